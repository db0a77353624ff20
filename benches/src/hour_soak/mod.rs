//! The hour soak (`soak_bench`, run by `scripts/soak.sh`; not in CI): does
//! anything grow when the system runs for an hour under churn?
//!
//! Real processes on this host:
//! - a learner training CartPole with its defaults (`--local-actors 0`),
//!   fed by `streams` actor streams on this process's runtime
//!   ([`actors::ChurningStreams`]); every minute a tenth of them end (half
//!   cleanly, half aborted mid-step) and are replaced, and a hundredth of
//!   `streams` connect and send a malformed step batch
//!   ([`actors::send_garbage`]; each must be refused with
//!   `InvalidArgument`, alone);
//! - one `actor` process frozen with SIGSTOP for `freeze_minutes` (the
//!   learner drops it by keepalive), then resumed (it reconnects);
//! - a `replay-server` with one memory-mapped table taking paced inserts
//!   from `writers` writers and `sample(128)` from `samplers` samplers
//!   ([`replay_load`]); at the end every acknowledged item the ring still
//!   holds is read back and checked.
//!
//! Every minute one [`Minute`] is recorded: both servers' RSS (anonymous
//! and file pages), threads and fds, the learner's env steps/s, learner
//! steps and 100-episode mean return, its stream errors, the table's size.
//! The JSON is rewritten after each minute (a crash keeps the minutes
//! before it); [`plot::draw`] draws the hour. The verdict: slopes of RSS
//! and fds after `warmup_minutes` (per 10 minutes), the return, the check.
pub mod actors;
pub mod plot;
pub mod replay_load;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use seed_replay_service::client::ClientOptions;
use seed_replay_service::ReplayClient;
use serde::Serialize;
use tracing::{info, warn};

use crate::child::ChildProcess;
use crate::frozen_actor::StatusProbe;
use crate::proc_stats::{slope, ProcStats};
use crate::scenario::wait_ready;
use crate::transport::Transport;
use actors::{send_garbage, ChurningStreams, Garbage};
use replay_load::{ReplayCheck, ReplayLoad};

/// How long a child may take to start serving or to stop.
const START_TIMEOUT: Duration = Duration::from_secs(60);
const STOP_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one garbage stream may take to be refused.
const GARBAGE_TIMEOUT: Duration = Duration::from_secs(30);

/// The soak's settings (defaults: the hour).
#[derive(Debug, Clone, Serialize)]
pub struct HourSoakConfig {
    pub minutes: u32,
    /// Length of a "minute" in seconds (60; shorter only for a smoke run).
    pub tick_seconds: f64,
    pub streams: usize,
    pub envs_per_stream: usize,
    /// Streams replaced each minute, and garbage streams sent.
    pub churn_per_minute: usize,
    pub garbage_per_minute: usize,
    /// The frozen actor is stopped at this minute for this many minutes.
    pub freeze_at_minute: u32,
    pub freeze_minutes: u32,
    pub writers: usize,
    pub writer_items_per_s: f64,
    pub samplers: usize,
    pub sample_every_ms: u64,
    pub table_capacity: u64,
    /// Slopes are fitted after this many minutes.
    pub warmup_minutes: u32,
}

impl Default for HourSoakConfig {
    fn default() -> Self {
        HourSoakConfig {
            minutes: 60,
            tick_seconds: 60.0,
            streams: 200,
            envs_per_stream: 2,
            churn_per_minute: 20,
            garbage_per_minute: 2,
            freeze_at_minute: 2,
            freeze_minutes: 5,
            writers: 4,
            writer_items_per_s: 2_000.0,
            samplers: 2,
            sample_every_ms: 10,
            table_capacity: 1_000_000,
            warmup_minutes: 10,
        }
    }
}

/// The binaries the soak runs.
#[derive(Debug, Clone)]
pub struct Binaries {
    pub learner: PathBuf,
    pub actor: PathBuf,
    pub replay_server: PathBuf,
}

/// One minute's record.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Minute {
    pub minute: u32,
    pub seconds: f64,
    pub learner: ProcStats,
    pub server: ProcStats,
    pub env_steps: u64,
    /// Over the minute before this record.
    pub env_steps_per_s: f64,
    pub learner_steps: u64,
    pub mean_return_last_100: f64,
    pub connected_actors: u32,
    pub live_env_slots: u32,
    pub stream_errors: u64,
    /// The learner's own step time (received to answered) over the run.
    pub step_p50_us: f64,
    pub step_p99_us: f64,
    pub table_stored: u64,
    pub table_inserted: u64,
    pub table_sampled: u64,
    pub replay_errors: u64,
    /// Cumulative: streams replaced, garbage streams sent and refused with
    /// `InvalidArgument`, and whether the frozen actor is stopped now.
    pub churned: u64,
    pub garbage_sent: u64,
    pub garbage_refused: u64,
    pub frozen_now: bool,
}

/// The hour's verdict.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Verdict {
    /// Least-squares slopes over the minutes after the warm-up, per 10
    /// minutes.
    pub learner_rss_mib_per_10_min: f64,
    pub server_rss_mib_per_10_min: f64,
    pub server_rss_anon_mib_per_10_min: f64,
    pub learner_fds_per_10_min: f64,
    pub server_fds_per_10_min: f64,
    pub learner_threads_per_10_min: f64,
    /// The first minute the 100-episode mean was at least 475, and its
    /// lowest value after that minute.
    pub first_minute_at_475: Option<u32>,
    pub min_return_after_475: Option<f64>,
    pub final_return: f64,
    /// Garbage streams not refused with `InvalidArgument`.
    pub garbage_not_refused: u64,
    /// Actor streams that ended without being asked (they retry forever).
    pub streams_ended_unasked: usize,
    /// The frozen actor was connected again at the end.
    pub frozen_actor_back: bool,
    pub replay: ReplayCheck,
    pub replay_check_passed: bool,
}

/// The JSON written after each minute.
#[derive(Debug, Clone, Serialize)]
pub struct HourSoakReport {
    pub machine: serde_json::Value,
    pub config: HourSoakConfig,
    pub minutes: Vec<Minute>,
    pub verdict: Option<Verdict>,
}

async fn wait_replay_ready(server: &mut ChildProcess, addr: &str) -> Result<ReplayClient> {
    let started = Instant::now();
    loop {
        if let Some(exited) = server.try_reap()? {
            return Err(server.failed(&exited).into());
        }
        if let Ok(mut c) = ReplayClient::connect(addr, ClientOptions::default()).await {
            if c.info(Some(replay_load::TABLE)).await.is_ok() {
                return Ok(c);
            }
        }
        if started.elapsed() > START_TIMEOUT {
            anyhow::bail!("replay-server at {addr} did not answer Info within 60 s");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Runs the soak; logs, the table and `soak.json` go into `dir`.
pub async fn run(
    cfg: &HourSoakConfig,
    bins: &Binaries,
    dir: &Path,
    machine: serde_json::Value,
) -> Result<HourSoakReport> {
    std::fs::create_dir_all(dir)?;
    let learner_addr = Transport::Tcp.allocate(dir, "learner")?;
    let mut cmd = Command::new(&bins.learner);
    cmd.args(["--local-actors", "0", "--env", "cartpole"])
        .args(["--listen", &learner_addr, "--progress-secs", "60"])
        .env("RAYON_NUM_THREADS", "1");
    let mut learner = ChildProcess::spawn("learner", dir, &mut cmd)?;
    wait_ready(&mut learner, &learner_addr).await?;
    let mut probe = StatusProbe::connect(&learner_addr).await?;

    let table_dir = dir.join("table");
    if table_dir.exists() {
        std::fs::remove_dir_all(&table_dir).context("clearing the last soak's table")?;
    }
    let config_path = dir.join("tables.json");
    std::fs::write(
        &config_path,
        replay_load::table_config(cfg.table_capacity, &table_dir),
    )?;
    let replay_addr = Transport::Tcp.allocate(dir, "replay-server")?;
    let mut cmd = Command::new(&bins.replay_server);
    cmd.arg("--config")
        .arg(&config_path)
        .args(["--listen", &replay_addr]);
    let mut server = ChildProcess::spawn("replay-server", dir, &mut cmd)?;
    let mut replay_info = wait_replay_ready(&mut server, &replay_addr).await?;

    let mut streams = ChurningStreams::start(&learner_addr, cfg.streams, cfg.envs_per_stream);
    let mut cmd = Command::new(&bins.actor);
    cmd.args([
        "--learner",
        &learner_addr,
        "--envs",
        "2",
        "--actor-id",
        "frozen",
    ])
    .args(["--seed", "999999"]);
    let frozen = ChildProcess::spawn("frozen-actor", dir, &mut cmd)?;
    let mut load = ReplayLoad::start(
        &replay_addr,
        cfg.writers,
        cfg.writer_items_per_s,
        cfg.samplers,
        Duration::from_millis(cfg.sample_every_ms),
    )
    .await?;
    info!(streams = cfg.streams, minutes = cfg.minutes, "soak running");

    let mut report = HourSoakReport {
        machine,
        config: cfg.clone(),
        minutes: Vec::new(),
        verdict: None,
    };
    let json = dir.join("soak.json");
    let started = Instant::now();
    let tick = Duration::from_secs_f64(cfg.tick_seconds);
    let (mut garbage_sent, mut garbage_refused, mut garbage_other) = (0u64, 0u64, 0u64);
    let mut frozen_now = false;
    let mut last: Option<(f64, u64)> = None;
    for minute in 0..=cfg.minutes {
        tokio::time::sleep_until((started + tick * minute).into()).await;
        if let Some(exited) = learner.try_reap()? {
            return Err(learner.failed(&exited).into());
        }
        if let Some(exited) = server.try_reap()? {
            return Err(server.failed(&exited).into());
        }
        let s = probe.get().await?;
        let table = replay_info
            .info(Some(replay_load::TABLE))
            .await?
            .into_iter()
            .next()
            .context("Info without the soak's table")?;
        let rate = last.map_or(0.0, |(t, steps)| {
            (s.env_steps - steps) as f64 / (s.uptime_seconds - t).max(1e-9)
        });
        last = Some((s.uptime_seconds, s.env_steps));
        // Relaxed: counters read for the record.
        use std::sync::atomic::Ordering::Relaxed;
        let m = Minute {
            minute,
            seconds: started.elapsed().as_secs_f64(),
            learner: ProcStats::read(learner.pid()),
            server: ProcStats::read(server.pid()),
            env_steps: s.env_steps,
            env_steps_per_s: rate,
            learner_steps: s.learner_steps,
            mean_return_last_100: s.mean_return_last_100,
            connected_actors: s.connected_actors,
            live_env_slots: s.live_env_slots,
            stream_errors: s.stream_errors,
            step_p50_us: s.step_latency_p50_us,
            step_p99_us: s.step_latency_p99_us,
            table_stored: table.stored,
            table_inserted: table.inserted,
            table_sampled: load.counters.sampled.load(Relaxed),
            replay_errors: load.counters.errors.load(Relaxed),
            churned: streams.stopped_cleanly + streams.aborted,
            garbage_sent,
            garbage_refused,
            frozen_now,
        };
        info!(
            minute,
            learner_rss_mib = m.learner.rss_mib,
            server_rss_mib = m.server.rss_mib,
            learner_fds = m.learner.fds,
            env_steps_per_s = m.env_steps_per_s as u64,
            mean_return = m.mean_return_last_100,
            connected = m.connected_actors,
            stored = m.table_stored,
            "minute"
        );
        report.minutes.push(m);
        write_json(&json, &report)?;
        if minute == cfg.minutes {
            break;
        }

        if minute == cfg.freeze_at_minute {
            frozen.signal(libc::SIGSTOP);
            frozen_now = true;
            info!("the frozen actor is stopped (SIGSTOP)");
        }
        if frozen_now && minute == cfg.freeze_at_minute + cfg.freeze_minutes {
            frozen.signal(libc::SIGCONT);
            frozen_now = false;
            info!("the frozen actor is resumed (SIGCONT)");
        }
        if minute > 0 {
            streams.churn(cfg.churn_per_minute).await;
        }
        let mut garbage = Vec::new();
        for g in 0..cfg.garbage_per_minute {
            let kind = if g % 2 == 0 {
                Garbage::ObservationBytes
            } else {
                Garbage::EnvIndex
            };
            let (addr, id) = (learner_addr.clone(), format!("garbage-{minute}-{g}"));
            garbage.push(tokio::spawn(async move {
                tokio::time::timeout(GARBAGE_TIMEOUT, send_garbage(&addr, &id, kind)).await
            }));
        }
        for g in garbage {
            garbage_sent += 1;
            match g.await {
                Ok(Ok(Ok(tonic::Code::InvalidArgument))) => garbage_refused += 1,
                other => {
                    warn!(
                        ?other,
                        "a garbage stream was not refused with InvalidArgument"
                    );
                    garbage_other += 1;
                }
            }
        }
    }

    info!("stopping the replay load and reading the table back");
    load.stop().await?;
    let replay = load.check(&replay_addr, cfg.table_capacity).await?;
    let ended_unasked = streams.ended_unasked();
    let end_status = probe.get().await?;
    // The frozen actor is back if the learner holds every stream plus it.
    let frozen_back = !frozen_now && end_status.connected_actors as usize > cfg.streams;
    streams.stop_all().await;
    drop(frozen);
    learner.signal(libc::SIGINT);
    server.signal(libc::SIGINT);
    let _ = learner.wait(STOP_TIMEOUT).await;
    let _ = server.wait(STOP_TIMEOUT).await;

    let verdict = verdict(
        cfg,
        &report.minutes,
        replay,
        garbage_other,
        ended_unasked,
        frozen_back,
    );
    report.verdict = Some(verdict);
    write_json(&json, &report)?;
    if let Err(e) = plot::draw(&report, &dir.join("soak.png")) {
        warn!(error = %e, "cannot draw the soak plot");
    }
    Ok(report)
}

fn write_json(path: &Path, report: &HourSoakReport) -> Result<()> {
    let text = serde_json::to_string_pretty(report)?;
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

fn verdict(
    cfg: &HourSoakConfig,
    minutes: &[Minute],
    replay: ReplayCheck,
    garbage_not_refused: u64,
    streams_ended_unasked: usize,
    frozen_actor_back: bool,
) -> Verdict {
    let after: Vec<&Minute> = minutes
        .iter()
        .filter(|m| m.minute >= cfg.warmup_minutes)
        .collect();
    let xs: Vec<f64> = after.iter().map(|m| f64::from(m.minute)).collect();
    let per_10 = |f: fn(&Minute) -> f64| {
        let ys: Vec<f64> = after.iter().map(|m| f(m)).collect();
        slope(&xs, &ys) * 10.0
    };
    let first = minutes.iter().find(|m| m.mean_return_last_100 >= 475.0);
    let min_after = first.map(|f| {
        minutes
            .iter()
            .filter(|m| m.minute > f.minute)
            .map(|m| m.mean_return_last_100)
            .fold(f64::INFINITY, f64::min)
    });
    Verdict {
        learner_rss_mib_per_10_min: per_10(|m| m.learner.rss_mib),
        server_rss_mib_per_10_min: per_10(|m| m.server.rss_mib),
        server_rss_anon_mib_per_10_min: per_10(|m| m.server.rss_anon_mib),
        learner_fds_per_10_min: per_10(|m| m.learner.fds as f64),
        server_fds_per_10_min: per_10(|m| m.server.fds as f64),
        learner_threads_per_10_min: per_10(|m| m.learner.threads as f64),
        first_minute_at_475: first.map(|m| m.minute),
        min_return_after_475: min_after.filter(|v| v.is_finite()),
        final_return: minutes.last().map_or(0.0, |m| m.mean_return_last_100),
        garbage_not_refused,
        streams_ended_unasked,
        frozen_actor_back,
        replay_check_passed: replay.passed(),
        replay,
    }
}
