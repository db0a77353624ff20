//! The `replay-server` command as a function of its arguments ([`run`]):
//! what the `replay-server` binary runs, and what the Python package runs
//! in process for `seed-rs replay-server`. Parses flags, sets up logging,
//! serves the configured tables until Ctrl-C or SIGTERM, and maps the
//! outcome to an exit code (0 clean stop, 1 error, 2 usage).
use std::ffi::OsString;

use anyhow::Context;
use clap::Parser;
use seed_shared::logging::init_logging;
use tracing::{error, info};

use crate::cli::{Flags, MirrorFlags};
use crate::client::ClientOptions;
use crate::config::ServiceConfig;
use crate::server::{start, start_mirror, MirrorOptions, ServerOptions, ServerTls};

/// The mirror's options, or `None` without --mirror-of.
fn mirror_options(
    flags: &MirrorFlags,
    max_message_bytes: usize,
) -> anyhow::Result<Option<MirrorOptions>> {
    {
        let Some(upstream) = &flags.mirror_of else {
            return Ok(None);
        };
        Ok(Some(MirrorOptions {
            upstream: upstream.clone(),
            client: ClientOptions {
                token: seed_shared::Token::from_option(flags.mirror_token.as_deref()),
                tls_ca: flags.tls.read_ca()?,
                tls_domain: flags.tls.domain.clone(),
                tls_identity: flags.tls.read_identity()?,
                max_message_bytes,
                ..ClientOptions::default()
            },
        }))
    }
}

/// The exit code of running the `replay-server` command line `args` (the first is the
/// program name).
pub fn run<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let flags = match Flags::try_parse_from(args) {
        Ok(flags) => flags,
        Err(e) => return seed_shared::usage::usage_exit_code(&e),
    };
    init_logging(flags.log_format);
    match serve(flags) {
        Ok(()) => 0,
        Err(e) => {
            error!("{e:#}");
            1
        }
    }
}

/// Clients the replay server should have file descriptors for; fewer after
/// raising the limit is a warning.
const REPLAY_CLIENTS: u64 = 1_000;

fn serve(flags: Flags) -> anyhow::Result<()> {
    seed_shared::open_files::report_open_files_limit("replay-server", REPLAY_CLIENTS);
    let mirror = mirror_options(&flags.mirror, flags.max_message_bytes)?;
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
        token: seed_shared::Token::from_option(flags.token.as_deref()),
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
            (Some(config), _) => start(config, options).await?,
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
