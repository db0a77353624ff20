//! The remote table's writer: unrolls from the inference threads to the
//! server's `Insert` stream, batched and pipelined.
//!
//! # Why a queue and a task
//! Inference never makes a network call: it encodes a completed unroll into
//! one owned record ([`EncodedUnroll::encode`], a copy of its bytes, as the
//! in-process insert copies them into a slot) and hands it to a bounded
//! queue. When the queue is full because the server holds inserts back
//! (its rate limiter or a `block` writer) while the stream is open,
//! inference waits for room up to `--insert-timeout-ms`, exactly as with a
//! full in-process buffer: the actors slow to the trainer's pace instead of
//! stepping envs whose unrolls would be thrown away (on a shared host they
//! would also take the trainer's CPU). When the server is unreachable the
//! unroll is dropped at once. Both are counted (`RemoteStats`:
//! `queue_full_waits`, `dropped_queue_full`, the latter reported as
//! `unroll/dropped_full`).
//!
//! # The stream
//! One task ([`run`]) keeps one `Insert` stream open. It takes whatever the
//! queue holds (up to [`MAX_BATCH_ROWS`] unrolls) into one batch of
//! contiguous per-field blocks and sends it, keeping up to
//! [`MAX_IN_FLIGHT`] batches unacknowledged, so the server stores one batch
//! while the next travels. Under load batches grow by themselves; an idle
//! learner sends single unrolls at once. A stream that breaks (server
//! restart, a refused batch) counts its unacknowledged unrolls as lost and
//! is reopened after a backoff (100 ms doubling to 5 s), without the
//! inference threads noticing.
//!
//! Cost per unroll: one copy into its record on the inference thread, one
//! into the batch's blocks on the task, the encoding into the message.
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use seed_replay::{FieldRef, ItemLayout, Values};
use seed_replay_service::pb::TableInfo;
use seed_replay_service::{InsertBatch, ReplayClient};
use tokio::sync::{mpsc, watch};
use tracing::{debug, warn};

use crate::log_throttle::{LogThrottle, WARN_INTERVAL};
use crate::unroll_store::remote::stats::RemoteStats;

/// Most unrolls in one insert batch.
pub const MAX_BATCH_ROWS: usize = 64;
/// Batches sent and not yet acknowledged, at most.
pub const MAX_IN_FLIGHT: usize = 2;
/// How long the writer keeps sending what is queued after `close`.
const FLUSH_AT_CLOSE: Duration = Duration::from_secs(2);

/// One unroll's fields, concatenated in layout order, little-endian.
#[derive(Debug)]
pub struct EncodedUnroll {
    bytes: Vec<u8>,
}

impl EncodedUnroll {
    /// Copies `fields` (layout order, the unroll builder's) into one record.
    /// `item_bytes` is the layout's item size (the record's capacity).
    pub fn encode(fields: &[FieldRef<'_>], item_bytes: usize) -> Self {
        let mut bytes = Vec::with_capacity(item_bytes);
        for f in fields {
            match f.values {
                Values::U8(v) => bytes.extend_from_slice(v),
                Values::Bool(v) => bytes.extend(v.iter().map(|&b| u8::from(b))),
                Values::U32(v) => v.iter().for_each(|x| bytes.extend(x.to_le_bytes())),
                Values::I32(v) => v.iter().for_each(|x| bytes.extend(x.to_le_bytes())),
                Values::F32(v) => v.iter().for_each(|x| bytes.extend(x.to_le_bytes())),
                Values::U64(v) => v.iter().for_each(|x| bytes.extend(x.to_le_bytes())),
                Values::I64(v) => v.iter().for_each(|x| bytes.extend(x.to_le_bytes())),
                Values::F64(v) => v.iter().for_each(|x| bytes.extend(x.to_le_bytes())),
                // Native-endian bytes: the crate builds for little-endian
                // targets only (`seed-replay-service`).
                Values::Raw { bytes: b, .. } => bytes.extend_from_slice(b),
            }
        }
        EncodedUnroll { bytes }
    }

    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}

/// `unrolls` as one insert batch of per-field blocks; `None` when a record
/// does not have the layout's size (a bug upstream: the batch is dropped).
fn batch_of(layout: &ItemLayout, unrolls: &[EncodedUnroll]) -> Option<InsertBatch> {
    let item_bytes: usize = layout.fields().iter().map(|f| f.num_bytes()).sum();
    if unrolls.iter().any(|u| u.len() != item_bytes) {
        return None;
    }
    let mut batch = InsertBatch::new(unrolls.len() as u32);
    let mut offset = 0;
    for f in layout.fields() {
        let n = f.num_bytes();
        let mut block = BytesMut::with_capacity(n * unrolls.len());
        for u in unrolls {
            block.extend_from_slice(&u.bytes[offset..offset + n]);
        }
        offset += n;
        batch = batch
            .raw(f.name(), f.dtype(), f.shape(), Bytes::from(block))
            .ok()?;
    }
    Some(batch)
}

/// Resolves once `stop` holds `true` (or its sender is gone). The guard
/// `wait_for` returns is dropped here, so callers' futures stay `Send`.
pub(crate) async fn stop_requested(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// Most unrolls per batch for the table `info` describes: at most
/// [`MAX_BATCH_ROWS`], the capacity, and a quarter of what its rate
/// limiter's window admits at once (a larger batch would wait for room for
/// all its rows, or be refused as too large).
pub fn max_batch_rows(info: &TableInfo) -> usize {
    let mut rows = MAX_BATCH_ROWS.min(info.capacity.max(1) as usize);
    if let Some(l) = &info.rate_limiter {
        let width = l.max_diff - l.min_diff;
        if width.is_finite() && l.samples_per_insert > 0.0 {
            rows = rows.min((width / l.samples_per_insert / 4.0) as usize);
        }
    }
    rows.max(1)
}

/// What the writer task works with.
pub struct WriterSetup {
    pub client: ReplayClient,
    pub table: String,
    pub layout: Arc<ItemLayout>,
    /// Most unrolls per batch ([`max_batch_rows`]).
    pub max_rows: usize,
    pub stats: Arc<RemoteStats>,
    /// Set while an insert stream is open. Relaxed: a hint for inference
    /// (wait for room, or drop at once), ordering nothing.
    pub connected: Arc<AtomicBool>,
}

/// The wait before reopening a failed insert stream: 100 ms, doubling up
/// to 5 s; an acknowledged batch starts it over.
struct RetryDelay(Duration);

impl Default for RetryDelay {
    fn default() -> Self {
        RetryDelay(Duration::from_millis(100))
    }
}

impl RetryDelay {
    /// Waits out the delay and doubles it for the next failure; `false`
    /// when `stop` is requested meanwhile.
    async fn wait(&mut self, stop: &mut watch::Receiver<bool>) -> bool {
        tokio::select! {
            _ = tokio::time::sleep(self.0) => {}
            _ = stop_requested(stop) => return false,
        }
        self.0 = (self.0 * 2).min(Duration::from_secs(5));
        true
    }
}

/// The writer task (module docs) until `stop`, then a short flush.
pub async fn run(
    setup: WriterSetup,
    mut queue: mpsc::Receiver<EncodedUnroll>,
    mut stop: watch::Receiver<bool>,
) {
    let WriterSetup {
        mut client,
        table,
        layout,
        max_rows,
        stats,
        connected,
    } = setup;
    let warnings = LogThrottle::new(WARN_INTERVAL);
    let mut retry = RetryDelay::default();
    let mut stopping = false;
    // False once every sender is gone (`recv` would return `None` at once).
    let mut queue_open = true;
    'stream: loop {
        let mut inserter = match client.inserter(&table).await {
            Ok(i) => {
                connected.store(true, Ordering::Relaxed);
                i
            }
            Err(e) => {
                connected.store(false, Ordering::Relaxed);
                RemoteStats::add(&stats.stream_errors, 1);
                if let Some(n) = warnings.hit() {
                    warn!(%table, occurrences = n, error = %e, "cannot open the replay insert stream; retrying");
                }
                if stopping || !retry.wait(&mut stop).await {
                    return;
                }
                continue 'stream;
            }
        };
        // Rows of each batch in flight, oldest first.
        let mut in_flight: VecDeque<u32> = VecDeque::new();
        let flush_deadline = tokio::time::sleep(FLUSH_AT_CLOSE);
        tokio::pin!(flush_deadline);
        loop {
            let broke = tokio::select! {
                ack = inserter.ack(), if !in_flight.is_empty() => match ack {
                    Ok(keys) => {
                        in_flight.pop_front();
                        RemoteStats::add(&stats.acked, u64::from(keys.count));
                        retry = RetryDelay::default();
                        None
                    }
                    Err(e) => Some(e.to_string()),
                },
                first = queue.recv(), if queue_open && in_flight.len() < MAX_IN_FLIGHT => {
                    let Some(first) = first else {
                        // Every sender is gone: flush what is in flight.
                        if in_flight.is_empty() {
                            return;
                        }
                        queue_open = false;
                        stopping = true;
                        flush_deadline.as_mut().reset(tokio::time::Instant::now() + FLUSH_AT_CLOSE);
                        continue;
                    };
                    let mut unrolls = vec![first];
                    while unrolls.len() < max_rows {
                        match queue.try_recv() {
                            Ok(u) => unrolls.push(u),
                            Err(_) => break,
                        }
                    }
                    let rows = unrolls.len() as u32;
                    match batch_of(&layout, &unrolls) {
                        None => {
                            RemoteStats::add(&stats.lost, u64::from(rows));
                            if let Some(n) = warnings.hit() {
                                warn!(%table, occurrences = n, "an unroll did not have the table's size; dropped");
                            }
                            None
                        }
                        Some(batch) => match inserter.send(batch).await {
                            Ok(()) => {
                                in_flight.push_back(rows);
                                RemoteStats::add(&stats.insert_batches, 1);
                                None
                            }
                            Err(e) => {
                                RemoteStats::add(&stats.lost, u64::from(rows));
                                Some(e.to_string())
                            }
                        },
                    }
                }
                _ = stop_requested(&mut stop), if !stopping => {
                    stopping = true;
                    flush_deadline.as_mut().reset(tokio::time::Instant::now() + FLUSH_AT_CLOSE);
                    None
                }
                _ = &mut flush_deadline, if stopping => {
                    let unsent = in_flight.iter().map(|&r| u64::from(r)).sum::<u64>();
                    debug!(%table, unacknowledged = unsent, "replay writer stopped");
                    return;
                }
            };
            if stopping && in_flight.is_empty() && queue.is_empty() {
                return;
            }
            if let Some(reason) = broke {
                connected.store(false, Ordering::Relaxed);
                let unacked: u64 = in_flight.iter().map(|&r| u64::from(r)).sum();
                RemoteStats::add(&stats.lost, unacked);
                RemoteStats::add(&stats.stream_errors, 1);
                if let Some(n) = warnings.hit() {
                    warn!(%table, occurrences = n, lost = unacked, error = %reason,
                        "the replay insert stream broke; reopening");
                }
                if stopping || !retry.wait(&mut stop).await {
                    return;
                }
                continue 'stream;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use seed_replay::DType;

    #[test]
    fn records_become_per_field_blocks_in_layout_order() {
        let layout = ItemLayout::builder()
            .field("a", DType::F32, &[2])
            .field("b", DType::U8, &[])
            .build()
            .unwrap();
        let rows: Vec<EncodedUnroll> = (0..3u8)
            .map(|r| {
                let a = [f32::from(r), -f32::from(r)];
                EncodedUnroll::encode(
                    &[
                        FieldRef::new(&[2], Values::F32(&a)),
                        FieldRef::new(&[], Values::U8(&[r + 10])),
                    ],
                    9,
                )
            })
            .collect();
        assert_eq!(rows[0].len(), 9);
        let batch = batch_of(&layout, &rows).expect("sizes match");
        assert_eq!(batch.rows(), 3);
        // A record of another size is refused, not sent.
        let short = EncodedUnroll { bytes: vec![0; 8] };
        assert!(batch_of(&layout, &[short]).is_none());
    }
}
