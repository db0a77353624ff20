//! The iterators of an in-process table: `LocalSampleStream`
//! (`ReplayBuffer.sample_stream`, `sample` in a loop) and
//! `LocalFollowStream` (`ReplayBuffer.follow`, the inserts from a cursor
//! on, as a server's `Follow` sends them).
//!
//! # Following in process
//! Each step is one [`ReplayBuffer::read_since`], the table-level read
//! the server's `Follow` producer makes (the slot seqlock read, so never a
//! torn item; items in key order, a gap when the cursor's item was
//! overwritten before it was read), into a batch made once. When nothing
//! new is published the step waits without the GIL, reading again every
//! [`POLL`] (an in-process insert signals nothing a reader could wait on;
//! the server polls its in-process inserts the same way), and checks
//! Ctrl-C every [`WAIT_SLICE`]. Closing the table ends the stream with
//! `ReplayError` `UNAVAILABLE`.
//!
//! Cost per step: one seqlock read per item into the reused batch, one
//! copy of each field into a new array; while waiting, one read of the
//! cursor's slot per [`POLL`].
//!
//! [`ReplayBuffer::read_since`]: seed_replay::ReplayBuffer::read_since
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use seed_replay::{FollowRead, ReplayError, SampleBatch};
use seed_replay_service::server::in_process;

use crate::replay::follow_event::{gap_dict, items_dict, FollowedItems};
use crate::replay::local_table::{batch_fields, LocalTable, WAIT_SLICE};
use crate::replay::table_api::TableApi;

/// How often a follow step waiting for inserts reads again.
const POLL: Duration = Duration::from_millis(10);

/// `ReplayBuffer.sample_stream`: `sample` in a loop, as an iterator.
#[pyclass(module = "seed_rs._native", name = "LocalSampleStream", frozen)]
pub struct PyLocalSampleStream {
    table: Arc<LocalTable>,
    batch_size: u32,
    timeout: Option<f64>,
    /// Batches left to yield; `None`: no limit. Set to `Some(0)` by `close`.
    left: Mutex<Option<u64>>,
}

impl PyLocalSampleStream {
    /// `max_batches` 0: no limit.
    pub fn new(
        table: Arc<LocalTable>,
        batch_size: u32,
        timeout: Option<f64>,
        max_batches: u64,
    ) -> Self {
        PyLocalSampleStream {
            table,
            batch_size,
            timeout,
            left: Mutex::new((max_batches > 0).then_some(max_batches)),
        }
    }
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
        self.table
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

/// Where a follow stream stands.
struct Cursor {
    /// The next key wanted.
    next: u64,
    /// The batch each read fills; its `max_rows` caps a step's items.
    batch: SampleBatch,
}

/// What one wait without the GIL found.
enum Step {
    Read(FollowRead),
    Closed,
    /// Nothing new within a slice: check Ctrl-C, then wait again.
    Idle,
}

/// `ReplayBuffer.follow`: an iterator over the table's inserts (module
/// docs; the events are the table's `follow` describes).
#[pyclass(module = "seed_rs._native", name = "LocalFollowStream", frozen)]
pub struct PyLocalFollowStream {
    table: Arc<LocalTable>,
    /// `None` once ended. A mutex because a step runs with the GIL
    /// released; a second thread's step meanwhile is refused.
    cursor: Mutex<Option<Cursor>>,
}

impl PyLocalFollowStream {
    /// A stream from key `cursor` on, reading into `batch`.
    pub fn new(table: Arc<LocalTable>, cursor: u64, batch: SampleBatch) -> Self {
        PyLocalFollowStream {
            table,
            cursor: Mutex::new(Some(Cursor {
                next: cursor,
                batch,
            })),
        }
    }
}

#[pymethods]
impl PyLocalFollowStream {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let mut guard = self.cursor.try_lock().map_err(|_| {
            PyRuntimeError::new_err("this follow stream is being read by another thread")
        })?;
        let Some(cursor) = guard.as_mut() else {
            return Ok(None);
        };
        let table = self.table.plain("follow")?;
        let buffer = table.buffer();
        loop {
            let first = cursor.next;
            let batch = &mut cursor.batch;
            let step = py.detach(|| {
                let until = Instant::now() + WAIT_SLICE;
                loop {
                    if buffer.is_closed() {
                        return Step::Closed;
                    }
                    let max = batch.max_rows();
                    match buffer.read_since(first, batch, max) {
                        FollowRead::Items { next } if next == first => {}
                        read => return Step::Read(read),
                    }
                    if Instant::now() >= until {
                        return Step::Idle;
                    }
                    std::thread::sleep(POLL);
                }
            });
            match step {
                Step::Idle => py.check_signals()?,
                Step::Closed => {
                    *guard = None;
                    return Err(self.table.replay_err(py, ReplayError::Closed));
                }
                Step::Read(FollowRead::Gap { oldest }) => {
                    cursor.next = oldest;
                    return gap_dict(py, first, oldest).map(Some);
                }
                Step::Read(FollowRead::Items { next }) => {
                    cursor.next = next;
                    let batch = &cursor.batch;
                    let items = FollowedItems {
                        keys: first..next,
                        fields: batch_fields(py, self.table.layout(), batch)?,
                        policy_versions: batch.policy_versions(),
                        head_key: buffer.next_key(),
                        replaced: in_process::replaced_keys(first, next, buffer.capacity() as u64),
                    };
                    return items_dict(py, items).map(Some);
                }
            }
        }
    }

    /// Ends the stream. Raises `RuntimeError` while another thread is
    /// reading it (as `FollowStream.close`).
    fn close(&self) -> PyResult<()> {
        let mut guard = self.cursor.try_lock().map_err(|_| {
            PyRuntimeError::new_err("this follow stream is being read by another thread")
        })?;
        *guard = None;
        Ok(())
    }
}
