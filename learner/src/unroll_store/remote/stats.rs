//! [`RemoteStats`]: what the learner's side of a remote replay table
//! counted, so drops and backpressure are visible rather than silent.
//!
//! Every field is an independent monotonic counter or a cached gauge, read
//! only for reports: `Relaxed` throughout.
use std::sync::atomic::{AtomicU64, Ordering};

/// Counters of a remote table's client (see the module docs).
#[derive(Debug, Default)]
pub struct RemoteStats {
    /// Unrolls inference handed to the send queue.
    pub queued: AtomicU64,
    /// Unrolls dropped because the send queue stayed full for the insert
    /// timeout, or was full while the server was unreachable.
    pub dropped_queue_full: AtomicU64,
    /// Times inference found the queue full while the server was
    /// connected and waited for room (backpressure; the time is in
    /// `unroll/insert_wait`).
    pub queue_full_waits: AtomicU64,
    /// Unrolls the server acknowledged (stored, with keys).
    pub acked: AtomicU64,
    /// Unrolls sent on an insert stream that broke before their
    /// acknowledgement (they may or may not be stored).
    pub lost: AtomicU64,
    /// Insert batches sent (each up to the batching limit of unrolls).
    pub insert_batches: AtomicU64,
    /// Insert or sample streams that ended on an error and were reopened.
    pub stream_errors: AtomicU64,
    /// Sampled batches received.
    pub sampled_batches: AtomicU64,
    /// Priority write-backs the server applied, and those it found stale.
    pub priorities_applied: AtomicU64,
    pub priorities_stale: AtomicU64,
    /// Priority write-backs or version updates that failed (not applied).
    pub failed_calls: AtomicU64,
    /// Items the table held at the last `Info` (refreshed about once a
    /// second).
    pub stored: AtomicU64,
    /// The table's own count of stale priority updates, at the last `Info`.
    pub table_stale_priority_updates: AtomicU64,
}

impl RemoteStats {
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }

    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}
