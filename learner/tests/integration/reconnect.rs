//! An actor reconnects by itself after the learner restarts on the same port.
use crate::support;

use std::sync::atomic::Ordering;

use seed_actor::{run_actor, ActorConfig, ReconnectPolicy};
use seed_env::EnvConfig;
use seed_learner::serve::transport::ListenAddr;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actor_reconnects_after_learner_restart() {
    let first = support::start_learner(|_| {}).await;
    let addr = first.local_addr().clone();
    let mut cfg = ActorConfig::new(addr.to_string(), EnvConfig::CartPole, 4);
    cfg.seed = 1;
    cfg.reconnect = ReconnectPolicy {
        initial_backoff: Duration::from_millis(20),
        max_backoff: Duration::from_millis(200),
        max_attempts: None,
    };
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let actor = tokio::spawn(run_actor(cfg, async {
        let _ = stop_rx.await;
    }));

    let m = std::sync::Arc::clone(first.metrics());
    support::wait_until("steps on the first learner", || {
        m.env_steps.load(Ordering::Relaxed) > 100
    })
    .await;
    first.shutdown().await.expect("first learner stops");

    let ListenAddr::Tcp(sock) = addr else {
        unreachable!("tcp learner")
    };
    let second = support::start_learner(|c| c.serve.listen = ListenAddr::Tcp(sock)).await;
    let m = std::sync::Arc::clone(second.metrics());
    support::wait_until("steps on the restarted learner", || {
        m.env_steps.load(Ordering::Relaxed) > 100
    })
    .await;

    let _ = stop_tx.send(());
    let report = support::within("the actor to stop", actor)
        .await
        .expect("actor task")
        .expect("actor ran cleanly");
    assert!(report.sessions >= 2, "{report:?}");
    assert!(report.env_steps > 200, "{report:?}");
    second.shutdown().await.expect("second learner stops");
}
