//! The grouped-table RPCs (`SubmitSteps`, `CompleteTrajectory`,
//! `FetchGroup`) between the wire and a [`GroupedTable`]: request checks
//! and staging ([`step_request`](super::step_request)), the table call,
//! and the reply. A refusal is counted against the table and becomes the
//! call's status; it ends only that call.
//!
//! A fetched group becomes one block per field, its trajectories' steps one
//! after another (`[steps, ...shape]`; a variable-length field's values
//! without padding and its `offsets`), so a learner uploads each field once
//! and splits by `lengths`. Cost: one copy of the group's bytes (none for a
//! one-trajectory group: its arrays are moved into the reply); the steps'
//! metadata are slices of one buffer.
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::config::grouped_table_spec::IdKind;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::watch;
use tonic::Status;

use crate::error::RequestError;
use crate::pb::{
    CompleteTrajectoryReply, CompleteTrajectoryRequest, FetchGroupReply, FetchGroupRequest,
    GroupedTableInfo, SubmitStepsReply, SubmitStepsRequest, TableInfo,
};
use crate::server::field_block::field_block;
use crate::server::grouped_table::{GroupedTable, ReleasedGroup};
use crate::server::layout_info;
use crate::server::pool_id::PoolId;
use crate::server::step_request;

/// Counts a refusal against `table` and turns it into the call's status.
fn refuse(table: &GroupedTable, e: RequestError) -> Status {
    table.count_rejected();
    e.into()
}

pub fn submit_steps(
    table: &GroupedTable,
    req: &SubmitStepsRequest,
) -> Result<SubmitStepsReply, Status> {
    let staged = step_request::stage(&table.name, table.layout(), table.spec().ids, req)
        .map_err(|e| refuse(table, e))?;
    let outcome = table.submit(staged).map_err(|e| refuse(table, e))?;
    Ok(SubmitStepsReply {
        groups_completed: outcome.groups_completed,
        groups_dropped_over_capacity: outcome.groups_dropped_over_capacity,
        groups_dropped_queue_full: outcome.groups_dropped_queue_full,
    })
}

pub fn complete_trajectory(
    table: &GroupedTable,
    req: &CompleteTrajectoryRequest,
) -> Result<CompleteTrajectoryReply, Status> {
    let id = trajectory_of(table, req).map_err(|e| refuse(table, e))?;
    let group_completed = table
        .complete_trajectory(&id)
        .map_err(|e| refuse(table, e))?;
    Ok(CompleteTrajectoryReply { group_completed })
}

/// The request's trajectory, of the table's kind of ids.
fn trajectory_of(
    table: &GroupedTable,
    req: &CompleteTrajectoryRequest,
) -> Result<PoolId, RequestError> {
    match table.spec().ids {
        IdKind::U64 if req.trajectory_uid.is_empty() => Ok(PoolId::Num(req.trajectory_id)),
        IdKind::U64 => Err(RequestError::invalid(
            "trajectory_uid",
            format!(
                "{:?} given, but table `{}` has u64 ids (`sampler.ids`): give trajectory_id",
                req.trajectory_uid, table.name
            ),
        )),
        IdKind::Str if req.trajectory_uid.is_empty() => Err(RequestError::invalid(
            "trajectory_uid",
            format!(
                "empty, but table `{}` has str ids (`sampler.ids`): give a non-empty \
                 trajectory_uid{}",
                table.name,
                if req.trajectory_id != 0 {
                    " (not trajectory_id)"
                } else {
                    ""
                }
            ),
        )),
        IdKind::Str => Ok(PoolId::Uid(Arc::from(req.trajectory_uid.as_str()))),
    }
}

pub async fn fetch_group(
    table: Arc<GroupedTable>,
    req: &FetchGroupRequest,
    mut closing: watch::Receiver<bool>,
) -> Result<FetchGroupReply, Status> {
    let timeout = Duration::from_millis(req.timeout_ms);
    let group = table
        .fetch(timeout, &mut closing)
        .await
        .map_err(|e| refuse(&table, e))?;
    Ok(match group {
        None => FetchGroupReply::default(),
        Some(g) => reply_of(&table, g),
    })
}

/// The reply carrying `group`: per field, its trajectories' steps in
/// order (a variable-length field with its offsets), and their metadata.
fn reply_of(table: &GroupedTable, group: ReleasedGroup) -> FetchGroupReply {
    let layout = table.layout();
    let n = group.trajectories.len();
    let mut trajectory_ids = Vec::with_capacity(n);
    let mut trajectory_uids = Vec::new();
    let mut lengths = Vec::with_capacity(n);
    let mut policy_versions = Vec::with_capacity(group.steps);
    for (id, t) in &group.trajectories {
        match id {
            PoolId::Num(v) => trajectory_ids.push(*v),
            PoolId::Uid(s) => trajectory_uids.push(s.to_string()),
        }
        lengths.push(t.len() as u32);
        policy_versions.extend_from_slice(&t.versions);
    }
    let metadata = metadata_of(&group);
    let mut trajectories = group.trajectories;
    let fields = layout
        .fields()
        .enumerate()
        .map(|(f, (spec, variable))| {
            let data = if let [(_, only)] = &mut trajectories[..] {
                std::mem::take(&mut only.data[f])
            } else {
                let bytes = trajectories.iter().map(|(_, t)| t.data[f].len()).sum();
                let mut out = Vec::with_capacity(bytes);
                for (_, t) in &trajectories {
                    out.extend_from_slice(&t.data[f]);
                }
                out
            };
            let mut block = field_block(spec, Bytes::from(data));
            if variable.is_some() {
                let mut offsets = Vec::with_capacity(group.steps + 1);
                let mut at = 0u64;
                offsets.push(0);
                for (_, t) in &trajectories {
                    for &len in &t.lens[f] {
                        at += len;
                        offsets.push(at);
                    }
                }
                block.offsets = offsets;
            }
            block
        })
        .collect();
    FetchGroupReply {
        found: true,
        group_id: group.group.num(),
        group_uid: group.group.uid().to_owned(),
        trajectory_ids,
        trajectory_uids,
        lengths,
        fields,
        policy_versions,
        metadata,
        table_policy_version: group.table_version,
    }
}

/// The steps' metadata, each a slice of one buffer; empty when no step
/// has any.
fn metadata_of(group: &ReleasedGroup) -> Vec<Bytes> {
    let total: usize = group
        .trajectories
        .iter()
        .map(|(_, t)| t.metadata.len())
        .sum();
    if total == 0 {
        return Vec::new();
    }
    let mut all = Vec::with_capacity(total);
    for (_, t) in &group.trajectories {
        all.extend_from_slice(&t.metadata);
    }
    let all = Bytes::from(all);
    let mut out = Vec::with_capacity(group.steps);
    let mut at = 0usize;
    for (_, t) in &group.trajectories {
        for &len in &t.metadata_lens {
            out.push(all.slice(at..at + len as usize));
            at += len as usize;
        }
    }
    out
}

/// The `grouped` part of a grouped table's `TableInfo`.
pub(crate) fn grouped_info(table: &GroupedTable) -> GroupedTableInfo {
    let s = table.stats();
    GroupedTableInfo {
        group_size: table.spec().group_size,
        max_lag: table.spec().max_lag,
        policy_version: s.policy_version,
        groups_ready: s.groups_ready,
        groups_open: s.groups_open,
        groups_released: s.groups_released,
        groups_dropped_stale: s.groups_dropped_stale,
        groups_dropped_over_capacity: s.groups_dropped_over_capacity,
        steps_pending: s.steps_pending,
        max_queue_size: table.spec().max_queue_size.map(|m| m as u64),
        groups_dropped_queue_full: s.groups_dropped_queue_full,
        ids: table.spec().ids.name().to_owned(),
        keep_stale: table.spec().keep_stale,
        groups_released_stale: s.groups_released_stale,
    }
}

/// The `TableInfo` of a grouped table: `capacity` in steps, `stored` the
/// steps held, `available` the steps of ready groups, `inserted` and
/// `sampled` the steps submitted and released.
pub fn table_info(table: &GroupedTable) -> TableInfo {
    let s = table.stats();
    TableInfo {
        name: table.name.clone(),
        sampler: "grouped".to_owned(),
        fields: layout_info::step_field_infos(table.layout()),
        capacity: table.spec().capacity_steps as u64,
        stored: s.steps_pending,
        available: s.steps_ready,
        inserted: s.steps_submitted,
        sampled: s.steps_released,
        // Relaxed: a statistic.
        rejected_requests: table.rejected_requests.load(Ordering::Relaxed),
        grouped: Some(grouped_info(table)),
        ..TableInfo::default()
    }
}
