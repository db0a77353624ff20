//! The `replay-server` command line ([`Flags`]), in the library so the
//! generated command-line reference (`docs/cli.md`) renders it from the
//! same definition the binary parses.
use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Parser;
use seed_shared::logging::LogFormat;
use seed_shared::{ClientTlsFlags, ClientTlsNames, TlsFlag};

use crate::server::DEFAULT_LISTEN;

/// Serves replay tables over gRPC (`seed.v1.Replay`).
#[derive(Debug, Parser)]
#[command(name = "replay-server", version)]
pub struct Flags {
    /// The tables to serve: a JSON file (see the crate docs for its keys).
    #[arg(
        long,
        required_unless_present = "mirror_of",
        conflicts_with = "mirror_of"
    )]
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub mirror: MirrorFlags,
    /// TCP address to listen on (port 0: any free port).
    #[arg(long, default_value = DEFAULT_LISTEN)]
    pub listen: SocketAddr,
    /// Shared secret every call must carry (`authorization: Bearer`).
    #[arg(long, env = "SEED_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Serve TLS with this certificate chain (PEM, leaf first).
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Require client certificates signed by these CAs (mutual TLS).
    #[arg(long, requires = "tls_cert")]
    pub tls_client_ca: Option<PathBuf>,
    /// Largest message accepted or sent, in bytes (an insert batch, a
    /// sample reply).
    #[arg(long, default_value_t = seed_shared::DEFAULT_MAX_MESSAGE_BYTES)]
    pub max_message_bytes: usize,
    /// Restore in-memory tables from their checkpoints in the config's
    /// `checkpoint_dir`, where one exists.
    #[arg(long)]
    pub restore: bool,
    /// Serve a table from a mapped table directory written by another
    /// server (a shard); repeat it to serve several as one read-only table.
    /// `TABLE=DIR` names the config's table; a bare `DIR` needs a config
    /// with one table. Adds to the table's `load` list.
    #[arg(long, value_name = "[TABLE=]DIR", requires = "config")]
    pub load: Vec<String>,
    /// Async worker threads (default: one per core).
    #[arg(long)]
    pub worker_threads: Option<usize>,
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// A mirror: copies of another replay server's tables (see the crate docs,
/// "Mirrors").
#[derive(Debug, clap::Args)]
pub struct MirrorFlags {
    /// Mirror the replay server at HOST:PORT (or http[s]://HOST:PORT):
    /// serve copies of its tables, kept in step through Follow, instead of
    /// a --config.
    #[arg(long, value_name = "HOST:PORT")]
    pub mirror_of: Option<String>,
    /// The primary's token.
    #[arg(
        long,
        env = "SEED_MIRROR_TOKEN",
        hide_env_values = true,
        requires = "mirror_of"
    )]
    pub mirror_token: Option<String>,
    /// `--mirror-tls-ca`, `--mirror-tls-domain`, `--mirror-tls-cert`,
    /// `--mirror-tls-key`: TLS to the primary ([`MirrorTlsNames`]).
    #[command(flatten)]
    pub tls: ClientTlsFlags<MirrorTlsNames>,
}

/// The mirror's client TLS flags, each needing `--mirror-of`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MirrorTlsNames;

impl ClientTlsNames for MirrorTlsNames {
    const HEADING: Option<&'static str> = None;
    const CA: TlsFlag = TlsFlag {
        id: "mirror_tls_ca",
        flag: "--mirror-tls-ca",
        value_name: "MIRROR_TLS_CA",
        help: "CA certificates (PEM) to verify an https:// primary",
        requires: &["mirror_of"],
    };
    const DOMAIN: TlsFlag = TlsFlag {
        id: "mirror_tls_domain",
        flag: "--mirror-tls-domain",
        value_name: "MIRROR_TLS_DOMAIN",
        help: "The name the primary's certificate is for (default: its host)",
        requires: &["mirror_of"],
    };
    const CERT: TlsFlag = TlsFlag {
        id: "mirror_tls_cert",
        flag: "--mirror-tls-cert",
        value_name: "MIRROR_TLS_CERT",
        help: "Client certificate (PEM) for a primary that requires mutual TLS",
        requires: &["mirror_of", "mirror_tls_key"],
    };
    const KEY: TlsFlag = TlsFlag {
        id: "mirror_tls_key",
        flag: "--mirror-tls-key",
        value_name: "MIRROR_TLS_KEY",
        help: "The private key of --mirror-tls-cert (PEM)",
        requires: &["mirror_tls_cert"],
    };
}
