//! [`RemoteTable`]: one table of a replay server, the [`TableApi`] bodies
//! that run its calls over a [`Connection`]. `ReplayTable`
//! (`ReplayClient(addr).table(name)`) holds one; the client makes one per
//! call of its own table methods (`client.insert("t", ...)`).
//!
//! Each call converts its arguments with the GIL held (`arrays`, with the
//! checks the in-process buffer makes, so both refuse the same input with
//! the same error), runs the Rust client's call with the GIL released
//! ([`Connection::call`]) and converts the reply. `close()` ends this
//! handle only (the connection is shared with the client's other
//! handles); after it every call raises.
//!
//! Cost: the Rust client's call, the array conversions and the GIL
//! hand-offs; making one is an `Arc` clone.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use seed_replay_service::client::SubmitReport;
use seed_replay_service::client::{FollowOptions, SampleOptions, StepSubmitter};
use seed_replay_service::{pb, ClientError};

use crate::replay::arrays;
use crate::replay::connection::Connection;
use crate::replay::error::{protocol_error, to_py_err};
use crate::replay::grouped;
use crate::replay::layout::{checkpoint_dict, info_dict};
use crate::replay::remote_streams::{PyFollowStream, PySampleStream};
use crate::replay::table_api::TableApi;

/// A table of a replay server (module docs).
pub struct RemoteTable {
    connection: Arc<Connection>,
    name: String,
    /// The `SubmitStepsStream` of this handle's submits, kept between
    /// calls (`None` before the first, after a refusal ended it, or while
    /// a call holds it: a concurrent call opens its own).
    submitter: Mutex<Option<StepSubmitter>>,
    /// Counts of `wait=False` submits answered and not yet returned by
    /// `flush_submits`.
    unflushed: Mutex<pb::SubmitStepsReply>,
    /// Set by `close`. Relaxed: a flag read by the same or later calls,
    /// ordering nothing else.
    closed: AtomicBool,
}

impl RemoteTable {
    pub fn new(connection: Arc<Connection>, name: String) -> Self {
        RemoteTable {
            connection,
            name,
            submitter: Mutex::new(None),
            unflushed: Mutex::new(pb::SubmitStepsReply::default()),
            closed: AtomicBool::new(false),
        }
    }

    /// The connection, unless this handle is closed.
    fn open(&self) -> PyResult<&Connection> {
        // Relaxed: see `closed`.
        if self.closed.load(Ordering::Relaxed) {
            return Err(PyRuntimeError::new_err(format!(
                "this handle of table `{}` is closed",
                self.name
            )));
        }
        Ok(&self.connection)
    }

    /// The server's address.
    pub fn addr(&self) -> &str {
        self.connection.addr()
    }

    /// Sends a grouped table's steps on the handle's `SubmitStepsStream`
    /// (`StepSubmitter`: one message each way, not a call per submit).
    /// `wait`: answered before it returns (after the answers of any
    /// submits still in flight, whose refusal is raised first); else
    /// `None` once sent, taking answers only while more than
    /// `SUBMITS_IN_FLIGHT` are in flight. A refusal ends the stream; the
    /// next submit opens another.
    fn send_steps<'py>(
        &self,
        py: Python<'py>,
        batch: seed_replay_service::StepBatch,
        wait: bool,
    ) -> PyResult<Option<Bound<'py, PyDict>>> {
        let connection = self.open()?;
        let table = self.name.as_str();
        let held = self.submitter.lock().ok().and_then(|mut s| s.take());
        let (kept, mut answers, outcome) = connection.call(py, move |mut c| async move {
            let mut s = match held {
                Some(s) => s,
                None => c.step_submitter(table).await?,
            };
            let (answers, outcome) = async {
                let mut answers = Vec::new();
                // A send that fails found the stream ended by an earlier
                // submit's refusal: the answers before it come first.
                let sent = s.send(batch).await;
                let keep = match (&sent, wait) {
                    (Ok(()), false) => SUBMITS_IN_FLIGHT,
                    _ => 0,
                };
                while s.pending() > keep {
                    match s.ack().await {
                        Ok(r) => answers.push(r),
                        Err(e) => {
                            let lost = s.pending() - 1 + usize::from(sent.is_err());
                            let e = if lost > 0 { with_context(e, lost) } else { e };
                            return (answers, Err(e));
                        }
                    }
                }
                (answers, sent)
            }
            .await;
            Ok(match outcome {
                Ok(()) => (Some(s), answers, Ok(())),
                Err(e) => (None, answers, Err(e)),
            })
        })?;
        if let (Some(s), Ok(mut slot)) = (kept, self.submitter.lock()) {
            *slot = Some(s);
        }
        // With `wait` and no refusal the last answer is this submit's; the
        // others are earlier `wait=False` submits', kept for
        // `flush_submits` (also when a refusal follows them).
        let own = match (&outcome, wait) {
            (Ok(()), true) => answers.pop(),
            _ => None,
        };
        if let Ok(mut sum) = self.unflushed.lock() {
            for r in &answers {
                add_report(&mut sum, r);
            }
        }
        outcome.map_err(|e| to_py_err(py, e))?;
        match own {
            Some(r) => submit_report_dict(py, &r).map(Some),
            None if wait => Err(protocol_error(
                py,
                "a submit waited for was not answered".into(),
            )),
            None => Ok(None),
        }
    }
}

/// Submits `submit_steps(..., wait=False)` leaves in flight at most.
const SUBMITS_IN_FLIGHT: usize = 8;

/// `e`, saying that `lost` submits sent after the refused one were not
/// stored.
fn with_context(e: ClientError, lost: usize) -> ClientError {
    match e {
        ClientError::Status { code, message } => ClientError::Status {
            code,
            message: format!(
                "{message} (an earlier submit_steps(..., wait=False); the {lost} sent after it \
                 were not stored)"
            ),
        },
        other => other,
    }
}

fn merge_replies(sum: &mut pb::SubmitStepsReply, r: &pb::SubmitStepsReply) {
    sum.groups_completed += r.groups_completed;
    sum.groups_dropped_over_capacity += r.groups_dropped_over_capacity;
    sum.groups_dropped_queue_full += r.groups_dropped_queue_full;
}

fn add_report(sum: &mut pb::SubmitStepsReply, r: &SubmitReport) {
    sum.groups_completed += r.groups_completed;
    sum.groups_dropped_over_capacity += r.groups_dropped_over_capacity;
    sum.groups_dropped_queue_full += r.groups_dropped_queue_full;
}

fn submit_report_dict<'py>(py: Python<'py>, r: &SubmitReport) -> PyResult<Bound<'py, PyDict>> {
    grouped::submit_dict(
        py,
        &pb::SubmitStepsReply {
            groups_completed: r.groups_completed,
            groups_dropped_over_capacity: r.groups_dropped_over_capacity,
            groups_dropped_queue_full: r.groups_dropped_queue_full,
        },
    )
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

impl TableApi for RemoteTable {
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
        let connection = self.open()?;
        let table = self.name.as_str();
        let layout = connection.layout(py, table)?;
        let batch = arrays::insert_batch(table, &layout, fields, priorities, policy_versions)?;
        let keys = connection.call(py, move |mut c| async move { c.insert(table, batch).await })?;
        let keys: Vec<u64> = keys.iter().collect();
        Ok(arrays::u64_array(py, &keys))
    }

    fn sample<'py>(
        &self,
        py: Python<'py>,
        batch_size: u32,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let connection = self.open()?;
        let table = self.name.as_str();
        let mut options = SampleOptions::new(batch_size);
        options.max_batches = 1;
        options.timeout = seconds("timeout", timeout)?;
        let reply = connection.call(py, move |mut c| async move {
            let mut stream = c.sample_stream(table, options).await?;
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

    fn sample_stream<'py>(
        &self,
        py: Python<'py>,
        batch_size: u32,
        max_batches: u64,
        max_in_flight: u32,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let connection = self.open()?;
        let table = self.name.as_str();
        let mut options = SampleOptions::new(batch_size);
        options.max_batches = max_batches;
        options.max_in_flight = max_in_flight;
        options.timeout = seconds("timeout", timeout)?;
        let stream = connection.call(py, move |mut c| async move {
            c.sample_stream(table, options).await
        })?;
        let stream = PySampleStream::new(Arc::clone(&self.connection), stream);
        Ok(Bound::new(py, stream)?.into_any())
    }

    fn update_priorities<'py>(
        &self,
        py: Python<'py>,
        keys: &Bound<'py, PyAny>,
        priorities: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let connection = self.open()?;
        let table = self.name.as_str();
        let keys = arrays::keys(keys)?;
        let priorities = arrays::priorities(priorities, keys.len())?;
        let (keys, priorities) = (&keys, &priorities);
        let report = connection.call(py, move |mut c| async move {
            c.update_priorities(table, keys, priorities).await
        })?;
        let d = PyDict::new(py);
        d.set_item("applied", report.applied)?;
        d.set_item("stale", report.stale)?;
        d.set_item("invalid", report.invalid)?;
        Ok(d)
    }

    fn set_policy_version<'py>(&self, py: Python<'py>, version: u64) -> PyResult<()> {
        let connection = self.open()?;
        let table = self.name.as_str();
        connection.call(py, move |mut c| async move {
            c.set_policy_version(table, version).await
        })
    }

    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let info = self.open()?.table_info(py, &self.name)?;
        info_dict(py, &info)
    }

    fn checkpoint<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let connection = self.open()?;
        let table = self.name.as_str();
        let reply = connection.call(py, move |mut c| async move { c.checkpoint(table).await })?;
        checkpoint_dict(py, reply)
    }

    fn submit_steps<'py>(
        &self,
        py: Python<'py>,
        trajectory_ids: &Bound<'py, PyAny>,
        group_ids: &Bound<'py, PyAny>,
        fields: &Bound<'py, PyDict>,
        policy_versions: Option<&Bound<'py, PyAny>>,
        is_last: Option<&Bound<'py, PyAny>>,
        metadata: Option<&Bound<'py, PyAny>>,
        wait: bool,
    ) -> PyResult<Option<Bound<'py, PyDict>>> {
        let connection = self.open()?;
        let table = self.name.as_str();
        let layout = connection.layout(py, table)?;
        let batch = grouped::step_batch(
            table,
            &layout,
            trajectory_ids,
            group_ids,
            fields,
            policy_versions,
            is_last,
            metadata,
        )?;
        self.send_steps(py, batch, wait)
    }

    fn flush_submits<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let connection = self.open()?;
        let held = self.submitter.lock().ok().and_then(|mut s| s.take());
        let Some(mut s) = held else {
            let earlier = self
                .unflushed
                .lock()
                .map(|mut e| std::mem::take(&mut *e))
                .unwrap_or_default();
            return grouped::submit_dict(py, &earlier);
        };
        let (kept, mut sum, outcome) = connection.call(py, move |_| async move {
            let mut sum = pb::SubmitStepsReply::default();
            let mut answered = Ok(());
            while s.pending() > 0 {
                match s.ack().await {
                    Ok(r) => add_report(&mut sum, &r),
                    Err(e) => {
                        answered = Err(with_context(e, s.pending().saturating_sub(1)));
                        break;
                    }
                }
            }
            Ok(match answered {
                Ok(()) => (Some(s), sum, Ok(())),
                Err(e) => (None, sum, Err(e)),
            })
        })?;
        if let (Some(s), Ok(mut slot)) = (kept, self.submitter.lock()) {
            *slot = Some(s);
        }
        if let Err(e) = outcome {
            // The answers before the refusal wait for the next flush.
            if let Ok(mut earlier) = self.unflushed.lock() {
                merge_replies(&mut earlier, &sum);
            }
            return Err(to_py_err(py, e));
        }
        if let Ok(mut earlier) = self.unflushed.lock() {
            merge_replies(&mut sum, &std::mem::take(&mut *earlier));
        }
        grouped::submit_dict(py, &sum)
    }

    fn submit_step<'py>(
        &self,
        py: Python<'py>,
        trajectory_id: &Bound<'py, PyAny>,
        group_id: &Bound<'py, PyAny>,
        step: &Bound<'py, PyDict>,
        policy_version: u64,
        is_last: bool,
        metadata: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let connection = self.open()?;
        let table = self.name.as_str();
        let layout = connection.layout(py, table)?;
        let batch = grouped::one_step_batch(
            table,
            &layout,
            trajectory_id,
            group_id,
            step,
            policy_version,
            is_last,
            metadata,
        )?;
        self.send_steps(py, batch, true)?
            .ok_or_else(|| protocol_error(py, "a submit waited for was not answered".into()))
    }

    fn complete_trajectory<'py>(
        &self,
        py: Python<'py>,
        trajectory_id: &Bound<'py, PyAny>,
    ) -> PyResult<bool> {
        let connection = self.open()?;
        let table = self.name.as_str();
        let layout = connection.layout(py, table)?;
        match grouped::trajectory_id(table, &layout, trajectory_id)? {
            Ok(id) => connection.call(py, move |mut c| async move {
                c.complete_trajectory(table, id).await
            }),
            Err(uid) => connection.call(py, move |mut c| async move {
                c.complete_trajectory_uid(table, &uid).await
            }),
        }
    }

    fn fetch_batch<'py>(
        &self,
        py: Python<'py>,
        timeout: Option<f64>,
    ) -> PyResult<Option<Bound<'py, PyDict>>> {
        self.fetch_group(py, timeout)
    }

    fn fetch_group<'py>(
        &self,
        py: Python<'py>,
        timeout: Option<f64>,
    ) -> PyResult<Option<Bound<'py, PyDict>>> {
        let connection = self.open()?;
        let table = self.name.as_str();
        let wait = match timeout {
            None => Duration::MAX,
            Some(t) if t.is_finite() && t >= 0.0 => Duration::from_secs_f64(t),
            Some(t) => {
                return Err(PyValueError::new_err(format!(
                    "timeout must be a number of seconds >= 0, is {t}"
                )))
            }
        };
        let group = connection.call(
            py,
            move |mut c| async move { c.fetch_group(table, wait).await },
        )?;
        match group {
            None => Ok(None),
            Some(g) => grouped::group_dict(py, &g.into_reply()),
        }
    }

    fn follow<'py>(
        &self,
        py: Python<'py>,
        cursor: u64,
        max_batch: u32,
        max_in_flight: u32,
    ) -> PyResult<Bound<'py, PyAny>> {
        let connection = self.open()?;
        let table = self.name.as_str();
        let options = FollowOptions {
            cursor,
            max_batch,
            max_in_flight,
        };
        let stream = connection.call(py, move |mut c| async move {
            c.follow_with(table, options).await
        })?;
        let stream = PyFollowStream::new(Arc::clone(&self.connection), stream);
        Ok(Bound::new(py, stream)?.into_any())
    }

    fn close<'py>(&self, _py: Python<'py>) -> PyResult<()> {
        // Relaxed: see `closed`.
        self.closed.store(true, Ordering::Relaxed);
        // Its submit stream ends with it.
        if let Ok(mut s) = self.submitter.lock() {
            s.take();
        }
        Ok(())
    }
}
