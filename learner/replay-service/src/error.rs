//! Errors of the replay service: the configuration file, starting the
//! server, one refused request (turned into a gRPC status that names the
//! field), and the client's.
//!
//! A refused request ends only its own call or stream: [`RequestError`]
//! becomes the `Status` that call returns; other clients never see it.
use std::path::PathBuf;

use seed_replay::ReplayError;
use tonic::{Code, Status};

/// A configuration file that cannot be served, naming the table and the
/// setting.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read the config file {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("config file {path}: {reason}")]
    Parse { path: PathBuf, reason: String },
    /// A table's settings are unusable; `setting` is its key in the file.
    #[error("table `{table}`, `{setting}`: {reason}")]
    Table {
        table: String,
        setting: &'static str,
        reason: String,
    },
    #[error("{reason}")]
    Service { reason: String },
}

/// Why the server did not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Tls(#[from] seed_shared::TlsFileError),
    /// A table's buffer could not be built, opened or restored.
    #[error("table `{table}`: {source}")]
    Table {
        table: String,
        #[source]
        source: ReplayError,
    },
    /// A shard directory of a loaded table (`load`) cannot be served with
    /// the others: its layout differs (`reason` names the field), it cannot
    /// be read, or it is another shard's directory.
    #[error("table `{table}`, shard {shard} ({dir}): {reason}")]
    Shard {
        table: String,
        shard: usize,
        dir: PathBuf,
        reason: String,
    },
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot serve: {reason}")]
    Transport { reason: String },
    /// A mirror's primary cannot be reached or described its tables badly.
    #[error("mirror of {addr}: {reason}")]
    Upstream { addr: String, reason: String },
}

/// One refused request. `field` is the request field at fault, spelled as
/// in `replay.proto` (`fields["obs"].shape`, `batch_size`).
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// The request itself is malformed.
    #[error("field `{field}`: {reason}")]
    Invalid { field: String, reason: String },
    /// No table of that name.
    #[error("field `table`: no table `{table}` (tables: {known})")]
    UnknownTable { table: String, known: String },
    /// The table cannot do this (priorities on a uniform table, a
    /// checkpoint without a checkpoint directory, one already running).
    #[error("{reason}")]
    Precondition { reason: String },
    /// The table has no room for the request (grouped tables: steps of
    /// open groups fill the capacity, or a group outgrows one message).
    #[error("field `{field}`: {reason}")]
    Exhausted { field: String, reason: String },
    /// The buffer refused (closed, timed out, an I/O error).
    #[error("table `{table}`: {source}")]
    Replay {
        table: String,
        #[source]
        source: ReplayError,
    },
    /// The client's token is missing or wrong.
    #[error("{reason}")]
    Unauthenticated { reason: &'static str },
}

impl RequestError {
    /// An `INVALID_ARGUMENT` refusal naming the request field at fault.
    pub fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Self {
        RequestError::Invalid {
            field: field.into(),
            reason: reason.into(),
        }
    }

    /// The gRPC code of this refusal.
    pub fn code(&self) -> Code {
        match self {
            RequestError::Invalid { .. } => Code::InvalidArgument,
            RequestError::UnknownTable { .. } => Code::NotFound,
            RequestError::Precondition { .. } => Code::FailedPrecondition,
            RequestError::Exhausted { .. } => Code::ResourceExhausted,
            RequestError::Unauthenticated { .. } => Code::Unauthenticated,
            RequestError::Replay { source, .. } => match source {
                ReplayError::Closed => Code::Unavailable,
                ReplayError::Timeout { .. } => Code::DeadlineExceeded,
                ReplayError::TooLarge { .. }
                | ReplayError::FieldCount { .. }
                | ReplayError::MissingField { .. }
                | ReplayError::DType { .. }
                | ReplayError::Shape { .. }
                | ReplayError::DataLength { .. }
                | ReplayError::Offsets { .. } => Code::InvalidArgument,
                ReplayError::Config { .. } => Code::FailedPrecondition,
                ReplayError::NotEnoughItems { .. }
                | ReplayError::WouldBlock { .. }
                | ReplayError::RateLimited { .. } => Code::Unavailable,
                ReplayError::Io { .. }
                | ReplayError::Corrupt { .. }
                | ReplayError::Mismatch { .. } => Code::Internal,
            },
        }
    }
}

impl From<RequestError> for Status {
    fn from(e: RequestError) -> Self {
        Status::new(e.code(), e.to_string())
    }
}

/// What a [`crate::client::ReplayClient`] call can fail with.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The server address is not a usable URI.
    #[error("replay server address `{addr}`: {reason}")]
    Address { addr: String, reason: String },
    #[error("cannot connect to the replay server at {addr}: {reason}")]
    Connect { addr: String, reason: String },
    #[error(transparent)]
    Tls(#[from] seed_shared::TlsFileError),
    /// The server refused the call; the status names the field.
    #[error("replay server: {code:?}: {message}")]
    Status { code: Code, message: String },
    /// A batch given to the client does not hold together (checked before
    /// anything is sent).
    #[error("batch field `{field}`: {reason}")]
    Batch { field: String, reason: String },
    /// The server's reply breaks the protocol.
    #[error("replay server sent a bad reply: {reason}")]
    Protocol { reason: String },
    /// A stream ended before its reply.
    #[error("the replay server closed the stream")]
    StreamClosed,
}

impl From<Status> for ClientError {
    fn from(s: Status) -> Self {
        ClientError::Status {
            code: s.code(),
            message: s.message().to_owned(),
        }
    }
}

impl ClientError {
    /// The gRPC code when the server refused the call.
    pub fn code(&self) -> Option<Code> {
        match self {
            ClientError::Status { code, .. } => Some(*code),
            _ => None,
        }
    }
}
