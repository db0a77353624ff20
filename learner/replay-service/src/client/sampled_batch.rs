//! [`SampledBatch`]: one batch from a sample stream: per field one
//! contiguous `[rows, ...shape]` block of little-endian bytes (ready for a
//! single upload, e.g. candle's `Tensor::from_raw_buffer`), plus the keys,
//! importance weights and policy versions of the rows; its blocks are
//! read through [`FieldBlocks`]. Cost: none beyond the received message;
//! the typed readers copy.
use crate::client::field_blocks::FieldBlocks;
use crate::pb::{FieldBlock, SampleReply};

#[derive(Debug, Clone)]
pub struct SampledBatch {
    reply: SampleReply,
}

impl SampledBatch {
    pub(crate) fn new(reply: SampleReply) -> Self {
        SampledBatch { reply }
    }

    pub fn rows(&self) -> usize {
        self.reply.rows as usize
    }
    /// The items' keys, one per row.
    pub fn keys(&self) -> &[u64] {
        &self.reply.keys
    }
    pub fn weights(&self) -> &[f32] {
        &self.reply.weights
    }
    pub fn policy_versions(&self) -> &[u64] {
        &self.reply.policy_versions
    }
    /// The reply as received.
    pub fn into_reply(self) -> SampleReply {
        self.reply
    }
}

/// Its fields' blocks: `field`, `field_f32`, `field_u64`.
impl FieldBlocks for SampledBatch {
    fn fields(&self) -> &[FieldBlock] {
        &self.reply.fields
    }
}
