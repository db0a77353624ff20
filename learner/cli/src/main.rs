//! The `learner` binary: parses flags, sets up logging, runs the library and
//! maps the outcome to an exit code (0 clean stop, 1 error).
use std::process::ExitCode;

use clap::Parser;
use seed_learner_cli::flags::{Cli, Command};
use tracing::error;

fn main() -> ExitCode {
    // Before any thread starts; see `heap` for why and the measured gain.
    let heap_tuned = seed_learner::heap::keep_large_buffers_on_the_heap();
    let cli = Cli::parse();
    let log_format = match &cli.command {
        Some(Command::Actor(a)) => a.log_format,
        _ => cli.train.log_format,
    };
    seed_shared::logging::init_logging(log_format);
    if !heap_tuned {
        tracing::debug!("heap settings not applied (not glibc)");
    }
    let result = match &cli.command {
        Some(Command::Actor(args)) => seed_actor::cli::run(args)
            .map(|_| ())
            .map_err(anyhow::Error::from),
        Some(Command::Eval(args)) => {
            seed_learner::app::eval::evaluate(&args.checkpoint, &args.to_config())
                .map(|r| {
                    println!(
                        "{} episodes: mean return {:.1}, min {:.1}, max {:.1} (policy v{})",
                        r.episodes, r.mean_return, r.min_return, r.max_return, r.policy_version
                    )
                })
                .map_err(anyhow::Error::from)
        }
        None if cli.train.print_replay_table_config => cli
            .train
            .to_config()
            .and_then(|config| seed_learner::app::replay_table::replay_table_config(&config))
            .map(|json| println!("{json}"))
            .map_err(anyhow::Error::from),
        None => cli
            .train
            .to_config()
            .and_then(|config| seed_learner::app::run::run(&config))
            .map(|_| ())
            .map_err(anyhow::Error::from),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            error!("{e:#}");
            ExitCode::FAILURE
        }
    }
}
