//! The wire form of a batch's fields: one [`FieldBlock`] per field of a
//! table's layout (its name, dtype and shape, and the rows' bytes), as
//! every reply that carries items builds it (`Sample` from a table or a
//! sharded table, `Follow`, `FetchGroup`).
//!
//! Why one place: the block's header comes from the layout, never from the
//! data, and four replies once each wrote that mapping out. Cost: the
//! header's few small allocations per field, plus whatever copy the caller
//! makes of the bytes.
use bytes::Bytes;
use seed_replay::{FieldSpec, ItemLayout, SampleBatch};

use crate::pb::FieldBlock;
use crate::server::reply_size::OFFSET_BYTES;
use crate::wire_dtype;

/// The block of the field `spec` holding `data` (its rows, packed).
pub(crate) fn field_block(spec: &FieldSpec, data: Bytes) -> FieldBlock {
    FieldBlock {
        name: spec.name().to_owned(),
        dtype: wire_dtype::to_wire(spec.dtype()) as i32,
        shape: spec.shape().iter().map(|&d| d as u32).collect(),
        data,
        offsets: Vec::new(),
    }
}

/// [`field_block`] of a variable-length field: its rows' values and their
/// `rows + 1` offsets (a fixed-shape field's are empty).
pub(crate) fn field_block_with_offsets(
    spec: &FieldSpec,
    data: Bytes,
    offsets: Vec<u64>,
) -> FieldBlock {
    FieldBlock {
        offsets,
        ..field_block(spec, data)
    }
}

/// Every field of `batch` (sampled from a table of `layout`) as blocks, in
/// the layout's order; each field's bytes copied once (a variable-length
/// field's values and offsets as the batch holds them).
pub(crate) fn batch_blocks(layout: &ItemLayout, batch: &SampleBatch) -> Vec<FieldBlock> {
    layout
        .fields()
        .iter()
        .enumerate()
        .map(|(i, spec)| {
            field_block_with_offsets(
                spec,
                Bytes::copy_from_slice(batch.field_bytes(i).unwrap_or_default()),
                batch
                    .field_offsets(i)
                    .map(<[u64]>::to_vec)
                    .unwrap_or_default(),
            )
        })
        .collect()
}

/// Bytes the fields of `batch` take in a reply (values and offsets),
/// without the per-row keys, weights and versions.
pub(crate) fn batch_field_bytes(layout: &ItemLayout, batch: &SampleBatch) -> usize {
    (0..layout.fields().len())
        .map(|i| {
            batch.field_bytes(i).map_or(0, <[u8]>::len)
                + batch.field_offsets(i).map_or(0, |o| o.len() * OFFSET_BYTES)
        })
        .sum()
}

/// The bytes of the first `rows` rows of `batch`'s fields in a reply: a
/// fixed-shape field's `rows * bytes`, a variable-length one's values up
/// to its offset `rows` and `rows + 1` offsets.
pub(crate) fn prefix_field_bytes(layout: &ItemLayout, batch: &SampleBatch, rows: usize) -> usize {
    layout
        .fields()
        .iter()
        .enumerate()
        .map(|(i, spec)| match batch.field_offsets(i) {
            None => rows * spec.num_bytes(),
            Some(o) => {
                o.get(rows).map_or(0, |&e| e as usize * spec.num_bytes())
                    + (rows + 1) * OFFSET_BYTES
            }
        })
        .sum()
}
