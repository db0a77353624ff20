//! The `learner` command as a function of its arguments ([`run`]): what
//! the `learner` binary runs, and what the Python package runs in process
//! for `seed-rs learner` (so one wheel carries the learner; see
//! `python`). Parses flags, resolves the settings (defaults, preset,
//! config file, flags), sets up logging, runs the library and maps the
//! outcome to an exit code (0 clean stop, 1 error, 2 usage).
use std::ffi::OsString;

use seed_learner::app::config::SelfCommand;
use seed_learner::app::settings::print::{to_toml, write_run_config};
use seed_learner::app::settings::schema::LogFormatName;
use seed_learner::app::settings::Resolved;
use seed_shared::logging::LogFormat;
use tracing::{error, info};

use crate::flags::{Cli, Command, TrainArgs};

/// Actor streams the learner should have file descriptors for (the scale
/// its stream benchmark goes to); fewer after raising the limit is a
/// warning.
const LEARNER_STREAMS: u64 = 10_000;

/// The exit code of running the `learner` command line `args` (the first
/// is the program name). `self_command`: how local actors run this program again when it
/// is not this executable (`None`: the executable itself).
pub fn run<I, T>(args: I, self_command: Option<SelfCommand>) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    // Before any thread starts; see `heap` for why and the measured gain.
    let heap_tuned = seed_learner::heap::keep_large_buffers_on_the_heap();
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => return seed_shared::usage::usage_exit_code(&e),
    };
    let result = match &cli.command {
        Some(Command::Actor(args)) => {
            seed_shared::logging::init_logging(args.log_format);
            seed_actor::cli::run(args)
                .map(|_| ())
                .map_err(anyhow::Error::from)
        }
        Some(Command::Eval(args)) => {
            seed_shared::logging::init_logging(LogFormat::Text);
            seed_learner::app::eval::evaluate(&args.checkpoint, &args.to_config())
                .map(|r| {
                    println!(
                        "{} episodes: mean return {:.1}, min {:.1}, max {:.1} (policy v{})",
                        r.episodes, r.mean_return, r.min_return, r.max_return, r.policy_version
                    )
                })
                .map_err(anyhow::Error::from)
        }
        None => {
            let resolved = cli.train.resolve();
            let log_format = match resolved.as_ref().map(|r| r.settings.run.log_format) {
                Ok(Some(LogFormatName::Json)) => LogFormat::Json,
                _ => LogFormat::Text,
            };
            seed_shared::logging::init_logging(log_format);
            // Each actor stream is a socket: room for the scale the learner
            // is measured at before the first one could be refused.
            seed_shared::open_files::report_open_files_limit("learner", LEARNER_STREAMS);
            resolved.map_err(anyhow::Error::from).and_then(|mut r| {
                r.config.run.self_command = self_command;
                r.config.run.settings_toml = Some(to_toml(&r.settings));
                learn(&cli.train, &r)
            })
        }
    };
    if !heap_tuned {
        tracing::debug!("heap settings not applied (not glibc)");
    }
    match result {
        Ok(()) => 0,
        Err(e) => {
            error!("{e:#}");
            1
        }
    }
}

/// `learner [FLAGS]`: print what was asked for, or run.
fn learn(args: &TrainArgs, resolved: &Resolved) -> anyhow::Result<()> {
    if args.print_config {
        print!("{}", to_toml(&resolved.settings));
        return Ok(());
    }
    let config = &resolved.config;
    if args.print_replay_table_config {
        let json = seed_learner::app::replay_table::replay_table_config(config)?;
        println!("{json}");
        return Ok(());
    }
    if let Some(dir) = config.run_dir() {
        write_run_config(dir, &resolved.settings)?;
    }
    if let Some(about) = &resolved.about {
        info!(preset = %about.description, "settings");
        if let (Some(actor), 0) = (&about.actor, config.run.local_actors) {
            let install = about
                .install
                .as_deref()
                .map(|i| format!(" (first: {i})"))
                .unwrap_or_default();
            info!(
                "this preset expects actors started beside it{install}: {actor} \
                 (with --learner ADDR when this learner is not on 127.0.0.1:50051)"
            );
        }
    }
    seed_learner::app::run::run(config)?;
    Ok(())
}
