//! [`FieldBlocks`]: reading a received batch's per-field blocks
//! (`FieldBlock`: a name and little-endian bytes, a variable-length
//! field's offsets), the same way for every
//! batch the client hands out ([`SampledBatch`](crate::SampledBatch),
//! [`FetchedGroup`](crate::FetchedGroup),
//! [`FollowedBatch`](crate::client::FollowedBatch)).
//!
//! Why a trait: each of those types only says where its blocks are; the
//! lookups and the typed readers are written once, here. Cost: a linear
//! search over the few fields of a layout; the typed readers copy.
use crate::pb::FieldBlock;

/// A received batch with one `[rows, ...shape]` block per field of the
/// table's layout.
pub trait FieldBlocks {
    /// Every field's block, in the table's layout order.
    fn fields(&self) -> &[FieldBlock];

    /// The bytes of the field called `name` (a variable-length field: its
    /// rows' values one after another, see [`offsets`](Self::offsets)).
    fn field(&self, name: &str) -> Option<&[u8]> {
        self.fields()
            .iter()
            .find(|f| f.name == name)
            .map(|f| &f.data[..])
    }

    /// A variable-length field's offsets (`rows + 1`, from 0, in elements
    /// of its last dimension: row `i` is elements `offsets[i]..offsets[i +
    /// 1]` of [`field`](Self::field)); `None` for a fixed-shape or unknown
    /// field.
    fn offsets(&self, name: &str) -> Option<&[u64]> {
        self.fields()
            .iter()
            .find(|f| f.name == name && !f.offsets.is_empty())
            .map(|f| &f.offsets[..])
    }

    /// The field as `f32`s (copied; a trailing partial value is ignored).
    fn field_f32(&self, name: &str) -> Option<Vec<f32>> {
        let bytes = self.field(name)?;
        Some(
            bytes
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
        )
    }

    /// The field as `u64`s (copied; a trailing partial value is ignored).
    fn field_u64(&self, name: &str) -> Option<Vec<u64>> {
        let bytes = self.field(name)?;
        Some(
            bytes
                .chunks_exact(8)
                .map(|c| u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
                .collect(),
        )
    }
}
