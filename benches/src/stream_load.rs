//! Many actor streams against one learner: how many a learner holds, and
//! what a stream's step costs it as they grow.
//!
//! [`run_stream_load`] starts `learner --no-train --local-actors 0` and then
//! `streams` actors, each the library's own actor ([`seed_actor::run_actor`]:
//! its own connection, hello, pipelined halves) over `envs` CartPole envs,
//! for `duration`. With `streams_per_connection` = K > 1, each process's
//! actors are grouped K to a [`SharedConnection`] (their streams
//! multiplexed on one HTTP/2 connection, as the actors of one process may
//! be), to measure what the learner's cost per connection is. With
//! `procs` = 1 they all run in this process on one tokio runtime; with
//! `procs` = P they are split over P child processes (this binary in its
//! hidden child mode, [`run_load_child`]), each running its share the same
//! way and handing back its streams' figures as one JSON line
//! ([`ChildReport`]).
//!
//! Reported per stream count ([`StreamLoadResult`]):
//! - env steps/s: each stream's steps over its active time, summed;
//! - the step round trip as the actors see it: count-weighted means of each
//!   stream's p50 and p99, and the worst stream's p99;
//! - the learner's own step time (`Status`: a step batch received to its
//!   action batch queued, p50/p99 over the run), which leaves out the
//!   load side's queueing and the wire;
//! - the learner's CPU per env step and per message (step batch), its peak
//!   RSS (`VmHWM`), and, half-way through with every stream connected, its
//!   open file descriptors (what `ulimit -n` must allow) and its RSS growth
//!   over the idle learner divided by the streams (KiB per stream; at small
//!   counts the learner's first-connection allocations dominate it).
//!
//! Why streams multiplexed on a runtime: 2,000 actor processes would measure
//! the machine's scheduler, and a multiplexed stream costs the learner
//! exactly what a remote actor's does (one HTTP/2 connection, one stream).
//! Why the split over a few processes: one load process was the bottleneck
//! by 2,000 streams, so beyond that it measured the generator, not the
//! learner. Cost: one process and runtime per child; each child's report is
//! six numbers per stream.
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use seed_actor::{
    run_actor, ActorConfig, ActorError, ActorReport, ReconnectPolicy, SharedConnection,
};
use seed_env::EnvConfig;
use serde::{Deserialize, Serialize};
use tokio::task::JoinHandle;
use tracing::{info, warn};

use crate::child::{ChildProcess, Exited};
use crate::error::HarnessError;
use crate::frozen_actor::StatusProbe;
use crate::proc_stats::ProcStats;
use crate::scenario::wait_ready;

/// How long the learner gets to exit after SIGINT, and a load child to
/// finish after its streams' `duration`.
const STOP_TIMEOUT: Duration = Duration::from_secs(60);
/// Log lines of a failed load child quoted in its error.
const TAIL_LINES: usize = 20;
/// The start of a load child's report line in its log.
const REPORT_PREFIX: &str = "{\"streams\":";

/// One actor stream running on this process's runtime.
type StreamTask = JoinHandle<Result<ActorReport, ActorError>>;

/// One load point's settings.
#[derive(Debug, Clone)]
pub struct LoadPoint {
    /// Actor streams.
    pub streams: usize,
    /// CartPole envs per stream.
    pub envs: usize,
    /// How long each stream steps.
    pub duration: Duration,
    /// Processes the streams are split over; 1 runs them in this process.
    pub procs: usize,
    /// Streams multiplexed on one HTTP/2 connection (a
    /// [`SharedConnection`] per group, within a process); 1: each stream
    /// its own connection, as separate actor processes would have.
    pub streams_per_connection: usize,
    /// Extra learner flags (a setting under test).
    pub learner_args: Vec<String>,
}

/// One load point's figures.
#[derive(Debug, Clone, Serialize)]
pub struct StreamLoadResult {
    pub streams: usize,
    pub envs_per_stream: usize,
    /// Processes the streams ran in (1: the harness itself; at most one
    /// per stream).
    pub procs: usize,
    /// Streams per HTTP/2 connection (1: one connection each).
    pub streams_per_connection: usize,
    /// Connections the streams were opened on.
    pub connections: usize,
    /// Extra learner flags of the run.
    pub learner_args: Vec<String>,
    pub seconds: f64,
    /// Streams that completed a session.
    pub connected: usize,
    pub env_steps_per_second: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p99_us_worst: f64,
    /// The learner's step time (step batch received to action batch
    /// queued) over the run, from its `Status`.
    pub learner_step_p50_us: f64,
    pub learner_step_p99_us: f64,
    /// Step batches the learner received (its `Status`).
    pub learner_step_batches: u64,
    /// Peak RSS (`VmHWM`).
    pub learner_rss_mib: f64,
    /// (RSS half-way − RSS before any stream) / streams, KiB.
    pub learner_rss_kib_per_stream: f64,
    /// Open file descriptors half-way.
    pub learner_open_fds: usize,
    pub learner_cpu_seconds: f64,
    /// Learner CPU microseconds per env step.
    pub learner_cpu_us_per_step: f64,
    /// Learner CPU microseconds per step batch received.
    pub learner_cpu_us_per_message: f64,
}

/// What one stream hands back: the parts of its [`ActorReport`] the
/// figures are made of.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StreamFigures {
    pub env_steps: u64,
    pub active_seconds: f64,
    pub sessions: u64,
    /// Round trips recorded.
    pub round_trips: u64,
    pub p50_us: f64,
    pub p99_us: f64,
}

impl From<&ActorReport> for StreamFigures {
    fn from(r: &ActorReport) -> Self {
        StreamFigures {
            env_steps: r.env_steps,
            active_seconds: r.active_seconds,
            sessions: r.sessions,
            round_trips: r.round_trip.count,
            p50_us: r.round_trip.p50_us,
            p99_us: r.round_trip.p99_us,
        }
    }
}

/// A load child's one line on stdout: its streams that finished (a stream
/// that failed is logged and left out, as in one process).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChildReport {
    pub streams: Vec<StreamFigures>,
}

/// The flags of the hidden child mode; `stream_load`'s `Args` parses them.
pub mod child_flags {
    pub const LEARNER: &str = "--child-learner";
    pub const STREAMS: &str = "--child-streams";
    pub const FIRST_ID: &str = "--child-first-id";
    pub const SECONDS: &str = "--child-seconds";
    pub const ENVS: &str = "--envs";
    pub const PER_CONNECTION: &str = "--streams-per-connection";
}

/// A free TCP port on 127.0.0.1 (bound, then released for the learner).
fn free_port() -> Result<u16, HarnessError> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

/// Starts streams `first_id..first_id + count` against `addr` on the
/// current runtime, `per_connection` to a connection (1: each its own).
fn spawn_streams(
    addr: &str,
    first_id: usize,
    count: usize,
    envs: usize,
    per_connection: usize,
    duration: Duration,
) -> Vec<StreamTask> {
    let mut shared = None;
    (first_id..first_id + count)
        .map(|i| {
            if per_connection > 1 && (i - first_id).is_multiple_of(per_connection) {
                shared = Some(SharedConnection::new());
            }
            let mut cfg = ActorConfig::new(addr.to_owned(), EnvConfig::CartPole, envs);
            cfg.actor_id = format!("load-{i}");
            cfg.seed = i as u64;
            cfg.max_seconds = Some(duration.as_secs_f64());
            cfg.reconnect = ReconnectPolicy {
                max_attempts: Some(20),
                ..ReconnectPolicy::default()
            };
            cfg.connection = shared.clone();
            tokio::spawn(run_actor(cfg, std::future::pending()))
        })
        .collect()
}

/// Waits for every stream; one that failed is logged and left out.
async fn collect_streams(tasks: Vec<StreamTask>) -> Vec<StreamFigures> {
    let mut figures = Vec::with_capacity(tasks.len());
    for t in tasks {
        match t.await {
            Ok(Ok(r)) => figures.push(StreamFigures::from(&r)),
            Ok(Err(e)) => info!(error = %e, "a stream failed"),
            Err(e) => info!(error = %e, "a stream task panicked"),
        }
    }
    figures
}

/// The hidden child mode: streams `first_id..first_id + streams` against
/// the learner at `addr` for `duration`, in this process.
pub async fn run_load_child(
    addr: &str,
    first_id: usize,
    streams: usize,
    envs: usize,
    per_connection: usize,
    duration: Duration,
) -> ChildReport {
    let tasks = spawn_streams(addr, first_id, streams, envs, per_connection, duration);
    ChildReport {
        streams: collect_streams(tasks).await,
    }
}

/// How many of `streams` each of `procs` processes runs: as even as can be,
/// the first ones one more.
fn shares(streams: usize, procs: usize) -> impl Iterator<Item = usize> {
    let (base, extra) = (streams / procs, streams % procs);
    (0..procs).map(move |c| base + usize::from(c < extra))
}

/// Connections `streams` split over `procs` processes open at
/// `per_connection` streams each (groups do not cross processes).
fn connections(streams: usize, procs: usize, per_connection: usize) -> usize {
    shares(streams, procs)
        .map(|count| count.div_ceil(per_connection))
        .sum()
}

/// Where the streams run while the learner is read.
enum Load {
    InProcess(Vec<StreamTask>),
    Children(Vec<ChildProcess>),
}

impl Load {
    /// Starts `point.streams` streams over `procs` processes.
    fn start(
        point: &LoadPoint,
        procs: usize,
        load_bin: &Path,
        addr: &str,
        dir: &Path,
    ) -> Result<Self, HarnessError> {
        if procs == 1 {
            return Ok(Load::InProcess(spawn_streams(
                addr,
                0,
                point.streams,
                point.envs,
                point.streams_per_connection,
                point.duration,
            )));
        }
        let mut children = Vec::with_capacity(procs);
        let mut first_id = 0;
        for (c, count) in shares(point.streams, procs).enumerate() {
            let mut cmd = Command::new(load_bin);
            cmd.args([child_flags::LEARNER, addr])
                .args([child_flags::STREAMS, &count.to_string()])
                .args([child_flags::FIRST_ID, &first_id.to_string()])
                .args([
                    child_flags::SECONDS,
                    &point.duration.as_secs_f64().to_string(),
                ])
                .args([child_flags::ENVS, &point.envs.to_string()])
                .args([
                    child_flags::PER_CONNECTION,
                    &point.streams_per_connection.to_string(),
                ]);
            children.push(ChildProcess::spawn(&format!("load-{c}"), dir, &mut cmd)?);
            first_id += count;
        }
        Ok(Load::Children(children))
    }

    /// Waits for every stream (a child until `deadline`) and gathers their
    /// figures; a child that failed or handed back no report is an error.
    async fn finish(self, deadline: Instant) -> Result<Vec<StreamFigures>, HarnessError> {
        match self {
            Load::InProcess(tasks) => Ok(collect_streams(tasks).await),
            Load::Children(mut children) => {
                let mut figures = Vec::new();
                for child in &mut children {
                    let left = deadline.saturating_duration_since(Instant::now());
                    let report = match child.wait(left).await {
                        Ok(exited) if exited.success() => {
                            info!(
                                child = child.name(),
                                cpu_seconds = exited.cpu.as_secs_f64(),
                                "load child done"
                            );
                            read_report(child)?
                        }
                        Ok(exited) => return Err(child_error(child, &describe(&exited))),
                        Err(e) => return Err(child_error(child, &e.to_string())),
                    };
                    figures.extend(report.streams);
                }
                Ok(figures)
            }
        }
    }
}

/// How a child ended, in words.
fn describe(exited: &Exited) -> String {
    match (exited.code, exited.signal) {
        (Some(c), _) => format!("exited with code {c}"),
        (None, Some(s)) => format!("was ended by signal {s}"),
        (None, None) => "ended with an unknown status".into(),
    }
}

/// A load child's log, lossily decoded (empty if unreadable).
fn read_log(child: &ChildProcess) -> String {
    std::fs::read(child.log())
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

/// The error for a load child that went wrong, with its log's last lines.
fn child_error(child: &ChildProcess, reason: &str) -> HarnessError {
    let log = read_log(child);
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| !l.starts_with(REPORT_PREFIX))
        .collect();
    HarnessError::LoadChild {
        name: child.name().to_owned(),
        reason: reason.to_owned(),
        log: child.log().to_path_buf(),
        tail: lines[lines.len().saturating_sub(TAIL_LINES)..].join("\n"),
    }
}

/// The report line of a child that exited cleanly (the last one in its log,
/// where stdout and stderr both go).
fn read_report(child: &ChildProcess) -> Result<ChildReport, HarnessError> {
    let log = read_log(child);
    let line = log
        .lines()
        .rev()
        .find(|l| l.starts_with(REPORT_PREFIX))
        .ok_or_else(|| child_error(child, "handed back no report"))?;
    serde_json::from_str(line)
        .map_err(|e| child_error(child, &format!("handed back an unreadable report: {e}")))
}

/// Runs one load point against a fresh learner; children log into `dir`.
/// `load_bin` is the `stream_load` binary, started in its child mode when
/// `point.procs` > 1.
pub async fn run_stream_load(
    learner_bin: &Path,
    load_bin: &Path,
    dir: &Path,
    point: &LoadPoint,
) -> Result<StreamLoadResult, HarnessError> {
    if point.procs == 0 {
        return Err(HarnessError::Config("procs must be at least 1".into()));
    }
    if point.streams_per_connection == 0 {
        return Err(HarnessError::Config(
            "streams per connection must be at least 1".into(),
        ));
    }
    let (streams, envs, duration) = (point.streams, point.envs, point.duration);
    let procs = point.procs.min(streams).max(1);
    std::fs::create_dir_all(dir)?;
    let addr = format!("127.0.0.1:{}", free_port()?);
    let mut cmd = Command::new(learner_bin);
    cmd.args(["--no-train", "--local-actors", "0", "--listen", &addr])
        .args(["--env", "cartpole", "--progress-secs", "0"])
        .args(&point.learner_args)
        .env("RAYON_NUM_THREADS", "1");
    let mut learner = ChildProcess::spawn("learner", dir, &mut cmd)?;
    wait_ready(&mut learner, &addr).await?;
    let pid = learner.pid();
    info!(streams, envs, procs, "streams connecting");
    let idle = ProcStats::read(pid);
    let started = Instant::now();
    let load = Load::start(point, procs, load_bin, &addr, dir)?;
    // Usage with every stream connected: half way through.
    tokio::time::sleep(duration / 2).await;
    let half = ProcStats::read(pid);
    let figures = load.finish(started + duration + STOP_TIMEOUT).await?;
    let seconds = started.elapsed().as_secs_f64();
    let end = ProcStats::read(pid);
    let status = StatusProbe::connect(&addr).await?.get().await?;
    learner.signal(libc::SIGINT);
    learner.wait_success(STOP_TIMEOUT).await?;
    let cpu = end.cpu_seconds - idle.cpu_seconds;
    let connected = figures.iter().filter(|r| r.sessions > 0).count();
    if connected < streams {
        warn!(connected, streams, "not every stream connected");
    }
    let steps: u64 = figures.iter().map(|r| r.env_steps).sum();
    let rate: f64 = figures
        .iter()
        .filter(|r| r.active_seconds > 0.0)
        .map(|r| r.env_steps as f64 / r.active_seconds)
        .sum();
    let count: u64 = figures.iter().map(|r| r.round_trips).sum();
    let weighted = |f: fn(&StreamFigures) -> f64| {
        figures
            .iter()
            .map(|r| f(r) * r.round_trips as f64)
            .sum::<f64>()
            / count.max(1) as f64
    };
    let per = |total: f64, n: u64| if n > 0 { total / n as f64 } else { 0.0 };
    Ok(StreamLoadResult {
        streams,
        envs_per_stream: envs,
        procs,
        streams_per_connection: point.streams_per_connection,
        connections: connections(streams, procs, point.streams_per_connection),
        learner_args: point.learner_args.clone(),
        seconds,
        connected,
        env_steps_per_second: rate,
        p50_us: weighted(|r| r.p50_us),
        p99_us: weighted(|r| r.p99_us),
        p99_us_worst: figures.iter().map(|r| r.p99_us).fold(0.0, f64::max),
        learner_step_p50_us: status.step_latency_p50_us,
        learner_step_p99_us: status.step_latency_p99_us,
        learner_step_batches: status.step_batches,
        learner_rss_mib: end.hwm_mib,
        learner_rss_kib_per_stream: per((half.rss_mib - idle.rss_mib) * 1024.0, streams as u64),
        learner_open_fds: half.fds,
        learner_cpu_seconds: cpu,
        learner_cpu_us_per_step: per(cpu * 1e6, steps),
        learner_cpu_us_per_message: per(cpu * 1e6, status.step_batches),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_report_round_trips_through_its_line() {
        let report = ChildReport {
            streams: vec![StreamFigures {
                env_steps: 10,
                active_seconds: 1.5,
                sessions: 1,
                round_trips: 5,
                p50_us: 120.0,
                p99_us: 900.0,
            }],
        };
        let line = serde_json::to_string(&report).unwrap();
        assert!(line.starts_with(REPORT_PREFIX), "{line}");
        assert_eq!(serde_json::from_str::<ChildReport>(&line).unwrap(), report);
    }

    #[test]
    fn connection_groups_do_not_cross_processes() {
        assert_eq!(connections(10_000, 2, 1), 10_000);
        assert_eq!(connections(10_000, 2, 50), 200);
        // 7 and 6 streams: groups of 4 make 2 connections in each process.
        assert_eq!(connections(13, 2, 4), 4);
        assert_eq!(connections(20, 1, 100), 1);
    }

    /// Runs `script` as the only load child and returns how finishing failed.
    async fn finish_error(script: &str) -> String {
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = Command::new("sh");
        cmd.args(["-c", script]);
        let child = ChildProcess::spawn("load-0", dir.path(), &mut cmd).unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        let err = Load::Children(vec![child])
            .finish(deadline)
            .await
            .unwrap_err();
        assert!(matches!(err, HarnessError::LoadChild { .. }), "{err}");
        err.to_string()
    }

    #[tokio::test]
    async fn a_failed_child_is_named_with_its_log_tail() {
        let err = finish_error("echo 'cannot connect' >&2; exit 3").await;
        assert!(err.starts_with("load-0 exited with code 3"), "{err}");
        assert!(err.ends_with("cannot connect"), "{err}");
        let err = finish_error("echo 'no report here'").await;
        assert!(err.contains("handed back no report"), "{err}");
        let err = finish_error("echo '{\"streams\": [1]}'").await;
        assert!(err.contains("unreadable report"), "{err}");
    }
}
