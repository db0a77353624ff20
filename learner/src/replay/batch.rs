//! [`SampleBatch`]: caller-owned, preallocated, contiguous per-field buffers
//! that samples are gathered into.
//!
//! Why: the prefetch thread reuses one batch per step and uploads each field
//! with a single copy (`[B, ...shape]`, e.g. with candle's
//! `Tensor::from_raw_buffer`), so sampling allocates nothing.
//! Cost: `max_rows * item_bytes` bytes, allocated and first-touched once.
use super::layout::{DType, ItemLayout};
use super::ItemKey;

/// Rows gathered by one sample call, plus per-row keys, importance weights
/// and policy versions.
#[derive(Debug, Clone)]
pub struct SampleBatch {
    layout: ItemLayout,
    max_rows: usize,
    len: usize,
    /// Bytes of one row of each field (cached: the gather loop needs it
    /// per row).
    row_bytes: Vec<usize>,
    /// One buffer of `max_rows * field bytes` per field.
    fields: Vec<Vec<u8>>,
    keys: Vec<ItemKey>,
    weights: Vec<f32>,
    policy_versions: Vec<u64>,
    groups: Vec<u64>,
}

impl SampleBatch {
    /// Allocates buffers for up to `max_rows` items of `layout`.
    pub fn new(layout: &ItemLayout, max_rows: usize) -> Self {
        SampleBatch {
            layout: layout.clone(),
            max_rows,
            len: 0,
            row_bytes: layout.fields().iter().map(|f| f.num_bytes()).collect(),
            fields: layout
                .fields()
                .iter()
                .map(|f| {
                    let mut v = vec![0u8; max_rows * f.num_bytes()];
                    // `vec![0; n]` may be lazily zeroed pages: write one
                    // byte per page so the first sample does not fault.
                    for b in v.iter_mut().step_by(4096) {
                        *b = std::hint::black_box(0);
                    }
                    v
                })
                .collect(),
            keys: Vec::with_capacity(max_rows),
            weights: Vec::with_capacity(max_rows),
            policy_versions: Vec::with_capacity(max_rows),
            groups: Vec::with_capacity(max_rows),
        }
    }

    pub fn layout(&self) -> &ItemLayout {
        &self.layout
    }
    /// Rows filled by the last sample call.
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn max_rows(&self) -> usize {
        self.max_rows
    }
    /// Keys of the sampled items, one per row.
    pub fn keys(&self) -> &[ItemKey] {
        &self.keys
    }
    /// Importance weights (prioritized: `(p_min / p_i)^beta`, i.e. normalised
    /// by the largest weight in the buffer; otherwise 1), times the
    /// policy-lag down-weight where applied.
    pub fn weights(&self) -> &[f32] {
        &self.weights
    }
    /// Policy version each row was produced by (0 if the layout declares no
    /// policy-version field).
    pub fn policy_versions(&self) -> &[u64] {
        &self.policy_versions
    }
    /// Group id of each row (grouped sampler; otherwise 0).
    pub fn groups(&self) -> &[u64] {
        &self.groups
    }

    /// Bytes of field `index` for the filled rows: `[len, ...shape]`.
    pub fn field_bytes(&self, index: usize) -> Option<&[u8]> {
        let f = self.layout.fields().get(index)?;
        Some(&self.fields.get(index)?[..self.len * f.num_bytes()])
    }

    /// Bytes of the field called `name` for the filled rows.
    pub fn field(&self, name: &str) -> Option<&[u8]> {
        let (i, _) = self.layout.field(name)?;
        self.field_bytes(i)
    }

    /// Copies the field into `f32`s (tests, debugging; the hot path uses
    /// `field`). `None` if absent or not `F32`.
    pub fn field_f32(&self, name: &str) -> Option<Vec<f32>> {
        let (_, spec) = self.layout.field(name)?;
        if spec.dtype() != DType::F32 {
            return None;
        }
        Some(
            self.field(name)?
                .chunks_exact(4)
                .map(|c| f32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
        )
    }

    /// Copies the field into `u64`s. `None` if absent or not `U64`.
    pub fn field_u64(&self, name: &str) -> Option<Vec<u64>> {
        let (_, spec) = self.layout.field(name)?;
        if spec.dtype() != DType::U64 {
            return None;
        }
        Some(
            self.field(name)?
                .chunks_exact(8)
                .map(|c| u64::from_ne_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
                .collect(),
        )
    }

    pub(crate) fn clear(&mut self) {
        self.len = 0;
        self.keys.clear();
        self.weights.clear();
        self.policy_versions.clear();
        self.groups.clear();
    }

    /// Destination of field `field` in the next (unfilled) row.
    #[inline]
    pub(crate) fn next_row_mut(&mut self, field: usize) -> &mut [u8] {
        let b = self.row_bytes[field];
        &mut self.fields[field][self.len * b..(self.len + 1) * b]
    }

    /// Commits the next row.
    #[inline]
    pub(crate) fn commit_row(
        &mut self,
        key: ItemKey,
        weight: f32,
        policy_version: u64,
        group: u64,
    ) {
        self.keys.push(key);
        self.weights.push(weight);
        self.policy_versions.push(policy_version);
        self.groups.push(group);
        self.len += 1;
    }
}
