//! [`RemoteReplayError`]: why a remote replay table cannot be used, said so
//! that the user knows which flag or which side (learner or server config)
//! to change. The stage converts it into the learner's error where it is
//! built; the running path counts failures instead of returning them.
use seed_replay_service::ClientError;

/// A remote table that cannot serve this learner.
#[derive(Debug, thiserror::Error)]
pub enum RemoteReplayError {
    /// Nothing answers at the address (or TLS failed).
    #[error("--replay-addr {addr}: cannot reach the replay server: {reason}")]
    Unreachable { addr: String, reason: String },
    /// The server answers but has no such table.
    #[error("--replay-addr {addr}: the server has no table `{table}` (it serves: {known})")]
    NoTable {
        addr: String,
        table: String,
        known: String,
    },
    /// The server refused the token.
    #[error("--replay-addr {addr}: the server refused us ({message}); check --replay-token")]
    Unauthenticated { addr: String, message: String },
    /// The table's items are not this learner's unrolls.
    #[error(
        "--replay-addr {addr}: table `{table}` does not fit this learner's unrolls: {detail} \
         (write the table as `learner --print-replay-table-config` prints it)"
    )]
    Layout {
        addr: String,
        table: String,
        detail: String,
    },
    /// The table's sampler cannot feed this agent.
    #[error("--replay-addr {addr}: table `{table}`: {reason}")]
    Sampler {
        addr: String,
        table: String,
        reason: String,
    },
    /// Any other failed call.
    #[error("--replay-addr {addr}: {source}")]
    Call {
        addr: String,
        #[source]
        source: ClientError,
    },
    /// The client's own threads could not start.
    #[error("the replay client's runtime: {0}")]
    Runtime(String),
}

impl From<RemoteReplayError> for crate::error::LearnerError {
    fn from(e: RemoteReplayError) -> Self {
        crate::error::LearnerError::Config(e.to_string())
    }
}
