//! The top-level `learner` run: thread pools, [`Learner::start`], local
//! actors, progress lines, stop conditions, the learning curve and the
//! summary.
use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use tracing::{error, info, warn};

use crate::app::config::LearnerConfig;
use crate::app::learner::Learner;
use crate::app::local_actors::{LocalActorSpec, LocalActors};
use crate::app::run_monitor::RunMonitor;
use crate::app::threads::{configure_candle_threads, default_io_threads};
use crate::error::LearnerError;
use crate::report::summary::RunSummary;

/// How often stop conditions (`--max-env-steps`, solved) are checked.
const STOP_CHECK: Duration = Duration::from_millis(50);

/// Builds rayon's global pool (the CPU math's: gemm, the conv layers,
/// large inference batches) with `threads` workers named `cpu-math-N`.
/// Unnamed, its workers would take the name of whichever thread first
/// used the pool (an inference thread, say), and a per-thread CPU profile
/// would book the trainer's matrix products to inference. With one thread
/// the math runs on its caller (`model::cpu` splits nothing) and the one
/// worker sleeps. Already built (a second run in one process): kept.
fn name_math_pool(threads: usize) {
    if let Err(err) = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("cpu-math-{i}"))
        .build_global()
    {
        tracing::debug!(%err, "rayon's pool was already built");
    }
}

/// Runs the learner as the CLI does; blocks until a stop condition.
pub fn run(config: &LearnerConfig) -> Result<RunSummary, LearnerError> {
    let candle_threads = configure_candle_threads(config.inference.candle_threads);
    name_math_pool(candle_threads);
    let io_threads = config
        .serve
        .io_threads
        .unwrap_or_else(default_io_threads)
        .max(1);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(io_threads)
        .thread_name("learner-io")
        .enable_all()
        .build()
        .map_err(|source| LearnerError::Io {
            what: "starting the tokio runtime".into(),
            source,
        })?;
    info!(candle_threads, io_threads, "thread pools");
    runtime.block_on(async {
        let interrupt = shutdown_signal()?;
        run_until(config, interrupt).await
    })
}

/// Actor flags that make a local actor match `config`.
fn actor_flags(config: &LearnerConfig) -> Vec<String> {
    let keepalive = config.serve.keepalive;
    let mut flags = vec![
        "--envs".to_string(),
        config.run.envs_per_actor.to_string(),
        "--max-message-bytes".into(),
        config.serve.max_message_bytes.to_string(),
        "--keepalive-secs".into(),
        // Whole seconds (the actor's flags); a sub-second setting rounds up.
        keepalive
            .interval
            .map_or(0, |d| d.as_secs().max(1))
            .to_string(),
        "--keepalive-timeout-secs".into(),
        keepalive.timeout.as_secs().max(1).to_string(),
    ];
    if let Some(env) = &config.env {
        flags.extend(seed_env::env_flags(env));
    }
    flags.extend(config.run.local_actor_flags.iter().cloned());
    flags
}

/// Serves and runs local actors until a stop condition or `interrupt`, in
/// four steps: start the learner, spawn the local actors, watch the run
/// until it should stop, then stop everything and summarise.
pub async fn run_until(
    config: &LearnerConfig,
    interrupt: impl Future<Output = ()>,
) -> Result<RunSummary, LearnerError> {
    // The run's one clock: `wall_seconds`, `seconds_to_solve`, the curve and
    // metrics.jsonl all count from here.
    let t0 = Instant::now();
    tokio::pin!(interrupt);
    let deadline = config
        .run
        .max_seconds
        .map(|s| tokio::time::Instant::now() + Duration::from_secs_f64(s.max(0.0)));
    let learner = start_learner(config, &mut interrupt, deadline).await?;
    let mut actors = spawn_local_actors(config, &learner)?;
    let mut monitor = RunMonitor::new(config, &learner, t0, deadline)?;
    let (outcome, failures) = watch(&mut monitor, &mut actors, &mut interrupt).await;
    finish(config, learner, actors, monitor, failures, outcome).await
}

/// Starts the learner; without `--env` this waits for the first actor's
/// hello, so an interrupt or `--max-seconds` ends the wait.
async fn start_learner<F: Future<Output = ()>>(
    config: &LearnerConfig,
    interrupt: &mut Pin<&mut F>,
    deadline: Option<tokio::time::Instant>,
) -> Result<Learner, LearnerError> {
    tokio::select! {
        started = Learner::start(config) => started,
        _ = interrupt => Err(LearnerError::NoActor("interrupted")),
        _ = sleep_until_opt(deadline) => Err(LearnerError::NoActor("--max-seconds")),
    }
}

/// The `--local-actors` processes, connected to the learner's local
/// address; `None` without any.
fn spawn_local_actors(
    config: &LearnerConfig,
    learner: &Learner,
) -> Result<Option<LocalActors>, LearnerError> {
    if config.run.local_actors == 0 {
        return Ok(None);
    }
    let spec = LocalActorSpec {
        actor_bin: config.run.actor_bin.clone(),
        self_command: config.run.self_command.clone(),
        learner: learner.local_actor_addr().clone(),
        args: actor_flags(config),
        token: config.serve.token.clone(),
        seed: config.seed,
    };
    Ok(Some(LocalActors::spawn(&spec, config.run.local_actors)?))
}

/// Watches the run until an interrupt, a stop condition of the
/// [`RunMonitor`], or the death of the last local actor; returns how the
/// run ended and how many local actors exited unexpectedly.
async fn watch<F: Future<Output = ()>>(
    monitor: &mut RunMonitor,
    actors: &mut Option<LocalActors>,
    interrupt: &mut Pin<&mut F>,
) -> (Result<(), LearnerError>, usize) {
    let mut failures = 0usize;
    let mut check = tokio::time::interval(STOP_CHECK);
    check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let outcome = loop {
        let actor_exit = async {
            match actors.as_mut() {
                Some(a) if a.alive() > 0 => a.next_exit().await,
                _ => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = &mut *interrupt => {
                info!("stopping: interrupted");
                break Ok(());
            }
            exit = actor_exit => {
                if let Some(exit) = exit {
                    failures += 1;
                    error!(index = exit.index, pid = exit.pid, status = %exit.status,
                        "local actor exited unexpectedly");
                    if actors.as_ref().is_some_and(|a| a.alive() == 0) {
                        break Err(LearnerError::LocalActorDied {
                            index: exit.index,
                            pid: exit.pid,
                            status: exit.status,
                        });
                    }
                }
            }
            _ = check.tick() => {
                if let Some(reason) = monitor.tick(tokio::time::Instant::now()) {
                    info!("stopping: {reason}");
                    break Ok(());
                }
            }
        }
    };
    (outcome, failures)
}

/// Stops training first (closing the replay buffer frees an inference
/// thread blocked on backpressure, so the server can shut down promptly),
/// then the local actors and the server; writes the summary, the learning
/// curve and the summary JSON.
async fn finish(
    config: &LearnerConfig,
    mut learner: Learner,
    actors: Option<LocalActors>,
    mut monitor: RunMonitor,
    failures: usize,
    outcome: Result<(), LearnerError>,
) -> Result<RunSummary, LearnerError> {
    let addr = learner.local_addr().clone();
    let (snap, wall) = monitor.final_snapshot();
    let train_secs = learner.training_elapsed().map_or(0.0, |t| t.as_secs_f64());
    let train_result = learner.stop_training().await;
    if let Some(a) = actors {
        a.stop().await;
    }
    if let Err(e) = learner.shutdown().await {
        warn!(error = %e, "server shutdown");
    }
    let summary = monitor.finish(&snap, wall, train_secs, failures, addr.to_string());
    info!(
        env_steps = summary.env_steps,
        env_steps_per_second = format!("{:.0}", summary.env_steps_per_second),
        mean_batch = format!("{:.1}", summary.mean_inference_batch),
        p50_us = summary.step_latency_us.p50,
        p99_us = summary.step_latency_us.p99,
        episodes = summary.episodes,
        mean_return = format!("{:.1}", summary.mean_return_last_100),
        "run finished"
    );
    if let Some(path) = &config.run.summary_json {
        summary.write_json(path)?;
    }
    train_result?;
    outcome.map(|()| summary)
}

/// Resolves on the first SIGINT or SIGTERM. Registers the handlers at once
/// (inside the runtime), so a signal arriving during start-up is not lost.
fn shutdown_signal() -> Result<impl Future<Output = ()>, LearnerError> {
    use tokio::signal::unix::{signal, SignalKind};
    let io = |source| LearnerError::Io {
        what: "installing signal handlers".into(),
        source,
    };
    let mut interrupt = signal(SignalKind::interrupt()).map_err(io)?;
    let mut terminate = signal(SignalKind::terminate()).map_err(io)?;
    Ok(async move {
        tokio::select! {
            _ = interrupt.recv() => info!("SIGINT received"),
            _ = terminate.recv() => info!("SIGTERM received"),
        }
    })
}

/// Sleeps until `deadline`, or forever without one.
async fn sleep_until_opt(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
