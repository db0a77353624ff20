//! One `InsertRequest` checked against its table and stored.
//!
//! Every check happens before anything is stored, and each failure names the
//! request field at fault (`fields["obs"].shape`, `priorities`), so a bad
//! batch stores nothing and the client learns exactly what to fix. Blocks
//! are matched to the layout by name (any order); the bytes go to the
//! buffer as they arrived (`Values::Raw`), with no per-element decoding.
//! A variable-length field's block carries its `offsets` (checked here,
//! naming the row, as a grouped table's steps are).
//! Cost: a name lookup per field, one copy of the bytes into the slots (or
//! the heap).
use std::time::Duration;

use seed_replay::{FieldRef, ItemKey, ItemLayout, ReplayError, Values};

use crate::error::RequestError;
use crate::pb::{InsertReply, InsertRequest};
use crate::server::block_check::{BlockCheck, RowKind};
use crate::server::table::Table;

/// The blocks of a checked request in layout order, with their shapes
/// (`[rows, ...shape]`) and a variable-length field's offsets, borrowing
/// the request's bytes.
pub(crate) struct CheckedFields<'a> {
    pub(crate) shapes: Vec<Vec<usize>>,
    pub(crate) data: Vec<&'a [u8]>,
    pub(crate) offsets: Vec<Option<&'a [u64]>>,
}

impl CheckedFields<'_> {
    /// The fields as the buffer takes them, in `layout`'s order.
    pub(crate) fn refs(&self, layout: &ItemLayout) -> Vec<FieldRef<'_>> {
        layout
            .fields()
            .iter()
            .zip(self.shapes.iter().zip(&self.data))
            .zip(&self.offsets)
            .map(|((spec, (shape, bytes)), &offsets)| FieldRef {
                shape,
                values: Values::Raw {
                    dtype: spec.dtype(),
                    bytes,
                },
                offsets,
            })
            .collect()
    }
}

/// Checks `req` against `table` (everything but the table name, which the
/// stream checked) and returns its fields in layout order.
fn check<'a>(
    table: &Table,
    req: &'a InsertRequest,
    policy_bytes: &'a [u8],
) -> Result<CheckedFields<'a>, RequestError> {
    let layout = table.buffer.layout();
    let rows = req.rows as usize;
    if rows == 0 {
        return Err(RequestError::invalid("rows", "must be at least 1"));
    }
    if rows > table.buffer.capacity() {
        return Err(RequestError::invalid(
            "rows",
            format!(
                "{rows} rows exceed the capacity of table `{}` ({})",
                table.name,
                table.buffer.capacity()
            ),
        ));
    }
    let blocks = BlockCheck {
        table: &table.name,
        layout,
        rows,
        kind: RowKind::Item,
    };
    blocks.names(&req.fields)?;
    let pv_field = layout.policy_version_field();
    if !req.policy_versions.is_empty() {
        let Some(pv) = pv_field else {
            return Err(RequestError::invalid(
                "policy_versions",
                format!("table `{}` has no policy-version field", table.name),
            ));
        };
        if req.policy_versions.len() != rows {
            return Err(RequestError::invalid(
                "policy_versions",
                format!("{} values for {rows} rows", req.policy_versions.len()),
            ));
        }
        let name = layout.fields()[pv].name();
        if req.fields.iter().any(|b| b.name == name) {
            return Err(RequestError::invalid(
                "policy_versions",
                format!("given together with field `{name}`, which holds the same values"),
            ));
        }
    }
    if !req.priorities.is_empty() {
        if !matches!(
            table.buffer.config().sampler,
            seed_replay::SamplerConfig::Prioritized(_)
        ) {
            return Err(RequestError::invalid(
                "priorities",
                format!("table `{}` is not prioritized", table.name),
            ));
        }
        if req.priorities.len() != rows {
            return Err(RequestError::invalid(
                "priorities",
                format!("{} values for {rows} rows", req.priorities.len()),
            ));
        }
    }
    let mut checked = CheckedFields {
        shapes: Vec::with_capacity(layout.fields().len()),
        data: Vec::with_capacity(layout.fields().len()),
        offsets: Vec::with_capacity(layout.fields().len()),
    };
    for (index, spec) in layout.fields().iter().enumerate() {
        let mut shape = Vec::with_capacity(spec.shape().len() + 1);
        shape.push(rows);
        shape.extend_from_slice(spec.shape());
        checked.shapes.push(shape);
        if Some(index) == pv_field && !req.policy_versions.is_empty() {
            checked.data.push(policy_bytes);
            checked.offsets.push(None);
            continue;
        }
        match spec.variable() {
            None => {
                checked.data.push(blocks.block(spec, &req.fields)?);
                checked.offsets.push(None);
            }
            Some(v) => {
                let (data, offsets) = blocks.variable_block(spec, v.max_len, &req.fields)?;
                checked.data.push(data);
                checked.offsets.push(Some(offsets));
            }
        }
    }
    Ok(checked)
}

/// Checks and stores `req` in `table`, waiting up to `wait` for room when
/// the writer policy or the rate limiter asks it to (`Duration::ZERO`: do
/// not wait; the caller retries off the async workers).
pub(crate) fn insert(
    table: &Table,
    req: &InsertRequest,
    wait: Duration,
) -> Result<InsertReply, RequestError> {
    let policy_bytes: Vec<u8> = req
        .policy_versions
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let checked = check(table, req, &policy_bytes)?;
    let refs = checked.refs(table.buffer.layout());
    let rows = req.rows as usize;
    let keys = table
        .buffer
        .insert_batch_timeout(&refs, rows, wait)
        .map_err(|source| RequestError::Replay {
            table: table.name.clone(),
            source,
        })?;
    if !req.priorities.is_empty() {
        let keys: Vec<ItemKey> = keys.iter().collect();
        table
            .buffer
            .update_priorities(&keys, &req.priorities)
            .map_err(|source| RequestError::Replay {
                table: table.name.clone(),
                source,
            })?;
    }
    Ok(InsertReply {
        first_key: keys.first.0,
        count: keys.count as u32,
    })
}

/// Whether a refusal only means "not now" (room or the rate limiter): the
/// insert may be retried with a wait.
pub(crate) fn must_wait(e: &RequestError) -> bool {
    matches!(
        e,
        RequestError::Replay {
            source: ReplayError::WouldBlock { .. } | ReplayError::Timeout { .. },
            ..
        }
    )
}
