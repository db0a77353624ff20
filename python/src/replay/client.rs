//! `seed_rs.ReplayClient`: one connection to a `replay-server` and the
//! calls over it, numpy arrays in and out.
//!
//! Each call converts its arguments with the GIL held ([`arrays`]), then
//! runs the Rust [`ReplayClient`] call on the object's own runtime with
//! the GIL released ([`Connection::call`]), then converts the reply. While
//! a call waits on the network other Python threads run, and Ctrl-C ends
//! the wait (the call is dropped, `KeyboardInterrupt` raised).
//!
//! # The runtime
//!
//! A current-thread tokio runtime: the calling Python thread drives the
//! connection itself inside `block_on`, so a round trip costs no wake-up
//! of another thread (27-42 us p50 across cores on a 2-core VM). Between
//! calls nothing runs the connection; HTTP/2 needs nothing meanwhile.
//! Several Python threads may call one client at once: tokio lets them
//! take turns driving the runtime, and their calls share the connection
//! (each clones the cheap [`ReplayClient`] handle).
//!
//! Cost per call, beyond the Rust client's: one GIL release and
//! re-acquisition, the array conversions of [`arrays`], and a 50 ms
//! interrupt check timer armed for the call.

use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pyo3::exceptions::{PyKeyboardInterrupt, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use seed_replay_service::client::{
    ClientOptions, FollowEvent, FollowOptions, FollowStream, SampleOptions, SampleStream,
};
use seed_replay_service::{ClientError, ReplayClient as RustClient};

use crate::interrupt::InterruptWatch;
use crate::replay::arrays;
use crate::replay::error::{protocol_error, to_py_err};
use crate::replay::grouped;
use crate::replay::layout::{info_dict, TableLayout};
use crate::replay::process_guard::ProcessGuard;

/// The runtime and the connection, shared by a client and anything that
/// outlives one call (a stream object would hold an `Arc` of it).
pub struct Connection {
    runtime: tokio::runtime::Runtime,
    client: RustClient,
    /// The runtime and connection do not survive `fork`.
    guard: ProcessGuard,
}

impl Connection {
    /// Runs `call` with a clone of the client on the runtime, the GIL
    /// released; Ctrl-C (a Python signal handler raising) drops the call
    /// and raises.
    pub fn call<T, F, Fut>(&self, py: Python<'_>, call: F) -> PyResult<T>
    where
        T: Send,
        F: FnOnce(RustClient) -> Fut + Send,
        Fut: Future<Output = Result<T, ClientError>> + Send,
    {
        self.guard.check("ReplayClient")?;
        let client = self.client.clone();
        self.run(py, call(client))
    }

    /// Runs `work` (a call on a stream the caller holds) as [`call`]
    /// does: the GIL released, Ctrl-C honoured.
    ///
    /// [`call`]: Connection::call
    pub fn run<T, Fut>(&self, py: Python<'_>, work: Fut) -> PyResult<T>
    where
        T: Send,
        Fut: Future<Output = Result<T, ClientError>> + Send,
    {
        self.guard.check("ReplayClient")?;
        let watch = InterruptWatch::default();
        let triggered = watch.clone().triggered();
        let result = py.detach(|| {
            self.runtime.block_on(async move {
                tokio::select! {
                    r = work => Some(r),
                    () = triggered => None,
                }
            })
        });
        match result {
            Some(r) => r.map_err(|e| to_py_err(py, e)),
            None => Err(watch
                .take()
                .unwrap_or_else(|| PyKeyboardInterrupt::new_err("interrupted"))),
        }
    }
}

/// A client of a seed-rs replay server (`replay-server`).
///
/// `ReplayClient(addr, token=None, *, tls_ca=None, tls_domain=None,
/// tls_cert=None, tls_key=None, max_message_bytes=None,
/// connect_timeout=10.0)` connects to `addr` (`HOST:PORT`,
/// `http://HOST:PORT`, or `https://HOST:PORT` with `tls_ca`), sending
/// `token` with every call. Raises `ReplayError` when the server cannot be
/// reached, `ValueError` for an unusable address or TLS file.
///
/// `table(name)` is a handle bound to one table with exactly the methods
/// of the in-process `ReplayBuffer` (switching between the two is changing
/// one constructor). The client's own methods take the table's name first:
/// `insert`, `sample`, `sample_stream`, `update_priorities`,
/// `set_policy_version`, `info`, `checkpoint`, `follow`, and for grouped
/// tables `submit_steps`, `complete_trajectory`, `fetch_group`.
/// Item data travels as numpy arrays shaped `[rows, *field_shape]` of the
/// table's dtypes. The server's refusals raise `ReplayError` with the
/// gRPC `code` and the server's `message`. One client may be used from
/// several threads; the network waits release the GIL.
#[pyclass(module = "seed_rs._native", name = "ReplayClient", frozen)]
pub struct PyReplayClient {
    addr: String,
    connection: Arc<Connection>,
    layouts: Mutex<HashMap<String, Arc<TableLayout>>>,
}

#[pymethods]
impl PyReplayClient {
    #[new]
    #[pyo3(signature = (
        addr, token=None, *, tls_ca=None, tls_domain=None, tls_cert=None, tls_key=None,
        max_message_bytes=None, connect_timeout=10.0,
    ))]
    // One parameter per Python keyword argument (pyo3 matches them by name).
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        addr: String,
        token: Option<String>,
        tls_ca: Option<PathBuf>,
        tls_domain: Option<String>,
        tls_cert: Option<PathBuf>,
        tls_key: Option<PathBuf>,
        max_message_bytes: Option<usize>,
        connect_timeout: f64,
    ) -> PyResult<Self> {
        let mut options = ClientOptions {
            token: seed_shared::Token::from_option(token.as_deref()),
            tls_domain,
            ..ClientOptions::default()
        };
        if let Some(n) = max_message_bytes {
            if n < 1024 {
                return Err(PyValueError::new_err(format!(
                    "max_message_bytes {n} is below 1024"
                )));
            }
            options.max_message_bytes = n;
        }
        if !(connect_timeout.is_finite() && connect_timeout > 0.0) {
            return Err(PyValueError::new_err(format!(
                "connect_timeout must be a positive number of seconds, is {connect_timeout}"
            )));
        }
        options.connect_timeout = Duration::from_secs_f64(connect_timeout);
        let tls_given = tls_ca.is_some() || tls_cert.is_some() || tls_key.is_some();
        if tls_given && !addr.starts_with("https://") {
            return Err(PyValueError::new_err(format!(
                "TLS options need an https:// address, got `{addr}`"
            )));
        }
        let tls_err = |e: seed_shared::TlsFileError| PyValueError::new_err(e.to_string());
        if let Some(ca) = &tls_ca {
            options.tls_ca =
                Some(seed_shared::tls::read_certificates("tls_ca", ca).map_err(tls_err)?);
        }
        options.tls_identity = match (&tls_cert, &tls_key) {
            (Some(cert), Some(key)) => Some((
                seed_shared::tls::read_certificates("tls_cert", cert).map_err(tls_err)?,
                seed_shared::tls::read_private_key("tls_key", key).map_err(tls_err)?,
            )),
            (None, None) => None,
            _ => {
                return Err(PyValueError::new_err(
                    "tls_cert and tls_key go together (a client certificate and its key)",
                ))
            }
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| PyRuntimeError::new_err(format!("cannot start a tokio runtime: {e}")))?;
        let connect = {
            let addr = addr.clone();
            py.detach(|| runtime.block_on(RustClient::connect(&addr, options)))
        };
        let client = connect.map_err(|e| to_py_err(py, e))?;
        Ok(PyReplayClient {
            addr,
            connection: Arc::new(Connection {
                runtime,
                client,
                guard: ProcessGuard::new(),
            }),
            layouts: Mutex::new(HashMap::new()),
        })
    }

    /// The address this client connected to.
    #[getter]
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// A handle bound to `table` (it shares this client's connection):
    /// the methods of `ReplayBuffer`, run by the server.
    ///
    /// Made through the `ReplayTable` class (`ReplayTable(client, name)`),
    /// which imports this file; this file does not import it.
    fn table<'py>(slf: &Bound<'py, Self>, name: String) -> PyResult<Bound<'py, PyAny>> {
        slf.py()
            .import("seed_rs._native")?
            .getattr("ReplayTable")?
            .call1((slf, name))
    }

    /// Inserts one batch into `table` and returns its keys (a `uint64`
    /// array, one per row, in row order).
    ///
    /// `fields` maps every field of the table to a C-contiguous array of
    /// the table's dtype shaped `[rows, *field_shape]` (no casts: a wrong
    /// dtype, shape, a missing or unknown field is a `ValueError` naming
    /// it). `priorities` (prioritized tables) and `policy_versions` give
    /// one value per row; with `policy_versions`, leave the table's
    /// policy-version field out.
    #[pyo3(signature = (table, fields, priorities=None, policy_versions=None))]
    pub fn insert<'py>(
        &self,
        py: Python<'py>,
        table: String,
        fields: &Bound<'py, PyDict>,
        priorities: Option<&Bound<'py, PyAny>>,
        policy_versions: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let layout = self.layout(py, &table)?;
        let batch = arrays::insert_batch(&table, &layout, fields, priorities, policy_versions)?;
        let keys =
            self.connection.call(
                py,
                move |mut c| async move { c.insert(&table, batch).await },
            )?;
        let keys: Vec<u64> = keys.iter().collect();
        Ok(arrays::u64_array(py, &keys))
    }

    /// Tells `table` the learner's current policy version (its lag cap
    /// measures items against it).
    pub fn set_policy_version(&self, py: Python<'_>, table: String, version: u64) -> PyResult<()> {
        self.connection.call(py, move |mut c| async move {
            c.set_policy_version(&table, version).await
        })
    }

    /// Grouped tables: appends steps to their trajectories. One row per
    /// step: `trajectory_ids[i]`, `group_ids[i]`, the row of every field
    /// of `fields` (as for `insert`, one step's layout),
    /// `policy_versions[i]` (default 0) and `is_last[i]` (default false:
    /// the trajectory goes on). Returns `{"groups_completed",
    /// "groups_dropped_over_capacity"}`.
    #[pyo3(signature = (table, trajectory_ids, group_ids, fields, policy_versions=None, is_last=None))]
    #[allow(clippy::too_many_arguments)]
    pub fn submit_steps<'py>(
        &self,
        py: Python<'py>,
        table: String,
        trajectory_ids: &Bound<'py, PyAny>,
        group_ids: &Bound<'py, PyAny>,
        fields: &Bound<'py, PyDict>,
        policy_versions: Option<&Bound<'py, PyAny>>,
        is_last: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let layout = self.layout(py, &table)?;
        let batch = grouped::step_batch(
            &table,
            &layout,
            trajectory_ids,
            group_ids,
            fields,
            policy_versions,
            is_last,
        )?;
        let report = self.connection.call(py, move |mut c| async move {
            c.submit_steps(&table, batch).await
        })?;
        grouped::submit_dict(
            py,
            &seed_replay_service::pb::SubmitStepsReply {
                groups_completed: report.groups_completed,
                groups_dropped_over_capacity: report.groups_dropped_over_capacity,
            },
        )
    }

    /// Grouped tables: ends trajectory `trajectory_id` without a last
    /// step; returns whether that completed its group.
    pub fn complete_trajectory(
        &self,
        py: Python<'_>,
        table: String,
        trajectory_id: u64,
    ) -> PyResult<bool> {
        self.connection.call(py, move |mut c| async move {
            c.complete_trajectory(&table, trajectory_id).await
        })
    }

    /// Grouped tables: the oldest complete group of `table`, whole, taken
    /// out of it: `{"group_id", "trajectory_ids", "lengths", "fields",
    /// "policy_versions"}`, each field one array of all its trajectories'
    /// steps one after another (`lengths` splits them). Waits up to
    /// `timeout` seconds (`None`: for ever; 0: not at all); `None` when no
    /// group was ready in time.
    #[pyo3(signature = (table, timeout=None))]
    pub fn fetch_group<'py>(
        &self,
        py: Python<'py>,
        table: String,
        timeout: Option<f64>,
    ) -> PyResult<Option<Bound<'py, PyDict>>> {
        let wait = match timeout {
            None => Duration::MAX,
            Some(t) if t.is_finite() && t >= 0.0 => Duration::from_secs_f64(t),
            Some(t) => {
                return Err(PyValueError::new_err(format!(
                    "timeout must be a number of seconds >= 0, is {t}"
                )))
            }
        };
        let group =
            self.connection.call(
                py,
                move |mut c| async move { c.fetch_group(&table, wait).await },
            )?;
        match group {
            None => Ok(None),
            Some(g) => grouped::group_dict(py, &g.into_reply()),
        }
    }

    /// Every item inserted into `table` from key `cursor` on (0: every
    /// item still stored), in key order, as the server publishes them: an
    /// iterator of dicts, `{"keys", "fields", "policy_versions",
    /// "next_key", "head_key", "replaced"}` for items, or `{"gap":
    /// (requested, oldest)}` when the keys from `requested` to `oldest`
    /// were overwritten before they could be read. It never ends by
    /// itself; `close()` ends it. `max_batch` and `max_in_flight`: the
    /// server's defaults when 0.
    #[pyo3(signature = (table, cursor=0, *, max_batch=0, max_in_flight=0))]
    pub fn follow(
        &self,
        py: Python<'_>,
        table: String,
        cursor: u64,
        max_batch: u32,
        max_in_flight: u32,
    ) -> PyResult<PyFollowStream> {
        let options = FollowOptions {
            cursor,
            max_batch,
            max_in_flight,
        };
        let stream = self.connection.call(py, move |mut c| async move {
            c.follow_with(&table, options).await
        })?;
        Ok(PyFollowStream {
            connection: self.connection.clone(),
            stream: Mutex::new(Some(stream)),
        })
    }

    /// Samples `batch_size` items from `table`: returns `(fields, keys,
    /// weights)`, `fields` a dict of arrays shaped `[batch_size,
    /// *field_shape]` of the table's dtypes, `keys` `uint64`, `weights`
    /// the importance weights (`float32`; 1 unless prioritized).
    ///
    /// Waits for enough items (the rate limiter's minimum included) for
    /// ever, or `timeout` seconds (then `ReplayError` `DEADLINE_EXCEEDED`).
    #[pyo3(signature = (table, batch_size, timeout=None))]
    pub fn sample<'py>(
        &self,
        py: Python<'py>,
        table: String,
        batch_size: u32,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let mut options = SampleOptions::new(batch_size);
        options.max_batches = 1;
        options.timeout = seconds("timeout", timeout)?;
        let reply = self.connection.call(py, move |mut c| async move {
            let mut stream = c.sample_stream(&table, options).await?;
            let batch = stream.next().await?.ok_or(ClientError::StreamClosed)?;
            // Read the stream to its end (its trailers) rather than drop
            // it: hyper answers many reset streams with GOAWAY.
            if stream.next().await?.is_some() {
                return Err(ClientError::Protocol {
                    reason: "a one-batch sample stream sent a second batch".into(),
                });
            }
            Ok(batch.into_reply())
        })?;
        arrays::sampled_tuple(py, &reply)
    }

    /// A pipelined sample stream over `table`: an iterator of `(fields,
    /// keys, weights)` batches of `batch_size`, as `sample` returns them.
    /// The server prepares up to `max_in_flight` batches (0: its default,
    /// 2; at most 16) ahead of what the client has read, so reading the
    /// next batch usually costs no round trip; it stops after
    /// `max_batches` (0: never; iterate as long as you like).
    #[pyo3(signature = (table, batch_size, *, max_batches=0, max_in_flight=0, timeout=None))]
    pub fn sample_stream(
        &self,
        py: Python<'_>,
        table: String,
        batch_size: u32,
        max_batches: u64,
        max_in_flight: u32,
        timeout: Option<f64>,
    ) -> PyResult<PySampleStream> {
        let mut options = SampleOptions::new(batch_size);
        options.max_batches = max_batches;
        options.max_in_flight = max_in_flight;
        options.timeout = seconds("timeout", timeout)?;
        let stream = self.connection.call(py, move |mut c| async move {
            c.sample_stream(&table, options).await
        })?;
        Ok(PySampleStream {
            connection: self.connection.clone(),
            stream: Mutex::new(Some(stream)),
        })
    }

    /// Sets the priorities of `keys` in a prioritized `table` (one
    /// priority per key). Returns `{"applied", "stale", "invalid"}`:
    /// `stale` counts keys that name no stored item (overwritten since),
    /// `invalid` priorities that are not finite (left unchanged).
    pub fn update_priorities<'py>(
        &self,
        py: Python<'py>,
        table: String,
        keys: &Bound<'py, PyAny>,
        priorities: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let keys = arrays::keys(keys)?;
        let priorities = arrays::priorities(priorities, keys.len())?;
        let report = self.connection.call(py, move |mut c| async move {
            c.update_priorities(&table, &keys, &priorities).await
        })?;
        let d = PyDict::new(py);
        d.set_item("applied", report.applied)?;
        d.set_item("stale", report.stale)?;
        d.set_item("invalid", report.invalid)?;
        Ok(d)
    }

    /// The server's tables: `info()` returns `{name: info}` for every
    /// table, `info(table)` that table's info dict (its fields, sampler,
    /// capacity, sizes, counters, rate limiter and storage).
    #[pyo3(signature = (table=None))]
    pub fn info<'py>(
        &self,
        py: Python<'py>,
        table: Option<String>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let asked = table.clone();
        let tables =
            self.connection.call(
                py,
                move |mut c| async move { c.info(asked.as_deref()).await },
            )?;
        if let Some(name) = table {
            let info = tables
                .iter()
                .find(|t| t.name == name)
                .ok_or_else(|| protocol_error(py, format!("no info on table `{name}`")))?;
            return info_dict(py, info);
        }
        let all = PyDict::new(py);
        for info in &tables {
            all.set_item(&info.name, info_dict(py, info)?)?;
        }
        Ok(all)
    }

    /// Has the server write `table`'s checkpoint into its configured
    /// checkpoint directory (the buffer's non-blocking checkpoint; inserts
    /// and samples go on). Returns `{"path", "items", "bytes"}` once the
    /// file is complete; `path` is on the server's file system.
    pub fn checkpoint<'py>(&self, py: Python<'py>, table: String) -> PyResult<Bound<'py, PyDict>> {
        let reply = self
            .connection
            .call(py, move |mut c| async move { c.checkpoint(&table).await })?;
        let d = PyDict::new(py);
        d.set_item("path", reply.path)?;
        d.set_item("items", reply.items)?;
        d.set_item("bytes", reply.bytes)?;
        Ok(d)
    }

    fn __reduce__(&self) -> PyResult<()> {
        ProcessGuard::refuse_pickle("ReplayClient")
    }

    fn __repr__(&self) -> String {
        format!("ReplayClient({:?})", self.addr)
    }
}

impl PyReplayClient {
    /// `table`'s layout: cached, else asked of the server once.
    fn layout(&self, py: Python<'_>, table: &str) -> PyResult<Arc<TableLayout>> {
        if let Some(l) = self.cached_layout(table) {
            return Ok(l);
        }
        let name = table.to_owned();
        let tables = self
            .connection
            .call(py, move |mut c| async move { c.info(Some(&name)).await })?;
        let info = tables
            .iter()
            .find(|t| t.name == table)
            .ok_or_else(|| protocol_error(py, format!("no info on table `{table}`")))?;
        let layout = Arc::new(TableLayout::from_info(info).map_err(|r| protocol_error(py, r))?);
        if let Ok(mut layouts) = self.layouts.lock() {
            layouts.insert(table.to_owned(), layout.clone());
        }
        Ok(layout)
    }

    fn cached_layout(&self, table: &str) -> Option<Arc<TableLayout>> {
        self.layouts.lock().ok()?.get(table).cloned()
    }
}

/// `what` seconds as a duration (`None` stays `None`).
fn seconds(what: &str, value: Option<f64>) -> PyResult<Option<Duration>> {
    match value {
        None => Ok(None),
        Some(t) if t.is_finite() && t > 0.0 => Ok(Some(Duration::from_secs_f64(t))),
        Some(t) => Err(PyValueError::new_err(format!(
            "{what} must be a positive number of seconds, is {t}"
        ))),
    }
}

/// A pipelined sample stream (`ReplayClient.sample_stream`): iterate it
/// for `(fields, keys, weights)` batches. A stream that ended on an error
/// stays ended; open another. `close()` (or dropping it) ends it early.
#[pyclass(module = "seed_rs._native", name = "SampleStream", frozen)]
pub struct PySampleStream {
    connection: Arc<Connection>,
    /// `None` once ended. A mutex because one iterator step runs with the
    /// GIL released; a second thread's step meanwhile is refused.
    stream: Mutex<Option<SampleStream>>,
}

#[pymethods]
impl PySampleStream {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let mut guard = self.stream.try_lock().map_err(|_| {
            PyRuntimeError::new_err("this sample stream is being read by another thread")
        })?;
        let Some(stream) = guard.as_mut() else {
            return Ok(None);
        };
        match self.connection.run(py, stream.next()) {
            Ok(Some(batch)) => arrays::sampled_tuple(py, &batch.into_reply()).map(Some),
            Ok(None) => {
                *guard = None;
                Ok(None)
            }
            Err(e) => {
                *guard = None;
                Err(e)
            }
        }
    }

    /// Ends the stream (the server stops preparing batches). Raises
    /// `RuntimeError` while another thread is reading it (waiting for the
    /// lock with the GIL held would deadlock with that reader, which needs
    /// the GIL to return).
    fn close(&self) -> PyResult<()> {
        let mut guard = self.stream.try_lock().map_err(|_| {
            PyRuntimeError::new_err("this sample stream is being read by another thread")
        })?;
        *guard = None;
        Ok(())
    }
}

/// `ReplayClient.follow`: an iterator over a table's inserts (see there).
#[pyclass(module = "seed_rs._native", name = "FollowStream", frozen)]
pub struct PyFollowStream {
    connection: Arc<Connection>,
    /// `None` once ended; a mutex as for `SampleStream`.
    stream: Mutex<Option<FollowStream>>,
}

#[pymethods]
impl PyFollowStream {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let mut guard = self.stream.try_lock().map_err(|_| {
            PyRuntimeError::new_err("this follow stream is being read by another thread")
        })?;
        let Some(stream) = guard.as_mut() else {
            return Ok(None);
        };
        let event = match self.connection.run(py, stream.next()) {
            Ok(Some(event)) => event,
            Ok(None) => {
                *guard = None;
                return Ok(None);
            }
            Err(e) => {
                *guard = None;
                return Err(e);
            }
        };
        let d = PyDict::new(py);
        match event {
            FollowEvent::Gap { requested, oldest } => d.set_item("gap", (requested, oldest))?,
            FollowEvent::Items(batch) => {
                let keys: Vec<u64> = batch.keys().collect();
                d.set_item("keys", arrays::u64_array(py, &keys))?;
                d.set_item(
                    "policy_versions",
                    arrays::u64_array(py, batch.policy_versions()),
                )?;
                d.set_item("next_key", batch.next_key())?;
                d.set_item("head_key", batch.head_key())?;
                let replaced = batch.replaced();
                d.set_item("replaced", (replaced.start, replaced.end))?;
                let items = batch.into_items();
                d.set_item(
                    "fields",
                    arrays::fields_dict(py, items.rows as usize, &items.fields)?,
                )?;
            }
        }
        Ok(Some(d))
    }

    /// Ends the stream (same rule as `SampleStream.close`).
    fn close(&self) -> PyResult<()> {
        let mut guard = self.stream.try_lock().map_err(|_| {
            PyRuntimeError::new_err("this follow stream is being read by another thread")
        })?;
        *guard = None;
        Ok(())
    }
}
