//! The top-level `learner` run: thread pools, [`Learner::start`], local
//! actors, progress lines, stop conditions, the learning curve and the
//! summary.
use std::future::Future;
use std::time::{Duration, Instant};

use tracing::{error, info, warn};

use crate::app::config::LearnerConfig;
use crate::app::learner::Learner;
use crate::app::local_actors::{LocalActorSpec, LocalActors};
use crate::app::threads::{configure_candle_threads, default_io_threads};
use crate::error::LearnerError;
use crate::metrics::RETURN_WINDOW;
use crate::report::learning_curve::{CurvePoint, LearningCurve};
use crate::report::metrics_log::MetricsLog;
use crate::report::progress::{interval_record, log_progress};
use crate::report::summary::{RunSummary, TrainingSummary};

/// How often stop conditions (`--max-env-steps`, solved) are checked.
const STOP_CHECK: Duration = Duration::from_millis(50);
/// How often the learning curve is sampled.
const CURVE_EVERY: Duration = Duration::from_millis(500);

/// Runs the learner as the CLI does; blocks until a stop condition.
pub fn run(config: &LearnerConfig) -> Result<RunSummary, LearnerError> {
    let candle_threads = configure_candle_threads(config.inference.candle_threads);
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

/// Serves and runs local actors until a stop condition or `interrupt`.
pub async fn run_until(
    config: &LearnerConfig,
    interrupt: impl Future<Output = ()>,
) -> Result<RunSummary, LearnerError> {
    // The run's one clock: `wall_seconds`, `seconds_to_solve`, the curve and
    // metrics.jsonl all count from here.
    let t0 = Instant::now();
    let args = &config.run;
    tokio::pin!(interrupt);
    let deadline = args
        .max_seconds
        .map(|s| tokio::time::Instant::now() + Duration::from_secs_f64(s.max(0.0)));
    // Without --env, starting waits for the first actor's hello.
    let mut learner = tokio::select! {
        started = Learner::start(config) => started?,
        _ = &mut interrupt => return Err(LearnerError::NoActor("interrupted")),
        _ = sleep_until_opt(deadline) => return Err(LearnerError::NoActor("--max-seconds")),
    };
    let addr = learner.local_addr().clone();
    let metrics = std::sync::Arc::clone(learner.metrics());
    let resumed_episodes = metrics.episodes.load(std::sync::atomic::Ordering::Relaxed);
    let training = config.train.is_some();
    let run_dir = config.run_dir().cloned();
    let mut metrics_log = match (&run_dir, training) {
        (Some(d), true) => Some(MetricsLog::open(d)?),
        _ => None,
    };
    let mut curve = LearningCurve::new(Some(args.target_return));
    // Episode returns for the curve (those of a resumed run's past are not
    // in memory: start from what is recorded now).
    let mut returns_seen = metrics.returns_since(u64::MAX, &mut Vec::new());
    let mut new_returns = Vec::new();
    let mut next_curve = tokio::time::Instant::now();
    let mut solved: Option<(u64, f64)> = None;
    // Lowest 100-episode mean after the first solve, sampled with the
    // progress lines (every --progress-secs, else every stop check).
    let mut min_after_solve: Option<f64> = None;

    let mut actors = if args.local_actors > 0 {
        Some(LocalActors::spawn(
            &LocalActorSpec {
                actor_bin: args.actor_bin.clone(),
                learner: learner.local_actor_addr().clone(),
                args: actor_flags(config),
                token: config.serve.token.clone().filter(|t| !t.is_empty()),
                seed: config.seed,
            },
            args.local_actors,
        )?)
    } else {
        None
    };

    let progress_every = args.progress_every;
    let mut next_progress = progress_every.map(|p| tokio::time::Instant::now() + p);
    let mut last = metrics.snapshot();
    let mut failures = 0usize;
    let mut check = tokio::time::interval(STOP_CHECK);
    check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);

    let outcome: Result<(), LearnerError> = loop {
        let actor_exit = async {
            match actors.as_mut() {
                Some(a) if a.alive() > 0 => a.next_exit().await,
                _ => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = &mut interrupt => {
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
                let now = tokio::time::Instant::now();
                if deadline.is_some_and(|d| now >= d) {
                    info!("stopping: --max-seconds reached");
                    break Ok(());
                }
                if let Some(max) = args.max_env_steps {
                    if metrics.env_steps.load(std::sync::atomic::Ordering::Relaxed) >= max {
                        info!("stopping: --max-env-steps reached");
                        break Ok(());
                    }
                }
                let snap = metrics.snapshot();
                let seconds = t0.elapsed().as_secs_f64();
                let episodes_here = snap.episodes.saturating_sub(resumed_episodes);
                if solved.is_none()
                    && episodes_here >= RETURN_WINDOW as u64
                    && snap.mean_return_last_100 >= args.target_return
                {
                    solved = Some((snap.env_steps, seconds));
                    min_after_solve = Some(snap.mean_return_last_100);
                    info!(env_steps = snap.env_steps, seconds = format!("{seconds:.1}"),
                        mean_return = format!("{:.1}", snap.mean_return_last_100), "solved");
                    if args.stop_when_solved {
                        break Ok(());
                    }
                }
                if now >= next_curve {
                    next_curve = now + CURVE_EVERY;
                    let point = CurvePoint {
                        env_steps: snap.env_steps,
                        seconds,
                        mean_return: snap.mean_return_last_100,
                        episodes: snap.episodes,
                    };
                    new_returns.clear();
                    returns_seen = metrics.returns_since(returns_seen, &mut new_returns);
                    curve.push_episodes(point, &new_returns);
                    curve.push(point);
                }
                let progress_due = next_progress.is_none_or(|at| now >= at);
                if let (true, Some(m)) = (progress_due && solved.is_some(), min_after_solve) {
                    min_after_solve = Some(m.min(snap.mean_return_last_100));
                }
                if let (Some(at), Some(every)) = (next_progress, progress_every) {
                    if now >= at {
                        let t = snap.training;
                        log_progress(&snap, &last, t.as_ref());
                        if let (Some(log), Some(t)) = (metrics_log.as_mut(), t.as_ref()) {
                            if let Err(e) = log.append(&interval_record(&snap, &last, t, seconds)) {
                                warn!(error = %e, "metrics.jsonl");
                            }
                        }
                        last = snap;
                        next_progress = Some(at + every);
                    }
                }
            }
        }
    };

    let wall = t0.elapsed();
    let snap = metrics.snapshot();
    let train_snap = snap.training;
    let train_secs = learner.training_elapsed().map_or(0.0, |t| t.as_secs_f64());
    if let (Some(log), Some(t)) = (metrics_log.as_mut(), train_snap.as_ref()) {
        let record = interval_record(&snap, &last, t, t0.elapsed().as_secs_f64());
        if let Err(e) = log.append(&record) {
            warn!(error = %e, "metrics.jsonl");
        }
    }
    // Training first: closing the replay buffer frees an inference thread
    // blocked on backpressure, so the server can shut down promptly.
    let train_result = learner.stop_training().await;
    if let Some(a) = actors.take() {
        a.stop().await;
    }
    if let Err(e) = learner.shutdown().await {
        warn!(error = %e, "server shutdown");
    }
    let mut summary = RunSummary::new(&snap, wall, failures, addr.to_string());
    if let Some(t) = &train_snap {
        summary.training = Some(TrainingSummary::new(
            t,
            train_secs,
            args.target_return,
            solved,
            snap.mean_return_last_100,
            min_after_solve,
        ));
    }
    if let Some(dir) = &run_dir {
        curve.push(CurvePoint {
            env_steps: snap.env_steps,
            seconds: t0.elapsed().as_secs_f64(),
            mean_return: snap.mean_return_last_100,
            episodes: snap.episodes,
        });
        let path = dir.join("learning_curve.png");
        match curve.write_png(&path) {
            Ok(()) => info!(path = %path.display(), "learning curve written"),
            Err(e) => warn!(error = %e, "learning curve"),
        }
    }
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
    if let Some(path) = &args.summary_json {
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
