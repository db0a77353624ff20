//! [`SampledBatch`]: one batch from a sample stream: per field one
//! contiguous `[rows, ...shape]` block of little-endian bytes (ready for a
//! single upload, e.g. candle's `Tensor::from_raw_buffer`), plus the keys,
//! importance weights and policy versions of the rows. Cost: none beyond
//! the received message; the typed readers copy.
use crate::client::field_blocks;
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
    /// Every field's block, in the table's layout order.
    pub fn fields(&self) -> &[FieldBlock] {
        &self.reply.fields
    }
    /// The bytes of the field called `name`.
    pub fn field(&self, name: &str) -> Option<&[u8]> {
        field_blocks::field(&self.reply.fields, name)
    }
    /// The field as `f32`s (copied).
    pub fn field_f32(&self, name: &str) -> Option<Vec<f32>> {
        self.field(name).map(field_blocks::to_f32)
    }
    /// The field as `u64`s (copied).
    pub fn field_u64(&self, name: &str) -> Option<Vec<u64>> {
        self.field(name).map(field_blocks::to_u64)
    }
    /// The reply as received.
    pub fn into_reply(self) -> SampleReply {
        self.reply
    }
}
