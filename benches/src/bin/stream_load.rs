//! `stream_load`: one learner holding many actor streams, at several
//! counts: env steps/s, step p50/p99 (the actors' round trip and the
//! learner's own received-to-answered time), the learner's RSS (peak, and
//! per stream), file descriptors, and CPU per env step and per message. See
//! [`seed_benches::stream_load`]. Writes one JSON object per count.
//!
//! The streams run in this process (`--procs 1`) or split over `--procs`
//! copies of this binary in a hidden child mode (`--child-learner` and
//! friends), so that one load process (the bottleneck by 2,000 streams) is
//! not what is measured. A child prints its streams' figures as one JSON
//! line on stdout and exits.
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use seed_benches::stream_load::{run_load_child, run_stream_load, LoadPoint};
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
    /// Processes the streams are split over (default 1: all in this
    /// process; P > 1: P child processes of this binary, at most one per
    /// stream).
    #[arg(long, default_value_t = 1)]
    procs: usize,
    /// CartPole envs per stream.
    #[arg(long, default_value_t = 2)]
    envs: usize,
    /// Streams multiplexed on one HTTP/2 connection (grouped within each
    /// process; 1: each stream its own connection, as separate actor
    /// processes have).
    #[arg(long, default_value_t = 1)]
    streams_per_connection: usize,
    /// Seconds per count.
    #[arg(long, default_value_t = 20.0)]
    seconds: f64,
    /// Where children log and the JSON goes.
    #[arg(long, default_value = "target/stream_load")]
    out: PathBuf,
    /// An extra learner flag, e.g. `--learner-arg=--keepalive-secs=0`
    /// (repeat for more) [default: none].
    #[arg(long = "learner-arg", allow_hyphen_values = true)]
    learner_args: Vec<String>,
    /// Child mode (not for direct use): the learner's address; run this
    /// process's share of the streams and print its report.
    #[arg(long, hide = true)]
    child_learner: Option<String>,
    /// Child mode: how many streams.
    #[arg(long, hide = true, default_value_t = 0)]
    child_streams: usize,
    /// Child mode: the first stream's id (ids and seeds follow on).
    #[arg(long, hide = true, default_value_t = 0)]
    child_first_id: usize,
    /// Child mode: seconds the streams step.
    #[arg(long, hide = true, default_value_t = 0.0)]
    child_seconds: f64,
}

/// A run of `seconds` as a duration, or why not.
fn duration(seconds: f64, flag: &str) -> Result<Duration, String> {
    Duration::try_from_secs_f64(seconds).map_err(|e| format!("{flag} {seconds}: {e}"))
}

fn main() -> ExitCode {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_ansi(args.child_learner.is_none())
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
    if let Some(addr) = &args.child_learner {
        let seconds = match duration(args.child_seconds, "--child-seconds") {
            Ok(d) => d,
            Err(e) => {
                error!("{e}");
                return ExitCode::FAILURE;
            }
        };
        let child = run_load_child(
            addr,
            args.child_first_id,
            args.child_streams,
            args.envs,
            args.streams_per_connection,
            seconds,
        );
        let report = runtime.block_on(child);
        return match serde_json::to_string(&report) {
            Ok(line) => {
                println!("{line}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                error!("cannot encode the report: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let seconds = match duration(args.seconds, "--seconds") {
        Ok(d) => d,
        Err(e) => {
            error!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let load_bin = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => {
            error!("cannot find this binary's own path (for load children): {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut results = Vec::new();
    for &n in &args.streams {
        let dir = args.out.join(format!("streams-{n}"));
        let point = LoadPoint {
            streams: n,
            envs: args.envs,
            duration: seconds,
            procs: args.procs,
            streams_per_connection: args.streams_per_connection,
            learner_args: args.learner_args.clone(),
        };
        match runtime.block_on(run_stream_load(&args.learner, &load_bin, &dir, &point)) {
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
