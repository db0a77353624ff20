//! `ReplayClient(addr).table(name)`: a handle bound to one table of a
//! replay server, with exactly the methods of the in-process
//! `ReplayBuffer`, so that moving a table out of the process (to share it
//! between processes or machines) is changing one constructor.
//!
//! Each method is the client's method of the same name with the table's
//! name filled in; the checks on the arrays are the same functions as the
//! buffer's (`arrays`), so both refuse the same input with the same
//! error. `close()` ends this handle only (the connection is the
//! client's, shared with its other handles); after it every call raises.
//! Cost: the client's, plus one attribute lookup.
use std::sync::atomic::{AtomicBool, Ordering};

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::replay::client::{PyFollowStream, PyReplayClient, PySampleStream};
use crate::replay::process_guard::ProcessGuard;

/// A table of a replay server (module docs).
#[pyclass(module = "seed_rs._native", name = "ReplayTable", frozen)]
pub struct PyReplayTable {
    client: Py<PyReplayClient>,
    name: String,
    /// Set by `close`. Relaxed: a flag read by the same or later calls,
    /// ordering nothing else.
    closed: AtomicBool,
}

impl PyReplayTable {
    fn client(&self) -> PyResult<&PyReplayClient> {
        // Relaxed: module docs.
        if self.closed.load(Ordering::Relaxed) {
            return Err(PyRuntimeError::new_err(format!(
                "this handle of table `{}` is closed",
                self.name
            )));
        }
        Ok(self.client.get())
    }
}

#[pymethods]
impl PyReplayTable {
    /// `ReplayTable(client, name)`, the same as `client.table(name)`.
    #[new]
    fn new(client: Py<PyReplayClient>, name: String) -> Self {
        PyReplayTable {
            client,
            name,
            closed: AtomicBool::new(false),
        }
    }

    /// The table's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// See `ReplayBuffer.insert`.
    #[pyo3(signature = (fields, priorities=None, policy_versions=None))]
    fn insert<'py>(
        &self,
        py: Python<'py>,
        fields: &Bound<'py, PyDict>,
        priorities: Option<&Bound<'py, PyAny>>,
        policy_versions: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.client()?
            .insert(py, self.name.clone(), fields, priorities, policy_versions)
    }

    /// See `ReplayBuffer.sample`.
    #[pyo3(signature = (batch_size, timeout=None))]
    fn sample<'py>(
        &self,
        py: Python<'py>,
        batch_size: u32,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        self.client()?
            .sample(py, self.name.clone(), batch_size, timeout)
    }

    /// See `ReplayBuffer.sample_stream`; here the server prepares up to
    /// `max_in_flight` batches (0: its default) ahead of the reader.
    #[pyo3(signature = (batch_size, *, max_batches=0, max_in_flight=0, timeout=None))]
    fn sample_stream(
        &self,
        py: Python<'_>,
        batch_size: u32,
        max_batches: u64,
        max_in_flight: u32,
        timeout: Option<f64>,
    ) -> PyResult<PySampleStream> {
        self.client()?.sample_stream(
            py,
            self.name.clone(),
            batch_size,
            max_batches,
            max_in_flight,
            timeout,
        )
    }

    /// See `ReplayBuffer.update_priorities`.
    fn update_priorities<'py>(
        &self,
        py: Python<'py>,
        keys: &Bound<'py, PyAny>,
        priorities: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyDict>> {
        self.client()?
            .update_priorities(py, self.name.clone(), keys, priorities)
    }

    /// See `ReplayBuffer.set_policy_version`.
    fn set_policy_version(&self, py: Python<'_>, version: u64) -> PyResult<()> {
        self.client()?
            .set_policy_version(py, self.name.clone(), version)
    }

    /// See `ReplayBuffer.info`.
    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.client()?.info(py, Some(self.name.clone()))
    }

    /// See `ReplayBuffer.checkpoint`; the file is written on the server,
    /// into its `checkpoint_dir`.
    fn checkpoint<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.client()?.checkpoint(py, self.name.clone())
    }

    /// Grouped tables; see `ReplayClient.submit_steps`.
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
        self.client()?.submit_steps(
            py,
            self.name.clone(),
            trajectory_ids,
            group_ids,
            fields,
            policy_versions,
            is_last,
        )
    }

    /// Grouped tables; see `ReplayClient.complete_trajectory`.
    fn complete_trajectory(&self, py: Python<'_>, trajectory_id: u64) -> PyResult<bool> {
        self.client()?
            .complete_trajectory(py, self.name.clone(), trajectory_id)
    }

    /// Grouped tables; see `ReplayClient.fetch_group`.
    #[pyo3(signature = (timeout=None))]
    fn fetch_group<'py>(
        &self,
        py: Python<'py>,
        timeout: Option<f64>,
    ) -> PyResult<Option<Bound<'py, PyDict>>> {
        self.client()?.fetch_group(py, self.name.clone(), timeout)
    }

    /// Every item inserted from `cursor` on; see `ReplayClient.follow`.
    #[pyo3(signature = (cursor=0, *, max_batch=0, max_in_flight=0))]
    fn follow(
        &self,
        py: Python<'_>,
        cursor: u64,
        max_batch: u32,
        max_in_flight: u32,
    ) -> PyResult<PyFollowStream> {
        self.client()?
            .follow(py, self.name.clone(), cursor, max_batch, max_in_flight)
    }

    /// Ends this handle (not the client's connection). Idempotent.
    fn close(&self) {
        // Relaxed: module docs.
        self.closed.store(true, Ordering::Relaxed);
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, _args: &Bound<'_, PyTuple>) -> bool {
        self.close();
        false
    }

    fn __reduce__(&self) -> PyResult<()> {
        ProcessGuard::refuse_pickle("ReplayTable")
    }

    fn __repr__(&self) -> String {
        format!(
            "ReplayTable({:?}, {:?})",
            self.client.get().addr(),
            self.name
        )
    }
}
