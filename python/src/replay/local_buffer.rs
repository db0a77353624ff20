//! `seed_rs.ReplayBuffer`: a replay table in this process, built from the
//! same table object a replay server's config takes, with the methods of
//! the remote handle (`ReplayClient(addr).table(name)`), so switching
//! between the two is changing one constructor.
//!
//! A plain table is the server's own [`Table`] (storage directory,
//! checkpoint path, insert timeout), sampled and inserted into directly; a
//! grouped table is the server's [`GroupedTable`], driven through the same
//! request functions as its RPCs ([`in_process`]). Refusals are the
//! `tonic::Status` a server would send, raised as the remote handle raises
//! them ([`status_to_py_err`]).
//!
//! # Threads and the GIL
//! The object is `frozen` and its table `Sync`: any number of Python
//! threads may call it at once. Every call that can wait (a sample on a
//! table without enough items or held by the rate limiter, an insert under
//! writer policy `block` or the rate limiter, `fetch_group`, a checkpoint)
//! runs with the GIL released, in slices of [`WAIT_SLICE`] between which
//! Ctrl-C is checked. Sampling always releases it (the copy out of the
//! slots runs without it). An insert into a table that cannot wait reads
//! the caller's arrays in place with the GIL held (one copy, into the
//! slots); one that can wait copies them first, then waits without the
//! GIL (the arrays may change meanwhile).
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

use pyo3::exceptions::{PyKeyboardInterrupt, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple, PyType};
use seed_replay::{FieldRef, ReplayError, SampleBatch, SamplerConfig, Values};
use seed_replay_service::pb::{CompleteTrajectoryRequest, FetchGroupRequest, TableInfo};
use seed_replay_service::server::{in_process, GroupedTable, Table};
use seed_replay_service::RequestError;
use tokio::sync::watch;
use tonic::Status;

use crate::interrupt::InterruptWatch;
use crate::replay::arrays;
use crate::replay::error::status_to_py_err;
use crate::replay::grouped;
use crate::replay::layout::{info_dict, TableLayout};
use crate::replay::process_guard::ProcessGuard;
use crate::replay::table_config::{self, TableKind};

/// How long one wait runs without the GIL before Ctrl-C is checked.
const WAIT_SLICE: Duration = Duration::from_millis(50);

/// The max message size a grouped table checks groups against in process:
/// no message is sent, so only memory bounds a group.
const IN_PROCESS_MESSAGE_BYTES: usize = usize::MAX / 2;

/// A grouped table and what its async fetch needs.
struct GroupedLocal {
    table: Arc<GroupedTable>,
    /// Runs `fetch_group`'s wait (current-thread: the caller drives it).
    runtime: tokio::runtime::Runtime,
    closing: watch::Sender<bool>,
}

enum LocalTable {
    Plain(Arc<Table>),
    Grouped(GroupedLocal),
}

/// A replay table in this process (module docs).
///
/// `ReplayBuffer(table, *, name=None, checkpoint_dir=None)`: `table` is a
/// table object as a replay server's config file takes it (a dict: fields,
/// capacity, sampler, writer policy, rate limiter, lag cap, `storage_dir`
/// for a memory-mapped table), its JSON text, a whole config file (a dict
/// with `tables`, or its path; `name` picks the table when it has several)
/// such as `learner --print-replay-table-config` prints. `checkpoint_dir`
/// (or the file's `checkpoint_dir`) is where `checkpoint()` writes.
/// A table with `storage_dir` reopens the directory's items when it holds
/// some. Methods: `insert`, `sample`, `sample_stream`, `update_priorities`,
/// `set_policy_version`, `info`, `checkpoint`, `close`; on a grouped table
/// `submit_steps`, `complete_trajectory` and `fetch_group`. A context
/// manager (closes on exit). To share one table across processes, serve it
/// with `replay-server`: a buffer cannot be pickled or used after `fork`.
#[pyclass(module = "seed_rs._native", name = "ReplayBuffer", frozen)]
pub struct PyReplayBuffer {
    name: String,
    table: LocalTable,
    layout: Arc<TableLayout>,
    guard: ProcessGuard,
}

fn request_err(py: Python<'_>, e: RequestError) -> PyErr {
    status_to_py_err(py, Status::from(e))
}

impl PyReplayBuffer {
    fn open(
        py: Python<'_>,
        table: &Bound<'_, PyAny>,
        name: Option<String>,
        checkpoint_dir: Option<PathBuf>,
        restore: bool,
    ) -> PyResult<Self> {
        let config = table_config::parse(table, name.as_deref(), checkpoint_dir)?;
        let name = config.kind.name().to_owned();
        let (table, info) = match config.kind {
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
                (LocalTable::Plain(Arc::new(table)), info)
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
                    LocalTable::Grouped(GroupedLocal {
                        table: Arc::new(table),
                        runtime,
                        closing,
                    }),
                    info,
                )
            }
        };
        let layout = TableLayout::from_info(&info).map_err(PyValueError::new_err)?;
        Ok(PyReplayBuffer {
            name,
            table,
            layout: Arc::new(layout),
            guard: ProcessGuard::new(),
        })
    }

    fn plain(&self, call: &str) -> PyResult<&Arc<Table>> {
        self.guard.check("ReplayBuffer")?;
        match &self.table {
            LocalTable::Plain(t) => Ok(t),
            LocalTable::Grouped(_) => Err(PyValueError::new_err(format!(
                "table `{}` is grouped: `{call}` is for fixed-shape tables (use submit_steps, \
                 complete_trajectory and fetch_group)",
                self.name
            ))),
        }
    }

    fn grouped(&self, call: &str) -> PyResult<&GroupedLocal> {
        self.guard.check("ReplayBuffer")?;
        match &self.table {
            LocalTable::Grouped(g) => Ok(g),
            LocalTable::Plain(_) => Err(PyValueError::new_err(format!(
                "table `{}` is not grouped (sampler `grouped`): it has no `{call}`",
                self.name
            ))),
        }
    }

    /// A refusal of the buffer, raised as a server would send it.
    fn replay_err(&self, py: Python<'_>, source: ReplayError) -> PyErr {
        request_err(
            py,
            RequestError::Replay {
                table: self.name.clone(),
                source,
            },
        )
    }

    fn info_reply(&self) -> TableInfo {
        match &self.table {
            LocalTable::Plain(t) => in_process::table_info(t),
            LocalTable::Grouped(g) => in_process::grouped_table_info(&g.table),
        }
    }
}

/// Runs `attempt(slice)` without the GIL until it succeeds, fails with
/// something other than "not now", or `deadline` passes (then
/// `timed_out()`), checking Ctrl-C between slices.
fn wait_in_slices<T: Send>(
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

fn deadline_of(what: &str, timeout: Option<f64>) -> PyResult<Option<(Instant, Duration)>> {
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

/// A sampled batch as `(fields, keys, weights)`.
fn sampled_tuple<'py>(
    py: Python<'py>,
    layout: &TableLayout,
    batch: &SampleBatch,
) -> PyResult<Bound<'py, PyTuple>> {
    let rows = batch.len();
    let fields = PyDict::new(py);
    for (index, spec) in layout.fields.iter().enumerate() {
        let bytes = batch.field_bytes(index).unwrap_or(&[]);
        let mut shape = Vec::with_capacity(spec.shape.len() + 1);
        shape.push(rows);
        shape.extend_from_slice(&spec.shape);
        fields.set_item(&spec.name, arrays::array(py, spec.dtype, &shape, bytes))?;
    }
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

#[pymethods]
impl PyReplayBuffer {
    #[new]
    #[pyo3(signature = (table, *, name=None, checkpoint_dir=None))]
    fn new(
        py: Python<'_>,
        table: &Bound<'_, PyAny>,
        name: Option<String>,
        checkpoint_dir: Option<PathBuf>,
    ) -> PyResult<Self> {
        Self::open(py, table, name, checkpoint_dir, false)
    }

    /// `ReplayBuffer.restore(table, *, name=None, checkpoint_dir=None)`:
    /// the buffer of `table` with the items, priorities and counters of
    /// its checkpoint `<checkpoint_dir>/<name>.seedrpl` (as `checkpoint()`
    /// writes it, here or on a replay server).
    #[classmethod]
    #[pyo3(signature = (table, *, name=None, checkpoint_dir=None))]
    fn restore(
        _cls: &Bound<'_, PyType>,
        py: Python<'_>,
        table: &Bound<'_, PyAny>,
        name: Option<String>,
        checkpoint_dir: Option<PathBuf>,
    ) -> PyResult<Self> {
        Self::open(py, table, name, checkpoint_dir, true)
    }

    /// The table's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// Inserts one batch and returns its keys (a `uint64` array, one per
    /// row, in row order). `fields` maps every field of the table to an
    /// array of the table's dtype shaped `[rows, *field_shape]`
    /// (C-contiguous; numpy, or anything with `__dlpack__` or the buffer
    /// protocol, read without a copy); `priorities` (prioritized tables)
    /// and `policy_versions` give one value per row; with
    /// `policy_versions`, leave the table's policy-version field out.
    #[pyo3(signature = (fields, priorities=None, policy_versions=None))]
    fn insert<'py>(
        &self,
        py: Python<'py>,
        fields: &Bound<'py, PyDict>,
        priorities: Option<&Bound<'py, PyAny>>,
        policy_versions: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let table = self.plain("insert")?;
        let layout = &self.layout;
        let checked = arrays::check_fields(&self.name, layout, fields, policy_versions.is_some())?;
        let rows = checked.rows;
        let buffer = table.buffer();
        let invalid =
            |field: &str, reason: String| request_err(py, RequestError::invalid(field, reason));
        if rows > buffer.capacity() {
            return Err(invalid(
                "rows",
                format!(
                    "{rows} rows exceed the capacity of table `{}` ({})",
                    self.name,
                    buffer.capacity()
                ),
            ));
        }
        let priorities = match priorities {
            None => None,
            Some(p) => {
                if !matches!(buffer.config().sampler, SamplerConfig::Prioritized(_)) {
                    return Err(invalid(
                        "priorities",
                        format!("table `{}` is not prioritized", self.name),
                    ));
                }
                Some(arrays::priorities(p, rows)?)
            }
        };
        let pv_bytes: Vec<u8> = match policy_versions {
            None => Vec::new(),
            Some(v) => {
                if layout.policy_version_field.is_none() {
                    return Err(invalid(
                        "policy_versions",
                        format!("table `{}` has no policy-version field", self.name),
                    ));
                }
                arrays::policy_versions(v, rows)?
                    .iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect()
            }
        };
        // Per layout field: its `[rows, ...]` shape and bytes (the
        // caller's array in place, or the policy versions).
        let mut shapes = Vec::with_capacity(layout.fields.len());
        let mut data: Vec<&[u8]> = Vec::with_capacity(layout.fields.len());
        let mut given = checked.arrays.iter().peekable();
        for (index, spec) in layout.fields.iter().enumerate() {
            let mut shape = Vec::with_capacity(spec.shape.len() + 1);
            shape.push(rows);
            shape.extend_from_slice(&spec.shape);
            shapes.push(shape);
            match given.peek() {
                Some((i, array)) if *i == index => {
                    data.push(arrays::array_bytes(array));
                    given.next();
                }
                _ => data.push(&pv_bytes),
            }
        }
        let store = |data: &[&[u8]], wait: Option<Duration>| {
            let refs: Vec<FieldRef<'_>> = layout
                .fields
                .iter()
                .zip(shapes.iter().zip(data))
                .map(|(spec, (shape, bytes))| {
                    FieldRef::new(
                        shape,
                        Values::Raw {
                            dtype: spec.dtype,
                            bytes,
                        },
                    )
                })
                .collect();
            match wait {
                None => buffer.insert_batch(&refs, rows),
                Some(w) => buffer.insert_batch_timeout(&refs, rows, w),
            }
        };
        let stored = match table.insert_wait() {
            // Cannot wait: straight from the caller's arrays.
            None => store(&data, None),
            Some(timeout) => {
                let owned: Vec<Vec<u8>> = data.iter().map(|d| d.to_vec()).collect();
                let owned: Vec<&[u8]> = owned.iter().map(Vec::as_slice).collect();
                let deadline = Instant::now() + timeout;
                wait_in_slices(
                    py,
                    Some(deadline),
                    |slice| store(&owned, Some(slice)),
                    || ReplayError::Timeout {
                        what: "room to insert (insert_timeout_ms)",
                        waited_ms: timeout.as_millis() as u64,
                    },
                )?
            }
        };
        let keys = stored.map_err(|source| self.replay_err(py, source))?;
        if let Some(p) = priorities {
            let keys: Vec<u64> = keys.iter().map(|k| k.0).collect();
            table
                .update_priorities(&keys, &p)
                .map_err(|e| request_err(py, e))?;
        }
        Ok(arrays::key_range_array(py, keys.first.0, keys.count))
    }

    /// Samples `batch_size` items: returns `(fields, keys, weights)`,
    /// `fields` a dict of new arrays shaped `[batch_size, *field_shape]`
    /// (fewer rows only when the lag cap dropped items), `keys` `uint64`,
    /// `weights` the importance weights (`float32`; 1 unless
    /// prioritized). Waits for enough items (and the rate limiter) for
    /// ever, or `timeout` seconds (then `ReplayError` `DEADLINE_EXCEEDED`),
    /// without the GIL.
    #[pyo3(signature = (batch_size, timeout=None))]
    fn sample<'py>(
        &self,
        py: Python<'py>,
        batch_size: usize,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let table = self.plain("sample")?;
        if batch_size == 0 {
            return Err(request_err(
                py,
                RequestError::invalid("batch_size", "must be at least 1"),
            ));
        }
        let deadline = deadline_of("timeout", timeout)?;
        let buffer = table.buffer();
        let mut batch = buffer.new_batch(batch_size);
        let sampled = py.detach(|| buffer.sample_into(&mut batch, batch_size));
        let sampled = match sampled {
            Err(ReplayError::NotEnoughItems { .. }) | Err(ReplayError::RateLimited { .. }) => {
                wait_in_slices(
                    py,
                    deadline.map(|(d, _)| d),
                    |slice| buffer.sample_into_timeout(&mut batch, batch_size, slice),
                    || ReplayError::Timeout {
                        what: "items to sample (timeout_ms)",
                        waited_ms: deadline.map_or(0, |(_, t)| t.as_millis() as u64),
                    },
                )?
            }
            other => other,
        };
        sampled.map_err(|source| self.replay_err(py, source))?;
        sampled_tuple(py, &self.layout, &batch)
    }

    /// An iterator of `(fields, keys, weights)` batches of `batch_size`, as
    /// `sample` returns them, ending after `max_batches` (0: never).
    /// `max_in_flight` is accepted for the remote handle's signature: in
    /// process there is no round trip to hide.
    #[pyo3(signature = (batch_size, *, max_batches=0, max_in_flight=0, timeout=None))]
    fn sample_stream(
        slf: &Bound<'_, Self>,
        batch_size: usize,
        max_batches: u64,
        max_in_flight: u32,
        timeout: Option<f64>,
    ) -> PyResult<PyLocalSampleStream> {
        let _ = max_in_flight;
        slf.get().plain("sample_stream")?;
        deadline_of("timeout", timeout)?;
        Ok(PyLocalSampleStream {
            buffer: slf.clone().unbind(),
            batch_size,
            timeout,
            left: std::sync::Mutex::new((max_batches > 0).then_some(max_batches)),
        })
    }

    /// Sets the priorities of `keys` (one finite, non-negative priority
    /// per key) in a prioritized table. Returns `{"applied", "stale",
    /// "invalid"}`: `stale` counts keys that name no stored item
    /// (overwritten since).
    fn update_priorities<'py>(
        &self,
        py: Python<'py>,
        keys: &Bound<'py, PyAny>,
        priorities: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let table = self.plain("update_priorities")?;
        let keys = arrays::keys(keys)?;
        let priorities = arrays::priorities(priorities, keys.len())?;
        let report = py
            .detach(|| table.update_priorities(&keys, &priorities))
            .map_err(|e| request_err(py, e))?;
        let d = PyDict::new(py);
        d.set_item("applied", report.applied)?;
        d.set_item("stale", report.stale)?;
        d.set_item("invalid", report.invalid)?;
        Ok(d)
    }

    /// Sets the learner's current policy version (the lag cap measures
    /// items against it).
    fn set_policy_version(&self, version: u64) -> PyResult<()> {
        self.guard.check("ReplayBuffer")?;
        match &self.table {
            LocalTable::Plain(t) => t.buffer().set_policy_version(version),
            LocalTable::Grouped(g) => g.table.set_policy_version(version),
        }
        Ok(())
    }

    /// The table's info dict, as the remote handle's `info()` returns it
    /// (fields, sampler, capacity, sizes, counters, rate limiter,
    /// storage).
    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.guard.check("ReplayBuffer")?;
        info_dict(py, &self.info_reply())
    }

    /// Writes the table's checkpoint to `<checkpoint_dir>/<name>.seedrpl`
    /// (inserts and samples from other threads go on meanwhile) and
    /// returns `{"path", "items", "bytes"}`; `ReplayBuffer.restore` reads
    /// it back.
    fn checkpoint<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let table = self.plain("checkpoint")?;
        let reply = py
            .detach(|| table.checkpoint())
            .map_err(|e| request_err(py, e))?;
        let d = PyDict::new(py);
        d.set_item("path", reply.path)?;
        d.set_item("items", reply.items)?;
        d.set_item("bytes", reply.bytes)?;
        Ok(d)
    }

    /// Grouped tables: appends steps to their trajectories (see the
    /// remote handle's `submit_steps`: the same arguments and checks).
    #[pyo3(signature = (trajectory_ids, group_ids, fields, policy_versions=None, is_last=None))]
    fn submit_steps<'py>(
        &self,
        py: Python<'py>,
        trajectory_ids: &Bound<'py, PyAny>,
        group_ids: &Bound<'py, PyAny>,
        fields: &Bound<'py, PyDict>,
        policy_versions: Option<&Bound<'py, PyAny>>,
        is_last: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let g = self.grouped("submit_steps")?;
        let batch = grouped::step_batch(
            &self.name,
            &self.layout,
            trajectory_ids,
            group_ids,
            fields,
            policy_versions,
            is_last,
        )?;
        let request = batch.into_request(&self.name);
        let reply = py
            .detach(|| in_process::submit_steps(&g.table, &request))
            .map_err(|s| status_to_py_err(py, s))?;
        grouped::submit_dict(py, &reply)
    }

    /// Grouped tables: ends a trajectory without a last step; returns
    /// whether that completed its group.
    fn complete_trajectory(&self, py: Python<'_>, trajectory_id: u64) -> PyResult<bool> {
        let g = self.grouped("complete_trajectory")?;
        let request = CompleteTrajectoryRequest {
            table: self.name.clone(),
            trajectory_id,
        };
        let reply = in_process::complete_trajectory(&g.table, &request)
            .map_err(|s| status_to_py_err(py, s))?;
        Ok(reply.group_completed)
    }

    /// Grouped tables: the oldest complete group, whole (a dict: see the
    /// remote handle's `fetch_group`), waiting up to `timeout` seconds
    /// (`None`: for ever; 0: not at all) without the GIL; `None` when none
    /// was ready in time.
    #[pyo3(signature = (timeout=None))]
    fn fetch_group<'py>(
        &self,
        py: Python<'py>,
        timeout: Option<f64>,
    ) -> PyResult<Option<Bound<'py, PyDict>>> {
        let g = self.grouped("fetch_group")?;
        let timeout_ms = match timeout {
            None => u64::MAX,
            Some(t) if t.is_finite() && t >= 0.0 => (t * 1000.0).round() as u64,
            Some(t) => {
                return Err(PyValueError::new_err(format!(
                    "timeout must be a number of seconds >= 0, is {t}"
                )))
            }
        };
        let request = FetchGroupRequest {
            table: self.name.clone(),
            timeout_ms,
        };
        let watch = InterruptWatch::default();
        let triggered = watch.clone().triggered();
        let table = Arc::clone(&g.table);
        let closing = g.closing.subscribe();
        let fetched = py.detach(|| {
            g.runtime.block_on(async move {
                tokio::select! {
                    r = in_process::fetch_group(table, &request, closing) => Some(r),
                    () = triggered => None,
                }
            })
        });
        match fetched {
            Some(reply) => {
                let reply = reply.map_err(|s| status_to_py_err(py, s))?;
                grouped::group_dict(py, &reply)
            }
            None => Err(watch
                .take()
                .unwrap_or_else(|| PyKeyboardInterrupt::new_err("interrupted"))),
        }
    }

    /// Closes the table: waiting calls wake with `ReplayError`
    /// (`UNAVAILABLE`) and later ones fail the same way; a mapped table's
    /// pages are written back. Idempotent.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.guard.check("ReplayBuffer")?;
        match &self.table {
            LocalTable::Plain(t) => {
                t.buffer().close();
                py.detach(|| t.buffer().flush())
                    .map_err(|source| self.replay_err(py, source))?;
            }
            LocalTable::Grouped(g) => {
                g.table.close();
                g.closing.send_replace(true);
            }
        }
        Ok(())
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    fn __reduce__(&self) -> PyResult<()> {
        ProcessGuard::refuse_pickle("ReplayBuffer")
    }

    fn __repr__(&self) -> String {
        format!("ReplayBuffer({:?})", self.name)
    }
}

/// `ReplayBuffer.sample_stream`: `sample` in a loop, as an iterator.
#[pyclass(module = "seed_rs._native", name = "LocalSampleStream", frozen)]
pub struct PyLocalSampleStream {
    buffer: Py<PyReplayBuffer>,
    batch_size: usize,
    timeout: Option<f64>,
    /// Batches left to yield; `None`: no limit. Set to `Some(0)` by `close`.
    left: std::sync::Mutex<Option<u64>>,
}

#[pymethods]
impl PyLocalSampleStream {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        {
            let mut left = self
                .left
                .lock()
                .map_err(|_| PyRuntimeError::new_err("sample stream state poisoned"))?;
            match *left {
                Some(0) => return Ok(None),
                Some(ref mut n) => *n -= 1,
                None => {}
            }
        }
        self.buffer
            .get()
            .sample(py, self.batch_size, self.timeout)
            .map(Some)
    }

    /// Ends the stream.
    fn close(&self) -> PyResult<()> {
        let mut left = self
            .left
            .lock()
            .map_err(|_| PyRuntimeError::new_err("sample stream state poisoned"))?;
        *left = Some(0);
        Ok(())
    }
}
