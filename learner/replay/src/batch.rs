//! [`SampleBatch`]: caller-owned, preallocated, contiguous per-field buffers
//! that samples are gathered into.
//!
//! Why: the prefetch thread reuses one batch per step and uploads each field
//! with a single copy (`[B, ...shape]`, e.g. with candle's
//! `Tensor::from_raw_buffer`), so sampling allocates nothing.
//! A variable-length field is gathered as its rows' heap references first
//! (inside the slot protocol), then [`SampleBatch::resolve_variable`] copies
//! the values they point to into one values buffer with `len + 1` offsets
//! (no padding); those buffers grow to the largest batch seen and are then
//! reused.
//! Cost: `max_rows * item_bytes` bytes, allocated and first-touched once,
//! plus the variable-length values of the largest batch.
use crate::dtype::DType;
use crate::heap::{copy_region, Heap, HeapRef};
use crate::item_key::ItemKey;
use crate::layout::ItemLayout;
use crate::loom::atomic::Ordering;
use crate::slot;
use crate::storage::{FieldGeometry, Slots};

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
    /// Per-row columns, `max_rows` long; the first `len` are filled.
    /// Preallocated rather than pushed: a row commit is then four stores
    /// behind one bounds check, on a path that runs per sampled row.
    keys: Vec<ItemKey>,
    weights: Vec<f32>,
    policy_versions: Vec<u64>,
    groups: Vec<u64>,
    /// Per field, its values and offsets if it is variable-length.
    variable: Vec<Option<VariableColumn>>,
}

/// A variable-length field's rows: values one after another and `len + 1`
/// offsets (in elements of the last dimension) from 0.
#[derive(Debug, Clone)]
struct VariableColumn {
    /// Bytes of one element of the last dimension.
    unit: usize,
    values: Vec<u8>,
    offsets: Vec<u64>,
}

impl VariableColumn {
    fn clear(&mut self) {
        self.values.clear();
        self.offsets.clear();
        self.offsets.push(0);
    }

    /// Keeps the first `rows` rows.
    fn truncate(&mut self, rows: usize) {
        if self.offsets.len() > rows + 1 {
            self.offsets.truncate(rows + 1);
            let end = self.offsets.last().copied().unwrap_or(0) as usize * self.unit;
            self.values.truncate(end);
        }
    }
}

/// What [`SampleBatch::resolve_variable`] does with a row whose values
/// are gone (its heap segment retired: the item was overwritten).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LostRows {
    /// Drop it and keep the rows after it.
    Drop,
    /// Stop there: the batch keeps the rows before it (an in-order read).
    Stop,
}

impl SampleBatch {
    /// Allocates buffers for up to `max_rows` items of `layout`.
    pub fn new(layout: &ItemLayout, max_rows: usize) -> Self {
        SampleBatch {
            layout: layout.clone(),
            max_rows,
            len: 0,
            row_bytes: layout.fields().iter().map(|f| f.row_bytes()).collect(),
            fields: layout
                .fields()
                .iter()
                .map(|f| {
                    let mut v = vec![0u8; max_rows * f.row_bytes()];
                    // `vec![0; n]` may be lazily zeroed pages: write one
                    // byte per page so the first sample does not fault.
                    for b in v.iter_mut().step_by(4096) {
                        *b = std::hint::black_box(0);
                    }
                    v
                })
                .collect(),
            keys: vec![ItemKey(0); max_rows],
            weights: vec![0.0; max_rows],
            policy_versions: vec![0; max_rows],
            groups: vec![0; max_rows],
            variable: layout
                .fields()
                .iter()
                .map(|f| {
                    f.is_variable().then(|| VariableColumn {
                        unit: f.num_bytes(),
                        values: Vec::new(),
                        offsets: vec![0],
                    })
                })
                .collect(),
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
        &self.keys[..self.len]
    }
    /// Importance weights (prioritized: `(p_min / p_i)^beta`, i.e. normalised
    /// by the largest weight in the buffer; otherwise 1), times the
    /// policy-lag down-weight where applied.
    pub fn weights(&self) -> &[f32] {
        &self.weights[..self.len]
    }
    /// Policy version each row was produced by (0 if the layout declares no
    /// policy-version field).
    pub fn policy_versions(&self) -> &[u64] {
        &self.policy_versions[..self.len]
    }
    /// Group id of each row (grouped sampler; otherwise 0).
    pub fn groups(&self) -> &[u64] {
        &self.groups[..self.len]
    }

    /// Bytes of field `index` for the filled rows: `[len, ...shape]`; a
    /// variable-length field's values, its rows one after another (see
    /// [`field_offsets`](Self::field_offsets)).
    pub fn field_bytes(&self, index: usize) -> Option<&[u8]> {
        if let Some(col) = self.variable.get(index)?.as_ref() {
            return Some(&col.values);
        }
        let f = self.layout.fields().get(index)?;
        Some(&self.fields.get(index)?[..self.len * f.num_bytes()])
    }

    /// A variable-length field's `len + 1` offsets, in elements of its last
    /// dimension: row `i` is elements `offsets[i]..offsets[i + 1]` of
    /// [`field_bytes`](Self::field_bytes). `None` for a fixed-shape field.
    pub fn field_offsets(&self, index: usize) -> Option<&[u64]> {
        Some(&self.variable.get(index)?.as_ref()?.offsets)
    }

    /// [`field_offsets`](Self::field_offsets) of the field called `name`.
    pub fn offsets(&self, name: &str) -> Option<&[u64]> {
        let (i, _) = self.layout.field(name)?;
        self.field_offsets(i)
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
        for col in self.variable.iter_mut().flatten() {
            col.clear();
        }
    }

    /// Keeps the first `len` rows (no-op past the end): a group that came
    /// out incomplete (`Grouped::copy`), or a reader that can send only
    /// so many bytes (a follow stream's message).
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
        for col in self.variable.iter_mut().flatten() {
            col.truncate(self.len);
        }
    }

    /// Whether the layout has variable-length fields.
    pub(crate) fn has_variable(&self) -> bool {
        self.variable.iter().any(Option::is_some)
    }

    /// Copies the values the committed rows' heap references point to into
    /// the variable-length fields' buffers (values and offsets, rebuilt
    /// from scratch). A row whose values are gone (its segment retired: the
    /// item was overwritten since its slot was read) is dropped, or ends
    /// the batch, as `lost` says. Returns how many rows were lost (with
    /// `Stop`: 0 or 1). Reads the heap through one segment-table snapshot.
    pub(crate) fn resolve_variable(&mut self, heap: &Heap, lost: LostRows) -> usize {
        if !self.has_variable() {
            return 0;
        }
        for col in self.variable.iter_mut().flatten() {
            col.clear();
        }
        let reader = heap.reader();
        let mut kept = 0;
        let mut dropped = 0;
        for row in 0..self.len {
            let mut found = true;
            for (f, col) in self.variable.iter_mut().enumerate() {
                let Some(col) = col else { continue };
                let rb = self.row_bytes[f];
                let Some(raw) = self.fields[f].get(row * rb..(row + 1) * rb) else {
                    found = false;
                    break;
                };
                let r = HeapRef::from_row_bytes(raw);
                let bytes = r.len as usize * col.unit;
                let Some(words) = reader.region(r, bytes) else {
                    found = false;
                    break;
                };
                let start = col.values.len();
                col.values.resize(start + bytes, 0);
                copy_region(words, &mut col.values[start..]);
                let end = col.offsets.last().copied().unwrap_or(0) + u64::from(r.len);
                col.offsets.push(end);
            }
            if !found {
                for col in self.variable.iter_mut().flatten() {
                    col.truncate(kept);
                }
                dropped += 1;
                if lost == LostRows::Stop {
                    break;
                }
                continue;
            }
            if kept != row {
                self.move_committed_row(row, kept);
            }
            kept += 1;
        }
        self.len = kept;
        dropped
    }

    /// Moves committed row `from` down to row `to` (rows between were
    /// dropped): data, key, weight, policy version and group.
    fn move_committed_row(&mut self, from: usize, to: usize) {
        self.move_row(from, to);
        self.weights.copy_within(from..from + 1, to);
    }

    /// Copies row `slots[j]` of every field into row `len + j` (not yet
    /// committed), field by field: each field's rows are one contiguous run
    /// of the batch, so this is a tight loop per field. The caller
    /// validates each copy (slot protocol) before committing it. Rows past
    /// `max_rows` are not copied (callers never ask for them).
    #[inline]
    pub(crate) fn copy_rows(&mut self, storage: Slots<'_>, slots: &[usize]) {
        let first = self.len;
        for (field, (buf, &bytes)) in self.fields.iter_mut().zip(&self.row_bytes).enumerate() {
            let Some(rows) = buf.get_mut(first * bytes..(first + slots.len()) * bytes) else {
                return;
            };
            copy_field(storage, storage.field(field), rows, slots);
        }
    }

    /// Moves uncommitted row `from` down to row `to`, data and metadata (a
    /// row before it was dropped).
    pub(crate) fn move_row(&mut self, from: usize, to: usize) {
        for (buf, &bytes) in self.fields.iter_mut().zip(&self.row_bytes) {
            buf.copy_within(from * bytes..(from + 1) * bytes, to * bytes);
        }
        self.keys.copy_within(from..from + 1, to);
        self.policy_versions.copy_within(from..from + 1, to);
        self.groups.copy_within(from..from + 1, to);
    }

    /// Fills the metadata of uncommitted rows `len..len + slots.len()`
    /// (capped at `max_rows`) from the sequence words `v1s` begun for
    /// `slots` and the groups flag loaded after them (`slot::metadata`).
    #[inline]
    pub(crate) fn begin_rows(
        &mut self,
        storage: Slots<'_>,
        slots: &[usize],
        v1s: &[u64],
        groups: bool,
    ) {
        let first = self.len;
        let end = (first + slots.len()).min(self.max_rows);
        for (((k, p), g), (&slot, &v1)) in self.keys[first..end]
            .iter_mut()
            .zip(&mut self.policy_versions[first..end])
            .zip(&mut self.groups[first..end])
            .zip(slots.iter().zip(v1s))
        {
            let meta = slot::metadata(storage, slot, v1, groups);
            (*k, *p, *g) = (ItemKey(meta.key), meta.policy_version, meta.group);
        }
    }

    /// Commits the next `rows` rows, whose data and metadata are already in
    /// place (`copy_rows`, `begin_rows`), row `j` with importance weight
    /// `weight(j)` (capped at `max_rows`).
    #[inline]
    pub(crate) fn commit_pending_rows(&mut self, rows: usize, weight: impl Fn(usize) -> f32) {
        let end = (self.len + rows).min(self.max_rows);
        for (j, w) in self.weights[self.len..end].iter_mut().enumerate() {
            *w = weight(j);
        }
        self.len = end;
    }

    /// Policy version written for the next (uncommitted) row.
    #[inline]
    pub(crate) fn pending_policy_version(&self) -> u64 {
        self.policy_versions.get(self.len).copied().unwrap_or(0)
    }

    /// Commits the next row, whose data and metadata are already in place
    /// (`copy_rows`, `begin_rows`), with importance weight `weight`.
    #[inline]
    pub(crate) fn commit_pending(&mut self, weight: f32) {
        if let Some(w) = self.weights.get_mut(self.len) {
            *w = weight;
            self.len += 1;
        }
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
        let i = self.len;
        let (Some(k), Some(w), Some(p), Some(g)) = (
            self.keys.get_mut(i),
            self.weights.get_mut(i),
            self.policy_versions.get_mut(i),
            self.groups.get_mut(i),
        ) else {
            // Samplers never draw more than `max_rows` (checked in
            // `sample_inner`); a row past the end is dropped, not a panic.
            debug_assert!(false, "commit_row past max_rows");
            return;
        };
        (*k, *w, *p, *g) = (key, weight, policy_version, group);
        self.len = i + 1;
    }
}

/// Copies row `slots[j]` of field `g` into the `j`-th `g.bytes`-long row of
/// `rows`. Relaxed loads; the caller validates each copy.
///
/// Rows of 1 to 8 whole words (a 3x4 `f32` is 6) get a copy unrolled for
/// their length: the general loop's per-word length checks and branches
/// were most of a cache-resident sample's copy (`perf annotate`).
#[inline(always)]
fn copy_field(storage: Slots<'_>, g: FieldGeometry, rows: &mut [u8], slots: &[usize]) {
    macro_rules! unrolled {
        ($($words:literal)*) => {
            $(if g.bytes == 8 * $words {
                return copy_words::<$words>(storage, g, rows, slots);
            })*
        };
    }
    unrolled!(1 2 3 4 5 6 7 8);
    // Scalars (a `bool`, a `u8`, an `f32`): part of one word, copied with a
    // length the compiler knows instead of a `memmove` call per row.
    macro_rules! partial {
        ($($bytes:literal)*) => {
            $(if g.bytes == $bytes {
                return copy_bytes::<$bytes>(storage, g, rows, slots);
            })*
        };
    }
    partial!(1 2 4);
    for (dst, &slot) in rows.chunks_exact_mut(g.bytes).zip(slots) {
        slot::copy_out(storage.row_at(g, slot), dst);
    }
}

/// [`copy_field`] for rows of `B < 8` bytes: the first `B` bytes of the
/// row's one word, as `slot::copy_out` takes them.
#[inline(always)]
fn copy_bytes<const B: usize>(
    storage: Slots<'_>,
    g: FieldGeometry,
    rows: &mut [u8],
    slots: &[usize],
) {
    for (dst, &slot) in rows.chunks_exact_mut(B).zip(slots) {
        let Some([word]) = storage.row_words::<1>(g, slot) else {
            continue;
        };
        dst.copy_from_slice(&word.load(Ordering::Relaxed).to_ne_bytes()[..B]);
    }
}

/// [`copy_field`] for rows of exactly `W` words (`g.bytes == 8 * W`).
#[inline(always)]
fn copy_words<const W: usize>(
    storage: Slots<'_>,
    g: FieldGeometry,
    rows: &mut [u8],
    slots: &[usize],
) {
    for (dst, &slot) in rows.chunks_exact_mut(8 * W).zip(slots) {
        let Some(src) = storage.row_words::<W>(g, slot) else {
            continue;
        };
        for (d, w) in dst.chunks_exact_mut(8).zip(src) {
            d.copy_from_slice(&w.load(Ordering::Relaxed).to_ne_bytes());
        }
    }
}
