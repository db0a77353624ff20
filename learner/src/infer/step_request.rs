//! One step batch from one stream on its way through the batcher.
//!
//! Carries the validated wire batch, the claim on its envs' slot state, and
//! the stream's reply channel, so the inference thread answers the stream
//! directly: no hop back through the stream task.
use std::time::Instant;

use seed_shared::pb;
use tokio::sync::mpsc;

use crate::infer::batcher::Batchable;
use crate::infer::state_table::StepClaim;

/// A stream's outgoing messages. Unbounded in type, bounded in practice: the
/// stream task refuses a step batch when [`crate::serve::server::MAX_STEP_BATCHES_IN_FLIGHT`]
/// are unanswered, so at most that many action batches (plus the welcome
/// and one final status) are ever queued. Tokio's bounded channel would take
/// a mutex on every receive to return capacity; this one is lock-free.
pub type ReplySender = mpsc::UnboundedSender<Result<pb::LearnerMessage, tonic::Status>>;

/// A validated step batch awaiting inference.
pub struct StepRequest {
    pub batch: pb::StepBatch,
    /// Exclusive access to the slot state of `batch.env_indices`.
    pub claim: StepClaim,
    pub reply: ReplySender,
    /// When the stream task decoded it (server-side latency starts here).
    pub received_at: Instant,
}

impl Batchable for StepRequest {
    fn rows(&self) -> usize {
        self.batch.env_indices.len()
    }

    fn enqueued_at(&self) -> Instant {
        self.received_at
    }

    /// The stream's lease: one per stream, holding all of its envs.
    fn stream(&self) -> Option<(u64, usize)> {
        let lease = self.claim.lease();
        Some((lease.id().0, lease.slots().len()))
    }
}
