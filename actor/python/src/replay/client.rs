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
use seed_replay_service::client::{ClientOptions, SampleOptions, SampleStream};
use seed_replay_service::{ClientError, ReplayClient as RustClient};

use crate::interrupt::InterruptWatch;
use crate::replay::arrays;
use crate::replay::error::{protocol_error, to_py_err};
use crate::replay::layout::{info_dict, TableLayout};

/// The runtime and the connection, shared by a client and anything that
/// outlives one call (a stream object would hold an `Arc` of it).
pub struct Connection {
    runtime: tokio::runtime::Runtime,
    client: RustClient,
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
/// Methods: `insert`, `sample`, `sample_stream`, `update_priorities`,
/// `info`, `checkpoint`.
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
            token,
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
            connection: Arc::new(Connection { runtime, client }),
            layouts: Mutex::new(HashMap::new()),
        })
    }

    /// The address this client connected to.
    #[getter]
    fn addr(&self) -> &str {
        &self.addr
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
    fn insert<'py>(
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
        arrays::u64_array(py, &keys)
    }

    /// Samples `batch_size` items from `table`: returns `(fields, keys,
    /// weights)`, `fields` a dict of arrays shaped `[batch_size,
    /// *field_shape]` of the table's dtypes, `keys` `uint64`, `weights`
    /// the importance weights (`float32`; 1 unless prioritized).
    ///
    /// Waits for enough items (the rate limiter's minimum included) for
    /// ever, or `timeout` seconds (then `ReplayError` `DEADLINE_EXCEEDED`).
    #[pyo3(signature = (table, batch_size, timeout=None))]
    fn sample<'py>(
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
    fn sample_stream(
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
    fn update_priorities<'py>(
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
    fn info<'py>(&self, py: Python<'py>, table: Option<String>) -> PyResult<Bound<'py, PyDict>> {
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
    fn checkpoint<'py>(&self, py: Python<'py>, table: String) -> PyResult<Bound<'py, PyDict>> {
        let reply = self
            .connection
            .call(py, move |mut c| async move { c.checkpoint(&table).await })?;
        let d = PyDict::new(py);
        d.set_item("path", reply.path)?;
        d.set_item("items", reply.items)?;
        d.set_item("bytes", reply.bytes)?;
        Ok(d)
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
