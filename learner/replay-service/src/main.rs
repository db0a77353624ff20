//! The `replay-server` binary: [`seed_replay_service::command::run`] on
//! the process's arguments.
use std::process::ExitCode;

fn main() -> ExitCode {
    ExitCode::from(seed_replay_service::command::run(std::env::args_os()))
}
