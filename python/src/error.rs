//! How the actor's errors reach Python.
//!
//! An env's exception comes back exactly as the env raised it: the
//! [`PyEnv`](crate::py_env::PyEnv) boxes the `PyErr` into the
//! [`EnvError`](seed_env::EnvError) and [`to_py_err`] unboxes it, so the
//! caller of `Actor.run` sees the env's own exception type and traceback.
//! A configuration the actor refuses is a `ValueError`; everything else
//! (the learner refused the stream, stayed unreachable, broke the protocol)
//! is a `seed_rs.ActorError`.

use pyo3::create_exception;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::PyErr;
use seed_actor::ActorError as RustActorError;
use seed_shared::error_chain;

create_exception!(
    seed_rs,
    ActorError,
    PyRuntimeError,
    "The actor stopped: the learner refused the stream (bad token, a spec it \
     does not serve), stayed unreachable past `max_reconnects`, or broke the \
     wire protocol. The message says which."
);

/// The Python exception for an actor that stopped with an error.
pub fn to_py_err(e: RustActorError) -> PyErr {
    match e {
        RustActorError::Env(env) => match env.into_inner().downcast::<PyErr>() {
            Ok(py_err) => *py_err,
            Err(other) => ActorError::new_err(format!("env failed: {other}")),
        },
        e @ (RustActorError::Config { .. }
        | RustActorError::Address { .. }
        | RustActorError::Tls(_)) => PyValueError::new_err(e.to_string()),
        other => ActorError::new_err(error_chain(&other)),
    }
}
