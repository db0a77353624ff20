//! `soak_bench`: the hour soak (see [`seed_benches::hour_soak`]): a
//! training learner under 200 churning actor streams, garbage streams and
//! a frozen actor, beside a replay server under writers and samplers;
//! every minute's RSS, fds, threads and rates in `OUT/soak.json`, the hour
//! in `OUT/soak.png`. `scripts/soak.sh` builds and runs it.
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use seed_benches::hour_soak::{run, Binaries, HourSoakConfig};
use seed_benches::machine::Machine;
use tracing::{error, info};
use tracing_subscriber::EnvFilter;

/// The hour soak (see the module docs); defaults are the hour's settings.
#[derive(Parser, Debug)]
#[command(name = "soak_bench")]
struct Args {
    /// Minutes to run (records at every minute, 0 included).
    #[arg(long, default_value_t = HourSoakConfig::default().minutes)]
    minutes: u32,
    /// Seconds per "minute" (60; shorter only to smoke-test the harness).
    #[arg(long, default_value_t = HourSoakConfig::default().tick_seconds)]
    tick_seconds: f64,
    /// Actor streams (each its own connection, `--envs` CartPole envs).
    #[arg(long, default_value_t = HourSoakConfig::default().streams)]
    streams: usize,
    /// CartPole envs per stream.
    #[arg(long, default_value_t = HourSoakConfig::default().envs_per_stream)]
    envs: usize,
    /// Streams replaced every minute [default: a tenth of --streams].
    #[arg(long)]
    churn: Option<usize>,
    /// Garbage streams every minute [default: a hundredth of --streams, at least 1].
    #[arg(long)]
    garbage: Option<usize>,
    /// Minute at which the frozen actor is stopped (SIGSTOP).
    #[arg(long, default_value_t = HourSoakConfig::default().freeze_at_minute)]
    freeze_at: u32,
    /// Minutes it stays stopped before SIGCONT.
    #[arg(long, default_value_t = HourSoakConfig::default().freeze_minutes)]
    freeze_minutes: u32,
    /// Replay writers, and each one's items per second.
    #[arg(long, default_value_t = HourSoakConfig::default().writers)]
    writers: usize,
    #[arg(long, default_value_t = HourSoakConfig::default().writer_items_per_s)]
    writer_items_per_s: f64,
    /// Replay samplers, and the milliseconds between one's samples.
    #[arg(long, default_value_t = HourSoakConfig::default().samplers)]
    samplers: usize,
    #[arg(long, default_value_t = HourSoakConfig::default().sample_every_ms)]
    sample_every_ms: u64,
    /// The replay table's capacity in items (memory-mapped, in OUT/table).
    #[arg(long, default_value_t = HourSoakConfig::default().table_capacity)]
    capacity: u64,
    /// Slopes are fitted from this minute on.
    #[arg(long, default_value_t = HourSoakConfig::default().warmup_minutes)]
    warmup_minutes: u32,
    #[arg(long, default_value = "target/release/learner")]
    learner: PathBuf,
    #[arg(long, default_value = "target/release/actor")]
    actor: PathBuf,
    #[arg(long, default_value = "target/release/replay-server")]
    replay_server: PathBuf,
    /// Where logs, the table, soak.json and soak.png go.
    #[arg(long, default_value = "target/soak")]
    out: PathBuf,
}

#[tokio::main]
async fn main() -> ExitCode {
    let a = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| EnvFilter::new("info,seed_actor=warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cfg = HourSoakConfig {
        minutes: a.minutes,
        tick_seconds: a.tick_seconds,
        streams: a.streams,
        envs_per_stream: a.envs,
        churn_per_minute: a.churn.unwrap_or(a.streams / 10),
        garbage_per_minute: a.garbage.unwrap_or((a.streams / 100).max(1)),
        freeze_at_minute: a.freeze_at,
        freeze_minutes: a.freeze_minutes,
        writers: a.writers,
        writer_items_per_s: a.writer_items_per_s,
        samplers: a.samplers,
        sample_every_ms: a.sample_every_ms,
        table_capacity: a.capacity,
        warmup_minutes: a.warmup_minutes,
    };
    let bins = Binaries {
        learner: a.learner,
        actor: a.actor,
        replay_server: a.replay_server,
    };
    let machine = Machine::detect();
    info!(%machine, out = %a.out.display(), "hour soak");
    let machine = serde_json::to_value(&machine).unwrap_or_default();
    match run(&cfg, &bins, &a.out, machine).await {
        Ok(report) => {
            let v = report.verdict.unwrap_or_default();
            println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
            ExitCode::SUCCESS
        }
        Err(e) => {
            error!("soak failed: {e:#}");
            ExitCode::FAILURE
        }
    }
}
