//! Soak of the liveness paths: 100 actors killed mid-stream and replaced,
//! then the learner restarted under its attached actors, with the learner's
//! real unroll assembly feeding a replay buffer that a checker drains like
//! the trainer does.
//!
//! The env's observation encodes its run: the synthetic env writes element
//! 0 as `(step + salt) mod 256`, where the salt comes from the env's seed and
//! every reset, and episodes are longer than the test. So inside one run
//! consecutive observations count up by exactly 1, and an unroll that glued
//! two runs (a killed actor's steps continued by its slot's next occupant,
//! or steps from before and after the learner restart) shows a jump (missed
//! only if the new salt happens to continue the count: 1 in 256 per glue).
//! Asserted: no unroll jumps; slots return to the live count after every
//! kill; the attached actors come back after the restart. The restart time
//! is printed (the figure the liveness issue asks for), not asserted.
use crate::support;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use seed_actor::{run_actor, ActorConfig};
use seed_env::{EnvConfig, SyntheticConfig};
use seed_learner::app::{Learner, LearnerConfig};
use seed_learner::learn::unroll::{fields, UnrollAssembler, UnrollSpec};
use seed_replay::{ReplayBuffer, ReplayConfig, SamplerConfig, WriterPolicy};
use seed_shared::ObsDType;
use tokio::sync::watch;

const KILLS: u64 = 100;
const STABLE_ACTORS: u64 = 2;
const STABLE_ENVS: usize = 4;
const CHURN_ENVS: usize = 2;
const T: usize = 8;

fn env() -> EnvConfig {
    EnvConfig::Synthetic(SyntheticConfig {
        obs_shape: vec![2],
        obs_dtype: ObsDType::U8,
        num_actions: 2,
        step_cost_us: 0,
        episode_len: u32::MAX,
    })
}

fn actor(socket: &str, id: &str, seed: u64, envs: usize) -> ActorConfig {
    let mut c = ActorConfig::new(socket.to_string(), env(), envs);
    c.seed = seed;
    c.actor_id = id.into();
    c.reconnect.initial_backoff = Duration::from_millis(10);
    c.reconnect.max_backoff = Duration::from_millis(100);
    c
}

/// Drains the replay buffer on its own thread and checks every unroll.
struct Checker {
    stop: Arc<AtomicBool>,
    unrolls: Arc<AtomicU64>,
    glued: Arc<AtomicU64>,
    handle: std::thread::JoinHandle<()>,
}

impl Checker {
    fn start(replay: Arc<ReplayBuffer>) -> Checker {
        let stop = Arc::new(AtomicBool::new(false));
        let unrolls = Arc::new(AtomicU64::new(0));
        let glued = Arc::new(AtomicU64::new(0));
        let (s, u, g) = (Arc::clone(&stop), Arc::clone(&unrolls), Arc::clone(&glued));
        let handle = std::thread::spawn(move || {
            let mut batch = replay.new_batch(16);
            let step_bytes = 2;
            loop {
                let done = s.load(Ordering::Acquire);
                if replay
                    .sample_into_timeout(&mut batch, 1, Duration::from_millis(20))
                    .is_ok()
                {
                    let obs = batch.field(fields::OBS).expect("obs field");
                    for unroll in obs.chunks_exact((T + 1) * step_bytes) {
                        let first: Vec<u8> = unroll.iter().step_by(step_bytes).copied().collect();
                        if first.windows(2).any(|w| w[1] != w[0].wrapping_add(1)) {
                            g.fetch_add(1, Ordering::Relaxed);
                        }
                        u.fetch_add(1, Ordering::Relaxed);
                    }
                } else if done {
                    return;
                }
            }
        });
        Checker {
            stop,
            unrolls,
            glued,
            handle,
        }
    }
}

async fn start(config: &LearnerConfig, replay: &Arc<ReplayBuffer>, spec: &UnrollSpec) -> Learner {
    // A fresh assembler per learner process, as a restarted learner has.
    let assembler = UnrollAssembler::new(
        spec.clone(),
        config.serve.max_env_slots,
        Arc::clone(replay).into(),
        None,
    );
    Learner::start_with_sink(config, assembler.sink_factory())
        .await
        .expect("learner starts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_actors_and_a_learner_restart_never_glue_two_runs_into_an_unroll() {
    support::init();
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = format!("unix:{}", dir.path().join("l.sock").display());
    let mut config = LearnerConfig::serving(socket.parse().expect("socket address"), env());
    config.serve.max_env_slots = 64;
    let spec = UnrollSpec {
        unroll_length: T,
        obs_shape: vec![2],
        obs_dtype: ObsDType::U8,
        action: seed_learner::model::ActionDistribution::Categorical { num_actions: 2 },
        state_size: 0,
        stride: T,
    };
    let replay = Arc::new(
        ReplayBuffer::new(
            spec.layout().expect("layout"),
            ReplayConfig::new(1024, SamplerConfig::Fifo).with_writer_policy(WriterPolicy::Block {
                timeout: Duration::from_secs(5),
            }),
        )
        .expect("replay"),
    );
    let checker = Checker::start(Arc::clone(&replay));
    let learner = start(&config, &replay, &spec).await;

    let (stop_tx, stop_rx) = watch::channel(false);
    let mut stable = Vec::new();
    for i in 0..STABLE_ACTORS {
        let mut stop = stop_rx.clone();
        stable.push(tokio::spawn(run_actor(
            actor(&socket, &format!("stable-{i}"), i, STABLE_ENVS),
            async move {
                let _ = stop.wait_for(|s| *s).await;
            },
        )));
    }
    let live = STABLE_ACTORS as usize * STABLE_ENVS;
    let m = Arc::clone(learner.metrics());
    support::wait_until("the stable actors", || m.snapshot().live_slots == live).await;

    // Kill an actor mid-stream 100 times (the task is aborted: its
    // connection drops with steps in flight and partial unrolls built).
    for k in 0..KILLS {
        let victim = tokio::spawn(run_actor(
            actor(&socket, &format!("victim-{k}"), 1_000 + 7 * k, CHURN_ENVS),
            std::future::pending(),
        ));
        support::wait_until("the victim to join", || {
            m.snapshot().live_slots == live + CHURN_ENVS
        })
        .await;
        let steps = m.snapshot().env_steps;
        support::wait_until("steps while the victim is in", || {
            m.snapshot().env_steps >= steps + 64
        })
        .await;
        victim.abort();
        let _ = victim.await;
        support::wait_until("the victim's slots to return", || {
            m.snapshot().live_slots == live
        })
        .await;
    }

    // Restart the learner under the attached actors.
    learner.shutdown().await.expect("shutdown");
    let restarted_at = Instant::now();
    let learner = start(&config, &replay, &spec).await;
    let m = Arc::clone(learner.metrics());
    support::wait_until("the actors to come back", || {
        m.snapshot().live_slots == live
    })
    .await;
    let back_after = restarted_at.elapsed();
    support::wait_until("steps after the restart", || {
        m.snapshot().env_steps >= 5_000
    })
    .await;

    let _ = stop_tx.send(true);
    for h in stable {
        let _ = h.await;
    }
    learner.shutdown().await.expect("shutdown");
    checker.stop.store(true, Ordering::Release);
    checker.handle.join().expect("checker");
    let (unrolls, glued) = (
        checker.unrolls.load(Ordering::Relaxed),
        checker.glued.load(Ordering::Relaxed),
    );
    eprintln!(
        "soak: {KILLS} actors killed, {unrolls} unrolls checked, {glued} glued, \
         actors back {:.3} s after the learner restart",
        back_after.as_secs_f64()
    );
    assert!(unrolls >= 500, "only {unrolls} unrolls reached the checker");
    assert_eq!(glued, 0, "{glued} of {unrolls} unrolls mix two runs");
}
