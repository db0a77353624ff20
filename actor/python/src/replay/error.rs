//! How the replay client's errors reach Python.
//!
//! A refusal by the server (bad input, an unknown table, a wrong token) is
//! a `seed_rs.ReplayError` carrying the gRPC status: `code` is the
//! canonical name (`"INVALID_ARGUMENT"`, `"UNAUTHENTICATED"`, as
//! `grpc.StatusCode` spells them) and `message` the server's message, which
//! names the field at fault. Failing to connect, a stream that ended early
//! or a reply that breaks the protocol are `ReplayError`s too, with `code`
//! `None`. Input the client refuses before sending (a wrong dtype or shape,
//! an address or TLS file it cannot use) is a `ValueError`.

use pyo3::create_exception;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use seed_replay_service::ClientError;
use tonic::Code;

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
    let err = ReplayError::new_err(text);
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
