//! [`Table`]: one served buffer and the service's counters about it.
//!
//! Why a wrapper: the buffer knows items; the service also counts its open
//! sample streams, the times one waited for its client (flow control), the
//! requests it refused, and whether a checkpoint is being written. Those
//! counters are plain `Relaxed` atomics: each is a statistic read by `Info`,
//! ordering nothing. Cost: the buffer's memory plus a few words.
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use seed_replay::{
    ItemKey, PriorityUpdate, ReplayBuffer, ReplayError, SamplerConfig, StorageKind, WriterPolicy,
};
use tracing::info;

use crate::config::TableSpec;
use crate::error::{RequestError, ServeError};
use crate::pb::CheckpointReply;

/// A served table.
#[derive(Debug)]
pub struct Table {
    pub(crate) name: String,
    pub(crate) buffer: ReplayBuffer,
    /// How long an insert waits for room (writer policy `Block` or the rate
    /// limiter).
    pub(crate) insert_timeout: Duration,
    /// Whether an insert can wait: then it runs off the async workers.
    pub(crate) inserts_may_wait: bool,
    /// `<checkpoint_dir>/<name>.seedrpl`, if the service has a directory.
    pub(crate) checkpoint_path: Option<PathBuf>,
    pub(crate) sample_streams: AtomicU64,
    pub(crate) flow_control_waits: AtomicU64,
    pub(crate) rejected_requests: AtomicU64,
    /// Set while a checkpoint is written; a second request is refused.
    /// Acquire swap / Release store: the flag guards the file, nothing else.
    pub(crate) checkpointing: AtomicBool,
    /// Notified after every insert the service stores: wakes the table's
    /// `Follow` streams (`server/follow_stream.rs`).
    pub(crate) published: tokio::sync::Notify,
}

impl Table {
    /// Builds the table's buffer: restored from its checkpoint when
    /// `restore` is set and the file exists, reopened from its mapped
    /// directory when that holds one, else new (allocated and first-touched
    /// now: about 3 s per GiB).
    pub fn open(
        spec: TableSpec,
        checkpoint_dir: Option<&std::path::Path>,
        restore: bool,
    ) -> Result<Table, ServeError> {
        let table_err = |source: ReplayError| ServeError::Table {
            table: spec.name.clone(),
            source,
        };
        let checkpoint_path = checkpoint_dir.map(|d| d.join(format!("{}.seedrpl", spec.name)));
        let restorable = checkpoint_path.as_ref().filter(|p| restore && p.exists());
        let buffer = match (&spec.storage_dir, restorable) {
            (Some(_), Some(_)) => {
                return Err(table_err(ReplayError::Config {
                    reason: "--restore applies to in-memory tables; this table has a \
                             `storage_dir`, which keeps its items itself"
                        .into(),
                }))
            }
            (None, Some(path)) => {
                let b = ReplayBuffer::restore(path, spec.layout.clone(), spec.replay.clone())
                    .map_err(table_err)?;
                info!(table = %spec.name, path = %path.display(), items = b.len(), "restored from checkpoint");
                b
            }
            (Some(dir), None) if dir.join("layout.json").exists() => {
                let b = ReplayBuffer::open_mapped(dir, spec.replay.clone()).map_err(table_err)?;
                if b.layout() != &spec.layout {
                    return Err(table_err(ReplayError::Mismatch {
                        path: dir.clone(),
                        reason: "the directory's item layout differs from the config's fields"
                            .into(),
                    }));
                }
                info!(table = %spec.name, dir = %dir.display(), items = b.len(), "reopened mapped table");
                b
            }
            (Some(dir), None) => {
                std::fs::create_dir_all(dir).map_err(|source| {
                    table_err(ReplayError::Io {
                        op: "create directory",
                        path: dir.clone(),
                        source,
                    })
                })?;
                ReplayBuffer::create_mapped(dir, spec.layout.clone(), spec.replay.clone())
                    .map_err(table_err)?
            }
            (None, None) => {
                ReplayBuffer::new(spec.layout.clone(), spec.replay.clone()).map_err(table_err)?
            }
        };
        let inserts_may_wait = matches!(spec.replay.writer_policy, WriterPolicy::Block { .. })
            || spec.replay.rate_limiter.is_some();
        let insert_timeout = match spec.replay.writer_policy {
            WriterPolicy::Block { timeout } => timeout,
            _ => spec.insert_timeout,
        };
        Ok(Table {
            name: spec.name,
            buffer,
            insert_timeout,
            inserts_may_wait,
            checkpoint_path,
            sample_streams: AtomicU64::new(0),
            flow_control_waits: AtomicU64::new(0),
            rejected_requests: AtomicU64::new(0),
            checkpointing: AtomicBool::new(false),
            published: tokio::sync::Notify::new(),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn buffer(&self) -> &ReplayBuffer {
        &self.buffer
    }

    /// The mapped directory, if the table has one.
    pub(crate) fn storage_dir(&self) -> Option<PathBuf> {
        match self.buffer.storage_kind() {
            StorageKind::Memory => None,
            StorageKind::Mapped(d) => Some(d),
        }
    }

    /// How long an insert may wait for room (writer policy `Block` or the
    /// rate limiter), and whether it can wait at all.
    pub fn insert_wait(&self) -> Option<Duration> {
        self.inserts_may_wait.then_some(self.insert_timeout)
    }

    /// Sets the priorities of `keys` (one per key). Refused
    /// (`FAILED_PRECONDITION`) for a table that is not prioritized;
    /// overwritten keys and non-finite priorities are counted, not refused.
    pub fn update_priorities(
        &self,
        keys: &[u64],
        priorities: &[f32],
    ) -> Result<PriorityUpdate, RequestError> {
        if !matches!(self.buffer.config().sampler, SamplerConfig::Prioritized(_)) {
            return Err(RequestError::Precondition {
                reason: format!(
                    "table `{}` is not prioritized (sampler {}): it has no priorities to update",
                    self.name,
                    self.buffer.config().sampler.kind()
                ),
            });
        }
        if keys.len() != priorities.len() {
            return Err(RequestError::invalid(
                "priorities",
                format!("{} values for {} keys", priorities.len(), keys.len()),
            ));
        }
        let keys: Vec<ItemKey> = keys.iter().map(|&k| ItemKey(k)).collect();
        self.buffer
            .update_priorities(&keys, priorities)
            .map_err(|source| RequestError::Replay {
                table: self.name.clone(),
                source,
            })
    }

    /// Writes the table's checkpoint to `<checkpoint_dir>/<name>.seedrpl`,
    /// blocking until the file is complete (the buffer copies slot by slot
    /// without a lock: inserts and samples go on meanwhile). Refused
    /// (`FAILED_PRECONDITION`) without a checkpoint directory or while
    /// another checkpoint of the table is being written.
    pub fn checkpoint(&self) -> Result<CheckpointReply, RequestError> {
        let Some(path) = self.checkpoint_path.clone() else {
            return Err(RequestError::Precondition {
                reason: format!(
                    "table `{}` has no checkpoint directory (`checkpoint_dir` in its config)",
                    self.name
                ),
            });
        };
        // Acquire: a checkpoint that finished before is visible whole.
        if self.checkpointing.swap(true, Ordering::Acquire) {
            return Err(RequestError::Precondition {
                reason: format!(
                    "a checkpoint of table `{}` is already being written",
                    self.name
                ),
            });
        }
        let written = self.buffer.checkpoint(&path);
        // Release: pairs with the Acquire swap above.
        self.checkpointing.store(false, Ordering::Release);
        let info = written.map_err(|source| RequestError::Replay {
            table: self.name.clone(),
            source,
        })?;
        info!(table = %self.name, path = %path.display(), items = info.items, bytes = info.bytes, "checkpoint written");
        Ok(CheckpointReply {
            path: path.display().to_string(),
            items: info.items,
            bytes: info.bytes,
        })
    }

    pub(crate) fn count_rejected(&self) {
        // Relaxed: a statistic (module docs).
        self.rejected_requests.fetch_add(1, Ordering::Relaxed);
    }
}
