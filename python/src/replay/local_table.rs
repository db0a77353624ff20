//! [`LocalTable`]: a replay table in this process, the [`TableApi`] bodies
//! that `seed_rs.ReplayBuffer` runs (implemented for `Arc<LocalTable>`:
//! its streams share the table).
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

use pyo3::exceptions::{PyKeyboardInterrupt, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use seed_replay::{FieldRef, ReplayError, SampleBatch, SamplerConfig, Values};
use seed_replay_service::pb::{
    CompleteTrajectoryRequest, FetchGroupRequest, FollowRequest, TableInfo,
};
use seed_replay_service::server::{in_process, GroupedTable, Table};
use seed_replay_service::RequestError;
use tokio::sync::watch;
use tonic::Status;

use crate::interrupt::InterruptWatch;
use crate::replay::arrays;
use crate::replay::error::status_to_py_err;
use crate::replay::grouped;
use crate::replay::layout::{info_dict, TableLayout};
use crate::replay::local_streams::{PyLocalFollowStream, PyLocalSampleStream};
use crate::replay::process_guard::ProcessGuard;
use crate::replay::table_api::TableApi;
use crate::replay::table_config::{self, TableKind};

/// How long one wait runs without the GIL before Ctrl-C is checked.
pub const WAIT_SLICE: Duration = Duration::from_millis(50);

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

enum LocalKind {
    Plain(Arc<Table>),
    Grouped(GroupedLocal),
}

/// A replay table in this process (module docs).
pub struct LocalTable {
    name: String,
    kind: LocalKind,
    layout: TableLayout,
    guard: ProcessGuard,
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

    fn grouped(&self, call: &str) -> PyResult<&GroupedLocal> {
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

    fn info_reply(&self) -> TableInfo {
        match &self.kind {
            LocalKind::Plain(t) => in_process::table_info(t),
            LocalKind::Grouped(g) => in_process::grouped_table_info(&g.table),
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

/// The fields of `batch` (read from a table of `layout`) as `{name: array
/// [rows, *shape]}`.
pub fn batch_fields<'py>(
    py: Python<'py>,
    layout: &TableLayout,
    batch: &SampleBatch,
) -> PyResult<Bound<'py, PyDict>> {
    let rows = batch.len();
    let fields = PyDict::new(py);
    for (index, spec) in layout.fields.iter().enumerate() {
        let bytes = batch.field_bytes(index).unwrap_or(&[]);
        let mut shape = Vec::with_capacity(spec.shape.len() + 1);
        shape.push(rows);
        shape.extend_from_slice(&spec.shape);
        fields.set_item(&spec.name, arrays::array(py, spec.dtype, &shape, bytes))?;
    }
    Ok(fields)
}

/// A sampled batch as `(fields, keys, weights)`.
fn sampled_tuple<'py>(
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

impl TableApi for Arc<LocalTable> {
    fn name(&self) -> &str {
        &self.name
    }

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

    fn sample<'py>(
        &self,
        py: Python<'py>,
        batch_size: u32,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let table = self.plain("sample")?;
        if batch_size == 0 {
            return Err(request_err(
                py,
                RequestError::invalid("batch_size", "must be at least 1"),
            ));
        }
        let batch_size = batch_size as usize;
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

    fn sample_stream<'py>(
        &self,
        py: Python<'py>,
        batch_size: u32,
        max_batches: u64,
        _max_in_flight: u32,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        // `max_in_flight`: nothing is prepared ahead in process.
        self.plain("sample_stream")?;
        deadline_of("timeout", timeout)?;
        let stream = PyLocalSampleStream::new(Arc::clone(self), batch_size, timeout, max_batches);
        Ok(Bound::new(py, stream)?.into_any())
    }

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

    fn set_policy_version<'py>(&self, _py: Python<'py>, version: u64) -> PyResult<()> {
        self.guard.check("ReplayBuffer")?;
        match &self.kind {
            LocalKind::Plain(t) => t.buffer().set_policy_version(version),
            LocalKind::Grouped(g) => g.table.set_policy_version(version),
        }
        Ok(())
    }

    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.guard.check("ReplayBuffer")?;
        info_dict(py, &self.info_reply())
    }

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

    fn complete_trajectory<'py>(&self, py: Python<'py>, trajectory_id: u64) -> PyResult<bool> {
        let g = self.grouped("complete_trajectory")?;
        let request = CompleteTrajectoryRequest {
            table: self.name.clone(),
            trajectory_id,
        };
        let reply = in_process::complete_trajectory(&g.table, &request)
            .map_err(|s| status_to_py_err(py, s))?;
        Ok(reply.group_completed)
    }

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

    /// The server's `Follow` checks ([`in_process::follow_plan`]: a cursor
    /// ahead of the table, a `max_in_flight` above the cap), then a
    /// [`PyLocalFollowStream`].
    fn follow<'py>(
        &self,
        py: Python<'py>,
        cursor: u64,
        max_batch: u32,
        max_in_flight: u32,
    ) -> PyResult<Bound<'py, PyAny>> {
        let table = self.plain("follow")?;
        let request = FollowRequest {
            table: self.name.clone(),
            cursor,
            max_batch,
            max_in_flight,
        };
        // No message to fit in process.
        let plan =
            in_process::follow_plan(table, &request, usize::MAX).map_err(|e| request_err(py, e))?;
        let batch = table.buffer().new_batch(plan.max_batch);
        let stream = PyLocalFollowStream::new(Arc::clone(self), plan.cursor, batch);
        Ok(Bound::new(py, stream)?.into_any())
    }

    fn close<'py>(&self, py: Python<'py>) -> PyResult<()> {
        self.guard.check("ReplayBuffer")?;
        match &self.kind {
            LocalKind::Plain(t) => {
                t.buffer().close();
                py.detach(|| t.buffer().flush())
                    .map_err(|source| self.replay_err(py, source))?;
            }
            LocalKind::Grouped(g) => {
                g.table.close();
                g.closing.send_replace(true);
            }
        }
        Ok(())
    }
}
