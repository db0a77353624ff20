//! How the replay client's errors reach Python.
//!
//! A refusal by the server (bad input, an unknown table, a wrong token) is
//! a `seed_rs.ReplayError` carrying the gRPC status: `code` is the
//! canonical name (`"INVALID_ARGUMENT"`, `"UNAUTHENTICATED"`, as
//! `grpc.StatusCode` spells them) and `message` the server's message, which
//! names the field at fault. Failing to connect, a stream that ended early
//! or a reply that breaks the protocol are `ReplayError`s too, with `code`
//! `None`. Input refused before anything is stored or sent (a wrong dtype
//! or shape, an address or TLS file that cannot be used) is a `ValueError`;
//! a refusal with status `INVALID_ARGUMENT` is a `ReplayArgumentError`,
//! both a `ReplayError` and a `ValueError`, so `except ValueError` catches
//! bad input whether it was found here or by the table.
//!
//! The in-process buffer's refusals go through the same functions
//! ([`status_to_py_err`]): its table calls return the `tonic::Status` a
//! server would have sent.

use pyo3::create_exception;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyTuple, PyType};
use seed_replay_service::ClientError;
use tonic::{Code, Status};

create_exception!(
    seed_rs,
    ReplayError,
    PyRuntimeError,
    "A replay server refused a call, or could not be reached. `code` is the \
     gRPC status name (`\"INVALID_ARGUMENT\"`, `\"NOT_FOUND\"`, \
     `\"UNAUTHENTICATED\"`, ...) or `None` when no status came back (not \
     connected, the stream broke); `message` is the server's message, which \
     names the field at fault."
);

/// `ReplayArgumentError(ReplayError, ValueError)`, made once per process
/// (pyo3's `create_exception!` takes one base).
static ARGUMENT_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// The class of `INVALID_ARGUMENT` refusals (module docs).
pub fn argument_error_type(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    Ok(ARGUMENT_ERROR
        .get_or_try_init(py, || {
            let bases = PyTuple::new(
                py,
                [
                    py.get_type::<ReplayError>().into_any(),
                    py.get_type::<PyValueError>().into_any(),
                ],
            )?;
            let namespace = pyo3::types::PyDict::new(py);
            namespace.set_item("__module__", "seed_rs")?;
            namespace.set_item(
                "__doc__",
                "A table refused bad input (gRPC status INVALID_ARGUMENT): both a \
                 ReplayError and a ValueError; `message` names the field.",
            )?;
            let class = py
                .get_type::<PyType>()
                .call1(("ReplayArgumentError", bases, namespace))?;
            PyResult::Ok(class.cast_into::<PyType>()?.unbind())
        })?
        .bind(py))
}

/// The Python exception for a status a table sent (or, in process,
/// returned).
pub fn status_to_py_err(py: Python<'_>, status: Status) -> PyErr {
    to_py_err(
        py,
        ClientError::Status {
            code: status.code(),
            message: status.message().to_owned(),
        },
    )
}

/// The Python exception for a failed call.
pub fn to_py_err(py: Python<'_>, e: ClientError) -> PyErr {
    match e {
        ClientError::Status { code, message } => {
            let name = code_name(code);
            replay_error(py, Some(name), format!("{name}: {message}"), message)
        }
        e @ (ClientError::Batch { .. } | ClientError::Address { .. } | ClientError::Tls(_)) => {
            PyValueError::new_err(e.to_string())
        }
        other => {
            let text = other.to_string();
            replay_error(py, None, text.clone(), text)
        }
    }
}

/// A `ReplayError` for a reply this client cannot read (`code` `None`).
pub fn protocol_error(py: Python<'_>, reason: String) -> PyErr {
    let text = format!("replay server sent a bad reply: {reason}");
    replay_error(py, None, text.clone(), text)
}

fn replay_error(
    py: Python<'_>,
    code: Option<&'static str>,
    text: String,
    message: String,
) -> PyErr {
    let err = match (code, argument_error_type(py)) {
        (Some("INVALID_ARGUMENT"), Ok(class)) => PyErr::from_type(class.clone(), text),
        _ => ReplayError::new_err(text),
    };
    let value = err.value(py);
    // Setting attributes on a fresh exception instance fails only without
    // memory; the exception is still the right type then.
    let _ = value.setattr("code", code);
    let _ = value.setattr("message", message);
    err
}

/// gRPC's canonical name of a status code.
pub fn code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}
