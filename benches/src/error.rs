//! [`HarnessError`]: why a latency-harness run failed.
//!
//! Every variant names the process, file or address involved, so a failed
//! sweep point says what to look at (child logs stay in the run directory).
use std::path::PathBuf;

/// A failure of the latency harness library.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// A child process could not be started.
    #[error("cannot start {name} ({program}): {source}")]
    Spawn {
        name: String,
        program: PathBuf,
        source: std::io::Error,
    },
    /// A child exited before it should have, or with a failure status.
    #[error("{name} exited with {status}; its log: {}", log.display())]
    ChildFailed {
        name: String,
        status: String,
        log: PathBuf,
    },
    /// A `stream_load` load child failed or handed back no report; `tail`
    /// is the end of its log (its stderr).
    #[error("{name} {reason}; its log {} ends:\n{tail}", log.display())]
    LoadChild {
        name: String,
        reason: String,
        log: PathBuf,
        tail: String,
    },
    /// A child did not finish in time and was killed.
    #[error("{name} did not finish within {seconds:.0} s and was killed; its log: {}", log.display())]
    ChildTimeout {
        name: String,
        seconds: f64,
        log: PathBuf,
    },
    /// A server never answered its `Status` RPC.
    #[error("{name} at {addr} did not become ready within {seconds:.0} s: {last_error}")]
    NotReady {
        name: String,
        addr: String,
        seconds: f64,
        last_error: String,
    },
    /// A summary JSON is missing or malformed.
    #[error("cannot read the summary {}: {reason}", path.display())]
    Summary { path: PathBuf, reason: String },
    /// The echo floor client failed.
    #[error("echo client: {0}")]
    Echo(String),
    /// A configuration value is unusable.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// Writing results (JSON, CSV, plots) failed.
    #[error("cannot write {}: {reason}", path.display())]
    Output { path: PathBuf, reason: String },
    /// Anything else from the OS.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
}
