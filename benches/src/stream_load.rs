//! Many actor streams against one learner, from one process: how many a
//! learner holds, and what a stream's step costs as they grow.
//!
//! [`run_stream_load`] starts `learner --no-train --local-actors 0` and then
//! `streams` actors inside this process, each the library's own actor
//! ([`seed_actor::run_actor`]: its own connection, hello, pipelined halves)
//! over `envs` CartPole envs, all on one tokio runtime, for `duration`.
//! Reported: env steps/s (the actors' steps over their active time), the
//! step round trip (count-weighted means of each stream's p50 and p99, and
//! the worst stream's p99), the learner's peak RSS (`VmHWM`) and its open
//! file descriptors with every stream connected (what `ulimit -n` must
//! allow), and the learner's CPU seconds per million env steps.
//!
//! Why one process: 2,000 actor processes would measure the machine's
//! scheduler; a stream multiplexed on a runtime costs the learner exactly
//! what a remote actor's does (one HTTP/2 connection, one stream).
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use seed_actor::{run_actor, ActorConfig, ActorReport, ReconnectPolicy};
use seed_env::EnvConfig;
use serde::Serialize;
use tracing::info;

use crate::child::ChildProcess;
use crate::error::HarnessError;
use crate::proc_stats::ProcStats;
use crate::scenario::wait_ready;

/// How long the learner gets to exit after SIGINT.
const STOP_TIMEOUT: Duration = Duration::from_secs(60);

/// One load point's figures.
#[derive(Debug, Clone, Serialize)]
pub struct StreamLoadResult {
    pub streams: usize,
    pub envs_per_stream: usize,
    pub seconds: f64,
    /// Streams that completed a session.
    pub connected: usize,
    pub env_steps_per_second: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p99_us_worst: f64,
    pub learner_rss_mib: f64,
    pub learner_open_fds: usize,
    pub learner_cpu_seconds: f64,
    /// Learner CPU microseconds per env step.
    pub learner_cpu_us_per_step: f64,
}

/// A free TCP port on 127.0.0.1 (bound, then released for the learner).
fn free_port() -> Result<u16, HarnessError> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

/// Runs `streams` actor streams of `envs` CartPole envs against a fresh
/// learner for `duration`; children log into `dir`.
pub async fn run_stream_load(
    learner_bin: &Path,
    dir: &Path,
    streams: usize,
    envs: usize,
    duration: Duration,
) -> Result<StreamLoadResult, HarnessError> {
    std::fs::create_dir_all(dir)?;
    let addr = format!("127.0.0.1:{}", free_port()?);
    let mut cmd = Command::new(learner_bin);
    cmd.args(["--no-train", "--local-actors", "0", "--listen", &addr])
        .args(["--env", "cartpole", "--progress-secs", "0"])
        .env("RAYON_NUM_THREADS", "1");
    let mut learner = ChildProcess::spawn("learner", dir, &mut cmd)?;
    wait_ready(&mut learner, &addr).await?;
    let pid = learner.pid();
    info!(streams, envs, "streams connecting");
    let cpu_before = ProcStats::read(pid).cpu_seconds;
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(streams);
    for i in 0..streams {
        let mut cfg = ActorConfig::new(addr.clone(), EnvConfig::CartPole, envs);
        cfg.actor_id = format!("load-{i}");
        cfg.seed = i as u64;
        cfg.max_seconds = Some(duration.as_secs_f64());
        cfg.reconnect = ReconnectPolicy {
            max_attempts: Some(20),
            ..ReconnectPolicy::default()
        };
        tasks.push(tokio::spawn(run_actor(cfg, std::future::pending())));
    }
    // Usage with every stream connected: half way through.
    tokio::time::sleep(duration / 2).await;
    let fds = ProcStats::read(pid).fds;
    let mut reports: Vec<ActorReport> = Vec::with_capacity(streams);
    for t in tasks {
        match t.await {
            Ok(Ok(r)) => reports.push(r),
            Ok(Err(e)) => info!(error = %e, "a stream failed"),
            Err(e) => info!(error = %e, "a stream task panicked"),
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let end = ProcStats::read(pid);
    let (cpu, rss) = (end.cpu_seconds - cpu_before, end.hwm_mib);
    learner.signal(libc::SIGINT);
    learner.wait_success(STOP_TIMEOUT).await?;
    let steps: u64 = reports.iter().map(|r| r.env_steps).sum();
    let rate: f64 = reports
        .iter()
        .filter(|r| r.active_seconds > 0.0)
        .map(|r| r.env_steps as f64 / r.active_seconds)
        .sum();
    let count: u64 = reports.iter().map(|r| r.round_trip.count).sum();
    let weighted = |f: fn(&ActorReport) -> f64| {
        reports
            .iter()
            .map(|r| f(r) * r.round_trip.count as f64)
            .sum::<f64>()
            / count.max(1) as f64
    };
    Ok(StreamLoadResult {
        streams,
        envs_per_stream: envs,
        seconds,
        connected: reports.iter().filter(|r| r.sessions > 0).count(),
        env_steps_per_second: rate,
        p50_us: weighted(|r| r.round_trip.p50_us),
        p99_us: weighted(|r| r.round_trip.p99_us),
        p99_us_worst: reports
            .iter()
            .map(|r| r.round_trip.p99_us)
            .fold(0.0, f64::max),
        learner_rss_mib: rss,
        learner_open_fds: fds,
        learner_cpu_seconds: cpu,
        learner_cpu_us_per_step: if steps > 0 {
            cpu * 1e6 / steps as f64
        } else {
            0.0
        },
    })
}
