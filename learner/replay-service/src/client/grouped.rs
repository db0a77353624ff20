//! The client side of grouped tables: [`StepBatch`] (steps of one or more
//! trajectories for `SubmitSteps`), [`FetchedGroup`] (one whole group from
//! `FetchGroup`), and the [`ReplayClient`] calls `submit_steps`,
//! `complete_trajectory` and `fetch_group`.
//!
//! A step batch is like an [`InsertBatch`]: one contiguous little-endian
//! block per field (`[rows, ...shape]`; a variable-length field's values
//! with `rows + 1` offsets, [`StepBatch::variable`]), plus per row its
//! trajectory and group ids (numbers, or strings for a table with `str`
//! ids: [`StepBatch::with_uids`]), policy version, metadata and whether it
//! is the trajectory's last step. A fetched group holds one block per
//! field with its trajectories' steps one after another;
//! [`FetchedGroup::trajectory_steps`] gives each trajectory's range and
//! [`FetchedGroup::offsets`] a variable field's. Cost: one copy of the
//! values into the batch; the group's typed readers copy, the raw blocks
//! do not.
use std::ops::Range;
use std::time::Duration;

use bytes::Bytes;
use seed_replay::DType;

use crate::client::field_blocks::FieldBlocks;
use crate::client::insert_batch::InsertBatch;
use crate::client::replay_client::ReplayClient;
use crate::error::ClientError;
use crate::pb::{self, FetchGroupReply, FieldBlock};

/// Steps for [`ReplayClient::submit_steps`]: `rows` steps, each of
/// trajectory `trajectory_ids[i]` in group `group_ids[i]`.
#[derive(Debug, Clone)]
pub struct StepBatch {
    fields: InsertBatch,
    trajectory_ids: Vec<u64>,
    group_ids: Vec<u64>,
    trajectory_uids: Vec<String>,
    group_uids: Vec<String>,
    policy_versions: Vec<u64>,
    is_last: Vec<bool>,
    metadata: Vec<Bytes>,
}

macro_rules! typed_adder {
    ($fn:ident, $t:ty) => {
        #[doc = concat!("Adds a `", stringify!($t), "` field (`[rows, ...shape]`); `shape` is one step's.")]
        pub fn $fn(mut self, name: &str, shape: &[usize], values: &[$t]) -> Result<Self, ClientError> {
            self.fields = self.fields.$fn(name, shape, values)?;
            Ok(self)
        }
    };
}

impl StepBatch {
    /// Steps whose trajectories and groups are given row by row (the two
    /// vectors are as long as the batch).
    pub fn new(trajectory_ids: Vec<u64>, group_ids: Vec<u64>) -> Result<Self, ClientError> {
        if trajectory_ids.len() != group_ids.len() {
            return Err(ClientError::Batch {
                field: "group_ids".into(),
                reason: format!(
                    "{} values for {} trajectory ids",
                    group_ids.len(),
                    trajectory_ids.len()
                ),
            });
        }
        let rows = u32::try_from(trajectory_ids.len()).map_err(|_| ClientError::Batch {
            field: "trajectory_ids".into(),
            reason: "more than u32::MAX steps".into(),
        })?;
        Ok(StepBatch {
            trajectory_ids,
            group_ids,
            ..StepBatch::empty(rows)
        })
    }

    /// Steps of a table with `str` ids (`sampler.ids`), given row by row.
    pub fn with_uids(
        trajectory_uids: Vec<String>,
        group_uids: Vec<String>,
    ) -> Result<Self, ClientError> {
        if trajectory_uids.len() != group_uids.len() {
            return Err(ClientError::Batch {
                field: "group_uids".into(),
                reason: format!(
                    "{} values for {} trajectory uids",
                    group_uids.len(),
                    trajectory_uids.len()
                ),
            });
        }
        let rows = u32::try_from(trajectory_uids.len()).map_err(|_| ClientError::Batch {
            field: "trajectory_uids".into(),
            reason: "more than u32::MAX steps".into(),
        })?;
        Ok(StepBatch {
            trajectory_uids,
            group_uids,
            ..StepBatch::empty(rows)
        })
    }

    fn empty(rows: u32) -> Self {
        StepBatch {
            fields: InsertBatch::new(rows),
            trajectory_ids: Vec::new(),
            group_ids: Vec::new(),
            trajectory_uids: Vec::new(),
            group_uids: Vec::new(),
            policy_versions: Vec::new(),
            is_last: Vec::new(),
            metadata: Vec::new(),
        }
    }

    /// `steps` consecutive steps of one trajectory.
    pub fn trajectory(trajectory: u64, group: u64, steps: u32) -> Self {
        StepBatch {
            trajectory_ids: vec![trajectory; steps as usize],
            group_ids: vec![group; steps as usize],
            ..StepBatch::empty(steps)
        }
    }

    pub fn rows(&self) -> u32 {
        self.fields.rows()
    }

    typed_adder!(f32, f32);
    typed_adder!(f64, f64);
    typed_adder!(i32, i32);
    typed_adder!(u32, u32);
    typed_adder!(i64, i64);
    typed_adder!(u64, u64);
    typed_adder!(u8, u8);

    /// Adds a field from little-endian bytes of `dtype`.
    pub fn raw(
        mut self,
        name: &str,
        dtype: DType,
        shape: &[usize],
        data: Bytes,
    ) -> Result<Self, ClientError> {
        self.fields = self.fields.raw(name, dtype, shape, data)?;
        Ok(self)
    }

    /// Adds a variable-length field from little-endian bytes of `dtype`:
    /// `shape` is the dimensions before the variable last one (`&[]` for
    /// a list), `offsets` has `rows + 1` entries from 0 (step `i` holds
    /// `offsets[i + 1] - offsets[i]` elements of the last dimension), and
    /// `data` the steps one after another.
    pub fn variable(
        mut self,
        name: &str,
        dtype: DType,
        shape: &[usize],
        data: Bytes,
        offsets: Vec<u64>,
    ) -> Result<Self, ClientError> {
        self.fields = self.fields.variable(name, dtype, shape, data, offsets)?;
        Ok(self)
    }

    /// Per step, opaque metadata bytes (JSON, say; at most 65,536 each),
    /// handed back with the step.
    pub fn metadata(mut self, metadata: Vec<Bytes>) -> Result<Self, ClientError> {
        self.check_rows("metadata", metadata.len())?;
        self.metadata = metadata;
        Ok(self)
    }

    /// One policy version per step (default: all 0).
    pub fn policy_versions(mut self, versions: Vec<u64>) -> Result<Self, ClientError> {
        self.check_rows("policy_versions", versions.len())?;
        self.policy_versions = versions;
        Ok(self)
    }

    /// Per step, whether it is its trajectory's last (default: none).
    pub fn is_last(mut self, is_last: Vec<bool>) -> Result<Self, ClientError> {
        self.check_rows("is_last", is_last.len())?;
        self.is_last = is_last;
        Ok(self)
    }

    /// Marks the batch's final step as its trajectory's last (for a batch
    /// of one trajectory: the trajectory ends with it).
    pub fn ending(mut self) -> Self {
        let rows = self.rows() as usize;
        if rows > 0 {
            self.is_last.resize(rows, false);
            self.is_last[rows - 1] = true;
        }
        self
    }

    fn check_rows(&self, field: &str, len: usize) -> Result<(), ClientError> {
        if len != self.rows() as usize {
            return Err(ClientError::Batch {
                field: field.into(),
                reason: format!("{len} values for {} steps", self.rows()),
            });
        }
        Ok(())
    }

    /// The request that submits these steps to `table` (also what an
    /// in-process grouped table takes: `server::in_process::submit_steps`).
    pub fn into_request(self, table: &str) -> pb::SubmitStepsRequest {
        let blocks = self.fields.into_request(table);
        pb::SubmitStepsRequest {
            table: blocks.table,
            rows: blocks.rows,
            fields: blocks.fields,
            trajectory_ids: self.trajectory_ids,
            group_ids: self.group_ids,
            policy_versions: self.policy_versions,
            is_last: self.is_last,
            trajectory_uids: self.trajectory_uids,
            group_uids: self.group_uids,
            metadata: self.metadata,
        }
    }
}

/// What a `submit_steps` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubmitReport {
    /// Groups these steps made complete.
    pub groups_completed: u32,
    /// Ready groups dropped for room.
    pub groups_dropped_over_capacity: u32,
    /// Ready groups dropped because `max_queue_size` were waiting.
    pub groups_dropped_queue_full: u32,
}

/// One whole group: its trajectories in the order first seen, and per field
/// one block of all their steps (`[steps, ...shape]`).
#[derive(Debug, Clone)]
pub struct FetchedGroup {
    reply: FetchGroupReply,
    /// Where each trajectory's steps start; one more entry at the end.
    starts: Vec<usize>,
}

impl FetchedGroup {
    fn new(reply: FetchGroupReply) -> Result<Self, ClientError> {
        let trajectories = reply.trajectory_ids.len().max(reply.trajectory_uids.len());
        if reply.lengths.len() != trajectories
            || (!reply.trajectory_ids.is_empty() && !reply.trajectory_uids.is_empty())
        {
            return Err(ClientError::Protocol {
                reason: format!(
                    "{} lengths for {} trajectory ids and {} uids",
                    reply.lengths.len(),
                    reply.trajectory_ids.len(),
                    reply.trajectory_uids.len()
                ),
            });
        }
        let mut starts = Vec::with_capacity(reply.lengths.len() + 1);
        let mut at = 0usize;
        starts.push(0);
        for &l in &reply.lengths {
            at += l as usize;
            starts.push(at);
        }
        if reply.policy_versions.len() != at
            || !(reply.metadata.is_empty() || reply.metadata.len() == at)
        {
            return Err(ClientError::Protocol {
                reason: format!(
                    "{} policy versions and {} metadata for {at} steps",
                    reply.policy_versions.len(),
                    reply.metadata.len()
                ),
            });
        }
        for b in &reply.fields {
            let ends = b.offsets.last().copied();
            if !b.offsets.is_empty()
                && (b.offsets.len() != at + 1
                    || b.offsets.windows(2).any(|w| w[1] < w[0])
                    || ends.is_none())
            {
                return Err(ClientError::Protocol {
                    reason: format!(
                        "field `{}`: {} offsets for {at} steps",
                        b.name,
                        b.offsets.len()
                    ),
                });
            }
        }
        Ok(FetchedGroup { reply, starts })
    }

    /// The group's id (tables with `u64` ids; 0 otherwise).
    pub fn group_id(&self) -> u64 {
        self.reply.group_id
    }
    /// The group's id (tables with `str` ids; empty otherwise).
    pub fn group_uid(&self) -> &str {
        &self.reply.group_uid
    }
    /// Tables with `u64` ids (empty otherwise).
    pub fn trajectory_ids(&self) -> &[u64] {
        &self.reply.trajectory_ids
    }
    /// Tables with `str` ids (empty otherwise).
    pub fn trajectory_uids(&self) -> &[String] {
        &self.reply.trajectory_uids
    }
    /// Each step's metadata (empty bytes where none); empty when no step
    /// had any.
    pub fn metadata(&self) -> &[Bytes] {
        &self.reply.metadata
    }
    /// The table's policy version when the group was fetched.
    pub fn table_policy_version(&self) -> u64 {
        self.reply.table_policy_version
    }
    /// Each step's lag: the table's policy version minus the step's (0
    /// for a step from a version ahead of the table's).
    pub fn lags(&self) -> Vec<u64> {
        let now = self.reply.table_policy_version;
        self.reply
            .policy_versions
            .iter()
            .map(|&v| now.saturating_sub(v))
            .collect()
    }
    /// Steps of each trajectory.
    pub fn lengths(&self) -> &[u32] {
        &self.reply.lengths
    }
    /// Steps of the whole group.
    pub fn steps(&self) -> usize {
        self.starts.last().copied().unwrap_or(0)
    }
    /// The rows of trajectory `i` (its position in `trajectory_ids`) in
    /// every field block.
    pub fn trajectory_steps(&self, i: usize) -> Range<usize> {
        self.starts[i]..self.starts[i + 1]
    }
    /// One per step.
    pub fn policy_versions(&self) -> &[u64] {
        &self.reply.policy_versions
    }
    /// The reply as received.
    pub fn into_reply(self) -> FetchGroupReply {
        self.reply
    }
}

/// Its fields' blocks (`[steps, ...shape]`): `field`, `field_f32`,
/// `field_u64`.
impl FieldBlocks for FetchedGroup {
    fn fields(&self) -> &[FieldBlock] {
        &self.reply.fields
    }
}

impl ReplayClient {
    /// Appends steps to their trajectories in grouped table `table`. All or
    /// nothing: a refused batch stores no step.
    pub async fn submit_steps(
        &mut self,
        table: &str,
        steps: StepBatch,
    ) -> Result<SubmitReport, ClientError> {
        let r = self
            .raw()
            .submit_steps(steps.into_request(table))
            .await?
            .into_inner();
        Ok(SubmitReport {
            groups_completed: r.groups_completed,
            groups_dropped_over_capacity: r.groups_dropped_over_capacity,
            groups_dropped_queue_full: r.groups_dropped_queue_full,
        })
    }

    /// Marks `trajectory` complete without a last step; returns whether
    /// its group became complete.
    pub async fn complete_trajectory(
        &mut self,
        table: &str,
        trajectory: u64,
    ) -> Result<bool, ClientError> {
        Ok(self
            .raw()
            .complete_trajectory(pb::CompleteTrajectoryRequest {
                table: table.to_owned(),
                trajectory_id: trajectory,
                trajectory_uid: String::new(),
            })
            .await?
            .into_inner()
            .group_completed)
    }

    /// [`Self::complete_trajectory`] for a table with `str` ids.
    pub async fn complete_trajectory_uid(
        &mut self,
        table: &str,
        trajectory: &str,
    ) -> Result<bool, ClientError> {
        Ok(self
            .raw()
            .complete_trajectory(pb::CompleteTrajectoryRequest {
                table: table.to_owned(),
                trajectory_id: 0,
                trajectory_uid: trajectory.to_owned(),
            })
            .await?
            .into_inner()
            .group_completed)
    }

    /// The oldest complete group of `table`, taken out of it; waits up to
    /// `timeout` for one (`Duration::ZERO`: not at all; `Duration::MAX`:
    /// until one comes) and gives `None` when none came.
    pub async fn fetch_group(
        &mut self,
        table: &str,
        timeout: Duration,
    ) -> Result<Option<FetchedGroup>, ClientError> {
        let reply = self
            .raw()
            .fetch_group(pb::FetchGroupRequest {
                table: table.to_owned(),
                timeout_ms: if timeout.is_zero() {
                    0
                } else {
                    u64::try_from(timeout.as_millis())
                        .unwrap_or(u64::MAX)
                        .max(1)
                },
            })
            .await?
            .into_inner();
        if !reply.found {
            return Ok(None);
        }
        FetchedGroup::new(reply).map(Some)
    }
}
