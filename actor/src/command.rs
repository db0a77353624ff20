//! The `actor` command as a function of its arguments ([`run`]): what the
//! standalone `actor` binary runs, and what the Python package runs in
//! process for `seed-rs rust-actor`. Parses flags, sets up logging, runs
//! the actor and maps the outcome to an exit code (0 clean stop, 1 error,
//! 2 usage).
use std::ffi::OsString;

use clap::Parser;
use tracing::{error, info};

use crate::cli::{self, ActorArgs};

/// Steps environments and streams them to a SEED-style learner.
#[derive(Parser, Debug)]
#[command(name = "actor", version, about)]
struct Cli {
    #[command(flatten)]
    actor: ActorArgs,
}

/// The exit code of running the `actor` command line `args` (the first is the program name).
pub fn run<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => return seed_shared::usage::usage_exit_code(&e),
    };
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
            0
        }
        Err(e) => {
            error!("actor failed: {:#}", anyhow::Error::from(e));
            1
        }
    }
}
