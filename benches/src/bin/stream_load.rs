//! `stream_load`: one learner holding many actor streams (multiplexed in
//! this process), at several counts: env steps/s, step p50/p99, the
//! learner's RSS, file descriptors and CPU per step. See
//! [`seed_benches::stream_load`]. Writes one JSON object per count.
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use seed_benches::stream_load::run_stream_load;
use tracing::error;
use tracing_subscriber::EnvFilter;

/// Many actor streams against one learner (see the module docs).
#[derive(Parser, Debug)]
#[command(name = "stream_load")]
struct Args {
    /// The learner binary.
    #[arg(long, default_value = "target/release/learner")]
    learner: PathBuf,
    /// Stream counts, one run each, in this order.
    #[arg(long, value_delimiter = ',', default_value = "20,200,2000")]
    streams: Vec<usize>,
    /// CartPole envs per stream.
    #[arg(long, default_value_t = 2)]
    envs: usize,
    /// Seconds per count.
    #[arg(long, default_value_t = 20.0)]
    seconds: f64,
    /// Where children log and the JSON goes.
    #[arg(long, default_value = "target/stream_load")]
    out: PathBuf,
}

fn main() -> ExitCode {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            error!("cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut results = Vec::new();
    for &n in &args.streams {
        let dir = args.out.join(format!("streams-{n}"));
        let run = run_stream_load(
            &args.learner,
            &dir,
            n,
            args.envs,
            Duration::from_secs_f64(args.seconds),
        );
        match runtime.block_on(run) {
            Ok(r) => {
                println!("{}", serde_json::to_string(&r).unwrap_or_default());
                results.push(r);
            }
            Err(e) => {
                error!("{n} streams: {:#}", anyhow::Error::from(e));
                return ExitCode::FAILURE;
            }
        }
    }
    let path = args.out.join("stream_load.json");
    match serde_json::to_string_pretty(&results).map(|j| std::fs::write(&path, j)) {
        Ok(Ok(())) => ExitCode::SUCCESS,
        _ => {
            error!(path = %path.display(), "cannot write the results");
            ExitCode::FAILURE
        }
    }
}
