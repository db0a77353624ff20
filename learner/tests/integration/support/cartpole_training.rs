//! Training runs with in-process CartPole actors: the learner runs until its
//! config stops it (steps, seconds or a solve), then the actors are told to
//! stop and are joined.
use std::time::Duration;

use seed_actor::{run_actor, ActorConfig};
use seed_env::EnvConfig;
use seed_learner::app::run::run_until;
use seed_learner::app::LearnerConfig;
use tokio::sync::watch;

/// Runs `args` with `actors` in-process CartPole actors of `envs` envs each
/// connecting to `socket`; returns the summary.
pub async fn train(
    args: LearnerConfig,
    socket: &str,
    actors: usize,
    envs: usize,
) -> seed_learner::report::summary::RunSummary {
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut handles = Vec::new();
    for i in 0..actors {
        let mut cfg = ActorConfig::new(socket.to_string(), EnvConfig::CartPole, envs);
        cfg.seed = 100 + i as u64;
        cfg.actor_id = format!("test-{i}");
        cfg.reconnect.initial_backoff = Duration::from_millis(10);
        let mut stop = stop_rx.clone();
        handles.push(tokio::spawn(run_actor(cfg, async move {
            let _ = stop.wait_for(|s| *s).await;
        })));
    }
    let summary = run_until(&args, std::future::pending())
        .await
        .expect("run succeeds");
    let _ = stop_tx.send(true);
    for h in handles {
        let _ = h.await;
    }
    summary
}
