//! [`LocalTable`]: a replay table in this process, what
//! `seed_rs.ReplayBuffer` holds; the `TableApi` bodies it runs are in
//! `local_calls` (implemented for `Arc<LocalTable>`: its streams share the
//! table).
//!
//! A plain table is the server's own [`Table`] (storage directory,
//! checkpoint path, insert timeout), sampled, inserted into and followed
//! directly; a grouped table is the server's [`GroupedTable`], driven
//! through the same request functions as its RPCs ([`in_process`]).
//! Refusals are the `tonic::Status` a server would send, raised as the
//! remote handle raises them ([`status_to_py_err`]).
//!
//! # Threads and the GIL
//! The table is `Sync`: any number of Python threads may call it at once.
//! Every call that can wait (a sample on a table without enough items or
//! held by the rate limiter, an insert under writer policy `block` or the
//! rate limiter, `fetch_group`, a follow step, a checkpoint) runs with the
//! GIL released, in slices of [`WAIT_SLICE`] between which Ctrl-C is
//! checked. Sampling always releases it (the copy out of the slots runs
//! without it). An insert into a table that cannot wait reads the caller's
//! arrays in place with the GIL held (one copy, into the slots); one that
//! can wait copies them first, then waits without the GIL (the arrays may
//! change meanwhile).
//!
//! # Cost
//! Insert: the checks of [`arrays::check_fields`] (struct reads, no Python
//! calls for numpy input) and one copy of the item bytes into the slots.
//! Sample: the buffer's copy out of the slots (a seqlock read: copy, then
//! verify) and one copy into each new array. See `benches/python/` for
//! figures.
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use seed_replay::{ReplayError, SampleBatch};
use seed_replay_service::pb::TableInfo;
use seed_replay_service::server::{in_process, GroupedTable, Table};
use seed_replay_service::RequestError;
use tokio::sync::watch;
use tonic::Status;

use crate::replay::arrays;
use crate::replay::error::status_to_py_err;
use crate::replay::layout::TableLayout;
use crate::replay::process_guard::ProcessGuard;
use crate::replay::shared_bytes;
use crate::replay::table_config::{self, TableKind};

/// How long one wait runs without the GIL before Ctrl-C is checked.
pub const WAIT_SLICE: Duration = Duration::from_millis(50);

/// The max message size a grouped table checks groups against in process:
/// no message is sent, so only memory bounds a group.
pub(crate) const IN_PROCESS_MESSAGE_BYTES: usize = usize::MAX / 2;

/// A grouped table and what its async fetch needs.
pub(crate) struct GroupedLocal {
    pub(crate) table: Arc<GroupedTable>,
    /// Runs `fetch_group`'s wait (current-thread: the caller drives it).
    pub(crate) runtime: tokio::runtime::Runtime,
    pub(crate) closing: watch::Sender<bool>,
}

pub(crate) enum LocalKind {
    Plain(Arc<Table>),
    Grouped(GroupedLocal),
}

/// A replay table in this process (module docs).
pub struct LocalTable {
    pub(crate) name: String,
    pub(crate) kind: LocalKind,
    pub(crate) layout: TableLayout,
    pub(crate) guard: ProcessGuard,
    /// Counts of `submit_steps(..., wait=False)` not yet returned by
    /// `flush_submits` (stored at once in process; counted as a server's
    /// table counts them).
    pub(crate) unflushed: std::sync::Mutex<seed_replay_service::pb::SubmitStepsReply>,
}

/// A refusal as the server would send it, raised.
pub fn request_err(py: Python<'_>, e: RequestError) -> PyErr {
    status_to_py_err(py, Status::from(e))
}

impl LocalTable {
    /// The table of `table` (a table object, its JSON text, a config file
    /// or its path; `name` picks one of several); with `restore`, loaded
    /// from its checkpoint in `checkpoint_dir`.
    pub fn open(
        py: Python<'_>,
        table: &Bound<'_, PyAny>,
        name: Option<String>,
        checkpoint_dir: Option<PathBuf>,
        restore: bool,
    ) -> PyResult<Self> {
        let config = table_config::parse(table, name.as_deref(), checkpoint_dir)?;
        let name = config.kind.name().to_owned();
        let (kind, info) = match config.kind {
            TableKind::Plain(spec) => {
                if restore {
                    let Some(dir) = &config.checkpoint_dir else {
                        return Err(PyValueError::new_err(
                            "restore needs `checkpoint_dir` (or the config file's)",
                        ));
                    };
                    let file = dir.join(format!("{name}.seedrpl"));
                    if !file.exists() {
                        return Err(PyValueError::new_err(format!(
                            "no checkpoint of table `{name}` at {}",
                            file.display()
                        )));
                    }
                }
                let dir = config.checkpoint_dir.clone();
                // Allocating and first-touching the slots (or reopening a
                // mapped directory) takes a while for a big table.
                let opened = py.detach(move || Table::open(spec, dir.as_deref(), restore));
                let table = opened.map_err(|e| PyValueError::new_err(e.to_string()))?;
                let info = in_process::table_info(&table);
                (LocalKind::Plain(Arc::new(table)), info)
            }
            TableKind::Grouped(spec) => {
                if restore {
                    return Err(PyValueError::new_err(
                        "grouped tables have no checkpoint to restore",
                    ));
                }
                let table = GroupedTable::new(spec, IN_PROCESS_MESSAGE_BYTES)
                    .map_err(|e| PyValueError::new_err(e.to_string()))?;
                let info = in_process::grouped_table_info(&table);
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_time()
                    .build()
                    .map_err(|e| {
                        PyRuntimeError::new_err(format!("cannot start a tokio runtime: {e}"))
                    })?;
                let (closing, _) = watch::channel(false);
                (
                    LocalKind::Grouped(GroupedLocal {
                        table: Arc::new(table),
                        runtime,
                        closing,
                    }),
                    info,
                )
            }
        };
        let layout = TableLayout::from_info(&info).map_err(PyValueError::new_err)?;
        Ok(LocalTable {
            name,
            kind,
            layout,
            guard: ProcessGuard::new(),
            unflushed: Default::default(),
        })
    }

    /// The plain table, for call `call` (a grouped table refuses it).
    pub fn plain(&self, call: &str) -> PyResult<&Arc<Table>> {
        self.guard.check("ReplayBuffer")?;
        match &self.kind {
            LocalKind::Plain(t) => Ok(t),
            LocalKind::Grouped(_) => Err(PyValueError::new_err(format!(
                "table `{}` is grouped: `{call}` is for fixed-shape tables (use submit_steps, \
                 complete_trajectory and fetch_group)",
                self.name
            ))),
        }
    }

    pub(crate) fn grouped(&self, call: &str) -> PyResult<&GroupedLocal> {
        self.guard.check("ReplayBuffer")?;
        match &self.kind {
            LocalKind::Grouped(g) => Ok(g),
            LocalKind::Plain(_) => Err(PyValueError::new_err(format!(
                "table `{}` is not grouped (sampler `grouped`): it has no `{call}`",
                self.name
            ))),
        }
    }

    pub fn layout(&self) -> &TableLayout {
        &self.layout
    }

    /// A refusal of the buffer, raised as a server would send it.
    pub fn replay_err(&self, py: Python<'_>, source: ReplayError) -> PyErr {
        request_err(
            py,
            RequestError::Replay {
                table: self.name.clone(),
                source,
            },
        )
    }

    pub(crate) fn info_reply(&self) -> TableInfo {
        match &self.kind {
            LocalKind::Plain(t) => in_process::table_info(t),
            LocalKind::Grouped(g) => in_process::grouped_table_info(&g.table),
        }
    }
}

/// Runs `attempt(slice)` without the GIL until it succeeds, fails with
/// something other than "not now", or `deadline` passes (then
/// `timed_out()`), checking Ctrl-C between slices.
pub(crate) fn wait_in_slices<T: Send>(
    py: Python<'_>,
    deadline: Option<Instant>,
    mut attempt: impl FnMut(Duration) -> Result<T, ReplayError> + Send,
    timed_out: impl FnOnce() -> ReplayError,
) -> PyResult<Result<T, ReplayError>> {
    loop {
        let slice = match deadline {
            None => WAIT_SLICE,
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Ok(Err(timed_out()));
                }
                left.min(WAIT_SLICE)
            }
        };
        match py.detach(|| attempt(slice)) {
            Err(ReplayError::Timeout { .. })
            | Err(ReplayError::NotEnoughItems { .. })
            | Err(ReplayError::RateLimited { .. })
            | Err(ReplayError::WouldBlock { .. }) => py.check_signals()?,
            other => return Ok(other),
        }
    }
}

pub(crate) fn deadline_of(
    what: &str,
    timeout: Option<f64>,
) -> PyResult<Option<(Instant, Duration)>> {
    match timeout {
        None => Ok(None),
        Some(t) if t.is_finite() && t > 0.0 => {
            let t = Duration::from_secs_f64(t);
            Ok(Some((Instant::now() + t, t)))
        }
        Some(t) => Err(PyValueError::new_err(format!(
            "{what} must be a positive number of seconds, is {t}"
        ))),
    }
}

/// The fields of `batch` (read from a table of `layout`) as `{name: array
/// [rows, *shape]}`, a variable-length field's as `(values, offsets)`.
pub fn batch_fields<'py>(
    py: Python<'py>,
    layout: &TableLayout,
    batch: &SampleBatch,
) -> PyResult<Bound<'py, PyDict>> {
    let rows = batch.len();
    let fields = PyDict::new(py);
    for (index, spec) in layout.fields.iter().enumerate() {
        let bytes = batch.field_bytes(index).unwrap_or(&[]);
        if let Some(offsets) = batch.field_offsets(index) {
            // One copy out of the reused batch, then a view of it.
            let values = shared_bytes::values_array(py, spec.dtype, Bytes::copy_from_slice(bytes))?;
            let offsets = shared_bytes::offsets_array(py, offsets.to_vec());
            fields.set_item(&spec.name, PyTuple::new(py, [values, offsets])?)?;
            continue;
        }
        let mut shape = Vec::with_capacity(spec.shape.len() + 1);
        shape.push(rows);
        shape.extend_from_slice(&spec.shape);
        fields.set_item(&spec.name, arrays::array(py, spec.dtype, &shape, bytes))?;
    }
    Ok(fields)
}

/// A sampled batch as `(fields, keys, weights)`.
pub(crate) fn sampled_tuple<'py>(
    py: Python<'py>,
    layout: &TableLayout,
    batch: &SampleBatch,
) -> PyResult<Bound<'py, PyTuple>> {
    let fields = batch_fields(py, layout, batch)?;
    let keys: Vec<u64> = batch.keys().iter().map(|k| k.0).collect();
    PyTuple::new(
        py,
        [
            fields.into_any(),
            arrays::u64_array(py, &keys),
            arrays::f32_array(py, batch.weights()),
        ],
    )
}
