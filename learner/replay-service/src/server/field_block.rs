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

/// Every field of `batch` (sampled from a table of `layout`) as blocks, in
/// the layout's order; each field's bytes copied once.
pub(crate) fn batch_blocks(layout: &ItemLayout, batch: &SampleBatch) -> Vec<FieldBlock> {
    layout
        .fields()
        .iter()
        .enumerate()
        .map(|(i, spec)| {
            field_block(
                spec,
                Bytes::copy_from_slice(batch.field_bytes(i).unwrap_or_default()),
            )
        })
        .collect()
}
