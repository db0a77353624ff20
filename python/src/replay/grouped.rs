//! Grouped tables (the trajectory pool) from Python: the arguments of
//! `submit_steps` and `submit_step` as a [`StepBatch`] and a fetched group
//! as a dict, shared by the in-process buffer and the remote handle.
//!
//! `submit_steps(trajectory_ids, group_ids, fields, policy_versions=None,
//! is_last=None, metadata=None)`: one row per step. Ids are integers, or
//! strings for a table with `str` ids (`sampler.ids`; kept as given). A
//! fixed-shape field as for `insert` (checked the same way, against one
//! step's layout); a variable-length field (shape `[..., -1]`) as a list of
//! one array per step (`[*shape, L_i]`, of the table's dtype; a Python list
//! of numbers is converted) or a `(values, offsets)` pair (`values` the
//! steps' elements one after another, `offsets` `rows + 1` integers from
//! 0). `metadata`: per step `bytes`, `str` (UTF-8), a JSON-able object
//! (`json.dumps`) or `None`.
//!
//! A group comes back as `{"group_id", "trajectory_ids", "lengths",
//! "fields", "policy_versions", "lags", "policy_version", "metadata"}`: per
//! fixed field one array of all its trajectories' steps, one after another
//! (`[steps, *shape]`), which `lengths` splits; per variable field a
//! `(values, offsets)` pair (`seed_rs.pad` makes `[steps, max]` and a
//! mask of it); `lags` each step's lag behind the table's
//! `policy_version` (for importance weights); `metadata` a list of `bytes`
//! per step, or `None` when no step had any. `None` when no group was
//! ready in time.
//!
//! Cost: one copy of each field's bytes into the batch, as for the remote
//! `insert` (the in-process table then stages them by trajectory, as the
//! server does, so both behave alike to the byte); a variable field given
//! as a list costs a numpy view per step.
use bytes::Bytes;
use numpy::PyUntypedArrayMethods;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};
use seed_replay_service::client::StepBatch;
use seed_replay_service::pb::{FetchGroupReply, SubmitStepsReply};

use crate::replay::arrays;
use crate::replay::error::protocol_error;
use crate::replay::layout::TableLayout;

static JSON_DUMPS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// The steps of a `submit_steps` call, checked against `layout`.
#[allow(clippy::too_many_arguments)]
pub fn step_batch(
    table: &str,
    layout: &TableLayout,
    trajectory_ids: &Bound<'_, PyAny>,
    group_ids: &Bound<'_, PyAny>,
    fields: &Bound<'_, PyDict>,
    policy_versions: Option<&Bound<'_, PyAny>>,
    is_last: Option<&Bound<'_, PyAny>>,
    metadata: Option<&Bound<'_, PyAny>>,
) -> PyResult<StepBatch> {
    let checked = arrays::check_fields(table, layout, fields, false)?;
    let rows = checked.rows;
    let value_err = |e: seed_replay_service::ClientError| PyValueError::new_err(e.to_string());
    let mut batch = if layout.str_ids {
        StepBatch::with_uids(
            uids(table, trajectory_ids, "trajectory_ids", rows)?,
            uids(table, group_ids, "group_ids", rows)?,
        )
    } else {
        StepBatch::new(
            numbers(table, trajectory_ids, "trajectory_ids", rows)?,
            numbers(table, group_ids, "group_ids", rows)?,
        )
    }
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
    for (index, value) in &checked.variable {
        let spec = &layout.fields[*index];
        let (data, offsets) = arrays::variable_field(spec, value, rows)?;
        batch = batch
            .variable(&spec.name, spec.dtype, &spec.shape, data, offsets)
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
    if let Some(m) = metadata.filter(|m| !m.is_none()) {
        batch = batch
            .metadata(metadata_bytes(m, rows)?)
            .map_err(value_err)?;
    }
    Ok(batch)
}

/// The one step of a `submit_step` call: each fixed field's value one
/// step's array (a batch of one is viewed from it), each variable field's
/// one step's list; then as `submit_steps`.
#[allow(clippy::too_many_arguments)]
pub fn one_step_batch<'py>(
    table: &str,
    layout: &TableLayout,
    trajectory_id: &Bound<'py, PyAny>,
    group_id: &Bound<'py, PyAny>,
    step: &Bound<'py, PyDict>,
    policy_version: u64,
    is_last: bool,
    metadata: Option<&Bound<'py, PyAny>>,
) -> PyResult<StepBatch> {
    let py = step.py();
    let fields = PyDict::new(py);
    for (key, value) in step.iter() {
        let name: String = key
            .extract()
            .map_err(|_| PyTypeError::new_err("field names must be str".to_owned()))?;
        let one = match layout.field(&name) {
            Some(f) if f.variable.is_some() => PyList::new(py, [value])?.into_any(),
            Some(f) => {
                let array = arrays::as_array(&value, || format!("field `{name}`"))?;
                let mut shape = vec![1usize];
                shape.extend(array.shape());
                if array.shape() != f.shape.as_slice() {
                    return Err(PyValueError::new_err(format!(
                        "field `{name}`: shape {:?}, one step is {:?}",
                        array.shape(),
                        f.shape
                    )));
                }
                array.call_method1("reshape", (PyTuple::new(py, shape)?,))?
            }
            // Named by `check_fields` below.
            None => value,
        };
        fields.set_item(key, one)?;
    }
    let ids = |id: &Bound<'py, PyAny>| PyList::new(py, [id.clone()]);
    let metadata = match metadata.filter(|m| !m.is_none()) {
        Some(m) => Some(PyList::new(py, [m])?.into_any()),
        None => None,
    };
    step_batch(
        table,
        layout,
        ids(trajectory_id)?.as_any(),
        ids(group_id)?.as_any(),
        &fields,
        Some(PyList::new(py, [policy_version])?.as_any()),
        Some(PyList::new(py, [u64::from(is_last)])?.as_any()),
        metadata.as_ref(),
    )
}

/// One trajectory id of a table of `layout`: `Ok(Ok(n))` for a number,
/// `Ok(Err(uid))` for a string, else a `ValueError` naming the kind the
/// table takes.
pub fn trajectory_id(
    table: &str,
    layout: &TableLayout,
    id: &Bound<'_, PyAny>,
) -> PyResult<Result<u64, String>> {
    if layout.str_ids {
        match id.cast::<PyString>() {
            Ok(s) => Ok(Err(s.to_cow()?.into_owned())),
            Err(_) => Err(PyValueError::new_err(format!(
                "`trajectory_id`: {}, but table `{table}` has str ids (`sampler.ids`)",
                id.get_type().name()?
            ))),
        }
    } else {
        id.extract::<u64>().map(Ok).map_err(|_| {
            PyValueError::new_err(format!(
                "`trajectory_id`: {}, but table `{table}` has u64 ids (`sampler.ids`): an \
                 integer in 0..2**64",
                id.repr().map(|r| r.to_string()).unwrap_or_default()
            ))
        })
    }
}

/// `what` (one per row) as integer ids of a table with `u64` ids.
fn numbers(table: &str, value: &Bound<'_, PyAny>, what: &str, rows: usize) -> PyResult<Vec<u64>> {
    if first_is_str(value) {
        return Err(PyValueError::new_err(format!(
            "`{what}`: strings, but table `{table}` has u64 ids (`sampler.ids`; declare \
             `\"ids\": \"str\"` for string ids)"
        )));
    }
    arrays::u64s(value, what, rows)
}

/// `what` (one per row) as the string ids of a table with `str` ids.
fn uids(table: &str, value: &Bound<'_, PyAny>, what: &str, rows: usize) -> PyResult<Vec<String>> {
    if value.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(format!(
            "`{what}`: one string; give a list of one id per row"
        )));
    }
    let n = value.len().map_err(|_| {
        PyTypeError::new_err(format!("`{what}`: expected a list of str ids, one per row"))
    })?;
    if n != rows {
        return Err(PyValueError::new_err(format!(
            "`{what}`: {n} ids for {rows} rows"
        )));
    }
    let mut out = Vec::with_capacity(rows);
    for (i, id) in value.try_iter()?.enumerate() {
        let id = id?;
        let Ok(s) = id.cast::<PyString>() else {
            return Err(PyValueError::new_err(format!(
                "`{what}[{i}]`: {}, but table `{table}` has str ids (`sampler.ids`)",
                id.get_type().name()?
            )));
        };
        out.push(s.to_cow()?.into_owned());
    }
    Ok(out)
}

fn first_is_str(value: &Bound<'_, PyAny>) -> bool {
    value.is_instance_of::<PyString>()
        || value
            .get_item(0)
            .is_ok_and(|first| first.is_instance_of::<PyString>())
}

/// Per step, its metadata as bytes (module docs).
fn metadata_bytes(value: &Bound<'_, PyAny>, rows: usize) -> PyResult<Vec<Bytes>> {
    let py = value.py();
    let n = value
        .len()
        .map_err(|_| PyTypeError::new_err("`metadata`: expected a list with one entry per step"))?;
    if n != rows {
        return Err(PyValueError::new_err(format!(
            "`metadata`: {n} entries for {rows} steps"
        )));
    }
    let mut out = Vec::with_capacity(rows);
    for (i, m) in value.try_iter()?.enumerate() {
        let m = m?;
        let bytes = if m.is_none() {
            Bytes::new()
        } else if let Ok(b) = m.cast::<PyBytes>() {
            Bytes::copy_from_slice(b.as_bytes())
        } else if let Ok(s) = m.cast::<PyString>() {
            Bytes::copy_from_slice(s.to_cow()?.as_bytes())
        } else {
            let dumps = JSON_DUMPS
                .get_or_try_init(py, || {
                    PyResult::Ok(py.import("json")?.getattr("dumps")?.unbind())
                })?
                .bind(py);
            let text = dumps.call1((&m,)).map_err(|e| {
                PyValueError::new_err(format!("`metadata[{i}]`: not bytes, str or JSON-able: {e}"))
            })?;
            Bytes::copy_from_slice(text.cast::<PyString>()?.to_cow()?.as_bytes())
        };
        out.push(bytes);
    }
    Ok(out)
}

/// `{"groups_completed", "groups_dropped_over_capacity",
/// "groups_dropped_queue_full"}`.
pub fn submit_dict<'py>(py: Python<'py>, reply: &SubmitStepsReply) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("groups_completed", reply.groups_completed)?;
    d.set_item(
        "groups_dropped_over_capacity",
        reply.groups_dropped_over_capacity,
    )?;
    d.set_item("groups_dropped_queue_full", reply.groups_dropped_queue_full)?;
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
    let trajectories = reply.trajectory_ids.len().max(reply.trajectory_uids.len());
    if reply.lengths.len() != trajectories
        || reply.policy_versions.len() != steps
        || !(reply.metadata.is_empty() || reply.metadata.len() == steps)
    {
        return Err(protocol_error(
            py,
            format!(
                "a group of {trajectories} trajectories with {} lengths, {} policy versions \
                 and {} metadata for {steps} steps",
                reply.lengths.len(),
                reply.policy_versions.len(),
                reply.metadata.len()
            ),
        ));
    }
    let d = PyDict::new(py);
    if reply.trajectory_uids.is_empty() {
        d.set_item("group_id", reply.group_id)?;
        d.set_item(
            "trajectory_ids",
            arrays::u64_array(py, &reply.trajectory_ids),
        )?;
    } else {
        d.set_item("group_id", &reply.group_uid)?;
        d.set_item("trajectory_ids", PyList::new(py, &reply.trajectory_uids)?)?;
    }
    let lengths: Vec<u64> = reply.lengths.iter().map(|&l| u64::from(l)).collect();
    d.set_item("lengths", arrays::u64_array(py, &lengths))?;
    d.set_item("fields", arrays::fields_dict(py, steps, &reply.fields)?)?;
    d.set_item(
        "policy_versions",
        arrays::u64_array(py, &reply.policy_versions),
    )?;
    let now = reply.table_policy_version;
    let lags: Vec<u64> = reply
        .policy_versions
        .iter()
        .map(|&v| now.saturating_sub(v))
        .collect();
    d.set_item("lags", arrays::u64_array(py, &lags))?;
    d.set_item("policy_version", now)?;
    if reply.metadata.is_empty() {
        d.set_item("metadata", py.None())?;
    } else {
        let list = PyList::empty(py);
        for m in &reply.metadata {
            list.append(PyBytes::new(py, m))?;
        }
        d.set_item("metadata", list)?;
    }
    Ok(Some(d))
}
