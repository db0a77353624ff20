//! [`UnrollStore`]: where the learner's unrolls are stored, the seam between
//! the learning stages and the replay buffer: the in-process
//! [`ReplayBuffer`] (the default) or a table of a replay server
//! ([`RemoteTable`], `--replay-addr`).
//!
//! The unroll assembler inserts through it, each prefetch thread samples
//! through its own `UnrollSampler` (`sampler.rs`), the trainer writes R2D2's priorities
//! back and publishes its policy version through it, and the reports read
//! its size. Why an enum and not a trait object: two kinds, known here, and
//! the in-process path stays a direct call.
//!
//! What differs (and why):
//! - inserting into the in-process buffer may wait (a full `block` buffer
//!   or the rate limiter: backpressure slows the actors); a remote insert
//!   is queued for a writer task and never waits for the network, only for
//!   room in its queue while the server holds inserts back
//!   ([`InsertOutcome::Queued`], [`InsertOutcome::DroppedFull`]);
//! - a learner checkpoint (`--run-dir`) holds the in-process buffer; a
//!   remote table is the server's to checkpoint (its `Checkpoint` RPC), so
//!   [`UnrollStore::local`] is `None` for it.
//!
//! Cost: one `match` per call on top of the store's own.
use std::sync::Arc;
use std::time::Duration;

use seed_replay::{FieldRef, ItemKey, ReplayBuffer, ReplayError, SamplerConfig};

use crate::unroll_store::remote::stats::RemoteStats;
use crate::unroll_store::remote::table::RemoteTable;

/// Where unrolls go (see the module docs).
#[derive(Debug, Clone)]
pub enum UnrollStore {
    /// The in-process buffer.
    Local(Arc<ReplayBuffer>),
    /// A table of a replay server.
    Remote(Arc<RemoteTable>),
}

/// What became of one inserted unroll.
#[derive(Debug)]
pub enum InsertOutcome {
    /// In the in-process buffer.
    Stored,
    /// Queued for the remote table (the server acknowledges it later:
    /// `RemoteStats::acked`).
    Queued,
    /// Dropped: the buffer stayed full or rate-limited for the whole
    /// timeout, or the remote send queue was full.
    DroppedFull,
    /// Dropped: the store is closed (the learner is stopping).
    DroppedClosed,
    /// Refused for another reason (a bug: the unroll did not fit).
    Refused(ReplayError),
}

impl From<Arc<ReplayBuffer>> for UnrollStore {
    fn from(buffer: Arc<ReplayBuffer>) -> Self {
        UnrollStore::Local(buffer)
    }
}

impl UnrollStore {
    /// Inserts one unroll (its fields in layout order). The in-process
    /// buffer waits up to `timeout` for room (`None`: its writer policy's
    /// own timeout); a remote table's queue waits up to `timeout` for room
    /// while its server holds inserts back (`None`: never), and never for
    /// the network.
    pub fn insert(&self, fields: &[FieldRef<'_>], timeout: Option<Duration>) -> InsertOutcome {
        match self {
            UnrollStore::Local(replay) => {
                let result = match timeout {
                    Some(t) => replay.insert_ref_timeout(fields, t),
                    None => replay.insert_ref(fields),
                };
                match result {
                    Ok(_) => InsertOutcome::Stored,
                    Err(ReplayError::Timeout { .. })
                    | Err(ReplayError::WouldBlock { .. })
                    | Err(ReplayError::RateLimited { .. }) => InsertOutcome::DroppedFull,
                    Err(ReplayError::Closed) => InsertOutcome::DroppedClosed,
                    Err(e) => InsertOutcome::Refused(e),
                }
            }
            UnrollStore::Remote(table) => {
                if table.is_closed() {
                    InsertOutcome::DroppedClosed
                } else if table.enqueue(fields, timeout.unwrap_or(Duration::ZERO)) {
                    InsertOutcome::Queued
                } else {
                    InsertOutcome::DroppedFull
                }
            }
        }
    }

    /// Whether the store samples by priority (R2D2 then writes them back).
    pub fn prioritized(&self) -> bool {
        match self {
            UnrollStore::Local(r) => matches!(r.config().sampler, SamplerConfig::Prioritized(_)),
            UnrollStore::Remote(t) => t.prioritized(),
        }
    }

    /// Sets the priorities of `keys`; returns how many were applied (keys
    /// of overwritten items are ignored and counted by the store).
    pub fn update_priorities(
        &self,
        keys: &[ItemKey],
        priorities: &[f32],
    ) -> Result<usize, ReplayError> {
        match self {
            UnrollStore::Local(r) => Ok(r.update_priorities(keys, priorities)?.applied),
            UnrollStore::Remote(t) => Ok(t.update_priorities(keys, priorities)),
        }
    }

    /// The trainer's current policy version (the lag cap's reference).
    pub fn set_policy_version(&self, version: u64) {
        match self {
            UnrollStore::Local(r) => r.set_policy_version(version),
            UnrollStore::Remote(t) => t.set_policy_version(version),
        }
    }

    /// Closes the store: waiting inserts and samples return, later ones
    /// are refused (the learner is stopping).
    pub fn close(&self) {
        match self {
            UnrollStore::Local(r) => r.close(),
            UnrollStore::Remote(t) => t.close(),
        }
    }

    /// Unrolls stored (a remote table's as of its last `Info`).
    pub fn stored(&self) -> usize {
        match self {
            UnrollStore::Local(r) => r.len(),
            UnrollStore::Remote(t) => RemoteStats::get(&t.stats.stored) as usize,
        }
    }

    /// Priority updates ignored because the item had been overwritten.
    pub fn stale_priority_updates(&self) -> u64 {
        match self {
            UnrollStore::Local(r) => r.stats().stale_priority_updates,
            UnrollStore::Remote(t) => RemoteStats::get(&t.stats.table_stale_priority_updates),
        }
    }

    /// The in-process buffer (what a learner checkpoint holds); `None` for
    /// a remote table.
    pub fn local(&self) -> Option<&Arc<ReplayBuffer>> {
        match self {
            UnrollStore::Local(r) => Some(r),
            UnrollStore::Remote(_) => None,
        }
    }

    /// The remote table, if that is where unrolls go.
    pub fn remote(&self) -> Option<&Arc<RemoteTable>> {
        match self {
            UnrollStore::Local(_) => None,
            UnrollStore::Remote(t) => Some(t),
        }
    }
}
