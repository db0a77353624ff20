//! [`SampledUnrolls`]: what the collator reads of a sampled batch, whether
//! the in-process buffer filled it ([`SampleBatch`]) or a replay server sent
//! it ([`SampleReply`], as received).
//!
//! Both hold one contiguous little-endian block per field, batch-major
//! (`[B, ...shape]`), plus keys, importance weights and policy versions, so
//! the collator's transpose and upload are the same for both. Cost: none;
//! `keys` copies `B` words.
use seed_replay::{ItemKey, SampleBatch};
use seed_replay_service::pb::SampleReply;

/// A sampled batch as the collator reads it (see the module docs).
pub trait SampledUnrolls {
    /// Rows `B` in the batch.
    fn rows(&self) -> usize;
    /// The `[B, ...shape]` bytes of field `name`.
    fn field(&self, name: &str) -> Option<&[u8]>;
    /// The rows' stable keys (priority write-back).
    fn keys(&self) -> Vec<ItemKey>;
    /// Importance weights (1 unless prioritized or down-weighted).
    fn weights(&self) -> &[f32];
    /// Policy version of each row.
    fn policy_versions(&self) -> &[u64];
}

impl SampledUnrolls for SampleBatch {
    fn rows(&self) -> usize {
        self.len()
    }
    fn field(&self, name: &str) -> Option<&[u8]> {
        SampleBatch::field(self, name)
    }
    fn keys(&self) -> Vec<ItemKey> {
        SampleBatch::keys(self).to_vec()
    }
    fn weights(&self) -> &[f32] {
        SampleBatch::weights(self)
    }
    fn policy_versions(&self) -> &[u64] {
        SampleBatch::policy_versions(self)
    }
}

impl SampledUnrolls for SampleReply {
    fn rows(&self) -> usize {
        self.rows as usize
    }
    fn field(&self, name: &str) -> Option<&[u8]> {
        self.fields
            .iter()
            .find(|f| f.name == name)
            .map(|f| &f.data[..])
    }
    fn keys(&self) -> Vec<ItemKey> {
        self.keys.iter().map(|&k| ItemKey(k)).collect()
    }
    fn weights(&self) -> &[f32] {
        &self.weights
    }
    fn policy_versions(&self) -> &[u64] {
        &self.policy_versions
    }
}
