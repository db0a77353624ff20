//! The top-level `learner` run: thread pools, server, local actors, progress
//! lines, stop conditions and the summary.
//!
//! Thread budget: candle's CPU pool (`--threads`), the inference threads,
//! and a small tokio runtime (`--io-threads`) for the gRPC server; on a
//! 2-core box that is one of each, leaving room for the local actors.
use std::future::Future;
use std::time::{Duration, Instant};

use seed_shared::EnvSpec;
use tracing::{error, info, warn};

use crate::infer::batcher::BatcherConfig;
use crate::cli::TrainArgs;
use crate::device::parse_device;
use crate::error::LearnerError;
use crate::report::learning_curve::{CurvePoint, LearningCurve};
use crate::app::local_actors::{LocalActorSpec, LocalActors};
use crate::metrics::{MetricsSnapshot, RETURN_WINDOW};
use crate::report::metrics_log::MetricsLog;
use crate::serve::server::{Server, ServerConfig};
use crate::report::summary::{RunSummary, TrainingSummary};
use crate::learn::training::{TrainingSetup, TrainingSnapshot};
use crate::serve::transport::ListenAddr;

/// How often stop conditions (`--max-env-steps`, solved) are checked.
const STOP_CHECK: Duration = Duration::from_millis(50);
/// How often the learning curve is sampled.
const CURVE_EVERY: Duration = Duration::from_millis(500);

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// candle pool default: 1 per 4 cores, 1 to 8 (inference batches here are
/// small matmuls that do not scale past a few threads).
pub fn default_candle_threads() -> usize {
    (cores() / 4).clamp(1, 8)
}

/// Tokio worker default: 1 per 4 cores, 1 to 4.
pub fn default_io_threads() -> usize {
    (cores() / 4).clamp(1, 4)
}

/// Sets candle's thread count. Must run before any other thread starts
/// (it writes the process environment) and before any candle call.
/// `RAYON_NUM_THREADS` unset makes candle re-read /proc/cpuinfo on every
/// matmul (measured: 124 us vs 2.9 us for a batch-1 MLP).
pub fn configure_candle_threads(explicit: Option<usize>) -> usize {
    let threads = match (explicit, std::env::var("RAYON_NUM_THREADS").ok()) {
        (Some(n), _) => n.max(1),
        (None, Some(v)) => match v.parse::<usize>() {
            Ok(n) if n > 0 => return n,
            _ => default_candle_threads(),
        },
        (None, None) => default_candle_threads(),
    };
    std::env::set_var("RAYON_NUM_THREADS", threads.to_string());
    threads
}

/// Runs the learner as the CLI does; blocks until a stop condition.
pub fn run(args: &TrainArgs) -> Result<RunSummary, LearnerError> {
    let candle_threads = configure_candle_threads(args.threads);
    let io_threads = args.io_threads.unwrap_or_else(default_io_threads).max(1);
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
        run_until(args, interrupt).await
    })
}

/// The env spec the flags describe.
pub fn spec_from_args(args: &TrainArgs) -> EnvSpec {
    args.environment.env_config().spec()
}

/// Actor flags that make a local actor match `args`.
fn actor_flags(args: &TrainArgs) -> Vec<String> {
    let mut flags = vec![
        "--envs".to_string(),
        args.envs_per_actor.to_string(),
        "--max-message-bytes".into(),
        args.max_message_bytes.to_string(),
    ];
    flags.extend(args.environment.to_flags());
    flags
}

/// Serves and runs local actors until a stop condition or `interrupt`.
pub async fn run_until(
    args: &TrainArgs,
    interrupt: impl Future<Output = ()>,
) -> Result<RunSummary, LearnerError> {
    let t0 = Instant::now();
    let (listen, fallback) = match &args.listen {
        Some(l) => (l.parse::<ListenAddr>()?, false),
        None => (TrainArgs::DEFAULT_LISTEN.parse::<ListenAddr>()?, true),
    };
    if args.max_batch == 0 {
        return Err(LearnerError::Config(
            "--max-batch must be at least 1".into(),
        ));
    }
    let mut config = ServerConfig::new(listen, spec_from_args(args));
    config.fallback_to_ephemeral = fallback;
    config.token = args.token.clone().filter(|t| !t.is_empty());
    config.max_message_bytes = args.max_message_bytes;
    config.batcher = BatcherConfig {
        max_rows: args.max_batch,
        flush_after: Duration::from_micros(args.flush_us),
    };
    config.max_env_slots = args.max_env_slots;
    config.inference_threads = args.inference_threads.max(1);
    config.inline_max_rows = args.inline_max_rows;
    config.device = parse_device(&args.device)?;
    config.seed = args.seed;
    config.metrics_addr = args.metrics_addr;
    let setup = if args.no_train {
        None
    } else {
        let setup = TrainingSetup::new(args, &config.spec, &config.device)?;
        config.model = Some(setup.model_config.clone());
        config.weights = Some(std::sync::Arc::clone(&setup.weights));
        config.sink = Some(std::sync::Arc::clone(&setup.sink));
        Some(setup)
    };
    let server = Server::bind(config).await?;
    let addr = server.local_addr().clone();
    let started = Instant::now();
    let metrics = std::sync::Arc::clone(server.metrics());
    let resumed = setup.as_ref().map(|s| s.resumed).unwrap_or_default();
    {
        use std::sync::atomic::Ordering::Relaxed;
        metrics.env_steps.store(resumed.env_steps, Relaxed);
        metrics.episodes.store(resumed.episodes, Relaxed);
    }
    let training = match setup {
        Some(s) => Some(s.start(std::sync::Arc::clone(&metrics))?),
        None => None,
    };
    let run_dir = args.run_dir.clone().or_else(|| args.resume.clone());
    let mut metrics_log = match (&run_dir, &training) {
        (Some(d), Some(_)) => Some(MetricsLog::open(d)?),
        _ => None,
    };
    let mut curve = LearningCurve::new(Some(args.target_return));
    let mut next_curve = tokio::time::Instant::now();
    let mut solved: Option<(u64, f64)> = None;

    let mut actors = if args.local_actors > 0 {
        Some(LocalActors::spawn(
            &LocalActorSpec {
                actor_bin: args.actor_bin.clone(),
                learner: addr.clone(),
                args: actor_flags(args),
                token: args.token.clone().filter(|t| !t.is_empty()),
                seed: args.seed,
            },
            args.local_actors,
        )?)
    } else {
        None
    };

    let deadline = args
        .max_seconds
        .map(|s| tokio::time::Instant::now() + Duration::from_secs_f64(s.max(0.0)));
    let progress_every =
        (args.progress_secs > 0.0).then(|| Duration::from_secs_f64(args.progress_secs));
    let mut next_progress = progress_every.map(|p| tokio::time::Instant::now() + p);
    let mut last = metrics.snapshot();
    let mut failures = 0usize;
    let mut check = tokio::time::interval(STOP_CHECK);
    check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tokio::pin!(interrupt);

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
                let episodes_here = snap.episodes.saturating_sub(resumed.episodes);
                if solved.is_none()
                    && episodes_here >= RETURN_WINDOW as u64
                    && snap.mean_return_last_100 >= args.target_return
                {
                    solved = Some((snap.env_steps, seconds));
                    info!(env_steps = snap.env_steps, seconds = format!("{seconds:.1}"),
                        mean_return = format!("{:.1}", snap.mean_return_last_100), "solved");
                    if args.stop_when_solved {
                        break Ok(());
                    }
                }
                if now >= next_curve {
                    next_curve = now + CURVE_EVERY;
                    curve.push(CurvePoint {
                        env_steps: snap.env_steps,
                        seconds,
                        mean_return: snap.mean_return_last_100,
                    });
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

    let wall = started.elapsed();
    let snap = metrics.snapshot();
    let train_snap = snap.training;
    let train_secs = training.as_ref().map_or(0.0, |t| t.elapsed().as_secs_f64());
    if let (Some(log), Some(t)) = (metrics_log.as_mut(), train_snap.as_ref()) {
        let record = interval_record(&snap, &last, t, t0.elapsed().as_secs_f64());
        if let Err(e) = log.append(&record) {
            warn!(error = %e, "metrics.jsonl");
        }
    }
    // Training first: closing the replay buffer frees an inference thread
    // blocked on backpressure, so the server can shut down promptly.
    let train_result = match training {
        Some(t) => tokio::task::block_in_place(|| t.stop()),
        None => Ok(()),
    };
    if let Some(a) = actors.take() {
        a.stop().await;
    }
    if let Err(e) = server.shutdown().await {
        warn!(error = %e, "server shutdown");
    }
    let mut summary = RunSummary::new(&snap, wall, failures, addr.to_string());
    if let Some(t) = &train_snap {
        summary.training = Some(TrainingSummary::new(
            t,
            train_secs,
            args.target_return,
            solved,
        ));
    }
    if let Some(dir) = &run_dir {
        curve.push(CurvePoint {
            env_steps: snap.env_steps,
            seconds: t0.elapsed().as_secs_f64(),
            mean_return: snap.mean_return_last_100,
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

/// One `metrics.jsonl` object: the interval since `last`, keys `area/name`.
fn interval_record(
    now: &MetricsSnapshot,
    last: &MetricsSnapshot,
    t: &TrainingSnapshot,
    seconds: f64,
) -> serde_json::Value {
    let i = now.since(last);
    serde_json::json!({
        "time/seconds": seconds,
        "env/steps": now.env_steps,
        "env/steps_per_second": i.env_steps_per_second,
        "env/episodes": now.episodes,
        "env/mean_return_last_100": now.mean_return_last_100,
        "inference/mean_batch": i.mean_batch_size,
        "inference/step_latency_p50_us": i.step_latency_p50_us,
        "inference/step_latency_p99_us": i.step_latency_p99_us,
        "train/learner_steps": t.learner_steps,
        "train/learner_steps_per_second": if i.seconds > 0.0 {
            now.learner_steps.saturating_sub(last.learner_steps) as f64 / i.seconds
        } else { 0.0 },
        "train/total_loss": t.total_loss,
        "train/pg_loss": t.pg_loss,
        "train/value_loss": t.value_loss,
        "train/entropy": t.entropy,
        "train/grad_norm": t.grad_norm,
        "train/learning_rate": t.learning_rate,
        "train/mean_policy_lag": t.mean_policy_lag,
        "train/max_policy_lag": t.max_policy_lag,
        "train/wait_fraction": t.wait_fraction(),
        "replay/stored": t.replay_stored,
        "replay/inserts": t.unrolls_inserted,
        "replay/dropped_full": t.unrolls_dropped_full,
        "replay/insert_wait_seconds": t.insert_wait_seconds,
        "prefetch/queue_depth": t.prefetch_queue,
    })
}

/// The progress line: a log line with the figures of the last interval.
fn log_progress(now: &MetricsSnapshot, last: &MetricsSnapshot, t: Option<&TrainingSnapshot>) {
    let i = now.since(last);
    if let Some(t) = t {
        let steps_per_s = if i.seconds > 0.0 {
            now.learner_steps.saturating_sub(last.learner_steps) as f64 / i.seconds
        } else {
            0.0
        };
        info!(
            "{} env steps | {:.0} env steps/s | {} episodes | mean return {:.1} | learner {} steps ({:.1}/s, waits {:.0}%) | loss pg {:.3} v {:.3} entropy {:.3} | grad norm {:.2} | lag mean {:.2} max {} | replay {} prefetch {} | batch {:.1}",
            now.env_steps,
            i.env_steps_per_second,
            now.episodes,
            now.mean_return_last_100,
            now.learner_steps,
            steps_per_s,
            100.0 * t.wait_fraction(),
            t.pg_loss,
            t.value_loss,
            t.entropy,
            t.grad_norm,
            t.mean_policy_lag,
            t.max_policy_lag,
            t.replay_stored,
            t.prefetch_queue,
            i.mean_batch_size,
        );
        return;
    }
    info!(
        "{:.0} env steps/s | {} episodes | mean return {:.1} | batch {:.1} | step latency p50 {:.0} us p99 {:.0} us | actors {} | slots {}",
        i.env_steps_per_second,
        now.episodes,
        now.mean_return_last_100,
        i.mean_batch_size,
        i.step_latency_p50_us,
        i.step_latency_p99_us,
        now.connected_actors,
        now.live_slots,
    );
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
