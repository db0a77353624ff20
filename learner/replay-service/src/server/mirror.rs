//! A mirror: a replay server whose tables are copies of another server's
//! (the primary's), kept in step through `Follow`, serving `Sample` and
//! `Info` itself, so N mirrors are N parallel samplers over one logical
//! buffer (`replay-server --mirror-of HOST:PORT`).
//!
//! # What a mirror takes from the primary
//! The table list and each table's layout (field names, dtypes, shapes,
//! policy-version field) and capacity come from the primary's `Info` at
//! start-up, so they cannot drift from the primary's; no config file is
//! read. Grouped tables are not mirrored (their items are released by
//! group, which a copy of the ring cannot follow) and are logged as
//! skipped.
//!
//! # What a mirror serves
//! Every mirror table samples **uniformly** (with replacement) over the
//! items it holds, whatever the primary's sampler: a mirror holds a copy of
//! the ring, not the primary's sampler state. Priorities are not followed
//! (a prioritized primary's mirror samples uniformly, weights 1), consume-
//! once samplers do not consume on the primary through a mirror, and no
//! rate limiter or lag cap applies. `Insert`, `UpdatePriorities` and
//! `Follow` on a mirror table are refused with `FAILED_PRECONDITION`
//! naming the table and the primary (writes go to the primary; follow the
//! primary, whose key stream has no holes). `Info` reports the mirror's
//! own table (`sampler: uniform`, its counters).
//!
//! # Keeping in step
//! One task per table holds a `Follow` stream from its cursor (0 at start)
//! and stores each batch under the primary's keys
//! ([`seed_replay::ReplayBuffer::insert_batch_at`]), so a mirror that has
//! caught up holds the same keys with the same bytes in the same slots as
//! the primary. Each item `k` takes the slot of `k - capacity`, which is
//! the overwrite the stream reports. On a gap the task logs how many items
//! it missed and goes on at the stream's new start; until the ring comes
//! round, the slots of the missed keys still hold older items, which stay
//! sampleable. A broken stream is reopened from the last cursor (no gap, no
//! duplicate), retrying with a backoff from [`RETRY_MIN`] to
//! [`RETRY_MAX`]. A primary rebuilt from scratch (keys below the mirror's
//! cursor) refuses the cursor; restart the mirror.
//!
//! Cost: per followed item the primary's seqlock read, the wire, and one
//! slot write here; the follower tasks run on the async workers.
use std::sync::Arc;
use std::time::Duration;

use seed_replay::{ItemKey, ItemLayout, ReplayConfig, SamplerConfig, WriterPolicy};
use tokio::sync::watch;
use tracing::{info, warn};

use crate::client::{ClientOptions, FieldBlocks, FollowEvent, FollowedBatch, ReplayClient};
use crate::config::{TableSpec, DEFAULT_INSERT_TIMEOUT_MS};
use crate::error::{ClientError, ServeError};
use crate::pb::TableInfo;
use crate::server::closing::stopping;
use crate::server::insert_request::CheckedFields;
use crate::server::running_server::{serve, RunningServer, ServerOptions};
use crate::server::service::ReplayService;
use crate::server::table::Table;
use crate::wire_dtype;

/// First wait before reopening a broken follow stream.
pub const RETRY_MIN: Duration = Duration::from_millis(50);
/// Longest wait between attempts.
pub const RETRY_MAX: Duration = Duration::from_secs(5);

/// Where the primary is and how to reach it.
#[derive(Debug, Clone)]
pub struct MirrorOptions {
    /// `HOST:PORT`, `http://HOST:PORT` or `https://HOST:PORT`.
    pub upstream: String,
    /// Token and TLS settings for the connection to the primary.
    pub client: ClientOptions,
}

/// Connects to the primary, builds a copy of each of its tables, starts
/// following them and serves the copies.
pub async fn start_mirror(
    mirror: MirrorOptions,
    options: ServerOptions,
) -> Result<RunningServer, ServeError> {
    let upstream = mirror.upstream.clone();
    let upstream_err = |reason: String| ServeError::Upstream {
        addr: upstream.clone(),
        reason,
    };
    let mut client = ReplayClient::connect(&upstream, mirror.client.clone())
        .await
        .map_err(|e| upstream_err(e.to_string()))?;
    let infos = client
        .info(None)
        .await
        .map_err(|e| upstream_err(format!("Info: {e}")))?;
    let mut specs = Vec::with_capacity(infos.len());
    for info in &infos {
        if info.sampler == "grouped" {
            warn!(table = %info.name, "not mirrored: grouped tables release items by group");
            continue;
        }
        if !info.shards.is_empty() {
            warn!(table = %info.name, "not mirrored: a loaded table (shard directories) is read-only and cannot be followed; load its directories instead");
            continue;
        }
        specs.push(spec_from_info(info)?);
    }
    if specs.is_empty() {
        return Err(upstream_err(
            "the primary serves no table a mirror can copy".into(),
        ));
    }
    let tables = tokio::task::spawn_blocking(move || {
        specs
            .into_iter()
            .map(|spec| Table::open(spec, None, false))
            .collect::<Result<Vec<_>, _>>()
    })
    .await
    .map_err(|e| ServeError::Transport {
        reason: format!("building the mirror's tables failed: {e}"),
    })??;
    let service = ReplayService::new(tables, options.max_message_bytes).mirroring(&upstream);
    let names: Vec<String> = infos.iter().map(|i| i.name.clone()).collect();
    let running = serve(service.clone(), &options).await?;
    for name in names {
        if let Some(table) = service.table(&name) {
            info!(table = %name, %upstream, "following");
            tokio::spawn(follow_table(client.clone(), table, service.closing()));
        }
    }
    Ok(running)
}

/// The mirror's copy of one primary table: same layout and capacity,
/// uniform sampling, overwrite-oldest (module docs).
fn spec_from_info(info: &TableInfo) -> Result<TableSpec, ServeError> {
    let bad = |reason: String| ServeError::Upstream {
        addr: String::new(),
        reason: format!("table `{}` in the primary's Info: {reason}", info.name),
    };
    let mut builder = ItemLayout::builder();
    for f in &info.fields {
        let dtype = wire_dtype::from_wire(f.dtype)
            .ok_or_else(|| bad(format!("field `{}` has dtype {}", f.name, f.dtype)))?;
        let shape: Vec<usize> = f.shape.iter().map(|&d| d as usize).collect();
        builder = match f.variable_length {
            true => {
                let max_len = (f.max_len > 0).then_some(f.max_len);
                builder.variable_field(&f.name, dtype, &shape, max_len)
            }
            false => builder.field(&f.name, dtype, &shape),
        };
    }
    if !info.policy_version_field.is_empty() {
        builder = builder.policy_version_field(&info.policy_version_field);
    }
    let layout = builder.build().map_err(|e| bad(e.to_string()))?;
    let capacity = usize::try_from(info.capacity)
        .ok()
        .filter(|&c| c > 0)
        .ok_or_else(|| bad(format!("capacity {}", info.capacity)))?;
    Ok(TableSpec {
        name: info.name.clone(),
        layout,
        replay: ReplayConfig::new(capacity, SamplerConfig::Uniform)
            .with_writer_policy(WriterPolicy::OverwriteOldest),
        storage_dir: None,
        load: Vec::new(),
        insert_timeout: Duration::from_millis(DEFAULT_INSERT_TIMEOUT_MS),
    })
}

/// Keeps `table` in step with the primary's table of the same name until
/// the service closes.
async fn follow_table(
    mut client: ReplayClient,
    table: Arc<Table>,
    mut closing: watch::Receiver<bool>,
) {
    let mut cursor = 0u64;
    let mut backoff = RETRY_MIN;
    loop {
        let opened = tokio::select! {
            r = client.follow(&table.name, cursor) => r,
            _ = stopping(&mut closing) => return,
        };
        match opened {
            Ok(mut stream) => loop {
                let event = tokio::select! {
                    e = stream.next() => e,
                    _ = stopping(&mut closing) => return,
                };
                match event {
                    Ok(Some(FollowEvent::Items(batch))) => {
                        if let Err(e) = store(&table, &batch) {
                            warn!(table = %table.name, error = %e, "cannot store followed items; reopening the stream");
                            break;
                        }
                        backoff = RETRY_MIN;
                        cursor = batch.next_key();
                    }
                    Ok(Some(FollowEvent::Gap { requested, oldest })) => {
                        if requested == 0 && cursor == 0 {
                            info!(table = %table.name, oldest, "starting at the primary's oldest item");
                        } else {
                            warn!(table = %table.name, missed = oldest - requested, from = requested,
                                "fell a ring behind the primary: items missed");
                        }
                        cursor = oldest;
                    }
                    Ok(None) => break,
                    Err(e) => {
                        warn!(table = %table.name, error = %e, "follow stream ended");
                        break;
                    }
                }
            },
            Err(e) => warn!(table = %table.name, error = %e, cursor, "cannot follow the primary"),
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = stopping(&mut closing) => return,
        }
        backoff = (backoff * 2).min(RETRY_MAX);
    }
}

/// Stores one followed batch under the primary's keys. The primary's
/// message is outside data: each block is matched to the layout by name
/// and checked (dtype, length) before anything is stored.
fn store(table: &Table, batch: &FollowedBatch) -> Result<(), ClientError> {
    let layout = table.buffer.layout();
    let rows = batch.rows();
    let bad = |reason: String| ClientError::Protocol { reason };
    let mut shapes = Vec::with_capacity(layout.fields().len());
    let mut data = Vec::with_capacity(layout.fields().len());
    let mut offsets = Vec::with_capacity(layout.fields().len());
    for spec in layout.fields() {
        let block = batch
            .fields()
            .iter()
            .find(|b| b.name == spec.name())
            .ok_or_else(|| bad(format!("followed items lack field `{}`", spec.name())))?;
        // A variable-length block's length goes with its offsets, which
        // the buffer checks (`ReplayError::Offsets`) before storing.
        let length_ok = spec.is_variable() || block.data.len() == rows * spec.num_bytes();
        if wire_dtype::from_wire(block.dtype) != Some(spec.dtype()) || !length_ok {
            return Err(bad(format!(
                "followed field `{}`: {} bytes of {} for {rows} rows",
                spec.name(),
                block.data.len(),
                wire_dtype::wire_name(block.dtype)
            )));
        }
        let mut shape = Vec::with_capacity(spec.shape().len() + 1);
        shape.push(rows);
        shape.extend_from_slice(spec.shape());
        shapes.push(shape);
        data.push(&block.data[..]);
        offsets.push(spec.is_variable().then_some(&block.offsets[..]));
    }
    let fields = CheckedFields {
        shapes,
        data,
        offsets,
    };
    let refs = fields.refs(layout);
    table
        .buffer
        .insert_batch_at(ItemKey(batch.keys().start), &refs, rows)
        .map_err(|e| bad(format!("storing followed items: {e}")))?;
    table.published.notify_waiters();
    Ok(())
}

impl Table {
    /// Waits until the table's next key is at least `key` (every key below
    /// it was claimed). Woken by inserts through the service and by a
    /// mirror's followed batches; tests and benchmarks use it to wait for
    /// a mirror to catch up without polling.
    pub async fn wait_for_next_key(&self, key: u64) {
        loop {
            let signal = self.published.notified();
            tokio::pin!(signal);
            signal.as_mut().enable();
            if self.buffer.next_key() >= key {
                return;
            }
            signal.await;
        }
    }
}
