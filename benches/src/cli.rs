//! The `latency` binary's command line ([`LatencyCli`]) and [`run`], which
//! turns it into one scenario or a sweep, prints progress and a table, and
//! writes JSON (and, for a sweep, CSV and plots).
//!
//! Ctrl-C (or SIGTERM) cancels the run: dropping the scenario kills every
//! child it started, then the process exits with an error.
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Parser, Subcommand};
use seed_env::{EnvArgs, EnvConfig};
use serde::Serialize;
use tracing::info;

use crate::error::HarnessError;
use crate::machine::Machine;
use crate::scenario::{run_scenario, Binaries, Scenario, ScenarioResult};
use crate::sweep::{run_sweep, write_outputs, Sweep};
use crate::transport::Transport;

/// End-to-end step latency and throughput of the learner and actors, beside
/// a bare tonic echo measured in the same run.
///
/// Each flag's doc states its default.
#[derive(Parser, Debug, Clone)]
#[command(name = "latency", version, about)]
pub struct LatencyCli {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// `learner` binary [default: `learner` next to this binary].
    #[arg(long)]
    pub learner_bin: Option<PathBuf>,
    /// `actor` binary [default: `actor` next to this binary].
    #[arg(long)]
    pub actor_bin: Option<PathBuf>,
    /// Actor processes (and echo clients) [default: 1].
    #[arg(long, hide_default_value = true, default_value_t = 1)]
    pub actors: usize,
    /// Envs per actor; the actor steps them in two halves [default: 1].
    #[arg(long, hide_default_value = true, default_value_t = 1)]
    pub envs_per_actor: usize,
    /// The environment the actors run.
    #[command(flatten)]
    pub environment: EnvArgs,
    /// Learner `--max-batch`: env rows per inference batch at most [default: 256].
    #[arg(long, hide_default_value = true, default_value_t = 256)]
    pub max_batch: usize,
    /// Learner `--flush-us`: flush a batch this long after its first request [default: 500].
    #[arg(long, hide_default_value = true, default_value_t = 500)]
    pub flush_us: u64,
    /// Learner `--inference-threads` [default: 1].
    #[arg(long, hide_default_value = true, default_value_t = 1)]
    pub inference_threads: usize,
    /// Learner `--inline-max-rows`: a step batch of at most this many envs
    /// that holds every connected env is inferred on the learner's I/O
    /// thread; 0 sends every step batch through the batcher and inference
    /// thread [default: 32, the learner's default].
    #[arg(long, hide_default_value = true, default_value_t = seed_learner::app::LearnerConfig::default().inference.inline_max_rows)]
    pub inline_max_rows: usize,
    /// Keep the learner's training on (unrolls, replay, trainer) while
    /// measuring [default: off: the learner runs with `--no-train`, so the
    /// figures are the serving path's alone].
    #[arg(long)]
    pub train: bool,
    /// Learner `--device`: where inference runs, `cpu` or `cuda:N` (a
    /// learner built with `--features cuda`) [default: cpu].
    #[arg(long, hide_default_value = true, default_value = "cpu")]
    pub device: String,
    /// Transport: `tcp` (loopback) or `unix` (domain socket) [default: tcp].
    #[arg(long, value_enum, hide_default_value = true, default_value_t = Transport::Tcp)]
    pub transport: Transport,
    /// Seconds per window (echo, then learner) of each scenario
    /// [default: 5, or 3 with --sweep].
    #[arg(long)]
    pub duration_secs: Option<f64>,
    /// Echo and learner windows alternated this many times, both servers
    /// up throughout; the figures pool every window of a side. Several
    /// short rounds keep the ratio steady on a noisy VM [default: 1].
    #[arg(long, default_value_t = 1, hide_default_value = true)]
    pub rounds: usize,
    /// Write the single run's result (with the machine) as JSON here [default: none].
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Run a grid of actors x envs per actor x transport instead of one scenario [default: off].
    #[arg(long)]
    pub sweep: bool,
    /// Sweep: actor counts [default: 1,2,4].
    #[arg(
        long,
        value_delimiter = ',',
        hide_default_value = true,
        default_value = "1,2,4"
    )]
    pub sweep_actors: Vec<usize>,
    /// Sweep: envs per actor [default: 1,16,256].
    #[arg(
        long,
        value_delimiter = ',',
        hide_default_value = true,
        default_value = "1,16,256"
    )]
    pub sweep_envs: Vec<usize>,
    /// Sweep: transports [default: tcp,unix].
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        hide_default_value = true,
        default_value = "tcp,unix"
    )]
    pub sweep_transports: Vec<Transport>,
    /// Sweep: where sweep.json, sweep.csv and the PNG plots go [default: benches/results].
    #[arg(long, hide_default_value = true, default_value = "benches/results")]
    pub out_dir: PathBuf,
    /// Where child logs, summaries and unix sockets go
    /// [default: a fresh directory under the system temp dir].
    #[arg(long)]
    pub run_dir: Option<PathBuf>,
}

/// Subcommands (internal).
#[derive(Subcommand, Debug, Clone)]
pub enum Command {
    /// Serve the echo floor on `--listen` until SIGTERM/SIGINT (started by the harness).
    #[command(hide = true)]
    EchoServer {
        /// `IP:PORT` or `unix:/path` [default: none, required].
        #[arg(long)]
        listen: String,
    },
}

impl LatencyCli {
    fn env(&self) -> EnvConfig {
        self.environment.env_config()
    }

    fn scenario(&self) -> Result<Scenario, HarnessError> {
        let secs = self
            .duration_secs
            .unwrap_or(if self.sweep { 3.0 } else { 5.0 });
        if !(secs.is_finite() && secs > 0.0) {
            return Err(HarnessError::Config(format!(
                "--duration-secs must be positive, got {secs}"
            )));
        }
        if self.rounds == 0 {
            return Err(HarnessError::Config("--rounds must be at least 1".into()));
        }
        Ok(Scenario {
            actors: self.actors,
            envs_per_actor: self.envs_per_actor,
            env: self.env(),
            max_batch: self.max_batch,
            flush_us: self.flush_us,
            transport: self.transport,
            duration: Duration::from_secs_f64(secs),
            rounds: self.rounds,
            inference_threads: self.inference_threads,
            inline_max_rows: self.inline_max_rows,
            device: self.device.clone(),
            train: self.train,
        })
    }

    fn binaries(&self) -> Result<Binaries, HarnessError> {
        let me = std::env::current_exe()?;
        let beside = |name: &str| me.with_file_name(name);
        let bins = Binaries {
            learner: self
                .learner_bin
                .clone()
                .unwrap_or_else(|| beside("learner")),
            actor: self.actor_bin.clone().unwrap_or_else(|| beside("actor")),
            echo: me,
        };
        for (flag, path) in [
            ("--learner-bin", &bins.learner),
            ("--actor-bin", &bins.actor),
        ] {
            if !path.is_file() {
                return Err(HarnessError::Config(format!(
                    "{} not found (build it with `cargo build --release -p seed-learner-cli -p seed-actor`, or pass {flag})",
                    path.display()
                )));
            }
        }
        Ok(bins)
    }
}

/// What `--json` writes for a single run.
#[derive(Debug, Serialize)]
struct SingleReport<'a> {
    machine: Machine,
    #[serde(flatten)]
    result: &'a ScenarioResult,
}

/// Runs the command line on a fresh multi-threaded runtime.
pub fn run(cli: LatencyCli) -> Result<(), HarnessError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let outcome = runtime.block_on(async move {
        let interrupted = shutdown_signal()?;
        tokio::select! {
            r = dispatch(cli) => r,
            () = interrupted => Err(HarnessError::Config("interrupted; children killed".into())),
        }
    });
    // Echo client threads finish within their phase; do not wait past that.
    runtime.shutdown_timeout(Duration::from_secs(1));
    outcome
}

async fn dispatch(cli: LatencyCli) -> Result<(), HarnessError> {
    if let Some(Command::EchoServer { listen }) = &cli.command {
        let stop = shutdown_signal()?;
        return crate::echo_server::serve_echo(listen, stop).await;
    }
    let bins = cli.binaries()?;
    let base = cli.scenario()?;
    let run_dir = match &cli.run_dir {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!("seed-latency-{}", std::process::id())),
    };
    std::fs::create_dir_all(&run_dir)?;
    let machine = Machine::detect();
    info!(%machine, run_dir = %run_dir.display(), "latency harness");
    if cli.sweep {
        let sweep = Sweep {
            base,
            actors: cli.sweep_actors.clone(),
            envs_per_actor: cli.sweep_envs.clone(),
            transports: cli.sweep_transports.clone(),
        };
        let report = run_sweep(&sweep, &bins, &run_dir).await;
        print_table(&report.results);
        for path in write_outputs(&report, &cli.out_dir)? {
            info!("wrote {}", path.display());
        }
        if !report.failed.is_empty() {
            return Err(HarnessError::Config(format!(
                "{} grid point(s) failed: {}; logs under {}",
                report.failed.len(),
                report.failed.join(", "),
                run_dir.display()
            )));
        }
    } else {
        let result = run_scenario(&base, &bins, &run_dir).await?;
        print_table(std::slice::from_ref(&result));
        if let Some(path) = &cli.json {
            write_json(
                path,
                &SingleReport {
                    machine,
                    result: &result,
                },
            )?;
            info!("wrote {}", path.display());
        }
    }
    Ok(())
}

fn write_json(path: &Path, value: &impl Serialize) -> Result<(), HarnessError> {
    let err = |reason: String| HarnessError::Output {
        path: path.to_path_buf(),
        reason,
    };
    let text = serde_json::to_string_pretty(value).map_err(|e| err(e.to_string()))?;
    std::fs::write(path, text + "\n").map_err(|e| err(e.to_string()))
}

/// The results as an aligned table on stdout (the program's output, not a log).
fn print_table(results: &[ScenarioResult]) {
    println!(
        "{:>6} {:>5} {:>12} {:>5} | {:>8} {:>8} {:>8} {:>8} | {:>8} {:>8} {:>6} {:>6} | {:>11} {:>8} {:>7} {:>9}",
        "actors", "envs", "env", "trans", "p50us", "p90us", "p99us", "p99.9us", "echo50", "echo99",
        "x50", "x99", "steps/s", "obs MB/s", "batch", "cpu s/M"
    );
    for r in results {
        println!(
            "{:>6} {:>5} {:>12} {:>5} | {:>8.1} {:>8.1} {:>8.1} {:>8.1} | {:>8.1} {:>8.1} {:>6.2} {:>6.2} | {:>11.0} {:>8.1} {:>7.1} {:>9.2}",
            r.actors, r.envs_per_actor, r.env, r.transport.name(), r.p50_us, r.p90_us, r.p99_us,
            r.p999_us, r.echo_p50_us, r.echo_p99_us, r.p50_ratio, r.p99_ratio,
            r.env_steps_per_second, r.obs_mb_per_second, r.mean_batch_fill,
            r.learner_cpu_s_per_million_steps
        );
    }
}

/// Resolves on the first SIGINT or SIGTERM.
fn shutdown_signal() -> std::io::Result<impl std::future::Future<Output = ()> + Send> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    Ok(async move {
        tokio::select! {
            _ = interrupt.recv() => info!("SIGINT received"),
            _ = terminate.recv() => info!("SIGTERM received"),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn every_flag_documents_its_default() {
        for arg in LatencyCli::command().get_arguments() {
            let id = arg.get_id().as_str();
            if matches!(id, "help" | "version") {
                continue;
            }
            let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
            assert!(help.contains("[default: "), "--{id}: {help:?}");
        }
    }

    #[test]
    fn defaults_are_one_cartpole_actor_over_tcp() {
        let cli = LatencyCli::try_parse_from(["latency"]).unwrap();
        let s = cli.scenario().unwrap();
        assert_eq!((s.actors, s.envs_per_actor), (1, 1));
        assert_eq!(s.env, EnvConfig::CartPole);
        assert_eq!(s.transport, Transport::Tcp);
        assert_eq!(s.duration, Duration::from_secs(5));
        let sweep = LatencyCli::try_parse_from(["latency", "--sweep"]).unwrap();
        assert_eq!(sweep.scenario().unwrap().duration, Duration::from_secs(3));
        assert_eq!(
            sweep.sweep_transports,
            vec![Transport::Tcp, Transport::Unix]
        );
        let bad = LatencyCli::try_parse_from(["latency", "--duration-secs", "0"]).unwrap();
        assert!(bad.scenario().is_err());
    }
}
