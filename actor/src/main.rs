//! The standalone `actor` binary: [`seed_actor::command::run`] on the
//! process's arguments.
use std::process::ExitCode;

fn main() -> ExitCode {
    ExitCode::from(seed_actor::command::run(std::env::args_os()))
}
