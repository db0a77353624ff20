//! Errors of the learner library.
//!
//! [`StreamError`] ends one actor stream; `server.rs` holds the single
//! `From<StreamError> for tonic::Status` that picks the gRPC code, and every
//! message names the offending field so an operator can fix the actor.
//! [`LearnerError`] is what starting or running the learner can fail with.
use std::path::PathBuf;

use seed_shared::ProtocolError;

/// Why one actor stream was ended. Never fatal to the learner.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    #[error("field `kind`: the first message must be a hello, got {got}")]
    FirstNotHello { got: &'static str },
    #[error("field `hello`: a second hello on one stream (the stream was already welcomed)")]
    SecondHello,
    #[error("field `kind` is empty: neither hello nor steps")]
    EmptyMessage,
    #[error(
        "field `token` is missing: this learner requires a shared token (--token / SEED_TOKEN)"
    )]
    MissingToken,
    #[error("field `token` does not match the learner's token")]
    WrongToken,
    #[error("field `{field}`: {reason}")]
    InvalidHello { field: &'static str, reason: String },
    #[error("field `{field}`: the learner serves {learner}, the actor sent {actor}")]
    SpecMismatch {
        field: &'static str,
        learner: String,
        actor: String,
    },
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
    #[error("field `env_indices[{position}]` = {index}: that env already has a step awaiting its action")]
    EnvBusy { position: usize, index: u32 },
    #[error(
        "field `seq` = {seq}: more than {limit} step batches awaiting actions on this stream; \
         wait for actions before sending more"
    )]
    TooManyInFlight { limit: usize, seq: u64 },
    #[error("field `hello.num_envs` = {asked}: only {free} of {capacity} env slots are free (--max-env-slots)")]
    SlotsExhausted {
        asked: usize,
        free: usize,
        capacity: usize,
    },
    #[error("message exceeds --max-message-bytes = {limit} bytes ({detail})")]
    MessageTooLarge { limit: usize, detail: String },
    #[error("the learner is shutting down")]
    ShuttingDown,
    /// A transport-level failure reported by tonic (passed through as is).
    #[error("{0}")]
    Transport(tonic::Status),
}

/// Failures to start or run the learner.
#[derive(Debug, thiserror::Error)]
pub enum LearnerError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    /// The `--metrics-addr` endpoint could not listen.
    #[error("cannot serve metrics on {addr} (--metrics-addr): {source}")]
    MetricsBind {
        addr: std::net::SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("`--listen {value}`: {reason}")]
    ListenAddr { value: String, reason: String },
    #[error("`--device {value}`: {reason}")]
    Device { value: String, reason: String },
    #[error("model: {0}")]
    Model(#[from] candle_core::Error),
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write summary to {path}: {source}")]
    Summary {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid configuration: {0}")]
    Config(String),
    /// Setting up the trainer, or a training step, failed.
    #[error("training failed: {0}")]
    Training(#[from] crate::learn::train::TrainError),
    #[error("local actor {index} (pid {pid}) died unexpectedly: {status}")]
    LocalActorDied {
        index: usize,
        pid: u32,
        status: String,
    },
    #[error("server: {0}")]
    Serve(String),
}
