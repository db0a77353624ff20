//! What an insert does when the buffer is full.
//!
//! The storage is a ring: item `key` lives in slot `key % capacity`, so the
//! item a new one displaces is always the oldest. Cost of a policy: one
//! `fetch_add` (overwrite, drop) or a check of the slots plus one CAS (block).
use std::time::Duration;

/// Behaviour of inserts when every slot holds an item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum WriterPolicy {
    /// Ring buffer: the oldest item is overwritten, consumed or not. Readers
    /// racing the overwrite retry (or, for consume-once samplers, skip the
    /// lost item, counted in `evicted_unconsumed`).
    OverwriteOldest,
    /// Bounded queue that never blocks: the oldest item is dropped; with the
    /// grouped sampler its whole group is dropped, so a partial group is
    /// never served. For other samplers this is the same as
    /// `OverwriteOldest` (in a ring the oldest item is the one displaced).
    DropOldest,
    /// Backpressure: an insert waits (up to `timeout`) until the oldest item
    /// has been consumed. Only valid with samplers that consume items
    /// (FIFO, max_times_sampled, grouped); others are rejected at
    /// construction because the wait could never end.
    Block { timeout: Duration },
}

impl WriterPolicy {
    pub(crate) fn blocks(&self) -> bool {
        matches!(self, WriterPolicy::Block { .. })
    }
}
