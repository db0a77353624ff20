//! The echo floor speaks the learner's contract: the real actor runs against
//! it, and the echo client's round trips add up to the rows it sent.
//!
//! Unit tests of the library rather than an integration test: a package
//! with integration tests has all its binaries built by `cargo test`
//! (ten here, most linking candle), which cost CI about two minutes.
use std::time::Duration;

use crate::echo_client::{run_echo_clients, EchoLoad};
use crate::echo_server::bind_echo;
use crate::transport::Transport;
use seed_actor::{run_actor, ActorConfig};
use seed_env::{EnvConfig, SyntheticConfig};
use seed_shared::ObsDType;
use tokio::sync::oneshot;

/// Serves the echo on a fresh address in `dir` on a background runtime
/// thread and returns once it is bound, so clients can connect at once;
/// dropping the returned sender stops it.
fn start_echo(transport: Transport, dir: &std::path::Path) -> (String, oneshot::Sender<()>) {
    let addr = transport.allocate(dir, "echo").unwrap();
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let (bound_tx, bound_rx) = std::sync::mpsc::channel::<()>();
    let listen = addr.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let listener = bind_echo(&listen).await.unwrap();
            let _ = bound_tx.send(());
            listener
                .serve(async {
                    let _ = stop_rx.await;
                })
                .await
                .unwrap();
        });
    });
    bound_rx.recv().expect("echo server bound");
    (addr, stop_tx)
}

#[test]
fn actor_runs_against_the_echo_over_both_transports() {
    let dir = tempfile::tempdir().unwrap();
    for transport in [Transport::Tcp, Transport::Unix] {
        let (addr, _stop) = start_echo(transport, dir.path());
        let mut cfg = ActorConfig::new(&addr, EnvConfig::CartPole, 4);
        cfg.max_env_steps = Some(400);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let report = rt.block_on(run_actor(cfg, std::future::pending())).unwrap();
        assert_eq!(report.env_steps, 400, "{transport}");
        assert_eq!(report.round_trip.count, report.action_batches);
        assert!(report.round_trip.p50_us > 0.0);
    }
}

#[test]
fn echo_clients_count_every_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let (addr, _stop) = start_echo(Transport::Unix, dir.path());
    let env = EnvConfig::Synthetic(SyntheticConfig {
        obs_shape: vec![4, 84, 84],
        obs_dtype: ObsDType::U8,
        num_actions: 6,
        step_cost_us: 0,
        episode_len: 1000,
    });
    let results = run_echo_clients(&EchoLoad {
        address: addr,
        env,
        envs: 6,
        clients: 2,
        duration: Duration::from_millis(200),
    })
    .unwrap();
    assert_eq!(results.len(), 2);
    for r in results {
        // Two halves of 3 envs each: every answered batch carries 3 rows.
        assert!(r.round_trip.count > 0);
        assert_eq!(r.rows, 3 * r.round_trip.count);
        assert!(r.round_trip.p50_us <= r.round_trip.p99_us);
    }
}
