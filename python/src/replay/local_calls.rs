//! The [`TableApi`] bodies of a table in this process (implemented for
//! `Arc<LocalTable>`: its streams share the table), which
//! `seed_rs.ReplayBuffer` runs: inserts, samples and their streams,
//! priorities, info and checkpoints, the grouped calls, follow, close.
//!
//! Why a file apart from [`LocalTable`]: the streams (`local_streams`)
//! read the table, and these calls open the streams, so the table sits
//! below both and the calls above them. Threads, the GIL and the cost of
//! each call: `local_table`'s module docs.
use std::sync::Arc;
use std::time::{Duration, Instant};

use pyo3::exceptions::{PyKeyboardInterrupt, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use seed_replay::{FieldRef, ReplayError, SamplerConfig, Values};
use seed_replay_service::pb::{CompleteTrajectoryRequest, FetchGroupRequest, FollowRequest};
use seed_replay_service::server::in_process;
use seed_replay_service::RequestError;

use crate::interrupt::InterruptWatch;
use crate::replay::arrays;
use crate::replay::error::status_to_py_err;
use crate::replay::grouped;
use crate::replay::layout::{checkpoint_dict, info_dict};
use crate::replay::local_streams::{PyLocalFollowStream, PyLocalSampleStream};
use crate::replay::local_table::{
    deadline_of, request_err, sampled_tuple, wait_in_slices, LocalKind, LocalTable,
};
use crate::replay::table_api::TableApi;

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
        // The variable-length fields' values (one copy: a list of arrays
        // is joined) and offsets.
        let variable = checked
            .variable
            .iter()
            .map(|(index, value)| {
                let (data, offsets) = arrays::variable_field(&layout.fields[*index], value, rows)?;
                Ok((*index, data, offsets))
            })
            .collect::<PyResult<Vec<_>>>()?;
        // Per layout field: its `[rows, ...]` shape, bytes (the caller's
        // array in place, a variable field's joined values, or the policy
        // versions) and a variable field's offsets.
        let mut shapes = Vec::with_capacity(layout.fields.len());
        let mut data: Vec<&[u8]> = Vec::with_capacity(layout.fields.len());
        let mut offsets: Vec<Option<&[u64]>> = Vec::with_capacity(layout.fields.len());
        let mut given = checked.arrays.iter().peekable();
        let mut joined = variable.iter().peekable();
        for (index, spec) in layout.fields.iter().enumerate() {
            let mut shape = Vec::with_capacity(spec.shape.len() + 1);
            shape.push(rows);
            shape.extend_from_slice(&spec.shape);
            shapes.push(shape);
            match (given.peek(), joined.peek()) {
                (Some((i, array)), _) if *i == index => {
                    data.push(arrays::array_bytes(array));
                    offsets.push(None);
                    given.next();
                }
                (_, Some((i, values, o))) if *i == index => {
                    data.push(values);
                    offsets.push(Some(o));
                    joined.next();
                }
                _ => {
                    data.push(&pv_bytes);
                    offsets.push(None);
                }
            }
        }
        let store = |data: &[&[u8]], wait: Option<Duration>| {
            let refs: Vec<FieldRef<'_>> = layout
                .fields
                .iter()
                .zip(shapes.iter().zip(data))
                .zip(&offsets)
                .map(|((spec, (shape, bytes)), &offsets)| FieldRef {
                    shape,
                    values: Values::Raw {
                        dtype: spec.dtype,
                        bytes,
                    },
                    offsets,
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

    fn set_policy_version<'py>(&self, py: Python<'py>, version: u64) -> PyResult<()> {
        self.guard.check("ReplayBuffer")?;
        match &self.kind {
            LocalKind::Plain(t) => t.buffer().set_policy_version(version),
            LocalKind::Grouped(g) => g
                .table
                .set_policy_version(version)
                .map_err(|e| request_err(py, e))?,
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
        let g = self.grouped("submit_steps")?;
        let batch = grouped::step_batch(
            &self.name,
            &self.layout,
            trajectory_ids,
            group_ids,
            fields,
            policy_versions,
            is_last,
            metadata,
        )?;
        let request = batch.into_request(&self.name);
        let reply = py
            .detach(|| in_process::submit_steps(&g.table, &request))
            .map_err(|s| status_to_py_err(py, s))?;
        // Stored either way; `wait=False` answers as a server's table does.
        if !wait {
            if let Ok(mut sum) = self.unflushed.lock() {
                sum.groups_completed += reply.groups_completed;
                sum.groups_dropped_over_capacity += reply.groups_dropped_over_capacity;
                sum.groups_dropped_queue_full += reply.groups_dropped_queue_full;
            }
            return Ok(None);
        }
        grouped::submit_dict(py, &reply).map(Some)
    }

    fn flush_submits<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        // In process every submit was stored before it returned.
        self.grouped("flush_submits")?;
        let sum = self
            .unflushed
            .lock()
            .map(|mut s| std::mem::take(&mut *s))
            .unwrap_or_default();
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
        let g = self.grouped("submit_step")?;
        let batch = grouped::one_step_batch(
            &self.name,
            &self.layout,
            trajectory_id,
            group_id,
            step,
            policy_version,
            is_last,
            metadata,
        )?;
        let request = batch.into_request(&self.name);
        let reply =
            in_process::submit_steps(&g.table, &request).map_err(|s| status_to_py_err(py, s))?;
        grouped::submit_dict(py, &reply)
    }

    fn complete_trajectory<'py>(
        &self,
        py: Python<'py>,
        trajectory_id: &Bound<'py, PyAny>,
    ) -> PyResult<bool> {
        let g = self.grouped("complete_trajectory")?;
        let (trajectory_id, trajectory_uid) =
            match grouped::trajectory_id(&self.name, &self.layout, trajectory_id)? {
                Ok(n) => (n, String::new()),
                Err(uid) => (0, uid),
            };
        let request = CompleteTrajectoryRequest {
            table: self.name.clone(),
            trajectory_id,
            trajectory_uid,
        };
        let reply = in_process::complete_trajectory(&g.table, &request)
            .map_err(|s| status_to_py_err(py, s))?;
        Ok(reply.group_completed)
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
