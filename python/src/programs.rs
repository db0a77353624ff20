//! `run_program(name, argv)`: the seed-rs programs (`learner`,
//! `replay-server`, the Rust `actor`) run in this process, so that the
//! wheel carries the whole system and `seed-rs learner ...` needs no
//! binary beside it (the console command `seed-rs`,
//! `python/seed_rs/cli.py`). Each is the very function its binary's
//! `main` calls, with the same flags.
//!
//! The learner's local actors run this program again: a learner started
//! here spawns `python -m seed_rs.cli learner actor ...` (the interpreter
//! that runs this module), given as `self_command`, since the executable
//! of this process is Python, not the learner.
//!
//! The GIL is released for the whole run; Ctrl-C and SIGTERM reach the
//! program's own handlers, which stop it cleanly.
use std::ffi::OsString;
use std::path::PathBuf;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use seed_learner::app::config::SelfCommand;

/// The programs `run_program` knows, by name.
pub const PROGRAMS: [&str; 3] = ["learner", "replay-server", "actor"];

/// Runs program `name` with `argv` (its arguments, without the program
/// name) and returns its exit code. `self_command`: `(program, args)` that
/// make the learner command line again (for the learner's local actors).
#[pyfunction]
#[pyo3(signature = (name, argv, self_command=None))]
pub fn run_program(
    py: Python<'_>,
    name: &str,
    argv: Vec<OsString>,
    self_command: Option<(PathBuf, Vec<OsString>)>,
) -> PyResult<u8> {
    if !PROGRAMS.contains(&name) {
        return Err(PyValueError::new_err(format!(
            "no program `{name}` (known: {})",
            PROGRAMS.join(", ")
        )));
    }
    let args: Vec<OsString> = std::iter::once(OsString::from(name)).chain(argv).collect();
    let self_command = self_command.map(|(program, args)| SelfCommand { program, args });
    Ok(py.detach(move || match name {
        "learner" => seed_learner_cli::command::run(args, self_command),
        "replay-server" => seed_replay_service::command::run(args),
        _ => seed_actor::command::run(args),
    }))
}
