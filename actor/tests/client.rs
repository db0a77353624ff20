//! The client loop against a scripted fake learner (see `support/`), over
//! loopback TCP and a unix socket: pipelining, exactly-once answers,
//! contract checks on action batches, fatal statuses, reconnects.

mod support;

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::time::Duration;

use seed_actor::{
    run_actor, ActorConfig, ActorError, ProtocolViolation, ReconnectPolicy, SharedConnection,
};
use seed_env::{EnvConfig, SyntheticConfig};
use seed_shared::{pb, EnvSpec, ObsDType};
use support::{guarded, policy_version_for, Corruption, Event, FakeServer, Script};
use tokio::sync::oneshot;
use tonic::Code;

fn loopback() -> std::net::SocketAddr {
    "127.0.0.1:0".parse().expect("loopback address")
}

fn config(learner: &str, env: EnvConfig, num_envs: usize) -> ActorConfig {
    let mut cfg = ActorConfig::new(learner, env, num_envs);
    cfg.actor_id = "test-actor".into();
    cfg.seed = 11;
    cfg.reconnect = ReconnectPolicy {
        initial_backoff: Duration::from_millis(5),
        max_backoff: Duration::from_millis(40),
        max_attempts: None,
    };
    cfg
}

fn split(events: Vec<Event>) -> (Vec<pb::Hello>, Vec<pb::StepBatch>) {
    let mut hellos = Vec::new();
    let mut batches = Vec::new();
    for e in events {
        match e {
            Event::Hello(h) => hellos.push(h),
            Event::Steps(b) => batches.push(b),
            Event::Violation(v) => panic!("actor broke the contract: {v}"),
            Event::Ended(_) => {}
        }
    }
    (hellos, batches)
}

#[tokio::test]
async fn pipelines_two_batches_and_every_batch_is_answered_once() {
    // AnswerInPairs only answers when two batches are outstanding: an actor
    // that waited for each answer before sending the other half would hang.
    let mut fake = FakeServer::tcp(loopback(), Script::AnswerInPairs).await;
    let mut cfg = config(&fake.learner, EnvConfig::CartPole, 8);
    cfg.token = seed_shared::Token::new("s3cret");
    cfg.max_env_steps = Some(2_000);
    let report = guarded(run_actor(cfg, std::future::pending()))
        .await
        .unwrap();

    let (hellos, batches) = split(support::drain(&mut fake.events));
    assert_eq!(hellos.len(), 1);
    let hello = &hellos[0];
    assert_eq!(
        (
            hello.actor_id.as_str(),
            hello.num_envs,
            hello.token.as_str()
        ),
        ("test-actor", 8, "s3cret")
    );
    assert_eq!(hello.spec, Some(EnvSpec::cartpole().to_proto()));

    // Stopped right after stepping a half: that half was not resent, the
    // other one is still in flight.
    assert_eq!(report.env_steps, 2_000);
    assert_eq!(report.env_steps, report.action_batches * 4);
    assert_eq!(report.step_batches, report.action_batches + 1);
    assert_eq!(batches.len() as u64, report.step_batches);
    assert_eq!(report.sessions, 1);
    // One round trip per action batch, ordered percentiles.
    let rt = report.round_trip;
    assert_eq!(rt.count, report.action_batches);
    assert!(rt.p50_us > 0.0 && rt.p50_us <= rt.p90_us && rt.p90_us <= rt.p99_us);
    assert!(rt.p99_us <= rt.p999_us && rt.p999_us <= rt.max_us);
    assert!(report.active_seconds > 0.0);
    assert_eq!(
        report.last_policy_version,
        policy_version_for(report.action_batches - 1)
    );
    // Halves alternate: 0..4, 4..8, 0..4, ...
    for (n, b) in batches.iter().enumerate() {
        assert_eq!(b.seq, n as u64);
        let first = if n % 2 == 0 { 0 } else { 4 };
        assert_eq!(b.env_indices, (first..first + 4).collect::<Vec<u32>>());
    }
    // 2000 CartPole steps under an alternating policy end many episodes, and
    // each one the learner heard of is a real CartPole episode.
    let reported: Vec<&pb::EpisodeStats> = batches.iter().flat_map(|b| &b.episodes).collect();
    assert!(!reported.is_empty());
    assert!(reported.len() as u64 <= report.episodes);
    for ep in &reported {
        assert_eq!(ep.episode_return, ep.episode_length as f32);
        assert!((1..=500).contains(&ep.episode_length));
    }
    // One run id per env, unchanged within the session.
    let ids: HashSet<u64> = batches
        .iter()
        .flat_map(|b| b.run_ids.iter().copied())
        .collect();
    assert_eq!(ids.len(), 8);
}

#[tokio::test]
async fn serves_atari_sized_frames_over_a_unix_socket() {
    let dir = tempfile::tempdir().unwrap();
    let mut fake = FakeServer::unix(&dir.path().join("learner.sock"), Script::Serve);
    let env = EnvConfig::Synthetic(SyntheticConfig {
        obs_shape: vec![4, 84, 84],
        obs_dtype: ObsDType::U8,
        num_actions: 6,
        step_cost_us: 0,
        episode_len: 5,
    });
    let mut cfg = config(&fake.learner, env, 5);
    cfg.max_env_steps = Some(60);
    let report = guarded(run_actor(cfg, std::future::pending()))
        .await
        .unwrap();

    let (hellos, batches) = split(support::drain(&mut fake.events));
    assert_eq!(hellos.len(), 1);
    assert_eq!(report.step_batches, batches.len() as u64);
    assert_eq!(report.step_batches, report.action_batches + 1);
    assert!(report.env_steps >= 60);
    // Halves of 3 and 2 envs, each row a full frame (the fake validated lengths).
    assert_eq!(batches[0].observations.len(), 3 * 84 * 84 * 4);
    assert_eq!(batches[1].observations.len(), 2 * 84 * 84 * 4);
    // 5-step episodes end by termination.
    assert!(batches.iter().any(|b| b.terminated.contains(&true)));
    assert!(report.episodes >= 5);
}

#[tokio::test]
async fn invalid_action_batches_end_the_actor_with_a_protocol_error() {
    for corruption in [
        Corruption::WrongSeq,
        Corruption::WrongCount,
        Corruption::OutOfRange,
    ] {
        let fake = FakeServer::tcp(loopback(), Script::Corrupt(corruption)).await;
        let cfg = config(&fake.learner, EnvConfig::CartPole, 4);
        let err = guarded(run_actor(cfg, std::future::pending()))
            .await
            .unwrap_err();
        let violation = match err {
            ActorError::Protocol(v) => v,
            other => panic!("{corruption:?}: expected a protocol error, got {other}"),
        };
        let expected = match corruption {
            Corruption::WrongSeq => ProtocolViolation::Seq {
                expected: 0,
                got: 1,
            },
            Corruption::WrongCount => ProtocolViolation::Actions {
                seq: 0,
                field: "actions",
                reason: "1 entries for 2 envs".into(),
            },
            Corruption::OutOfRange => ProtocolViolation::Actions {
                seq: 0,
                field: "actions",
                reason: "entry 0 = 2 is not below num_actions = 2".into(),
            },
        };
        assert_eq!(violation, expected, "{corruption:?}");
        // A contract violation is not retried.
        assert_eq!(fake.calls.load(std::sync::atomic::Ordering::SeqCst), 1);
    }
}

#[tokio::test]
async fn fatal_statuses_end_the_actor_without_reconnecting() {
    let cases = [
        Script::RejectCall(Code::InvalidArgument),
        Script::FailAfterHello(Code::InvalidArgument),
        Script::RejectCall(Code::Unauthenticated),
        Script::FailAfterHello(Code::ResourceExhausted),
        Script::FailAfterHello(Code::FailedPrecondition),
    ];
    for script in cases {
        let fake = FakeServer::tcp(loopback(), script).await;
        let cfg = config(&fake.learner, EnvConfig::CartPole, 4);
        let err = guarded(run_actor(cfg, std::future::pending()))
            .await
            .unwrap_err();
        let expected = match script {
            Script::RejectCall(c) | Script::FailAfterHello(c) => c,
            _ => unreachable!(),
        };
        match &err {
            ActorError::Rejected { code, message } => {
                assert_eq!(*code, expected, "{script:?}");
                assert!(message.contains("fake learner"), "{message}");
            }
            other => panic!("{script:?}: expected Rejected, got {other}"),
        }
        assert_eq!(
            fake.calls.load(std::sync::atomic::Ordering::SeqCst),
            1,
            "{script:?}"
        );
    }
}

/// A fake learner that answers 3 batches, ends the stream with
/// `UNAVAILABLE` and refuses every later call: a learner going away.
async fn ending_after_three_batches() -> FakeServer {
    FakeServer::tcp(
        loopback(),
        Script::EndAfter {
            batches: 3,
            code: Code::Unavailable,
        },
    )
    .await
}

#[tokio::test]
async fn reconnects_after_the_learner_restarts_with_fresh_run_ids() {
    let mut first = ending_after_three_batches().await;
    let addr = first.addr();
    let cfg = config(&first.learner, EnvConfig::CartPole, 6);
    let (stop, stopped) = oneshot::channel::<()>();
    let actor = tokio::spawn(run_actor(cfg, async {
        let _ = stopped.await;
    }));

    // Session 1 runs until the fake ends it, then the learner goes away.
    let mut session1 = Vec::new();
    loop {
        match first.next_event().await {
            Event::Ended(code) => {
                assert_eq!(code, Code::Unavailable);
                break;
            }
            e => session1.push(e),
        }
    }
    let mut leftover_events =
        std::mem::replace(&mut first.events, tokio::sync::mpsc::unbounded_channel().1);
    first.shut_down().await;
    session1.extend(support::drain(&mut leftover_events));
    let (hellos1, batches1) = split(session1);
    assert_eq!(hellos1.len(), 1);
    assert!(batches1.len() >= 3);

    // ... and comes back on the same address.
    let mut second = FakeServer::tcp(addr, Script::Serve).await;
    let mut session2 = Vec::new();
    while session2
        .iter()
        .filter(|e| matches!(e, Event::Steps(_)))
        .count()
        < 4
    {
        session2.push(second.next_event().await);
    }
    stop.send(()).unwrap();
    let report = guarded(actor).await.unwrap().unwrap();
    session2.extend(support::drain(&mut second.events));
    let (hellos2, batches2) = split(session2);

    assert_eq!(hellos2.len(), 1, "a new hello on the new stream");
    assert_eq!(report.sessions, 2);
    assert_eq!(batches2[0].seq, 0, "sequence numbers restart per stream");
    let ids1: HashSet<u64> = batches1
        .iter()
        .flat_map(|b| b.run_ids.iter().copied())
        .collect();
    let ids2: HashSet<u64> = batches2
        .iter()
        .flat_map(|b| b.run_ids.iter().copied())
        .collect();
    assert_eq!((ids1.len(), ids2.len()), (6, 6));
    assert!(
        ids1.is_disjoint(&ids2),
        "run ids must be fresh after a reconnect"
    );
    // Fresh episodes: the first batches of the new session are reset observations.
    for b in &batches2[..2] {
        assert!(b.rewards.iter().all(|&r| r == 0.0));
        assert!(b.episodes.is_empty());
    }
}

#[tokio::test]
async fn actors_given_one_shared_connection_stream_over_one_connection() {
    let mut fake = FakeServer::tcp(loopback(), Script::Serve).await;
    let run = |id: &str, seed: u64, connection: Option<SharedConnection>| {
        let mut cfg = config(&fake.learner, EnvConfig::CartPole, 4);
        cfg.actor_id = id.into();
        cfg.seed = seed;
        cfg.max_env_steps = Some(400);
        cfg.connection = connection;
        tokio::spawn(run_actor(cfg, std::future::pending()))
    };
    let shared = SharedConnection::new();
    let actors: Vec<_> = (0..3)
        .map(|i| run(&format!("shared-{i}"), i, Some(shared.clone())))
        .collect();
    let mut step_batches = 0;
    for a in actors {
        let report = guarded(a).await.unwrap().unwrap();
        assert_eq!((report.env_steps, report.sessions), (400, 1));
        step_batches += report.step_batches;
    }
    assert_eq!(fake.calls.load(Ordering::SeqCst), 3);
    assert_eq!(fake.connections.load(Ordering::SeqCst), 1);
    // Every actor's batches arrived, each on its own stream.
    let (hellos, batches) = split(support::drain(&mut fake.events));
    let ids: HashSet<&str> = hellos.iter().map(|h| h.actor_id.as_str()).collect();
    assert_eq!(ids.len(), 3);
    assert_eq!(batches.len() as u64, step_batches);
    // Without one, each actor dials its own.
    let own: Vec<_> = (0..2).map(|i| run(&format!("own-{i}"), i, None)).collect();
    for a in own {
        guarded(a).await.unwrap().unwrap();
    }
    assert_eq!(fake.connections.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_shared_connection_redials_after_the_learner_restarts() {
    let mut first = ending_after_three_batches().await;
    let addr = first.addr();
    let mut cfg = config(&first.learner, EnvConfig::CartPole, 2);
    cfg.connection = Some(SharedConnection::new());
    let (stop, stopped) = oneshot::channel::<()>();
    let actor = tokio::spawn(run_actor(cfg, async {
        let _ = stopped.await;
    }));
    while !matches!(first.next_event().await, Event::Ended(_)) {}
    first.shut_down().await;

    let mut second = FakeServer::tcp(addr, Script::Serve).await;
    let mut steps = 0;
    while steps < 4 {
        if let Event::Steps(_) = second.next_event().await {
            steps += 1;
        }
    }
    stop.send(()).unwrap();
    let report = guarded(actor).await.unwrap().unwrap();
    assert_eq!(report.sessions, 2);
    assert_eq!(second.connections.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_shared_connection_refuses_an_actor_of_another_learner() {
    let fake = FakeServer::tcp(loopback(), Script::Serve).await;
    let other = FakeServer::tcp(loopback(), Script::Serve).await;
    let shared = SharedConnection::new();
    let mut cfg = config(&fake.learner, EnvConfig::CartPole, 2);
    cfg.max_env_steps = Some(10);
    cfg.connection = Some(shared.clone());
    guarded(run_actor(cfg, std::future::pending()))
        .await
        .unwrap();
    let mut cfg = config(&other.learner, EnvConfig::CartPole, 2);
    cfg.connection = Some(shared);
    match guarded(run_actor(cfg, std::future::pending())).await {
        Err(ActorError::Config { field, reason }) => {
            assert_eq!(field, "connection");
            assert!(reason.contains(&other.learner), "{reason}");
        }
        other => panic!("expected a config error naming `connection`, got {other:?}"),
    }
    assert_eq!(other.calls.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn gives_up_after_max_reconnects_when_nobody_listens() {
    // Bind and drop to find a port nobody listens on.
    let addr = std::net::TcpListener::bind(loopback())
        .unwrap()
        .local_addr()
        .unwrap();
    let mut cfg = config(&addr.to_string(), EnvConfig::CartPole, 2);
    cfg.reconnect.max_attempts = Some(3);
    let err = guarded(run_actor(cfg, std::future::pending()))
        .await
        .unwrap_err();
    match err {
        ActorError::Unreachable {
            attempts,
            last_error,
        } => {
            assert_eq!(attempts, 3);
            assert!(last_error.contains("connect"), "{last_error}");
        }
        other => panic!("expected Unreachable, got {other}"),
    }
}

#[tokio::test]
async fn shutdown_while_unreachable_is_a_clean_stop() {
    let addr = std::net::TcpListener::bind(loopback())
        .unwrap()
        .local_addr()
        .unwrap();
    let cfg = config(&addr.to_string(), EnvConfig::CartPole, 2);
    // Retrying forever; only the shutdown future can end it.
    let report = guarded(run_actor(cfg, async {})).await.unwrap();
    assert_eq!(report.sessions, 0);
    let mut cfg = config(&addr.to_string(), EnvConfig::CartPole, 2);
    cfg.max_seconds = Some(0.0);
    let report = guarded(run_actor(cfg, std::future::pending()))
        .await
        .unwrap();
    assert_eq!(report.env_steps, 0);
}
