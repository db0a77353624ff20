//! The iterators over a server's streams: `SampleStream` (`sample_stream`
//! of a server's table) and `FollowStream` (its `follow`). Each holds the
//! [`Connection`] and the Rust stream behind a mutex, and reads one message
//! per `__next__` with [`Connection::run`] (the GIL released, Ctrl-C
//! honoured).
//!
//! A stream that ended on an error stays ended; open another. `close()`
//! (or dropping it) ends it early. Cost per message: the array
//! conversions of `arrays`.
use std::sync::{Arc, Mutex};

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use seed_replay_service::client::{FollowEvent, FollowStream, SampleStream};

use crate::replay::arrays;
use crate::replay::connection::Connection;
use crate::replay::follow_event::{gap_dict, items_dict, FollowedItems};

/// A pipelined sample stream of a server's table: iterate it for
/// `(fields, keys, weights)` batches.
#[pyclass(module = "seed_rs._native", name = "SampleStream", frozen)]
pub struct PySampleStream {
    connection: Arc<Connection>,
    /// `None` once ended. A mutex because one iterator step runs with the
    /// GIL released; a second thread's step meanwhile is refused.
    stream: Mutex<Option<SampleStream>>,
}

impl PySampleStream {
    pub fn new(connection: Arc<Connection>, stream: SampleStream) -> Self {
        PySampleStream {
            connection,
            stream: Mutex::new(Some(stream)),
        }
    }
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

/// `follow` of a server's table: an iterator over its inserts (see the
/// table's `follow`).
#[pyclass(module = "seed_rs._native", name = "FollowStream", frozen)]
pub struct PyFollowStream {
    connection: Arc<Connection>,
    /// `None` once ended; a mutex as for `SampleStream`.
    stream: Mutex<Option<FollowStream>>,
}

impl PyFollowStream {
    pub fn new(connection: Arc<Connection>, stream: FollowStream) -> Self {
        PyFollowStream {
            connection,
            stream: Mutex::new(Some(stream)),
        }
    }
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
        match event {
            FollowEvent::Gap { requested, oldest } => gap_dict(py, requested, oldest).map(Some),
            FollowEvent::Items(batch) => {
                let keys = batch.keys();
                let head_key = batch.head_key();
                let replaced = batch.replaced();
                let items = batch.into_items();
                let fields = arrays::fields_dict(py, items.rows as usize, &items.fields)?;
                items_dict(
                    py,
                    FollowedItems {
                        keys,
                        fields,
                        policy_versions: &items.policy_versions,
                        head_key,
                        replaced,
                    },
                )
                .map(Some)
            }
        }
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
