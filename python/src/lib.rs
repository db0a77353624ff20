//! `seed_rs._native`: the compiled half of the `seed_rs` Python package.
//!
//! The Python half (`python/seed_rs/`) turns Gymnasium envs and spaces into
//! an [`EnvSpec`](seed_shared::EnvSpec) and one adapter per env; this half
//! wraps each adapter as a [`seed_env::Env`] ([`PyEnv`](py_env::PyEnv)) and
//! runs the Rust actor client over them
//! ([`seed_actor::run_actor_with_envs`]): the same stream, pipelined halves,
//! reconnects and episode bookkeeping as the `actor` binary.
//!
//! The same module holds the replay tables ([`replay`]): `ReplayBuffer`
//! in process, `ReplayClient` and its table handles for a replay server,
//! numpy arrays in and out; and the seed-rs programs themselves (the
//! learner, the replay server, the Rust actor: [`programs`]), so that one
//! wheel carries the whole system (`seed-rs learner ...`).
//!
//! # Why the actor runs in Rust
//!
//! A Python actor loop would pay the interpreter for every batch it encodes
//! and every network wait; here Python runs only inside the envs' `reset`
//! and `step`. The network waits run with the GIL released, so other
//! Python threads keep running, and each env call takes the GIL back for
//! its duration ([`py_env`]).
//!
//! # Cost
//!
//! Per env step: one GIL acquisition, the env's `step` call, one `tobytes`
//! call and one memcpy of the observation into its row of the batch (the
//! observation is converted in Python first only where its dtype or layout
//! differs from the wire's). Per batch: what the Rust actor costs.

mod error;
mod interrupt;
mod native_actor;
mod policy;
mod programs;
mod py_env;
mod replay;
mod report;
mod tensorboard;

use pyo3::prelude::*;

/// The compiled part of `seed_rs`; use the `seed_rs` package instead.
#[pymodule]
mod _native {
    #[pymodule_export]
    use crate::error::ActorError;
    #[pymodule_export]
    use crate::native_actor::{check_spec, enable_logging, NativeActor};
    #[pymodule_export]
    use crate::policy::NativePolicy;
    #[pymodule_export]
    use crate::programs::run_program;
    #[pymodule_export]
    use crate::replay::arrays::call_floor;
    #[pymodule_export]
    use crate::replay::client::PyReplayClient;
    #[pymodule_export]
    use crate::replay::error::ReplayError;
    #[pymodule_export]
    use crate::replay::local_buffer::PyReplayBuffer;
    #[pymodule_export]
    use crate::replay::local_streams::PyLocalFollowStream;
    #[pymodule_export]
    use crate::replay::local_streams::PyLocalSampleStream;
    #[pymodule_export]
    use crate::replay::remote_streams::PyFollowStream;
    #[pymodule_export]
    use crate::replay::remote_streams::PySampleStream;
    #[pymodule_export]
    use crate::replay::table_handle::PyReplayTable;
    #[pymodule_export]
    use crate::tensorboard::TensorBoardWriter;

    use pyo3::prelude::*;
    use pyo3::types::PyTuple;

    /// What is made at import rather than declared: `ReplayArgumentError`
    /// (a `ReplayError` and a `ValueError`: pyo3's exceptions take one base
    /// class); the table method lists `TABLE_METHODS` and
    /// `CLIENT_TABLE_METHODS` (tuples); the defaults whose home is Rust,
    /// `DEFAULT_LEARNER_ADDR` and `DEFAULT_NUM_ENVS` (read by
    /// `seed_rs.defaults`).
    #[pymodule_init]
    fn init(m: &Bound<'_, PyModule>) -> PyResult<()> {
        use crate::replay::table_api::{CLIENT_TABLE_METHODS, TABLE_METHODS};
        let py = m.py();
        m.add(
            "ReplayArgumentError",
            crate::replay::error::argument_error_type(py)?,
        )?;
        m.add("TABLE_METHODS", PyTuple::new(py, TABLE_METHODS)?)?;
        m.add(
            "CLIENT_TABLE_METHODS",
            PyTuple::new(py, CLIENT_TABLE_METHODS)?,
        )?;
        // The defaults whose home is Rust, for `seed_rs.defaults`: each value
        // written once across both languages.
        m.add("DEFAULT_LEARNER_ADDR", seed_shared::DEFAULT_LEARNER_ADDR)?;
        m.add("DEFAULT_NUM_ENVS", seed_actor::DEFAULT_NUM_ENVS)?;
        // `--eval-every`'s episode seeds and best-policy directory, which
        // `python -m seed_rs.actor --eval` shares.
        m.add("EVAL_SEED", seed_learner::app::evaluator::EVAL_SEED)?;
        m.add("BEST_DIR", seed_learner::app::evaluator::BEST_DIR)?;
        m.add(
            "DEFAULT_EVAL_EPISODES",
            seed_learner::app::evaluator::DEFAULT_EVAL_EPISODES,
        )
    }
}
