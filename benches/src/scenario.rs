//! One measurement: a learner and N actor processes on this host, beside
//! the echo floor with the same payload, streams and transport.
//!
//! [`run_scenario`] starts two servers, then alternates two windows, each
//! `duration` long, `rounds` times:
//! 1. **Echo floor**: an [`EchoLearner`](crate::echo_server::EchoLearner)
//!    process (this harness binary, `echo-server` subcommand) answered by N
//!    echo clients ([`run_echo_clients`]), each pipelining like an actor
//!    with K envs.
//! 2. **Learner**: `learner --local-actors 0 --listen ADDR` with the
//!    batching flags and a `--summary-json`, answered by N `actor`
//!    processes with `--max-seconds duration --summary-json`.
//!
//! Why rounds: on a shared 2-core VM the floor itself moves by 1.5x from
//! one minute to the next; windows a few seconds apart, alternated, put
//! both sides in the same weather, so their ratio holds still where the
//! absolute figures do not. At the end the learner gets SIGINT, writes its
//! summary and is reaped with `wait4`, which gives its CPU time.
//!
//! Figures across actors (or echo clients) are count-weighted means of each
//! one's percentiles (the actors are identical, so these agree closely;
//! `p99_us_worst` keeps the worst actor's p99). Env steps/s is the sum of
//! each actor's steps over its own active time. Children log to
//! `<run dir>/<name>.log`; every child is killed if the scenario fails or
//! is cancelled (see [`ChildProcess`]).
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use seed_actor::learner_address::LearnerAddress;
use seed_actor::RoundTripPercentiles;
use seed_env::EnvConfig;
use seed_shared::pb;
use seed_shared::pb::learner_client::LearnerClient;
use serde::{Deserialize, Serialize};
use tracing::info;

use crate::child::ChildProcess;
use crate::echo_client::{run_echo_clients, EchoClientResult, EchoLoad};
use crate::error::HarnessError;
use crate::transport::Transport;

/// How long a server may take to answer its first `Status` call.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// Retry interval of the readiness probe.
const READY_POLL: Duration = Duration::from_millis(20);
/// Slack beyond `duration` for actors to connect, stop and write summaries.
const ACTOR_SLACK: Duration = Duration::from_secs(60);
/// How long the learner and echo server get to exit after their signal.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// The programs a scenario starts.
#[derive(Debug, Clone)]
pub struct Binaries {
    pub learner: PathBuf,
    pub actor: PathBuf,
    /// A binary whose `echo-server --listen ADDR` serves the echo (the harness itself).
    pub echo: PathBuf,
}

/// One point of the grid.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub actors: usize,
    pub envs_per_actor: usize,
    pub env: EnvConfig,
    /// Learner `--max-batch`.
    pub max_batch: usize,
    /// Learner `--flush-us`.
    pub flush_us: u64,
    pub transport: Transport,
    /// Length of each window (echo, then learner).
    pub duration: Duration,
    /// Echo and learner windows alternated this many times.
    pub rounds: usize,
    /// Learner `--inference-threads`.
    pub inference_threads: usize,
    /// Learner `--inline-max-rows`.
    pub inline_max_rows: usize,
    /// Learner `--device` (`cpu`, `cuda:N`).
    pub device: String,
    /// Whether the learner trains while measured (else `--no-train`).
    pub train: bool,
}

impl Scenario {
    /// Short label for progress lines and file names.
    pub fn label(&self) -> String {
        format!(
            "{}x{}_{}_{}",
            self.actors,
            self.envs_per_actor,
            env_name(&self.env),
            self.transport
        )
    }

    /// `--env ...` flags describing the env, as both binaries take them.
    fn env_flags(&self) -> Vec<String> {
        seed_env::env_flags(&self.env)
    }
}

fn env_name(env: &EnvConfig) -> String {
    match env {
        EnvConfig::CartPole => "cartpole".into(),
        EnvConfig::CartPoleMasked => "cartpole-masked".into(),
        EnvConfig::Pendulum => "pendulum".into(),
        EnvConfig::Synthetic(s) => format!("{}{}", join_x(&s.obs_shape), s.obs_dtype),
    }
}

fn join_x(shape: &[usize]) -> String {
    shape
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join("x")
}

/// The figures of one scenario (one row of the sweep's CSV).
#[derive(Debug, Clone, Serialize)]
pub struct ScenarioResult {
    pub actors: usize,
    pub envs_per_actor: usize,
    pub env: String,
    pub obs_bytes_per_env: usize,
    pub max_batch: usize,
    pub flush_us: u64,
    pub transport: Transport,
    /// Learner `--device`.
    pub device: String,
    /// Whether the learner trained during the run.
    pub train: bool,
    /// Learner `--inline-max-rows`.
    pub inline_max_rows: usize,
    /// Share of inference batches a stream task ran inline.
    pub inline_batch_fraction: f64,
    /// Each window's length.
    pub duration_s: f64,
    /// Echo/learner window pairs.
    pub rounds: usize,
    /// Actor round trip (StepBatch queued to its ActionBatch received), µs.
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    /// The largest p99 of any one actor.
    pub p99_us_worst: f64,
    /// Echo floor, same payload, streams and transport, µs.
    pub echo_p50_us: f64,
    pub echo_p90_us: f64,
    pub echo_p99_us: f64,
    pub echo_p999_us: f64,
    /// Ours over the echo.
    pub p50_ratio: f64,
    pub p99_ratio: f64,
    /// Sum over actors of env steps over active seconds.
    pub env_steps_per_second: f64,
    /// Env rows per second the echo floor answered.
    pub echo_rows_per_second: f64,
    /// Observation bytes ingested by the learner, MB/s (10^6 bytes).
    pub obs_mb_per_second: f64,
    /// Learner's mean env rows per inference batch.
    pub mean_batch_fill: f64,
    /// Learner's env steps and CPU (user + system) over its whole life.
    pub learner_env_steps: u64,
    pub learner_cpu_seconds: f64,
    pub learner_cpu_s_per_million_steps: f64,
    /// Learner server-side step latency (received to answered), µs.
    pub learner_step_p50_us: f64,
    pub learner_step_p99_us: f64,
    /// Context switches of the learner's threads per step round trip
    /// while the actors ran, and of the echo server's per echo round trip:
    /// where a side hands a step from thread to thread, it shows here.
    pub learner_context_switches_per_step: f64,
    pub echo_context_switches_per_step: f64,
}

/// The fields of the learner's `--summary-json` the harness reads.
#[derive(Debug, Deserialize)]
struct LearnerSummary {
    env_steps: u64,
    mean_inference_batch: f64,
    inference_batches: u64,
    inline_batches: u64,
    step_latency_us: LearnerLatency,
}

#[derive(Debug, Deserialize)]
struct LearnerLatency {
    p50: f64,
    p99: f64,
}

/// The fields of the actor's `--summary-json` the harness reads.
#[derive(Debug, Deserialize)]
struct ActorSummary {
    env_steps: u64,
    active_seconds: f64,
    round_trip: ActorRoundTrip,
}

#[derive(Debug, Deserialize)]
struct ActorRoundTrip {
    count: u64,
    mean_us: f64,
    p50_us: f64,
    p90_us: f64,
    p99_us: f64,
    p999_us: f64,
    max_us: f64,
}

impl From<ActorRoundTrip> for RoundTripPercentiles {
    fn from(r: ActorRoundTrip) -> Self {
        RoundTripPercentiles {
            count: r.count,
            mean_us: r.mean_us,
            p50_us: r.p50_us,
            p90_us: r.p90_us,
            p99_us: r.p99_us,
            p999_us: r.p999_us,
            max_us: r.max_us,
        }
    }
}

/// Count-weighted mean of each percentile (module docs).
fn pooled(parts: &[RoundTripPercentiles]) -> RoundTripPercentiles {
    let total: u64 = parts.iter().map(|p| p.count).sum();
    if total == 0 {
        return RoundTripPercentiles::default();
    }
    let mean = |f: fn(&RoundTripPercentiles) -> f64| {
        parts.iter().map(|p| f(p) * p.count as f64).sum::<f64>() / total as f64
    };
    RoundTripPercentiles {
        count: total,
        mean_us: mean(|p| p.mean_us),
        p50_us: mean(|p| p.p50_us),
        p90_us: mean(|p| p.p90_us),
        p99_us: mean(|p| p.p99_us),
        p999_us: mean(|p| p.p999_us),
        max_us: parts.iter().map(|p| p.max_us).fold(0.0, f64::max),
    }
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        f64::NAN
    }
}

/// Runs both phases of `scenario`, with child logs and sockets in `dir`.
pub async fn run_scenario(
    scenario: &Scenario,
    bins: &Binaries,
    dir: &Path,
) -> Result<ScenarioResult, HarnessError> {
    if scenario.actors == 0 || scenario.envs_per_actor == 0 {
        return Err(HarnessError::Config(
            "actors and envs per actor must be at least 1".into(),
        ));
    }
    std::fs::create_dir_all(dir)?;
    let label = scenario.label();
    let mut echo = EchoPhase::start(scenario, bins, dir).await?;
    let mut learner = LearnerPhase::start(scenario, bins, dir).await?;
    let rounds = scenario.rounds.max(1);
    for round in 0..rounds {
        info!(%label, round, "echo floor");
        echo.window(scenario).await?;
        info!(%label, round, "learner");
        learner.window(scenario, bins, dir, round).await?;
    }
    echo.stop().await?;
    let ours = learner.stop().await?;
    // Rates are per window: each window's sum over clients, averaged.
    let windows = rounds as f64;

    let echo_rt = pooled(
        &echo
            .results
            .iter()
            .map(|e| e.round_trip)
            .collect::<Vec<_>>(),
    );
    let echo_rows_per_second = echo
        .results
        .iter()
        .map(|e| {
            if e.seconds > 0.0 {
                e.rows as f64 / e.seconds
            } else {
                0.0
            }
        })
        .sum::<f64>()
        / windows;
    let actor_rt: Vec<RoundTripPercentiles> = ours.actors.iter().map(|a| a.round_trip).collect();
    let rt = pooled(&actor_rt);
    let env_steps_per_second: f64 = ours
        .actors
        .iter()
        .map(|a| {
            if a.active_seconds > 0.0 {
                a.env_steps as f64 / a.active_seconds
            } else {
                0.0
            }
        })
        .sum::<f64>()
        / windows;
    let obs_bytes = scenario.env.spec().obs_bytes();
    let cpu = ours.learner_cpu.as_secs_f64();
    Ok(ScenarioResult {
        actors: scenario.actors,
        envs_per_actor: scenario.envs_per_actor,
        env: env_name(&scenario.env),
        obs_bytes_per_env: obs_bytes,
        max_batch: scenario.max_batch,
        flush_us: scenario.flush_us,
        transport: scenario.transport,
        device: scenario.device.clone(),
        train: scenario.train,
        inline_max_rows: scenario.inline_max_rows,
        inline_batch_fraction: ratio(
            ours.learner.inline_batches as f64,
            ours.learner.inference_batches as f64,
        ),
        duration_s: scenario.duration.as_secs_f64(),
        rounds,
        p50_us: rt.p50_us,
        p90_us: rt.p90_us,
        p99_us: rt.p99_us,
        p999_us: rt.p999_us,
        p99_us_worst: actor_rt.iter().map(|p| p.p99_us).fold(0.0, f64::max),
        echo_p50_us: echo_rt.p50_us,
        echo_p90_us: echo_rt.p90_us,
        echo_p99_us: echo_rt.p99_us,
        echo_p999_us: echo_rt.p999_us,
        p50_ratio: ratio(rt.p50_us, echo_rt.p50_us),
        p99_ratio: ratio(rt.p99_us, echo_rt.p99_us),
        env_steps_per_second,
        echo_rows_per_second,
        obs_mb_per_second: env_steps_per_second * obs_bytes as f64 / 1e6,
        mean_batch_fill: ours.learner.mean_inference_batch,
        learner_env_steps: ours.learner.env_steps,
        learner_cpu_seconds: cpu,
        learner_cpu_s_per_million_steps: ratio(cpu * 1e6, ours.learner.env_steps as f64),
        learner_step_p50_us: ours.learner.step_latency_us.p50,
        learner_step_p99_us: ours.learner.step_latency_us.p99,
        learner_context_switches_per_step: ratio(
            ours.switches as f64,
            ours.actors.iter().map(|a| a.round_trip.count).sum::<u64>() as f64,
        ),
        echo_context_switches_per_step: ratio(
            echo.switches as f64,
            echo.results.iter().map(|r| r.round_trip.count).sum::<u64>() as f64,
        ),
    })
}

/// The echo server and what its clients measured so far.
struct EchoPhase {
    server: ChildProcess,
    addr: String,
    results: Vec<EchoClientResult>,
    /// The server's context switches while clients ran.
    switches: u64,
}

impl EchoPhase {
    async fn start(scenario: &Scenario, bins: &Binaries, dir: &Path) -> Result<Self, HarnessError> {
        let addr = scenario.transport.allocate(dir, "echo")?;
        let mut server = ChildProcess::spawn(
            "echo-server",
            dir,
            Command::new(&bins.echo).args(["echo-server", "--listen", &addr]),
        )?;
        wait_ready(&mut server, &addr).await?;
        Ok(EchoPhase {
            server,
            addr,
            results: Vec::new(),
            switches: 0,
        })
    }

    /// N echo clients for one window.
    async fn window(&mut self, scenario: &Scenario) -> Result<(), HarnessError> {
        let load = EchoLoad {
            address: self.addr.clone(),
            env: scenario.env.clone(),
            envs: scenario.envs_per_actor,
            clients: scenario.actors,
            duration: scenario.duration,
        };
        let before = self.server.context_switches();
        let results = tokio::task::spawn_blocking(move || run_echo_clients(&load))
            .await
            .map_err(|e| HarnessError::Echo(format!("client task: {e}")))??;
        self.switches += self.server.context_switches().saturating_sub(before);
        self.results.extend(results);
        Ok(())
    }

    async fn stop(&mut self) -> Result<(), HarnessError> {
        self.server.signal(libc::SIGTERM);
        self.server.wait(STOP_TIMEOUT).await?;
        Ok(())
    }
}

/// The learner process and what its actors measured so far.
struct LearnerPhase {
    learner: ChildProcess,
    addr: String,
    learner_json: PathBuf,
    actors: Vec<ActorSummaryParsed>,
    /// The learner's context switches while actors ran.
    switches: u64,
}

/// The learner's figures once it has stopped.
struct LearnerOutcome {
    learner: LearnerSummary,
    learner_cpu: Duration,
    /// The learner's context switches while the actors ran.
    switches: u64,
    actors: Vec<ActorSummaryParsed>,
}

struct ActorSummaryParsed {
    env_steps: u64,
    active_seconds: f64,
    round_trip: RoundTripPercentiles,
}

impl LearnerPhase {
    async fn start(scenario: &Scenario, bins: &Binaries, dir: &Path) -> Result<Self, HarnessError> {
        let addr = scenario.transport.allocate(dir, "learner")?;
        let learner_json = dir.join("learner.json");
        remove_stale(&learner_json)?;
        let mut cmd = Command::new(&bins.learner);
        cmd.args(["--local-actors", "0", "--listen", &addr])
            .args(["--max-batch", &scenario.max_batch.to_string()])
            .args(["--flush-us", &scenario.flush_us.to_string()])
            .args([
                "--inference-threads",
                &scenario.inference_threads.to_string(),
            ])
            .args(["--inline-max-rows", &scenario.inline_max_rows.to_string()])
            .args(["--device", &scenario.device])
            .args((!scenario.train).then_some("--no-train"))
            .args(scenario.env_flags())
            .arg("--summary-json")
            .arg(&learner_json)
            .env("RAYON_NUM_THREADS", "1");
        let mut learner = ChildProcess::spawn("learner", dir, &mut cmd)?;
        wait_ready(&mut learner, &addr).await?;
        Ok(LearnerPhase {
            learner,
            addr,
            learner_json,
            actors: Vec::new(),
            switches: 0,
        })
    }

    /// N actor processes for one window.
    async fn window(
        &mut self,
        scenario: &Scenario,
        bins: &Binaries,
        dir: &Path,
        round: usize,
    ) -> Result<(), HarnessError> {
        let mut actors = Vec::with_capacity(scenario.actors);
        let mut actor_jsons = Vec::with_capacity(scenario.actors);
        for i in 0..scenario.actors {
            let json = dir.join(format!("actor-{i}-r{round}.json"));
            remove_stale(&json)?;
            let mut cmd = Command::new(&bins.actor);
            cmd.args(["--learner", &self.addr])
                .args(["--envs", &scenario.envs_per_actor.to_string()])
                .args(scenario.env_flags())
                .args(["--actor-id", &format!("bench-{i}")])
                .args(["--seed", &(i + round * scenario.actors).to_string()])
                .args([
                    "--max-seconds",
                    &scenario.duration.as_secs_f64().to_string(),
                ])
                .args(["--max-reconnects", "3"])
                .arg("--summary-json")
                .arg(&json);
            actors.push(ChildProcess::spawn(
                &format!("actor-{i}-r{round}"),
                dir,
                &mut cmd,
            )?);
            actor_jsons.push(json);
        }
        let actor_deadline = scenario.duration + ACTOR_SLACK;
        let started = Instant::now();
        let before = self.learner.context_switches();
        for actor in &mut actors {
            let left = actor_deadline.saturating_sub(started.elapsed());
            actor.wait_success(left).await?;
        }
        self.switches += self.learner.context_switches().saturating_sub(before);
        for path in &actor_jsons {
            let a: ActorSummary = read_json(path)?;
            self.actors.push(ActorSummaryParsed {
                env_steps: a.env_steps,
                active_seconds: a.active_seconds,
                round_trip: a.round_trip.into(),
            });
        }
        Ok(())
    }

    async fn stop(mut self) -> Result<LearnerOutcome, HarnessError> {
        self.learner.signal(libc::SIGINT);
        let exited = self.learner.wait_success(STOP_TIMEOUT).await?;
        Ok(LearnerOutcome {
            learner: read_json(&self.learner_json)?,
            learner_cpu: exited.cpu,
            switches: self.switches,
            actors: self.actors,
        })
    }
}

fn remove_stale(path: &Path) -> Result<(), HarnessError> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e.into()),
    }
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, HarnessError> {
    let err = |reason: String| HarnessError::Summary {
        path: path.to_path_buf(),
        reason,
    };
    let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
    serde_json::from_str(&text).map_err(|e| err(e.to_string()))
}

/// Waits until the server at `addr` answers `Status`, or its process exits.
pub(crate) async fn wait_ready(child: &mut ChildProcess, addr: &str) -> Result<(), HarnessError> {
    let address = LearnerAddress::parse(addr)
        .map_err(|e| HarnessError::Config(format!("address {addr}: {e}")))?;
    let started = Instant::now();
    let mut last_error = String::from("never tried");
    while started.elapsed() < READY_TIMEOUT {
        if let Some(exited) = child.try_reap()? {
            return Err(child.failed(&exited));
        }
        match address.connect().await {
            Ok(channel) => match LearnerClient::new(channel)
                .status(pb::StatusRequest {})
                .await
            {
                Ok(_) => return Ok(()),
                Err(status) => last_error = status.to_string(),
            },
            Err(e) => last_error = e.to_string(),
        }
        tokio::time::sleep(READY_POLL).await;
    }
    Err(HarnessError::NotReady {
        name: child.name().to_owned(),
        addr: addr.to_owned(),
        seconds: READY_TIMEOUT.as_secs_f64(),
        last_error,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pooling_weights_by_count() {
        let a = RoundTripPercentiles {
            count: 1,
            p50_us: 10.0,
            max_us: 50.0,
            ..Default::default()
        };
        let b = RoundTripPercentiles {
            count: 3,
            p50_us: 20.0,
            max_us: 30.0,
            ..Default::default()
        };
        let p = pooled(&[a, b]);
        assert_eq!(p.count, 4);
        assert_eq!(p.p50_us, 17.5);
        assert_eq!(p.max_us, 50.0);
        assert_eq!(pooled(&[]).count, 0);
    }
}
