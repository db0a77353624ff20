//! Errors of the replay buffer: every refusal is a value, never a panic.
//!
//! Inserts that are refused hand the item back ([`InsertError`]) so the caller
//! can retry or drop it deliberately.
use std::path::PathBuf;

use crate::dtype::DType;

/// Why a replay-buffer operation did not happen.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The layout or the buffer configuration is unusable (including
    /// configurations that could deadlock); `reason` says which rule failed.
    #[error("invalid replay configuration: {reason}")]
    Config { reason: String },
    /// An inserted item has a different number of fields than the layout.
    #[error("item has {got} fields, layout has {expected}")]
    FieldCount { expected: usize, got: usize },
    /// A named field is missing from an inserted item.
    #[error("item lacks field `{field}`")]
    MissingField { field: String },
    /// A field's dtype differs from the layout's.
    #[error("field `{field}`: dtype {got:?}, layout says {expected:?}")]
    DType {
        field: String,
        expected: DType,
        got: DType,
    },
    /// A field's shape differs from the layout's.
    #[error("field `{field}`: shape {got:?}, layout says {expected:?}")]
    Shape {
        field: String,
        expected: Vec<usize>,
        got: Vec<usize>,
    },
    /// A field's data length does not match its declared shape.
    #[error("field `{field}`: {got} bytes of data, shape needs {expected}")]
    DataLength {
        field: String,
        expected: usize,
        got: usize,
    },
    /// A variable-length field's offsets are wrong: too few or too many,
    /// not starting at 0, going backwards, a row over `max_len`, or not
    /// ending at the values' length. `row` names the row where it shows.
    #[error("field `{field}`{}: {reason}", row.map(|r| format!(", row {r}")).unwrap_or_default())]
    Offsets {
        field: String,
        row: Option<usize>,
        reason: String,
    },
    /// A sample asked for more items than the sampler can hand out now
    /// (consume-once samplers never hand an item out twice).
    #[error("requested {requested} items, {available} available")]
    NotEnoughItems { requested: usize, available: usize },
    /// A request can never be satisfied: more rows than the batch buffer or
    /// the buffer capacity holds.
    #[error("requested {requested} rows, at most {limit} possible")]
    TooLarge { requested: usize, limit: usize },
    /// The buffer is full and the writer policy is `Block` (non-blocking call)
    /// or the rate limiter refuses inserts right now.
    #[error("insert would block: {reason}")]
    WouldBlock { reason: &'static str },
    /// The rate limiter refuses sampling right now (non-blocking call).
    #[error("sampling is rate limited: {reason}")]
    RateLimited { reason: &'static str },
    /// A blocking call waited its whole timeout.
    #[error("timed out after {waited_ms} ms waiting for {what}")]
    Timeout { what: &'static str, waited_ms: u64 },
    /// The buffer was closed; blocked and later calls return this.
    #[error("replay buffer closed")]
    Closed,
    /// A file operation failed.
    #[error("{op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A checkpoint or mapped directory is damaged (bad magic, truncated,
    /// checksum mismatch, unparsable header).
    #[error("corrupt replay file {path}: {reason}")]
    Corrupt { path: PathBuf, reason: String },
    /// A checkpoint or mapped directory is intact but was written for a
    /// different layout, capacity or sampler.
    #[error("replay file {path} does not match this buffer: {reason}")]
    Mismatch { path: PathBuf, reason: String },
}

impl ReplayError {
    pub(crate) fn config(reason: impl Into<String>) -> Self {
        ReplayError::Config {
            reason: reason.into(),
        }
    }

    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        ReplayError::Io {
            op,
            path: path.into(),
            source,
        }
    }
}

/// A refused insert: the error and the item, handed back untouched.
#[derive(Debug, thiserror::Error)]
#[error("insert refused: {error}")]
pub struct InsertError<T> {
    /// Why the item was refused.
    #[source]
    pub error: ReplayError,
    /// The item, unchanged.
    pub item: T,
}
