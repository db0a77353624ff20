//! The `learner` binary: [`seed_learner_cli::command::run`] on the
//! process's arguments.
use std::process::ExitCode;

fn main() -> ExitCode {
    ExitCode::from(seed_learner_cli::command::run(std::env::args_os(), None))
}
