//! The grouped-table RPCs (`SubmitSteps`, `CompleteTrajectory`,
//! `FetchGroup`) between the wire and a [`GroupedTable`]: request checks
//! and staging ([`step_request`](super::step_request)), the table call,
//! and the reply. A refusal is counted against the table and becomes the
//! call's status; it ends only that call.
//!
//! A fetched group becomes one block per field, its trajectories' steps one
//! after another (`[steps, ...shape]`), so a learner uploads each field
//! once and splits by `lengths`. Cost: one copy of the group's bytes (none
//! for a one-trajectory group: its arrays are moved into the reply).
use std::sync::atomic::Ordering;
use std::sync::Arc;
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
    let staged =
        step_request::stage(&table.name, table.layout(), req).map_err(|e| refuse(table, e))?;
    let outcome = table.submit(staged).map_err(|e| refuse(table, e))?;
    Ok(SubmitStepsReply {
        groups_completed: outcome.groups_completed,
        groups_dropped_over_capacity: outcome.groups_dropped_over_capacity,
    })
}

pub fn complete_trajectory(
    table: &GroupedTable,
    req: &CompleteTrajectoryRequest,
) -> Result<CompleteTrajectoryReply, Status> {
    let group_completed = table
        .complete_trajectory(req.trajectory_id)
        .map_err(|e| refuse(table, e))?;
    Ok(CompleteTrajectoryReply { group_completed })
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
/// order.
fn reply_of(table: &GroupedTable, group: ReleasedGroup) -> FetchGroupReply {
    let layout = table.layout();
    let mut trajectory_ids = Vec::with_capacity(group.trajectories.len());
    let mut lengths = Vec::with_capacity(group.trajectories.len());
    let mut policy_versions = Vec::with_capacity(group.steps);
    for (id, t) in &group.trajectories {
        trajectory_ids.push(*id);
        lengths.push(t.len() as u32);
        policy_versions.extend_from_slice(&t.versions);
    }
    let mut trajectories = group.trajectories;
    let fields = layout
        .fields()
        .iter()
        .enumerate()
        .map(|(f, spec)| {
            let data = if let [(_, only)] = &mut trajectories[..] {
                std::mem::take(&mut only.data[f])
            } else {
                let mut out = Vec::with_capacity(group.steps * spec.num_bytes());
                for (_, t) in &trajectories {
                    out.extend_from_slice(&t.data[f]);
                }
                out
            };
            field_block(spec, Bytes::from(data))
        })
        .collect();
    FetchGroupReply {
        found: true,
        group_id: group.group,
        trajectory_ids,
        lengths,
        fields,
        policy_versions,
    }
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
        fields: layout_info::field_infos(table.layout()),
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
