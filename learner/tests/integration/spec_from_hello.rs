//! A learner started without an env (`--local-actors 0`, no `--env`) takes
//! the env spec from the first actor's hello whose spec a network fits,
//! builds its model for it, and refuses later actors that declare another
//! spec with FAILED_PRECONDITION naming the field.
use crate::support;

use seed_learner::app::{BoundLearner, Learner, LearnerConfig};
use seed_learner::serve::transport::ListenAddr;
use seed_shared::pb::{self, actor_message::Kind};
use seed_shared::{EnvSpec, ObsDType};
use support::{hello, init, within, GoodActor, RawStream};
use tonic::Code;

fn hello_with(spec: EnvSpec) -> pb::Hello {
    pb::Hello {
        spec: Some(spec.to_proto()),
        ..hello(2, "")
    }
}

/// A serving learner without an env, bound on loopback (not yet started:
/// starting waits for the first usable hello), and its address.
async fn bind_without_env() -> (BoundLearner, std::net::SocketAddr) {
    init();
    let config = LearnerConfig {
        env: None,
        ..LearnerConfig::serving(
            "127.0.0.1:0".parse::<ListenAddr>().expect("literal"),
            seed_env::EnvConfig::CartPole,
        )
    };
    let bound = Learner::bind(&config).await.expect("binds");
    match bound.local_addr() {
        ListenAddr::Tcp(a) => {
            let a = *a;
            (bound, a)
        }
        ListenAddr::Unix(_) => unreachable!("tcp listen address"),
    }
}

/// Sends `h` on a new stream and returns the status that ends it.
async fn refused(uri: &str, h: pb::Hello) -> tonic::Status {
    let mut s = RawStream::open_at(uri).await;
    s.send(Kind::Hello(h)).await;
    s.status().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_usable_hello_fixes_the_spec_and_later_ones_must_match_it() {
    let (bound, addr) = bind_without_env().await;
    let uri = format!("http://{addr}");
    let starting = tokio::spawn(bound.start());

    // A spec no network fits is refused, and does not fix the run's spec
    // (else the CartPole actor below would be refused).
    let rank4 = EnvSpec::synthetic(vec![2, 3, 4, 5], ObsDType::F32, 2);
    let status = refused(&uri, hello_with(rank4)).await;
    assert_eq!(status.code(), Code::FailedPrecondition, "{status:?}");
    assert!(status.message().contains("unsupported"), "{status:?}");
    let channels_last = EnvSpec::synthetic(vec![84, 84, 4], ObsDType::U8, 6);
    let status = refused(&uri, hello_with(channels_last)).await;
    assert_eq!(status.code(), Code::FailedPrecondition, "{status:?}");
    assert!(status.message().contains("channels-last"), "{status:?}");

    // The first usable hello: CartPole. Its actor is welcomed once the
    // model is built, and gets actions.
    let good = GoodActor::start_on(RawStream::open_at(&uri).await, 4, "").await;
    let learner = within("the learner to start", starting)
        .await
        .expect("start task")
        .expect("learner starts");
    good.progresses(5).await;
    let model = learner.weights().load().model.config().clone();
    assert_eq!(model.obs_shape, vec![4]);

    // Later hellos must declare the same spec.
    let mut other_obs = EnvSpec::cartpole();
    other_obs.obs_shape = vec![3];
    let status = refused(&uri, hello_with(other_obs)).await;
    assert_eq!(status.code(), Code::FailedPrecondition, "{status:?}");
    assert!(status.message().contains("spec.obs_shape"), "{status:?}");
    let mut other_actions = EnvSpec::cartpole();
    other_actions.action = seed_shared::ActionSpace::uniform_box(2, -1.0, 1.0);
    let status = refused(&uri, hello_with(other_actions)).await;
    assert_eq!(status.code(), Code::FailedPrecondition, "{status:?}");
    assert!(status.message().contains("spec.action_box"), "{status:?}");
    // And the first actor never noticed.
    good.progresses(5).await;
    good.stop();
    learner.shutdown().await.expect("clean shutdown");
}

#[tokio::test]
async fn local_actors_need_an_env() {
    init();
    let config = LearnerConfig {
        env: None,
        ..LearnerConfig::default()
    };
    let err = Learner::start(&config).await.err().expect("refused");
    assert!(err.to_string().contains("--env"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_continuous_spec_from_the_first_hello_gets_a_gaussian_policy_and_actions() {
    let (bound, addr) = bind_without_env().await;
    let addr = addr.to_string();
    let starting = tokio::spawn(bound.start());
    // The Rust actor over Pendulum-v1: the learner knows nothing of it
    // beyond its hello.
    let mut actor = seed_actor::ActorConfig::new(addr, seed_env::EnvConfig::Pendulum, 4);
    actor.max_env_steps = Some(400);
    let report = within(
        "the actor",
        seed_actor::run_actor(actor, std::future::pending()),
    )
    .await
    .expect("the actor runs to its step limit");
    assert!(report.env_steps >= 400, "{report:?}");
    assert_eq!(report.sessions, 1);
    let learner = within("the learner to start", starting)
        .await
        .expect("start task")
        .expect("learner starts");
    let model = learner.weights().load().model.config().clone();
    assert_eq!(
        model.action,
        seed_learner::model::distribution::ActionDistribution::Gaussian { dim: 1 }
    );
    assert_eq!(model.obs_shape, vec![3]);
    learner.shutdown().await.expect("clean shutdown");
}
