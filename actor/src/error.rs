//! Errors of the actor library.
//!
//! [`ActorError`] is what [`run_actor`](crate::run_actor) returns: either the
//! actor was misconfigured, the learner broke the wire contract
//! ([`ProtocolViolation`]), the learner refused the stream with a status that
//! retrying cannot fix, or it stayed unreachable for longer than the
//! reconnect policy allows, or an env failed. Transient failures never surface here: the client
//! reconnects on its own.

/// Why the actor stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ActorError {
    /// A configuration value is out of range (flag or [`ActorConfig`](crate::ActorConfig) field named).
    #[error("invalid configuration: `{field}`: {reason}")]
    Config { field: &'static str, reason: String },
    /// The `--learner` address cannot be parsed, or does not go with the
    /// TLS flags.
    #[error("invalid learner address `{addr}`: {reason}")]
    Address { addr: String, reason: String },
    /// A TLS flag's file cannot be used (the message names flag and path).
    #[error(transparent)]
    Tls(#[from] seed_shared::TlsFileError),
    /// The learner sent something the contract does not allow.
    #[error("learner protocol violation: {0}")]
    Protocol(#[from] ProtocolViolation),
    /// The learner ended the stream with a status that a retry cannot fix
    /// (bad input, bad token, too large, precondition).
    #[error("learner rejected the stream: {code:?}: {message}")]
    Rejected { code: tonic::Code, message: String },
    /// Connecting failed `attempts` times in a row (`--max-reconnects`).
    #[error("learner unreachable after {attempts} consecutive attempts; last error: {last_error}")]
    Unreachable { attempts: u32, last_error: String },
    /// `--summary-json` could not be written.
    #[error("cannot write the summary to {}: {source}", path.display())]
    Summary {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    /// An env failed to reset or step (a Python env's exception, say).
    #[error("env failed: {0}")]
    Env(#[from] seed_env::EnvError),
    /// The runtime or a signal handler could not be set up.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
}

/// A learner message that breaks the wire contract (`proto/seed/v1/seed.proto`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolViolation {
    #[error("first message is not a Welcome")]
    ExpectedWelcome,
    #[error("a second Welcome arrived on the stream")]
    UnexpectedWelcome,
    #[error("message without a `kind`")]
    EmptyMessage,
    #[error("Welcome has {got} env slots for {expected} envs")]
    SlotCount { expected: usize, got: usize },
    #[error("ActionBatch seq {got} arrived while no step batch was outstanding")]
    Unsolicited { got: u64 },
    #[error("ActionBatch seq {got}, expected {expected} (the oldest outstanding step batch)")]
    Seq { expected: u64, got: u64 },
    /// The actions do not fit the env spec: a count, a value out of range,
    /// a non-finite float, or the wrong field for the action space.
    #[error("ActionBatch seq {seq}: field `{field}`: {reason}")]
    Actions {
        seq: u64,
        field: &'static str,
        reason: String,
    },
}
