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
    /// Bounded queue that never blocks: when full, the oldest item is
    /// dropped to make room, and with the grouped sampler its whole group,
    /// so a partial group is never served.
    ///
    /// In this storage that is the same mechanism as `OverwriteOldest`: the
    /// slot a new item takes (`key % capacity`) always holds the oldest
    /// item, and a consume-once sampler hands items out oldest first, so
    /// the item displaced is the oldest unconsumed one. One difference from
    /// a queue with free slot choice (the trajectory-pool design, which
    /// drops the oldest *ready* group): a group still open when the ring
    /// comes round to its first item is the one dropped, since slots are
    /// not reassigned. Size the buffer to hold the open groups plus the
    /// ready queue.
    DropOldest,
    /// Backpressure: an insert waits (up to `timeout`) until the oldest item
    /// has been consumed. Only valid with samplers that consume items in
    /// insertion order: FIFO, and grouped (size the buffer so no group
    /// stays open for a whole lap of the ring: a writer waiting on an open
    /// group's slot waits for that group). Others are rejected at
    /// construction: uniform, prioritized and recent never consume, and
    /// max_times_sampled consumes in random order, so a writer can wait on
    /// its slot while samplers wait for samples (see `ReplayConfig::validate`).
    Block { timeout: Duration },
}

impl WriterPolicy {
    pub(crate) fn blocks(&self) -> bool {
        matches!(self, WriterPolicy::Block { .. })
    }
}
