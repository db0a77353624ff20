//! [`TableLayout`]: a table's fields as its `Info` reply describes them,
//! and that reply (and a `Checkpoint` reply) as a Python dict, the same
//! from a table in process or on a server.
//!
//! Why the client keeps layouts: `insert` checks a dict of arrays against
//! the table (names, dtypes, shapes) before sending, so a wrong array is a
//! `ValueError` naming the field without a round trip, and the batch gets
//! the table's dtypes without the caller spelling them. A table's layout
//! is fixed for the server's life, so each client asks once per table
//! (one `Info` call on the first insert); a server restarted with another
//! layout still refuses a wrong batch itself. Cost: a hash lookup per
//! insert.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList, PyString};
use seed_replay::DType;
use seed_replay_service::pb::{CheckpointReply, TableInfo};
use seed_replay_service::wire_dtype;

/// One field: its name, dtype and the shape of one item (a
/// variable-length field's: the dimensions before its variable last one).
#[derive(Debug, Clone)]
pub struct FieldLayout {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<usize>,
    /// Variable-length (grouped tables): its last dimension varies from
    /// step to step, at most `max_len` when that is `Some`.
    pub variable: Option<Option<u64>>,
}

/// A table's fields, in the table's order.
pub struct TableLayout {
    pub fields: Vec<FieldLayout>,
    /// The field that holds each item's policy version, if any.
    pub policy_version_field: Option<String>,
    /// A grouped table whose trajectory and group ids are strings.
    pub str_ids: bool,
    /// The field names as Python strings, made once: looking a field up in
    /// the caller's dict with a new string per call cost an allocation and
    /// a hash per field per insert.
    py_names: PyOnceLock<Vec<Py<PyString>>>,
}

impl TableLayout {
    /// The layout `info` describes; `Err` names a field whose dtype this
    /// client does not know.
    pub fn from_info(info: &TableInfo) -> Result<Self, String> {
        let fields = info
            .fields
            .iter()
            .map(|f| {
                Ok(FieldLayout {
                    name: f.name.clone(),
                    dtype: wire_dtype::from_wire(f.dtype).ok_or_else(|| {
                        format!(
                            "field `{}`: dtype {}",
                            f.name,
                            wire_dtype::wire_name(f.dtype)
                        )
                    })?,
                    shape: f.shape.iter().map(|&d| d as usize).collect(),
                    variable: f
                        .variable_length
                        .then_some(Some(f.max_len).filter(|&m| m > 0)),
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(TableLayout {
            fields,
            policy_version_field: Some(info.policy_version_field.clone()).filter(|f| !f.is_empty()),
            str_ids: info.grouped.as_ref().is_some_and(|g| g.ids == "str"),
            py_names: PyOnceLock::new(),
        })
    }

    /// The field names as Python strings, in layout order.
    pub fn py_names<'a>(&'a self, py: Python<'_>) -> &'a [Py<PyString>] {
        self.py_names.get_or_init(py, || {
            self.fields
                .iter()
                .map(|f| PyString::new(py, &f.name).unbind())
                .collect()
        })
    }

    pub fn field(&self, name: &str) -> Option<&FieldLayout> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// The field names, `, `-separated, for messages.
    pub fn names(&self) -> String {
        self.fields
            .iter()
            .map(|f| f.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// A written checkpoint as a dict: `{"path", "items", "bytes"}`.
pub fn checkpoint_dict<'py>(
    py: Python<'py>,
    reply: CheckpointReply,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("path", reply.path)?;
    d.set_item("items", reply.items)?;
    d.set_item("bytes", reply.bytes)?;
    Ok(d)
}

/// One table's `Info` as a dict: `name`, `sampler`, `fields` (a list of
/// `{"name", "dtype", "shape"}`, dtypes as numpy names; a variable-length
/// field's shape ends in -1, beside its `max_len`), `capacity`, the
/// counters, `rate_limiter` (a dict, or `None` without one),
/// `storage_dir` (`None` in memory) and `grouped` (a grouped table's
/// settings and counters, else `None`).
pub fn info_dict<'py>(py: Python<'py>, info: &TableInfo) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("name", &info.name)?;
    d.set_item("sampler", &info.sampler)?;
    let fields = PyList::empty(py);
    for f in &info.fields {
        let field = PyDict::new(py);
        field.set_item("name", &f.name)?;
        let dtype = match wire_dtype::from_wire(f.dtype) {
            Some(dt) => numpy_name(dt).to_owned(),
            None => wire_dtype::wire_name(f.dtype),
        };
        field.set_item("dtype", dtype)?;
        let mut shape: Vec<i64> = f.shape.iter().map(|&s| i64::from(s)).collect();
        if f.variable_length {
            shape.push(-1);
            field.set_item("max_len", Some(f.max_len).filter(|&m| m > 0))?;
        }
        field.set_item("shape", shape)?;
        fields.append(field)?;
    }
    d.set_item("fields", fields)?;
    d.set_item(
        "policy_version_field",
        Some(&info.policy_version_field).filter(|f| !f.is_empty()),
    )?;
    for (key, value) in [
        ("capacity", info.capacity),
        ("stored", info.stored),
        ("available", info.available),
        ("inserted", info.inserted),
        ("sampled", info.sampled),
        ("removed", info.removed),
        ("evicted_unconsumed", info.evicted_unconsumed),
        ("dropped_policy_lag", info.dropped_policy_lag),
        ("stale_priority_updates", info.stale_priority_updates),
        ("invalid_priority_updates", info.invalid_priority_updates),
        ("sample_streams", info.sample_streams),
        ("sample_flow_control_waits", info.sample_flow_control_waits),
        ("rejected_requests", info.rejected_requests),
    ] {
        d.set_item(key, value)?;
    }
    match &info.rate_limiter {
        None => d.set_item("rate_limiter", py.None())?,
        Some(l) => {
            let limiter = PyDict::new(py);
            limiter.set_item("inserts", l.inserts)?;
            limiter.set_item("samples", l.samples)?;
            limiter.set_item("min_size_to_sample", l.min_size_to_sample)?;
            limiter.set_item("samples_per_insert", l.samples_per_insert)?;
            limiter.set_item("min_diff", l.min_diff)?;
            limiter.set_item("max_diff", l.max_diff)?;
            d.set_item("rate_limiter", limiter)?;
        }
    }
    d.set_item(
        "storage_dir",
        Some(&info.storage_dir).filter(|s| !s.is_empty()),
    )?;
    match &info.grouped {
        None => d.set_item("grouped", py.None())?,
        Some(g) => {
            let grouped = PyDict::new(py);
            grouped.set_item("group_size", g.group_size)?;
            grouped.set_item("ids", &g.ids)?;
            grouped.set_item("max_lag", g.max_lag)?;
            grouped.set_item("keep_stale", g.keep_stale)?;
            grouped.set_item("max_queue_size", g.max_queue_size)?;
            for (key, value) in [
                ("policy_version", g.policy_version),
                ("groups_ready", g.groups_ready),
                ("groups_open", g.groups_open),
                ("groups_released", g.groups_released),
                ("groups_released_stale", g.groups_released_stale),
                ("groups_dropped_stale", g.groups_dropped_stale),
                (
                    "groups_dropped_over_capacity",
                    g.groups_dropped_over_capacity,
                ),
                ("groups_dropped_queue_full", g.groups_dropped_queue_full),
                ("steps_pending", g.steps_pending),
            ] {
                grouped.set_item(key, value)?;
            }
            d.set_item("grouped", grouped)?;
        }
    }
    Ok(d)
}

/// numpy's name of a buffer dtype, for messages.
pub fn numpy_name(d: DType) -> &'static str {
    match d {
        DType::U8 => "uint8",
        DType::Bool => "bool",
        DType::U32 => "uint32",
        DType::I32 => "int32",
        DType::F32 => "float32",
        DType::U64 => "uint64",
        DType::I64 => "int64",
        DType::F64 => "float64",
    }
}
