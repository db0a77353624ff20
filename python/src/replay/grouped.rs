//! Grouped tables (the trajectory pool) from Python: the arguments of
//! `submit_steps` as a [`StepBatch`] and a fetched group as a dict, shared
//! by the in-process buffer and the remote handle.
//!
//! `submit_steps(trajectory_ids, group_ids, fields, policy_versions=None,
//! is_last=None)`: one row per step; `fields` as for `insert` (checked the
//! same way, against one step's layout). A group comes back as
//! `{"group_id", "trajectory_ids", "lengths", "fields", "policy_versions"}`:
//! per field one array of all its trajectories' steps, one after another
//! (`[steps, *shape]`), which `lengths` splits; `None` when no group was
//! ready in time.
//!
//! Cost: one copy of each field's bytes into the batch, as for the remote
//! `insert` (the in-process table then stages them by trajectory, as the
//! server does, so both behave alike to the byte).
use bytes::Bytes;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use seed_replay_service::client::StepBatch;
use seed_replay_service::pb::{FetchGroupReply, SubmitStepsReply};

use crate::replay::arrays;
use crate::replay::error::protocol_error;
use crate::replay::layout::TableLayout;

/// The steps of a `submit_steps` call, checked against `layout`.
pub fn step_batch(
    table: &str,
    layout: &TableLayout,
    trajectory_ids: &Bound<'_, PyAny>,
    group_ids: &Bound<'_, PyAny>,
    fields: &Bound<'_, PyDict>,
    policy_versions: Option<&Bound<'_, PyAny>>,
    is_last: Option<&Bound<'_, PyAny>>,
) -> PyResult<StepBatch> {
    let checked = arrays::check_fields(table, layout, fields, false)?;
    let rows = checked.rows;
    let value_err = |e: seed_replay_service::ClientError| PyValueError::new_err(e.to_string());
    let mut batch = StepBatch::new(
        arrays::u64s(trajectory_ids, "trajectory_ids", rows)?,
        arrays::u64s(group_ids, "group_ids", rows)?,
    )
    .map_err(value_err)?;
    for (index, array) in &checked.arrays {
        let spec = &layout.fields[*index];
        batch = batch
            .raw(
                &spec.name,
                spec.dtype,
                &spec.shape,
                Bytes::copy_from_slice(arrays::array_bytes(array)),
            )
            .map_err(value_err)?;
    }
    if let Some(v) = policy_versions {
        batch = batch
            .policy_versions(arrays::policy_versions(v, rows)?)
            .map_err(value_err)?;
    }
    if let Some(v) = is_last {
        let flags = arrays::u64s(v, "is_last", rows)?;
        batch = batch
            .is_last(flags.into_iter().map(|f| f != 0).collect())
            .map_err(value_err)?;
    }
    Ok(batch)
}

/// `{"groups_completed", "groups_dropped_over_capacity"}`.
pub fn submit_dict<'py>(py: Python<'py>, reply: &SubmitStepsReply) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("groups_completed", reply.groups_completed)?;
    d.set_item(
        "groups_dropped_over_capacity",
        reply.groups_dropped_over_capacity,
    )?;
    Ok(d)
}

/// A fetched group as a dict (module docs), `None` when none was found.
pub fn group_dict<'py>(
    py: Python<'py>,
    reply: &FetchGroupReply,
) -> PyResult<Option<Bound<'py, PyDict>>> {
    if !reply.found {
        return Ok(None);
    }
    let steps: usize = reply.lengths.iter().map(|&l| l as usize).sum();
    if reply.lengths.len() != reply.trajectory_ids.len() || reply.policy_versions.len() != steps {
        return Err(protocol_error(
            py,
            format!(
                "a group of {} trajectories with {} lengths and {} policy versions for {steps} steps",
                reply.trajectory_ids.len(),
                reply.lengths.len(),
                reply.policy_versions.len()
            ),
        ));
    }
    let d = PyDict::new(py);
    d.set_item("group_id", reply.group_id)?;
    d.set_item(
        "trajectory_ids",
        arrays::u64_array(py, &reply.trajectory_ids),
    )?;
    let lengths: Vec<u64> = reply.lengths.iter().map(|&l| u64::from(l)).collect();
    d.set_item("lengths", arrays::u64_array(py, &lengths))?;
    d.set_item("fields", arrays::fields_dict(py, steps, &reply.fields)?)?;
    d.set_item(
        "policy_versions",
        arrays::u64_array(py, &reply.policy_versions),
    )?;
    Ok(Some(d))
}
