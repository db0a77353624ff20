//! `latency`: end-to-end step latency and throughput beside the echo floor.
//! Parses flags, sets up logging, runs [`seed_benches::cli::run`] and maps
//! the outcome to an exit code. See `latency --help`.
use std::process::ExitCode;

use clap::Parser;
use seed_benches::cli::{run, LatencyCli};
use tracing::error;
use tracing_subscriber::EnvFilter;

fn main() -> ExitCode {
    let cli = LatencyCli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            error!("{:#}", anyhow::Error::from(e));
            ExitCode::FAILURE
        }
    }
}
