//! [`LearnerError`]: what starting or running the learner can fail with.
//!
//! A leaf: errors of the stages convert into it where they are defined
//! (`impl From<TrainError> for LearnerError` sits beside `TrainError`), so
//! this file imports no stage. What ends one actor stream only is
//! [`crate::serve::StreamError`].
use std::path::PathBuf;

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
    Training(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error("local actor {index} (pid {pid}) died unexpectedly: {status}")]
    LocalActorDied {
        index: usize,
        pid: u32,
        status: String,
    },
    #[error("server: {0}")]
    Serve(String),
}
