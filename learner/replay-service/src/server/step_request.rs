//! One `SubmitStepsRequest` checked against its grouped table's step layout
//! and staged: its rows sorted into one [`Segment`] per trajectory, each
//! holding that trajectory's new steps as contiguous per-field bytes.
//!
//! Everything here needs only the request and the layout, so it runs before
//! the table's lock is taken; what needs the table's state (is the
//! trajectory already complete, is the group full) is checked under the
//! lock by `GroupedTable::submit`. Each failure names the request field at
//! fault (`fields["obs"].shape`, `trajectory_ids[3]`), and a refused
//! request stores nothing. Cost: one copy of the request's bytes into the
//! segments, a hash lookup per row.
use std::collections::HashMap;

use seed_replay::ItemLayout;

use crate::error::RequestError;
use crate::pb::SubmitStepsRequest;
use crate::server::block_check::{BlockCheck, RowKind};

/// The new steps of one trajectory in a request.
#[derive(Debug)]
pub(crate) struct Segment {
    pub(crate) trajectory: u64,
    pub(crate) group: u64,
    /// The request row of its first step (for error messages).
    pub(crate) first_row: usize,
    /// Per layout field, the steps' bytes one after another.
    pub(crate) data: Vec<Vec<u8>>,
    pub(crate) versions: Vec<u64>,
    /// Its last step was marked `is_last`.
    pub(crate) last: bool,
}

impl Segment {
    pub(crate) fn steps(&self) -> usize {
        self.versions.len()
    }
}

/// A checked request: its segments in the order their trajectories first
/// appear.
#[derive(Debug)]
pub(crate) struct StagedSteps {
    pub(crate) rows: usize,
    pub(crate) segments: Vec<Segment>,
}

/// Checks `req` against `layout` (the table name was looked up already)
/// and stages its rows by trajectory.
pub(crate) fn stage(
    table: &str,
    layout: &ItemLayout,
    req: &SubmitStepsRequest,
) -> Result<StagedSteps, RequestError> {
    let rows = req.rows as usize;
    if rows == 0 {
        return Err(RequestError::invalid("rows", "must be at least 1"));
    }
    let per_row = |name: &str, len: usize, optional: bool| {
        if len == rows || (optional && len == 0) {
            Ok(())
        } else {
            Err(RequestError::invalid(
                name,
                format!(
                    "{len} values for {rows} rows{}",
                    if optional {
                        " (give one per row, or none)"
                    } else {
                        ""
                    }
                ),
            ))
        }
    };
    per_row("trajectory_ids", req.trajectory_ids.len(), false)?;
    per_row("group_ids", req.group_ids.len(), false)?;
    per_row("policy_versions", req.policy_versions.len(), true)?;
    per_row("is_last", req.is_last.len(), true)?;
    let blocks = check_blocks(table, layout, req, rows)?;

    let mut segments: Vec<Segment> = Vec::new();
    let mut index: HashMap<u64, usize> = HashMap::new();
    for row in 0..rows {
        let trajectory = req.trajectory_ids[row];
        let group = req.group_ids[row];
        let at = *index.entry(trajectory).or_insert_with(|| {
            segments.push(Segment {
                trajectory,
                group,
                first_row: row,
                data: layout.fields().iter().map(|_| Vec::new()).collect(),
                versions: Vec::new(),
                last: false,
            });
            segments.len() - 1
        });
        let seg = &mut segments[at];
        if seg.group != group {
            return Err(RequestError::invalid(
                format!("group_ids[{row}]"),
                format!(
                    "{group}, but row {} put trajectory {trajectory} in group {}",
                    seg.first_row, seg.group
                ),
            ));
        }
        if seg.last {
            return Err(RequestError::Precondition {
                reason: format!(
                    "field `trajectory_ids[{row}]`: a step of trajectory {trajectory} after \
                     its last step (`is_last` on an earlier row)"
                ),
            });
        }
        for ((out, block), spec) in seg.data.iter_mut().zip(&blocks).zip(layout.fields()) {
            let n = spec.num_bytes();
            out.extend_from_slice(&block[row * n..(row + 1) * n]);
        }
        seg.versions
            .push(req.policy_versions.get(row).copied().unwrap_or(0));
        seg.last = req.is_last.get(row).copied().unwrap_or(false);
    }
    Ok(StagedSteps { rows, segments })
}

/// The request's blocks in layout order, each checked for name, dtype,
/// shape and byte length.
fn check_blocks<'a>(
    table: &str,
    layout: &ItemLayout,
    req: &'a SubmitStepsRequest,
    rows: usize,
) -> Result<Vec<&'a [u8]>, RequestError> {
    let blocks = BlockCheck {
        table,
        layout,
        rows,
        kind: RowKind::Step,
    };
    blocks.names(&req.fields)?;
    layout
        .fields()
        .iter()
        .map(|spec| blocks.block(spec, &req.fields))
        .collect()
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use seed_replay::DType;

    use super::*;
    use crate::pb::{FieldBlock, FieldDtype};

    #[test]
    fn interleaved_rows_are_staged_per_trajectory_in_order() {
        let layout = ItemLayout::builder()
            .field("x", DType::U8, &[2])
            .build()
            .unwrap();
        // Rows: (trajectory, bytes) = (5, 0 1), (6, 2 3), (5, 4 5) last.
        let req = SubmitStepsRequest {
            table: "t".into(),
            rows: 3,
            fields: vec![FieldBlock {
                name: "x".into(),
                dtype: FieldDtype::U8 as i32,
                shape: vec![2],
                data: Bytes::from_static(&[0, 1, 2, 3, 4, 5]),
            }],
            trajectory_ids: vec![5, 6, 5],
            group_ids: vec![1, 1, 1],
            policy_versions: vec![7, 8, 9],
            is_last: vec![false, false, true],
        };
        let staged = stage("t", &layout, &req).unwrap();
        assert_eq!(staged.rows, 3);
        let [a, b] = &staged.segments[..] else {
            panic!("two segments expected");
        };
        assert_eq!((a.trajectory, a.first_row, a.last), (5, 0, true));
        assert_eq!(a.data[0], vec![0, 1, 4, 5]);
        assert_eq!(a.versions, vec![7, 9]);
        assert_eq!((b.trajectory, b.first_row, b.last), (6, 1, false));
        assert_eq!(b.data[0], vec![2, 3]);
    }
}
