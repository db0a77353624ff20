//! TLS on the actor streams, with certificates made at run time
//! (support/pki.rs): a round trip over TLS (raw client and the real actor),
//! mutual TLS (a client certificate from the right CA gets in; none, or one
//! from another CA, does not), a server certificate from an untrusted CA is
//! refused, the token is still checked, and a plaintext actor against a TLS
//! learner (or the reverse) fails with an error that says TLS, not a hang.
use crate::support;

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use seed_actor::{run_actor, ActorConfig, ActorError, ClientTls, ReconnectPolicy};
use seed_env::EnvConfig;
use seed_learner::app::Learner;
use seed_learner::serve::tls::ServerTls;
use seed_learner::serve::transport::ListenAddr;
use support::pki::TestPki;
use support::{tls_channel, try_hello, GoodActor, RawStream};
use tonic::Code;

fn tcp_addr(server: &Learner) -> SocketAddr {
    match server.local_addr() {
        ListenAddr::Tcp(a) => *a,
        other => panic!("tcp learner expected, got {other}"),
    }
}

async fn tls_learner(pki: &TestPki, mutual: bool, token: Option<&str>) -> Learner {
    let tls = ServerTls::from_files(
        &pki.server_cert,
        &pki.server_key,
        mutual.then_some(pki.client_ca.as_path()),
    )
    .expect("test certificates load");
    support::start_learner(|c| {
        c.serve.tls = Some(tls);
        c.serve.token = token.and_then(seed_shared::Token::new);
    })
    .await
}

/// A real actor for `learner`, giving up after its first failed connect.
fn actor_config(learner: String, tls: Option<ClientTls>) -> ActorConfig {
    let mut cfg = ActorConfig::new(learner, EnvConfig::CartPole, 4);
    cfg.seed = 1;
    cfg.tls = tls;
    cfg.reconnect = ReconnectPolicy {
        initial_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(10),
        max_attempts: Some(1),
    };
    cfg
}

/// Runs `cfg` until it gives up, which must be a connection failure.
async fn fails_to_connect(cfg: ActorConfig) -> String {
    let outcome = support::within(
        "the actor to give up",
        run_actor(cfg, std::future::pending()),
    )
    .await;
    match outcome {
        Err(ActorError::Unreachable { last_error, .. }) => last_error,
        other => panic!("expected a connection failure, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hello_welcome_steps_and_actions_over_tls() {
    let pki = TestPki::generate();
    let server = tls_learner(&pki, false, None).await;
    let addr = tcp_addr(&server);

    let channel = tls_channel(addr, &pki.server_ca, None)
        .await
        .expect("TLS connect");
    let good =
        GoodActor::start_on(RawStream::open_on(support::client_on(channel)).await, 4, "").await;
    good.progresses(20).await;
    good.stop();

    // The real actor, verifying the certificate's IP address (the host of
    // --learner, the default server name).
    let tls = ClientTls::from_files(&pki.server_ca, None, None).expect("CA loads");
    let cfg = actor_config(addr.to_string(), Some(tls));
    let m = Arc::clone(server.metrics());
    let before = m.env_steps.load(Ordering::Relaxed);
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let actor = tokio::spawn(run_actor(cfg, async {
        let _ = stop_rx.await;
    }));
    support::wait_until("the TLS actor's steps", || {
        m.env_steps.load(Ordering::Relaxed) > before + 100
    })
    .await;
    let _ = stop_tx.send(());
    let report = support::within("the actor to stop", actor)
        .await
        .expect("actor task")
        .expect("actor ran cleanly");
    assert_eq!(report.sessions, 1, "{report:?}");
    server.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_admits_only_clients_with_a_certificate_from_its_ca() {
    let pki = TestPki::generate();
    let server = tls_learner(&pki, true, None).await;
    let addr = tcp_addr(&server);

    let with_cert = tls_channel(
        addr,
        &pki.server_ca,
        Some((&pki.client_cert, &pki.client_key)),
    )
    .await
    .expect("mTLS connect");
    let good = GoodActor::start_on(
        RawStream::open_on(support::client_on(with_cert)).await,
        2,
        "",
    )
    .await;
    good.progresses(10).await;

    let no_cert = try_hello(tls_channel(addr, &pki.server_ca, None).await, 2, "").await;
    assert!(no_cert.is_err(), "a client without a certificate got in");
    let wrong_ca = try_hello(
        tls_channel(
            addr,
            &pki.server_ca,
            Some((&pki.other_client_cert, &pki.other_client_key)),
        )
        .await,
        2,
        "",
    )
    .await;
    assert!(wrong_ca.is_err(), "a certificate from another CA got in");
    good.progresses(10).await;
    assert_eq!(server.metrics().snapshot().connected_actors, 1);

    // The real actor with --tls-cert/--tls-key.
    let tls = ClientTls::from_files(
        &pki.server_ca,
        Some("localhost".into()),
        Some((&pki.client_cert, &pki.client_key)),
    )
    .expect("client files load");
    let mut cfg = actor_config(format!("https://{addr}"), Some(tls));
    cfg.max_env_steps = Some(200);
    let report = support::within(
        "the mTLS actor's steps",
        run_actor(cfg, std::future::pending()),
    )
    .await
    .expect("actor ran cleanly");
    assert!(report.env_steps >= 200, "{report:?}");
    // And without them.
    let tls = ClientTls::from_files(&pki.server_ca, None, None).expect("CA loads");
    let e = fails_to_connect(actor_config(addr.to_string(), Some(tls))).await;
    assert!(e.contains("--tls-cert"), "no advice in: {e}");
    good.stop();
    server.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_learner_certificate_from_an_untrusted_ca_is_refused() {
    let pki = TestPki::generate();
    let server = tls_learner(&pki, false, None).await;
    let addr = tcp_addr(&server);
    let refused = try_hello(tls_channel(addr, &pki.other_ca, None).await, 2, "").await;
    assert!(refused.is_err(), "connected to a learner it does not trust");

    let tls = ClientTls::from_files(&pki.other_ca, None, None).expect("CA loads");
    let e = fails_to_connect(actor_config(addr.to_string(), Some(tls))).await;
    assert!(e.contains("certificate") && e.contains("--tls-ca"), "{e}");
    assert_eq!(server.metrics().snapshot().connected_actors, 0);
    server.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_is_still_checked_over_tls() {
    let pki = TestPki::generate();
    let server = tls_learner(&pki, false, Some("s3cret")).await;
    let addr = tcp_addr(&server);
    let channel = tls_channel(addr, &pki.server_ca, None)
        .await
        .expect("TLS connect");
    let mut wrong = RawStream::open_on(support::client_on(channel.clone())).await;
    wrong
        .send(seed_shared::pb::actor_message::Kind::Hello(support::hello(
            2, "guess",
        )))
        .await;
    assert_eq!(wrong.status().await.code(), Code::Unauthenticated);
    let welcome = try_hello(Ok(channel), 2, "s3cret").await.expect("welcomed");
    assert_eq!(welcome.env_slots.len(), 2);
    server.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plaintext_actor_and_a_tls_learner_fail_clearly_either_way() {
    let pki = TestPki::generate();
    let tls_server = tls_learner(&pki, false, None).await;
    let e = fails_to_connect(actor_config(tcp_addr(&tls_server).to_string(), None)).await;
    assert!(e.contains("serves TLS") && e.contains("--tls-ca"), "{e}");
    tls_server.shutdown().await.expect("shutdown");

    let plain_server = support::start_learner(|_| {}).await;
    let tls = ClientTls::from_files(&pki.server_ca, None, None).expect("CA loads");
    let e = fails_to_connect(actor_config(tcp_addr(&plain_server).to_string(), Some(tls))).await;
    assert!(e.contains("does not seem to serve TLS"), "{e}");
    plain_server.shutdown().await.expect("shutdown");
}
