//! One `SubmitStepsRequest` checked against its grouped table's step layout
//! and staged: its rows sorted into one [`Segment`] per trajectory, each
//! holding that trajectory's new steps as contiguous per-field bytes (a
//! variable-length field's values without padding, and each step's length)
//! and their metadata.
//!
//! Everything here needs only the request, the layout and the table's kind
//! of ids, so it runs before the table's lock is taken; what needs the
//! table's state (is the trajectory already complete, is the group full) is
//! checked under the lock by `GroupedTable::submit`. Each failure names the
//! request field at fault (`fields["obs"].shape`, `trajectory_ids[3]`,
//! `fields["tokens"].offsets[4]`), and a refused request stores nothing.
//! Cost: one copy of the request's bytes into the segments, a hash lookup
//! per row.
use std::collections::HashMap;
use std::sync::Arc;

use crate::config::grouped_table_spec::IdKind;
use crate::config::step_layout::StepLayout;
use crate::error::RequestError;
use crate::pb::SubmitStepsRequest;
use crate::server::block_check::{BlockCheck, RowKind};
use crate::server::pool_id::PoolId;

/// The most bytes of metadata one step may carry.
pub const MAX_METADATA_BYTES: usize = 1 << 16;

/// Bytes a fetch reply spends on a step besides its values: its policy
/// version (a varint, 10 at most), per variable-length field an offset,
/// and its metadata's length and tag.
const REPLY_BYTES_PER_STEP: usize = 10;
const REPLY_BYTES_PER_OFFSET: usize = 10;
const REPLY_BYTES_PER_METADATA: usize = 6;

/// The new steps of one trajectory in a request.
#[derive(Debug)]
pub(crate) struct Segment {
    pub(crate) trajectory: PoolId,
    pub(crate) group: PoolId,
    /// The request row of its first step (for error messages).
    pub(crate) first_row: usize,
    /// Per layout field, the steps' bytes one after another.
    pub(crate) data: Vec<Vec<u8>>,
    /// Per layout field, each step's length in elements of the variable
    /// last dimension (empty for fixed-shape fields).
    pub(crate) lens: Vec<Vec<u64>>,
    pub(crate) versions: Vec<u64>,
    /// The steps' metadata one after another, and each step's length.
    pub(crate) metadata: Vec<u8>,
    pub(crate) metadata_lens: Vec<u32>,
    /// Its last step was marked `is_last`.
    pub(crate) last: bool,
}

impl Segment {
    pub(crate) fn steps(&self) -> usize {
        self.versions.len()
    }

    /// What these steps add to their group's fetch reply, in bytes.
    pub(crate) fn reply_bytes(&self) -> usize {
        let per_step = REPLY_BYTES_PER_STEP
            + REPLY_BYTES_PER_OFFSET * self.lens.iter().filter(|l| !l.is_empty()).count()
            + if self.metadata_lens.iter().any(|&l| l > 0) {
                REPLY_BYTES_PER_METADATA
            } else {
                0
            };
        self.data.iter().map(Vec::len).sum::<usize>()
            + self.metadata.len()
            + self.steps() * per_step
    }
}

/// A checked request: its segments in the order their trajectories first
/// appear.
#[derive(Debug)]
pub(crate) struct StagedSteps {
    pub(crate) rows: usize,
    pub(crate) segments: Vec<Segment>,
}

/// One field's block, checked.
enum Block<'a> {
    Fixed(&'a [u8], usize),
    Variable {
        data: &'a [u8],
        offsets: &'a [u64],
        unit: usize,
    },
}

/// Checks `req` against `layout` and the table's kind of ids (the table
/// name was looked up already) and stages its rows by trajectory.
pub(crate) fn stage(
    table: &str,
    layout: &StepLayout,
    ids: IdKind,
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
    let row_ids = RowIds::check(table, ids, req, rows)?;
    per_row("policy_versions", req.policy_versions.len(), true)?;
    per_row("is_last", req.is_last.len(), true)?;
    per_row("metadata", req.metadata.len(), true)?;
    if let Some((row, m)) = req
        .metadata
        .iter()
        .enumerate()
        .find(|(_, m)| m.len() > MAX_METADATA_BYTES)
    {
        return Err(RequestError::invalid(
            format!("metadata[{row}]"),
            format!(
                "{} bytes; a step's metadata may hold {MAX_METADATA_BYTES} (put large \
                 data in a field)",
                m.len()
            ),
        ));
    }
    let blocks = check_blocks(table, layout, req, rows)?;

    let mut segments: Vec<Segment> = Vec::new();
    let mut index: HashMap<RowKey<'_>, usize> = HashMap::new();
    for row in 0..rows {
        let key = row_ids.trajectory(row);
        let at = match index.get(&key) {
            Some(&at) => at,
            None => {
                segments.push(Segment {
                    trajectory: row_ids.trajectory_id(row),
                    group: row_ids.group_id(row),
                    first_row: row,
                    data: blocks.iter().map(|_| Vec::new()).collect(),
                    lens: blocks.iter().map(|_| Vec::new()).collect(),
                    versions: Vec::new(),
                    metadata: Vec::new(),
                    metadata_lens: Vec::new(),
                    last: false,
                });
                index.insert(key, segments.len() - 1);
                segments.len() - 1
            }
        };
        let seg = &mut segments[at];
        if !row_ids.same_group(row, &seg.group) {
            let (field, group) = row_ids.group_field(row);
            return Err(RequestError::invalid(
                field,
                format!(
                    "{group}, but row {} put trajectory {} in group {}",
                    seg.first_row, seg.trajectory, seg.group
                ),
            ));
        }
        if seg.last {
            return Err(RequestError::Precondition {
                reason: format!(
                    "field `{}[{row}]`: a step of trajectory {} after its last step \
                     (`is_last` on an earlier row)",
                    row_ids.trajectory_field(),
                    seg.trajectory
                ),
            });
        }
        for (f, block) in blocks.iter().enumerate() {
            match *block {
                Block::Fixed(bytes, n) => {
                    seg.data[f].extend_from_slice(&bytes[row * n..(row + 1) * n])
                }
                Block::Variable {
                    data,
                    offsets,
                    unit,
                } => {
                    // In range: `variable_block` checked the offsets
                    // against the data's length.
                    let (start, end) = (offsets[row] as usize, offsets[row + 1] as usize);
                    seg.data[f].extend_from_slice(&data[start * unit..end * unit]);
                    seg.lens[f].push((end - start) as u64);
                }
            }
        }
        seg.versions
            .push(req.policy_versions.get(row).copied().unwrap_or(0));
        let meta = req.metadata.get(row).map_or(&[][..], |m| &m[..]);
        seg.metadata.extend_from_slice(meta);
        // At most `MAX_METADATA_BYTES` (checked above).
        seg.metadata_lens.push(meta.len() as u32);
        seg.last = req.is_last.get(row).copied().unwrap_or(false);
    }
    Ok(StagedSteps { rows, segments })
}

/// A row's trajectory, as the request holds it (no allocation per row).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum RowKey<'a> {
    Num(u64),
    Uid(&'a str),
}

/// The request's per-row ids, of the table's kind.
enum RowIds<'a> {
    Num {
        trajectories: &'a [u64],
        groups: &'a [u64],
    },
    Uid {
        trajectories: &'a [String],
        groups: &'a [String],
    },
}

impl<'a> RowIds<'a> {
    /// The ids of the table's kind, one per row, and none of the other.
    fn check(
        table: &str,
        ids: IdKind,
        req: &'a SubmitStepsRequest,
        rows: usize,
    ) -> Result<Self, RequestError> {
        let (given, other, other_names) = match ids {
            IdKind::U64 => (
                ["trajectory_ids", "group_ids"],
                [req.trajectory_uids.len(), req.group_uids.len()],
                ["trajectory_uids", "group_uids"],
            ),
            IdKind::Str => (
                ["trajectory_uids", "group_uids"],
                [req.trajectory_ids.len(), req.group_ids.len()],
                ["trajectory_ids", "group_ids"],
            ),
        };
        for (name, len) in other_names.iter().zip(other) {
            if len > 0 {
                return Err(RequestError::invalid(
                    *name,
                    format!(
                        "{len} given, but table `{table}` has {} ids (`sampler.ids`): give {} \
                         and {}",
                        ids.name(),
                        given[0],
                        given[1]
                    ),
                ));
            }
        }
        let lens = match ids {
            IdKind::U64 => [req.trajectory_ids.len(), req.group_ids.len()],
            IdKind::Str => [req.trajectory_uids.len(), req.group_uids.len()],
        };
        for (name, len) in given.iter().zip(lens) {
            if len != rows {
                return Err(RequestError::invalid(
                    *name,
                    format!("{len} values for {rows} rows"),
                ));
            }
        }
        Ok(match ids {
            IdKind::U64 => RowIds::Num {
                trajectories: &req.trajectory_ids,
                groups: &req.group_ids,
            },
            IdKind::Str => {
                for (name, values) in given.iter().zip([&req.trajectory_uids, &req.group_uids]) {
                    if let Some(row) = values.iter().position(String::is_empty) {
                        return Err(RequestError::invalid(
                            format!("{name}[{row}]"),
                            "empty: a string id must have at least one character",
                        ));
                    }
                }
                RowIds::Uid {
                    trajectories: &req.trajectory_uids,
                    groups: &req.group_uids,
                }
            }
        })
    }

    fn trajectory(&self, row: usize) -> RowKey<'a> {
        match self {
            RowIds::Num { trajectories, .. } => RowKey::Num(trajectories[row]),
            RowIds::Uid { trajectories, .. } => RowKey::Uid(&trajectories[row]),
        }
    }

    fn trajectory_id(&self, row: usize) -> PoolId {
        match self {
            RowIds::Num { trajectories, .. } => PoolId::Num(trajectories[row]),
            RowIds::Uid { trajectories, .. } => PoolId::Uid(Arc::from(trajectories[row].as_str())),
        }
    }

    fn group_id(&self, row: usize) -> PoolId {
        match self {
            RowIds::Num { groups, .. } => PoolId::Num(groups[row]),
            RowIds::Uid { groups, .. } => PoolId::Uid(Arc::from(groups[row].as_str())),
        }
    }

    fn same_group(&self, row: usize, group: &PoolId) -> bool {
        match (self, group) {
            (RowIds::Num { groups, .. }, PoolId::Num(g)) => groups[row] == *g,
            (RowIds::Uid { groups, .. }, PoolId::Uid(g)) => groups[row] == **g,
            _ => false,
        }
    }

    /// The request field naming row `row`'s group, and that id.
    fn group_field(&self, row: usize) -> (String, String) {
        match self {
            RowIds::Num { groups, .. } => (format!("group_ids[{row}]"), groups[row].to_string()),
            RowIds::Uid { groups, .. } => {
                (format!("group_uids[{row}]"), format!("{:?}", groups[row]))
            }
        }
    }

    fn trajectory_field(&self) -> &'static str {
        match self {
            RowIds::Num { .. } => "trajectory_ids",
            RowIds::Uid { .. } => "trajectory_uids",
        }
    }
}

/// The request's blocks in layout order, each checked for name, dtype,
/// shape and byte length (and a variable field's offsets).
fn check_blocks<'a>(
    table: &str,
    layout: &StepLayout,
    req: &'a SubmitStepsRequest,
    rows: usize,
) -> Result<Vec<Block<'a>>, RequestError> {
    let blocks = BlockCheck {
        table,
        layout: layout.units(),
        rows,
        kind: RowKind::Step,
    };
    blocks.names(&req.fields)?;
    layout
        .fields()
        .map(|(spec, variable)| match variable {
            None => Ok(Block::Fixed(
                blocks.block(spec, &req.fields)?,
                spec.num_bytes(),
            )),
            Some(v) => {
                let (data, offsets) = blocks.variable_block(spec, v.max_len, &req.fields)?;
                Ok(Block::Variable {
                    data,
                    offsets,
                    unit: spec.num_bytes(),
                })
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use seed_replay::{DType, ItemLayout};

    use super::*;
    use crate::pb::{FieldBlock, FieldDtype};

    #[test]
    fn interleaved_rows_are_staged_per_trajectory_in_order() {
        let layout = StepLayout::fixed(
            ItemLayout::builder()
                .field("x", DType::U8, &[2])
                .build()
                .unwrap(),
        );
        // Rows: (trajectory, bytes) = (5, 0 1), (6, 2 3), (5, 4 5) last.
        let req = SubmitStepsRequest {
            table: "t".into(),
            rows: 3,
            fields: vec![FieldBlock {
                name: "x".into(),
                dtype: FieldDtype::U8 as i32,
                shape: vec![2],
                data: Bytes::from_static(&[0, 1, 2, 3, 4, 5]),
                offsets: vec![],
            }],
            trajectory_ids: vec![5, 6, 5],
            group_ids: vec![1, 1, 1],
            policy_versions: vec![7, 8, 9],
            is_last: vec![false, false, true],
            ..SubmitStepsRequest::default()
        };
        let staged = stage("t", &layout, IdKind::U64, &req).unwrap();
        assert_eq!(staged.rows, 3);
        let [a, b] = &staged.segments[..] else {
            panic!("two segments expected");
        };
        assert_eq!(
            (&a.trajectory, a.first_row, a.last),
            (&PoolId::Num(5), 0, true)
        );
        assert_eq!(a.data[0], vec![0, 1, 4, 5]);
        assert_eq!(a.versions, vec![7, 9]);
        assert_eq!(
            (&b.trajectory, b.first_row, b.last),
            (&PoolId::Num(6), 1, false)
        );
        assert_eq!(b.data[0], vec![2, 3]);
    }
}
