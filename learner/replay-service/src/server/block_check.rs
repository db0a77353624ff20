//! [`BlockCheck`]: the per-field blocks of a write request (`Insert`'s
//! items, `SubmitSteps`' steps) checked against the table's layout.
//!
//! Why its own file: both writes send the same `FieldBlock`s (matched to
//! the layout by name, in any order) and must refuse them alike, each
//! failure naming the request field at fault (`fields[2].name`,
//! `fields["obs"].shape`). The callers keep their own order of checks: an
//! insert checks its policy versions and priorities between the names and
//! the blocks. Cost: a name lookup per block, no copy.
use seed_replay::{FieldSpec, ItemLayout};

use crate::error::RequestError;
use crate::pb::FieldBlock;
use crate::wire_dtype;

/// What one row of the request is, as error messages say it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RowKind {
    /// A row of an `InsertRequest`: one item ("per item", "3 rows of").
    Item,
    /// A row of a `SubmitStepsRequest`: one step ("per step", "3 steps of").
    Step,
}

impl RowKind {
    fn one(self) -> &'static str {
        match self {
            RowKind::Item => "item",
            RowKind::Step => "step",
        }
    }

    fn many(self) -> &'static str {
        match self {
            RowKind::Item => "rows",
            RowKind::Step => "steps",
        }
    }
}

/// The checks of one request's blocks against table `table`'s `layout`,
/// for `rows` rows.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BlockCheck<'a> {
    pub(crate) table: &'a str,
    pub(crate) layout: &'a ItemLayout,
    pub(crate) rows: usize,
    pub(crate) kind: RowKind,
}

impl BlockCheck<'_> {
    /// Every block names a field of the layout, and none is given twice.
    pub(crate) fn names(&self, blocks: &[FieldBlock]) -> Result<(), RequestError> {
        let table = self.table;
        for (i, block) in blocks.iter().enumerate() {
            if self.layout.field(&block.name).is_none() {
                let known: Vec<&str> = self.layout.fields().iter().map(|f| f.name()).collect();
                return Err(RequestError::invalid(
                    format!("fields[{i}].name"),
                    format!(
                        "table `{table}` has no field `{}` (fields: {})",
                        block.name,
                        known.join(", ")
                    ),
                ));
            }
            if blocks[..i].iter().any(|b| b.name == block.name) {
                return Err(RequestError::invalid(
                    format!("fields[\"{}\"]", block.name),
                    "given twice",
                ));
            }
        }
        Ok(())
    }

    /// The bytes of the block for `spec`, which must be given, with the
    /// field's dtype and shape and `rows` rows of bytes.
    pub(crate) fn block<'b>(
        &self,
        spec: &FieldSpec,
        blocks: &'b [FieldBlock],
    ) -> Result<&'b [u8], RequestError> {
        let (table, rows) = (self.table, self.rows);
        let Some(block) = blocks.iter().find(|b| b.name == spec.name()) else {
            return Err(RequestError::invalid(
                format!("fields[\"{}\"]", spec.name()),
                format!("missing: table `{table}` stores it"),
            ));
        };
        let at = |what: &str| format!("fields[\"{}\"].{what}", spec.name());
        if wire_dtype::from_wire(block.dtype) != Some(spec.dtype()) {
            return Err(RequestError::invalid(
                at("dtype"),
                format!(
                    "{}, table `{table}` stores {}",
                    wire_dtype::wire_name(block.dtype),
                    wire_dtype::name(spec.dtype())
                ),
            ));
        }
        if block.shape.len() != spec.shape().len()
            || block
                .shape
                .iter()
                .zip(spec.shape())
                .any(|(&a, &b)| a as usize != b)
        {
            return Err(RequestError::invalid(
                at("shape"),
                format!(
                    "{:?} per {}, table `{table}` stores {:?}",
                    block.shape,
                    self.kind.one(),
                    spec.shape()
                ),
            ));
        }
        if !block.offsets.is_empty() {
            return Err(RequestError::invalid(
                at("offsets"),
                format!(
                    "{} given, but field `{}` of table `{table}` is fixed-shape (offsets are \
                     for variable-length fields)",
                    block.offsets.len(),
                    spec.name()
                ),
            ));
        }
        // Checked: a grouped table's `rows` is not bounded by a capacity.
        if rows.checked_mul(spec.num_bytes()) != Some(block.data.len()) {
            return Err(RequestError::invalid(
                at("data"),
                format!(
                    "{} bytes, {rows} {} of {:?} {} need {}",
                    block.data.len(),
                    self.kind.many(),
                    spec.shape(),
                    wire_dtype::name(spec.dtype()),
                    rows.saturating_mul(spec.num_bytes())
                ),
            ));
        }
        Ok(&block.data[..])
    }

    /// The bytes and offsets of the block for the variable-length field
    /// `spec` (its fixed part: the dimensions before the variable one):
    /// given, of the field's dtype and fixed dimensions, with `rows + 1`
    /// offsets from 0 that never go backwards, no row longer than
    /// `max_len`, and exactly the bytes the last offset counts.
    pub(crate) fn variable_block<'b>(
        &self,
        spec: &FieldSpec,
        max_len: Option<u64>,
        blocks: &'b [FieldBlock],
    ) -> Result<(&'b [u8], &'b [u64]), RequestError> {
        let (table, rows) = (self.table, self.rows);
        let Some(block) = blocks.iter().find(|b| b.name == spec.name()) else {
            return Err(RequestError::invalid(
                format!("fields[\"{}\"]", spec.name()),
                format!("missing: table `{table}` stores it"),
            ));
        };
        let at = |what: &str| format!("fields[\"{}\"].{what}", spec.name());
        if wire_dtype::from_wire(block.dtype) != Some(spec.dtype()) {
            return Err(RequestError::invalid(
                at("dtype"),
                format!(
                    "{}, table `{table}` stores {}",
                    wire_dtype::wire_name(block.dtype),
                    wire_dtype::name(spec.dtype())
                ),
            ));
        }
        if block.shape.len() != spec.shape().len()
            || block
                .shape
                .iter()
                .zip(spec.shape())
                .any(|(&a, &b)| a as usize != b)
        {
            return Err(RequestError::invalid(
                at("shape"),
                format!(
                    "{:?}, table `{table}` stores {:?} then a variable-length dimension (give \
                     the dimensions before it)",
                    block.shape,
                    spec.shape()
                ),
            ));
        }
        let offsets = &block.offsets[..];
        if offsets.len() != rows + 1 {
            return Err(RequestError::invalid(
                at("offsets"),
                format!(
                    "{} offsets for {rows} {}: a variable-length field needs rows + 1, from 0",
                    offsets.len(),
                    self.kind.many()
                ),
            ));
        }
        if offsets[0] != 0 {
            return Err(RequestError::invalid(
                at("offsets[0]"),
                format!("{}, must be 0", offsets[0]),
            ));
        }
        for (row, pair) in offsets.windows(2).enumerate() {
            let (start, end) = (pair[0], pair[1]);
            if end < start {
                return Err(RequestError::invalid(
                    at(&format!("offsets[{}]", row + 1)),
                    format!(
                        "{end} after {start}: offsets go backwards ({} {row})",
                        self.kind.one()
                    ),
                ));
            }
            if let Some(max) = max_len.filter(|&m| end - start > m) {
                return Err(RequestError::invalid(
                    at(&format!("offsets[{}]", row + 1)),
                    format!(
                        "{} {row} holds {} elements, more than the field's max_len {max}",
                        self.kind.one(),
                        end - start
                    ),
                ));
            }
        }
        let total = offsets[rows];
        let expected = usize::try_from(total)
            .ok()
            .and_then(|t| t.checked_mul(spec.num_bytes()));
        if expected != Some(block.data.len()) {
            return Err(RequestError::invalid(
                at("data"),
                format!(
                    "{} bytes, but the offsets end at {total} elements of {:?} {}, which need {}",
                    block.data.len(),
                    spec.shape(),
                    wire_dtype::name(spec.dtype()),
                    expected
                        .map_or_else(|| "more than the address space".into(), |e| e.to_string())
                ),
            ));
        }
        Ok((&block.data[..], offsets))
    }
}
