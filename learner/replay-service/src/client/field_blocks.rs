//! Reading a reply's per-field blocks (`FieldBlock`: a name and
//! little-endian bytes), shared by every reply type the client hands out
//! (sampled batches, fetched groups, followed batches). Cost: a linear
//! search over the few fields of a layout; the typed readers copy.
use crate::pb::FieldBlock;

/// The bytes of the field called `name`.
pub(crate) fn field<'a>(fields: &'a [FieldBlock], name: &str) -> Option<&'a [u8]> {
    fields.iter().find(|f| f.name == name).map(|f| &f.data[..])
}

/// Little-endian `f32`s (a trailing partial value is ignored).
pub(crate) fn to_f32(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Little-endian `u64`s (a trailing partial value is ignored).
pub(crate) fn to_u64(bytes: &[u8]) -> Vec<u64> {
    bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
        .collect()
}
