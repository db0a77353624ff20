//! Errors raised while validating what crosses the wire.
//!
//! Every variant names the offending protobuf field, because the learner turns
//! these into the gRPC status message an actor's operator reads.

/// A message that does not match the contract or the stream's [`EnvSpec`](crate::EnvSpec).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProtocolError {
    #[error("field `{field}` is missing")]
    Missing { field: &'static str },
    #[error("field `{field}`: unknown or unspecified dtype {value}")]
    UnknownDType { field: &'static str, value: i32 },
    #[error("field `{field}`: {reason}")]
    InvalidSpec { field: &'static str, reason: String },
    #[error("field `{field}`: expected {expected} bytes, got {got}")]
    ByteLength {
        field: &'static str,
        expected: usize,
        got: usize,
    },
    #[error("field `{field}`: expected {expected} entries (one per env index), got {got}")]
    Count {
        field: &'static str,
        expected: usize,
        got: usize,
    },
    #[error("field `rewards[{position}]` is not finite: {value}")]
    NonFiniteReward { position: usize, value: f32 },
    #[error(
        "field `observations`: env `env_indices[{position}]` = {index} has a non-finite \
         value ({value}) at element {element}"
    )]
    NonFiniteObservation {
        position: usize,
        index: u32,
        element: usize,
        value: f32,
    },
    #[error(
        "fields `terminated[{position}]` and `truncated[{position}]` are both true; \
         a step ends its episode one way or the other"
    )]
    TerminatedAndTruncated { position: usize },
    #[error("field `seq` = {got}: expected {expected} (starts at 0 on each stream, +1 per batch)")]
    Sequence { expected: u64, got: u64 },
    #[error("field `env_indices[{position}]` = {index} is out of range for {num_envs} envs")]
    EnvIndexOutOfRange {
        position: usize,
        index: u32,
        num_envs: u32,
    },
    #[error("field `env_indices[{position}]` = {index} appears twice in one batch")]
    DuplicateEnvIndex { position: usize, index: u32 },
    #[error("field `env_indices` is empty")]
    EmptyBatch,
    #[error(
        "field `episodes[{position}].env_index` = {index} is out of range for {num_envs} envs"
    )]
    EpisodeEnvOutOfRange {
        position: usize,
        index: u32,
        num_envs: u32,
    },
}
/// A TLS flag's file that cannot be used: unreadable, not PEM, or not
/// holding what the flag needs. Names the flag and the path, since that is
/// what the operator changes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{flag} {}`: {reason}", path.display())]
pub struct TlsFileError {
    /// The flag that named the file (`--tls-cert`, ...).
    pub flag: &'static str,
    pub path: std::path::PathBuf,
    pub reason: String,
}
