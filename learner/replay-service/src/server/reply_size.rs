//! How many bytes a reply of items takes, and the refusal of a sampled
//! batch that would not fit the server's message limit.
//!
//! Why its own file: a fixed-shape table's reply size is known from the
//! batch size alone and is checked when a stream is planned
//! (`sample_stream::plan`, `follow_stream::plan`), but a row of a
//! variable-length field without `max_len` can hold any number of
//! elements, so such a batch is measured again as it is sampled, by
//! every source that builds a reply (`SampleSource::reply` of a table and
//! of a sharded table). Cost: a sum over the fields, no copy.
use seed_replay::ItemLayout;

use crate::error::RequestError;

/// Bytes of one item of `layout` at most: a variable-length field counts
/// `max_len` elements (one when it has none) and its offset.
pub(crate) fn max_item_bytes(layout: &ItemLayout) -> usize {
    layout
        .fields()
        .iter()
        .map(|f| match f.variable() {
            None => f.num_bytes(),
            Some(v) => usize::try_from(v.max_len.unwrap_or(1))
                .unwrap_or(usize::MAX)
                .saturating_mul(f.num_bytes())
                .saturating_add(OFFSET_BYTES),
        })
        .fold(0usize, usize::saturating_add)
}

/// Bytes of one offset on the wire at most (a varint of a `u64`).
pub(crate) const OFFSET_BYTES: usize = 10;

/// Bytes of a reply of `rows` rows whose fields take `field_bytes`: keys,
/// weights and versions take at most 10 + 5 + 10 bytes per row, plus the
/// field headers; 64 bytes per row and 4 KiB cover them.
pub(crate) fn reply_bytes(rows: usize, field_bytes: usize) -> usize {
    rows.saturating_mul(64)
        .saturating_add(field_bytes)
        .saturating_add(4096)
}

/// The refusal of a sampled batch whose variable-length rows make a reply
/// over the message limit (the plan could not know: a field without
/// `max_len`).
pub(crate) fn too_big(rows: usize, bytes: usize, max_message_bytes: usize) -> RequestError {
    RequestError::Exhausted {
        field: "batch_size".into(),
        reason: format!(
            "{rows} items hold {bytes} bytes of values, over the server's {max_message_bytes}-byte \
             message limit (--max-message-bytes): sample fewer, or give the variable-length \
             fields a `max_len` so that batch_size is checked up front"
        ),
    }
}
