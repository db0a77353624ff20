//! The standalone `actor` binary: parses flags, sets up logging, runs the
//! actor and maps the outcome to an exit code (0 clean stop, 1 error).

use std::process::ExitCode;

use clap::Parser;
use seed_actor::cli::{self, ActorArgs};
use tracing::{error, info};

/// Steps environments and streams them to a SEED-style learner.
#[derive(Parser, Debug)]
#[command(name = "actor", version, about)]
struct Cli {
    #[command(flatten)]
    actor: ActorArgs,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    seed_shared::logging::init_logging(cli.actor.log_format);
    match cli::run(&cli.actor) {
        Ok(r) => {
            info!(
                env_steps = r.env_steps,
                step_batches = r.step_batches,
                action_batches = r.action_batches,
                episodes = r.episodes,
                sessions = r.sessions,
                policy_version = r.last_policy_version,
                round_trip_p50_us = r.round_trip.p50_us,
                round_trip_p99_us = r.round_trip.p99_us,
                "actor finished"
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            error!("actor failed: {:#}", anyhow::Error::from(e));
            ExitCode::FAILURE
        }
    }
}
