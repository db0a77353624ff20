//! The `replay-server` binary: parses flags, sets up logging, serves the
//! configured tables until Ctrl-C or SIGTERM, and maps the outcome to an
//! exit code (0 clean stop, 1 error).
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use seed_replay_service::client::ClientOptions;
use seed_replay_service::server::{start_mirror, MirrorOptions, ServerTls, DEFAULT_LISTEN};
use seed_replay_service::{ServerOptions, ServiceConfig};
use seed_shared::logging::{init_logging, LogFormat};
use tracing::{error, info};

/// Serves replay tables over gRPC (`seed.v1.Replay`).
#[derive(Debug, Parser)]
#[command(name = "replay-server", version)]
struct Flags {
    /// The tables to serve: a JSON file (see the crate docs for its keys).
    #[arg(
        long,
        required_unless_present = "mirror_of",
        conflicts_with = "mirror_of"
    )]
    config: Option<PathBuf>,
    #[command(flatten)]
    mirror: MirrorFlags,
    /// TCP address to listen on (port 0: any free port).
    #[arg(long, default_value = DEFAULT_LISTEN)]
    listen: SocketAddr,
    /// Shared secret every call must carry (`authorization: Bearer`).
    #[arg(long, env = "SEED_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Serve TLS with this certificate chain (PEM, leaf first).
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Require client certificates signed by these CAs (mutual TLS).
    #[arg(long, requires = "tls_cert")]
    tls_client_ca: Option<PathBuf>,
    /// Largest message accepted or sent, in bytes (an insert batch, a
    /// sample reply).
    #[arg(long, default_value_t = seed_shared::DEFAULT_MAX_MESSAGE_BYTES)]
    max_message_bytes: usize,
    /// Restore in-memory tables from their checkpoints in the config's
    /// `checkpoint_dir`, where one exists.
    #[arg(long)]
    restore: bool,
    /// Serve a table from a mapped table directory written by another
    /// server (a shard); repeat it to serve several as one read-only table.
    /// `TABLE=DIR` names the config's table; a bare `DIR` needs a config
    /// with one table. Adds to the table's `load` list.
    #[arg(long, value_name = "[TABLE=]DIR", requires = "config")]
    load: Vec<String>,
    /// Async worker threads (default: one per core).
    #[arg(long)]
    worker_threads: Option<usize>,
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
}

/// A mirror: copies of another replay server's tables (see the crate docs,
/// "Mirrors").
#[derive(Debug, clap::Args)]
struct MirrorFlags {
    /// Mirror the replay server at HOST:PORT (or http[s]://HOST:PORT):
    /// serve copies of its tables, kept in step through Follow, instead of
    /// a --config.
    #[arg(long, value_name = "HOST:PORT")]
    mirror_of: Option<String>,
    /// The primary's token.
    #[arg(
        long,
        env = "SEED_MIRROR_TOKEN",
        hide_env_values = true,
        requires = "mirror_of"
    )]
    mirror_token: Option<String>,
    /// CA certificates (PEM) to verify an https:// primary.
    #[arg(long, requires = "mirror_of")]
    mirror_tls_ca: Option<PathBuf>,
    /// The name the primary's certificate is for (default: its host).
    #[arg(long, requires = "mirror_of")]
    mirror_tls_domain: Option<String>,
    /// Client certificate (PEM) for a primary that requires mutual TLS.
    #[arg(long, requires_all = ["mirror_of", "mirror_tls_key"])]
    mirror_tls_cert: Option<PathBuf>,
    /// The private key of --mirror-tls-cert (PEM).
    #[arg(long, requires = "mirror_tls_cert")]
    mirror_tls_key: Option<PathBuf>,
}

impl MirrorFlags {
    /// The mirror's options, or `None` without --mirror-of.
    fn options(&self, max_message_bytes: usize) -> anyhow::Result<Option<MirrorOptions>> {
        let Some(upstream) = &self.mirror_of else {
            return Ok(None);
        };
        let tls_ca = match &self.mirror_tls_ca {
            Some(p) => Some(seed_shared::tls::read_certificates("--mirror-tls-ca", p)?),
            None => None,
        };
        let tls_identity = match (&self.mirror_tls_cert, &self.mirror_tls_key) {
            (Some(c), Some(k)) => Some((
                seed_shared::tls::read_certificates("--mirror-tls-cert", c)?,
                seed_shared::tls::read_private_key("--mirror-tls-key", k)?,
            )),
            _ => None,
        };
        Ok(Some(MirrorOptions {
            upstream: upstream.clone(),
            client: ClientOptions {
                token: self.mirror_token.clone(),
                tls_ca,
                tls_domain: self.mirror_tls_domain.clone(),
                tls_identity,
                max_message_bytes,
                ..ClientOptions::default()
            },
        }))
    }
}

fn main() -> ExitCode {
    let flags = Flags::parse();
    init_logging(flags.log_format);
    match run(flags) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            error!("{e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(flags: Flags) -> anyhow::Result<()> {
    let mirror = flags.mirror.options(flags.max_message_bytes)?;
    if mirror.is_some() && flags.restore {
        anyhow::bail!("--restore does not apply to a mirror: it copies its primary's tables");
    }
    let config = match (&flags.config, &mirror) {
        (Some(path), _) => {
            let mut config = ServiceConfig::from_file(path)?;
            config.add_loaded_shards(&flags.load)?;
            Some(config)
        }
        (None, Some(_)) => None,
        (None, None) => anyhow::bail!("--config or --mirror-of is required"),
    };
    let tls = match (&flags.tls_cert, &flags.tls_key) {
        (Some(c), Some(k)) => Some(ServerTls::from_files(c, k, flags.tls_client_ca.as_deref())?),
        _ => None,
    };
    if flags.max_message_bytes < 1024 {
        anyhow::bail!(
            "--max-message-bytes {} is below 1024 bytes",
            flags.max_message_bytes
        );
    }
    let options = ServerOptions {
        listen: flags.listen,
        token: flags.token,
        tls,
        max_message_bytes: flags.max_message_bytes,
        restore: flags.restore,
    };
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    runtime.enable_all();
    if let Some(n) = flags.worker_threads {
        if n == 0 {
            anyhow::bail!("--worker-threads must be at least 1");
        }
        runtime.worker_threads(n);
    }
    let runtime = runtime.build().context("cannot start the async runtime")?;
    runtime.block_on(async move {
        let mut server = match (config, mirror) {
            (Some(config), _) => seed_replay_service::start(config, options).await?,
            (None, Some(mirror)) => start_mirror(mirror, options).await?,
            (None, None) => anyhow::bail!("--config or --mirror-of is required"),
        };
        tokio::select! {
            r = server.wait() => r?,
            _ = shutdown_signal() => {
                info!("stopping");
                server.stop().await?;
            }
        }
        Ok(())
    })
}

/// Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}
