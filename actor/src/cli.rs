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
use seed_shared::keepalive::{DEFAULT_KEEPALIVE_SECS, DEFAULT_KEEPALIVE_TIMEOUT_SECS};
use seed_shared::logging::LogFormat;
use seed_shared::{
    ClientTlsFlags, ClientTlsNames, Keepalive, TlsFlag, DEFAULT_LEARNER_ADDR,
    DEFAULT_MAX_MESSAGE_BYTES,
};
use tracing::info;

use crate::client::{run_actor, ActorReport};
use crate::config::{default_actor_id, ActorConfig, ReconnectPolicy, DEFAULT_NUM_ENVS};
use crate::error::ActorError;
use crate::tls::ClientTls;

/// Flags of the `actor` binary (and of `learner actor`).
///
/// A default is read from its one home (a constant or `Default` of the
/// library) and printed by clap; a doc comment states only what has no
/// value to print (`[default: none]`, a rule).
#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct ActorArgs {
    /// Learner address: `host:port`, `http://host:port`, `unix:/path/to/socket`,
    /// or `https://host:port` (TLS; needs --tls-ca, with which `host:port`
    /// means TLS too).
    #[arg(long, env = "SEED_LEARNER", default_value = DEFAULT_LEARNER_ADDR)]
    pub learner: String,
    /// Number of environments K this actor runs, stepped in two halves of K/2.
    #[arg(long, default_value_t = DEFAULT_NUM_ENVS)]
    pub envs: usize,
    /// The environment these envs run.
    #[command(flatten)]
    pub environment: EnvArgs,
    /// Log lines as `text` (colour only on a terminal without NO_COLOR) or
    /// `json` (one object per line, for log shippers).
    #[arg(long, value_enum, default_value_t = LogFormat::default())]
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
    /// First reconnect delay in milliseconds; doubles per failure, with jitter.
    #[arg(long, default_value_t = millis(ReconnectPolicy::default().initial_backoff))]
    pub reconnect_initial_ms: u64,
    /// Largest reconnect delay in milliseconds.
    #[arg(long, default_value_t = millis(ReconnectPolicy::default().max_backoff))]
    pub reconnect_max_ms: u64,
    /// Consecutive failed connects before giving up with an error [default: retry forever].
    #[arg(long)]
    pub max_reconnects: Option<u32>,
    /// Largest gRPC message sent or accepted, in bytes.
    #[arg(long, default_value_t = DEFAULT_MAX_MESSAGE_BYTES)]
    pub max_message_bytes: usize,
    /// Write the actor's report (steps, batches, round-trip percentiles) as
    /// JSON to this file when it stops cleanly [default: none].
    #[arg(long)]
    pub summary_json: Option<PathBuf>,
    /// Seconds without traffic from the learner before the actor pings it
    /// (HTTP/2 keepalive; also the TCP keepalive idle time); 0 disables
    /// both. A learner that does not answer within --keepalive-timeout-secs
    /// (frozen, or its host gone without closing the connection) is
    /// dropped and the actor reconnects (with the defaults, within the sum
    /// of the two).
    #[arg(help_heading = "Liveness and TLS", long, default_value_t = DEFAULT_KEEPALIVE_SECS)]
    pub keepalive_secs: u64,
    /// Seconds a keepalive ping may stay unanswered before the connection
    /// is dropped; at least 1 while --keepalive-secs is on.
    #[arg(help_heading = "Liveness and TLS", long, default_value_t = DEFAULT_KEEPALIVE_TIMEOUT_SECS)]
    pub keepalive_timeout_secs: u64,
    /// `--tls-ca`, `--tls-domain`, `--tls-cert`, `--tls-key`: TLS to the
    /// learner ([`LearnerTlsNames`]).
    #[command(flatten)]
    pub tls: ClientTlsFlags<LearnerTlsNames>,
}

/// A default delay as its flag's milliseconds.
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The actor's client TLS flags: `--tls-ca` and `--tls-domain` for the
/// learner's certificate, `--tls-cert` and `--tls-key` for mutual TLS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LearnerTlsNames;

impl ClientTlsNames for LearnerTlsNames {
    const HEADING: Option<&'static str> = Some("Liveness and TLS");
    const CA: TlsFlag = TlsFlag {
        id: "tls_ca",
        flag: "--tls-ca",
        value_name: "PATH",
        help: "Connect with TLS, trusting only the CA certificates in this PEM file \
               for the learner's certificate (the learner's own certificate if it \
               is self-signed) [default: none, plaintext]",
        requires: &[],
    };
    const DOMAIN: TlsFlag = TlsFlag {
        id: "tls_domain",
        flag: "--tls-domain",
        value_name: "NAME",
        help: "The name the learner's certificate must carry (a DNS name or an IP \
               address in its subject alternative names); needs --tls-ca [default: \
               the host of --learner]",
        requires: &["tls_ca"],
    };
    const CERT: TlsFlag = TlsFlag {
        id: "tls_cert",
        flag: "--tls-cert",
        value_name: "PATH",
        help: "Client certificate chain (PEM, leaf first) presented to a learner \
               that requires one (mutual TLS, `learner --tls-client-ca`); needs \
               --tls-key and --tls-ca [default: none]",
        requires: &["tls_key", "tls_ca"],
    };
    const KEY: TlsFlag = TlsFlag {
        id: "tls_key",
        flag: "--tls-key",
        value_name: "PATH",
        help: "Private key (PEM: PKCS#8, PKCS#1 or SEC1) of --tls-cert [default: none]",
        requires: &["tls_cert"],
    };
}

impl ActorArgs {
    /// The validated [`ActorConfig`] these flags describe; reads the TLS
    /// files once.
    pub fn to_config(&self) -> Result<ActorConfig, ActorError> {
        let env = self.environment.env_config();
        let tls = match &self.tls.ca {
            Some(ca) => Some(ClientTls::from_files(
                ca,
                self.tls.domain.clone(),
                self.tls.cert.as_deref().zip(self.tls.key.as_deref()),
            )?),
            None => None,
        };
        let cfg = ActorConfig {
            learner: self.learner.clone(),
            actor_id: self.actor_id.clone().unwrap_or_else(default_actor_id),
            num_envs: self.envs,
            env,
            seed: self.seed.unwrap_or_else(rand::random),
            token: seed_shared::Token::from_option(self.token.as_deref()),
            max_env_steps: self.max_env_steps,
            max_seconds: self.max_seconds,
            reconnect: ReconnectPolicy {
                initial_backoff: Duration::from_millis(self.reconnect_initial_ms),
                max_backoff: Duration::from_millis(self.reconnect_max_ms),
                max_attempts: self.max_reconnects,
            },
            max_message_bytes: self.max_message_bytes,
            keepalive: Keepalive::from_secs(self.keepalive_secs, self.keepalive_timeout_secs),
            tls,
            connection: None,
        };
        cfg.validate()?;
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
        assert_eq!(cfg.num_envs, DEFAULT_NUM_ENVS);
        assert_eq!(cfg.env, EnvConfig::CartPole);
        assert_eq!(cfg.seed, 3);
        assert_eq!(cfg.reconnect, ReconnectPolicy::default());
        assert_eq!(cfg.max_message_bytes, DEFAULT_MAX_MESSAGE_BYTES);
        assert_eq!(cfg.keepalive, Keepalive::default());
        assert_eq!(cfg.tls, None);
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
        assert_eq!(cfg.token, seed_shared::Token::new("s3cret"));
        assert_eq!(cfg.learner, "unix:/tmp/l.sock");
    }

    #[test]
    fn keepalive_and_tls_flags_reach_the_config_and_bad_ones_are_refused() {
        let files = seed_test_pki::SelfSignedFiles::generate();
        let (cert_path, key_path) = (&files.cert, &files.key);
        let (c, k) = (cert_path.to_str().unwrap(), key_path.to_str().unwrap());

        let cfg = parse(&[
            "--learner",
            "learner.example:50051",
            "--keepalive-secs",
            "2",
            "--keepalive-timeout-secs",
            "3",
            "--tls-ca",
            c,
            "--tls-domain",
            "localhost",
            "--tls-cert",
            c,
            "--tls-key",
            k,
        ])
        .unwrap()
        .to_config()
        .unwrap();
        assert_eq!(cfg.keepalive, Keepalive::from_secs(2, 3));
        let tls = cfg.tls.expect("tls on");
        assert_eq!(&tls.ca.path, cert_path);
        assert_eq!(tls.domain.as_deref(), Some("localhost"));
        assert_eq!(&tls.identity.expect("client identity").key.path, key_path);
        let off = parse(&["--keepalive-secs", "0"])
            .unwrap()
            .to_config()
            .unwrap();
        assert_eq!(off.keepalive.interval, None);

        // Usage errors: a half identity, a domain or identity without a CA.
        assert!(parse(&["--tls-ca", c, "--tls-cert", c]).is_err());
        assert!(parse(&["--tls-ca", c, "--tls-key", k]).is_err());
        assert!(parse(&["--tls-domain", "x"]).is_err());
        assert!(parse(&["--tls-cert", c, "--tls-key", k]).is_err());

        let config = |flags: &[&str]| parse(flags).unwrap().to_config();
        let missing = files.dir().join("missing.pem");
        match config(&["--tls-ca", missing.to_str().unwrap()]) {
            Err(ActorError::Tls(e)) => {
                assert_eq!(e.flag, "--tls-ca");
                assert!(e.to_string().contains("missing.pem"), "{e}");
            }
            other => panic!("{other:?}"),
        }
        match config(&["--tls-ca", c, "--tls-cert", k, "--tls-key", k]) {
            Err(ActorError::Tls(e)) => assert_eq!(e.flag, "--tls-cert"),
            other => panic!("{other:?}"),
        }
        for learner in ["unix:/tmp/l.sock", "http://h:1"] {
            assert!(
                matches!(
                    config(&["--learner", learner, "--tls-ca", c]),
                    Err(ActorError::Address { .. })
                ),
                "{learner} with --tls-ca"
            );
        }
        assert!(config(&["--learner", "https://h:1", "--tls-ca", c]).is_ok());
        assert!(matches!(
            config(&["--keepalive-timeout-secs", "0"]),
            Err(ActorError::Config {
                field: "keepalive",
                ..
            })
        ));
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

    /// Each flag's help shows its default once: clap prints a value read
    /// from the library (so the doc must not restate it), a doc states what
    /// has no value to print (`[default: none]`), and where the value is
    /// hidden (the env flags, which the learner embeds too) the doc states
    /// that same value.
    #[test]
    fn every_flag_shows_its_default_once() {
        use clap::CommandFactory;
        for arg in Cli::command().get_arguments() {
            let id = arg.get_id().as_str();
            if id == "help" {
                continue;
            }
            let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
            let value = arg
                .get_default_values()
                .iter()
                .map(|v| v.to_string_lossy())
                .collect::<Vec<_>>()
                .join(",");
            if value.is_empty() {
                assert!(
                    help.contains("[default: "),
                    "--{id} has no default in its doc: {help:?}"
                );
            } else if arg.is_hide_default_value_set() {
                assert!(
                    help.contains(&format!("[default: {value}")),
                    "--{id}: {help:?} vs {value}"
                );
            } else {
                assert!(
                    !help.contains("[default: "),
                    "--{id}: clap prints its default {value}; the doc restates one: {help:?}"
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
