//! The actor's command line: [`ActorArgs`] (a `clap::Args` struct, so the
//! learner can embed it as its hidden `learner actor ...` subcommand with
//! `#[command(flatten)]`) and [`run`], which builds a current-thread tokio
//! runtime, stops cleanly on SIGINT/SIGTERM and runs [`run_actor`]. The
//! environment's flags are `seed_env`'s [`EnvArgs`], flattened in.
//!
//! Why current-thread: an actor's work is stepping envs, which is
//! synchronous; the network side is one stream. A single thread per actor
//! process leaves the other cores to the other actors and the learner.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

use seed_env::EnvArgs;
use seed_shared::logging::LogFormat;
use seed_shared::{DEFAULT_LEARNER_ADDR, DEFAULT_MAX_MESSAGE_BYTES};
use tracing::info;

use crate::client::{run_actor, ActorReport};
use crate::config::{default_actor_id, ActorConfig, ReconnectPolicy};
use crate::error::ActorError;

/// Flags of the `actor` binary (and of `learner actor`).
///
/// Each doc comment states its flag's default; clap's own `[default: ...]`
/// is hidden so help does not print it twice.
#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct ActorArgs {
    /// Learner address: `host:port`, `http://host:port` or `unix:/path/to/socket`
    /// [default: 127.0.0.1:50051].
    #[arg(long, env = "SEED_LEARNER", hide_default_value = true, default_value = DEFAULT_LEARNER_ADDR)]
    pub learner: String,
    /// Number of environments K this actor runs, stepped in two halves of K/2 [default: 16].
    #[arg(long, hide_default_value = true, default_value_t = 16)]
    pub envs: usize,
    /// The environment these envs run.
    #[command(flatten)]
    pub environment: EnvArgs,
    /// Log lines as `text` (colour only on a terminal without NO_COLOR) or
    /// `json` (one object per line, for log shippers) [default: text].
    #[arg(long, value_enum, hide_default_value = true, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Actor id sent in the hello [default: `hostname-pid`].
    #[arg(long)]
    pub actor_id: Option<String>,
    /// Shared secret the learner checks at hello [default: none].
    #[arg(long, env = "SEED_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Seed of env construction and episode resets [default: random].
    #[arg(long)]
    pub seed: Option<u64>,
    /// Stop cleanly after this many env steps [default: unlimited].
    #[arg(long)]
    pub max_env_steps: Option<u64>,
    /// Stop cleanly after this many seconds [default: unlimited].
    #[arg(long)]
    pub max_seconds: Option<f64>,
    /// First reconnect delay in milliseconds; doubles per failure, with jitter [default: 100].
    #[arg(long, hide_default_value = true, default_value_t = 100)]
    pub reconnect_initial_ms: u64,
    /// Largest reconnect delay in milliseconds [default: 5000].
    #[arg(long, hide_default_value = true, default_value_t = 5000)]
    pub reconnect_max_ms: u64,
    /// Consecutive failed connects before giving up with an error [default: retry forever].
    #[arg(long)]
    pub max_reconnects: Option<u32>,
    /// Largest gRPC message sent or accepted, in bytes [default: 67108864 (64 MiB)].
    #[arg(long, hide_default_value = true, default_value_t = DEFAULT_MAX_MESSAGE_BYTES)]
    pub max_message_bytes: usize,
    /// Write the actor's report (steps, batches, round-trip percentiles) as
    /// JSON to this file when it stops cleanly [default: none].
    #[arg(long)]
    pub summary_json: Option<PathBuf>,
}

impl ActorArgs {
    /// The validated [`ActorConfig`] these flags describe.
    pub fn to_config(&self) -> Result<ActorConfig, ActorError> {
        let env = self.environment.env_config();
        let cfg = ActorConfig {
            learner: self.learner.clone(),
            actor_id: self.actor_id.clone().unwrap_or_else(default_actor_id),
            num_envs: self.envs,
            env,
            seed: self.seed.unwrap_or_else(rand::random),
            token: self.token.clone().filter(|t| !t.is_empty()),
            max_env_steps: self.max_env_steps,
            max_seconds: self.max_seconds,
            reconnect: ReconnectPolicy {
                initial_backoff: Duration::from_millis(self.reconnect_initial_ms),
                max_backoff: Duration::from_millis(self.reconnect_max_ms),
                max_attempts: self.max_reconnects,
            },
            max_message_bytes: self.max_message_bytes,
        };
        cfg.validate()?;
        crate::learner_address::LearnerAddress::parse(&cfg.learner)?;
        Ok(cfg)
    }
}

/// Runs an actor from its flags on a current-thread runtime until it is
/// done, SIGINT/SIGTERM arrives (a clean stop) or a fatal error; on a clean
/// stop writes the report to `--summary-json` if given.
pub fn run(args: &ActorArgs) -> Result<ActorReport, ActorError> {
    let cfg = args.to_config()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let report = runtime.block_on(async move {
        // Registered before the first connect so an early signal is not lost.
        let shutdown = shutdown_signal()?;
        run_actor(cfg, shutdown).await
    })?;
    if let Some(path) = &args.summary_json {
        write_summary(path, &report)?;
    }
    Ok(report)
}

/// Writes `report` as pretty JSON to `path`.
pub fn write_summary(path: &Path, report: &ActorReport) -> Result<(), ActorError> {
    let err = |source| ActorError::Summary {
        path: path.to_path_buf(),
        source,
    };
    let json = serde_json::to_string_pretty(report).map_err(|e| err(e.into()))?;
    std::fs::write(path, json + "\n").map_err(err)
}

/// Resolves on the first SIGINT or SIGTERM.
#[cfg(unix)]
fn shutdown_signal() -> std::io::Result<impl Future<Output = ()> + Send> {
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

/// Resolves on Ctrl-C.
#[cfg(not(unix))]
fn shutdown_signal() -> std::io::Result<impl Future<Output = ()> + Send> {
    Ok(async {
        if tokio::signal::ctrl_c().await.is_ok() {
            info!("Ctrl-C received");
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use seed_env::{EnvConfig, SyntheticConfig};
    use seed_shared::ObsDType;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        actor: ActorArgs,
    }

    fn parse(args: &[&str]) -> Result<ActorArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("actor").chain(args.iter().copied())).map(|c| c.actor)
    }

    #[test]
    fn defaults_make_a_cartpole_actor() {
        let cfg = parse(&["--seed", "3"]).unwrap().to_config().unwrap();
        // SEED_LEARNER may be set in the environment running the tests.
        if std::env::var_os("SEED_LEARNER").is_none() {
            assert_eq!(cfg.learner, DEFAULT_LEARNER_ADDR);
        }
        assert_eq!(cfg.num_envs, 16);
        assert_eq!(cfg.env, EnvConfig::CartPole);
        assert_eq!(cfg.seed, 3);
        assert_eq!(cfg.reconnect.initial_backoff, Duration::from_millis(100));
        assert_eq!(cfg.reconnect.max_attempts, None);
        assert_eq!(cfg.max_message_bytes, DEFAULT_MAX_MESSAGE_BYTES);
    }

    #[test]
    fn synthetic_flags_reach_the_config() {
        let args = parse(&[
            "--env",
            "synthetic",
            "--obs-shape",
            "8,3",
            "--obs-dtype",
            "f32",
            "--num-actions",
            "4",
            "--step-cost-us",
            "7",
            "--episode-len",
            "20",
            "--learner",
            "unix:/tmp/l.sock",
            "--envs",
            "6",
            "--max-reconnects",
            "2",
            "--actor-id",
            "a1",
            "--token",
            "s3cret",
        ])
        .unwrap();
        let cfg = args.to_config().unwrap();
        assert_eq!(
            cfg.env,
            EnvConfig::Synthetic(SyntheticConfig {
                obs_shape: vec![8, 3],
                obs_dtype: ObsDType::F32,
                num_actions: 4,
                step_cost_us: 7,
                episode_len: 20,
            })
        );
        assert_eq!((cfg.num_envs, cfg.actor_id.as_str()), (6, "a1"));
        assert_eq!(cfg.reconnect.max_attempts, Some(2));
        assert_eq!(cfg.token.as_deref(), Some("s3cret"));
        assert_eq!(cfg.learner, "unix:/tmp/l.sock");
    }

    #[test]
    fn summary_json_holds_the_report() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("actor.json");
        let args = parse(&["--summary-json", path.to_str().unwrap()]).unwrap();
        assert_eq!(args.summary_json.as_deref(), Some(path.as_path()));
        let mut rt = crate::RoundTripHistogram::new();
        rt.record(Duration::from_micros(80));
        let report = ActorReport {
            env_steps: 7,
            round_trip: rt.percentiles(),
            ..ActorReport::default()
        };
        write_summary(&path, &report).unwrap();
        let back: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(back["env_steps"], 7);
        assert_eq!(back["round_trip"]["count"], 1);
        let p50 = back["round_trip"]["p50_us"].as_f64().unwrap();
        assert!((p50 - 80.0).abs() < 0.1, "{p50}");
    }

    #[test]
    fn every_flag_documents_its_default() {
        use clap::CommandFactory;
        for arg in Cli::command().get_arguments() {
            let id = arg.get_id().as_str();
            if id == "help" {
                continue;
            }
            let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
            assert!(
                help.contains("[default: "),
                "--{id} has no default in its doc: {help:?}"
            );
            // Where clap has a default, the doc must say the same one.
            let defaults = arg.get_default_values();
            if !defaults.is_empty() {
                let value = defaults
                    .iter()
                    .map(|v| v.to_string_lossy())
                    .collect::<Vec<_>>()
                    .join(",");
                assert!(
                    help.contains(&format!("[default: {value}")),
                    "--{id}: {help:?} vs {value}"
                );
            }
        }
    }

    #[test]
    fn bad_values_are_refused() {
        assert!(parse(&["--obs-dtype", "f64"]).is_err());
        assert!(parse(&["--env", "pong"]).is_err());
        let zero_envs = parse(&["--envs", "0"]).unwrap();
        assert!(matches!(
            zero_envs.to_config(),
            Err(ActorError::Config {
                field: "num_envs",
                ..
            })
        ));
        let bad_addr = parse(&["--learner", "https://x:1"]).unwrap();
        assert!(matches!(
            bad_addr.to_config(),
            Err(ActorError::Address { .. })
        ));
    }
}
