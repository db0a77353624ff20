//! The producer behind one `Sample` stream: samples batches into a
//! preallocated batch and hands them to the response stream through a
//! bounded channel. It reads any [`SampleSource`]: a table or a set of
//! loaded shards.
//!
//! # Flow control
//! The producer reserves a place in the channel (capacity `max_in_flight`)
//! *before* it samples, so it never holds more than `max_in_flight`
//! prepared batches; tonic's encoder takes one more off the channel only
//! when HTTP/2 flow control lets it write, and that stops when the client
//! stops reading. A slow client therefore slows its own stream down: the
//! server's memory for it is bounded by `(max_in_flight + 1)` batches plus
//! the HTTP/2 window, and a consume-once table is not drained into buffers
//! nobody reads. Each time the producer has to wait for room it counts
//! `sample_flow_control_waits`.
//!
//! # Waiting for items
//! A sample is first tried on the async worker (microseconds, no wait).
//! When the table has too few items or the rate limiter says no, the
//! producer waits on a blocking thread in slices of at most
//! [`WAIT_SLICE`], checking between slices whether the client went away,
//! until the request's `timeout_ms` (0: for ever).
//!
//! # A lone batch
//! A request for one batch that can be sampled at once is answered by the
//! `Sample` handler itself ([`sample_lone`]): no producer task, no channel.
//!
//! Cost per batch: the buffer's sample into the reused batch, one copy of
//! each field block into the reply (`Bytes`), keys, weights and versions.
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use seed_replay::ReplayError;
use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::{mpsc, watch};
use tonic::Status;

use crate::error::RequestError;
use crate::pb::{SampleReply, SampleRequest};
use crate::server::closing::stopping;
use crate::server::reply_size::reply_bytes;
use crate::server::sample_source::{SampleSource, StreamGuard};

/// Prepared batches a stream may hold ahead of its client by default.
pub const DEFAULT_MAX_IN_FLIGHT: u32 = 2;
/// The most a client may ask for.
pub const MAX_IN_FLIGHT: u32 = 16;
/// Longest single blocking wait for items, so a cancelled stream's thread
/// comes back soon.
pub const WAIT_SLICE: Duration = Duration::from_millis(100);

/// A checked `SampleRequest`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SamplePlan {
    pub batch_size: usize,
    pub max_batches: u64,
    pub max_in_flight: usize,
    pub timeout: Option<Duration>,
    /// The server's message limit: a batch of variable-length rows is
    /// checked against it as it is sampled (`SampleSource::reply`).
    pub max_message_bytes: usize,
}

/// Checks the request's numbers against the table and the message limit.
pub(crate) fn plan<S: SampleSource>(
    table: &S,
    req: &SampleRequest,
    max_message_bytes: usize,
) -> Result<SamplePlan, RequestError> {
    let n = req.batch_size as usize;
    if n == 0 {
        return Err(RequestError::invalid("batch_size", "must be at least 1"));
    }
    // A variable-length field counts its `max_len` elements (one, without
    // it: such a batch is checked again as it is sampled).
    let item_bytes = table.item_bytes();
    let reply_bytes = reply_bytes(n, n.saturating_mul(item_bytes));
    if reply_bytes > max_message_bytes {
        return Err(RequestError::invalid(
            "batch_size",
            format!(
                "{n} items of {item_bytes} bytes make a reply over the server's \
                 {max_message_bytes}-byte message limit (--max-message-bytes)"
            ),
        ));
    }
    if let Some(capacity) = table.consume_once_capacity().filter(|&c| n > c) {
        return Err(RequestError::invalid(
            "batch_size",
            format!(
                "{n} exceeds the capacity of consume-once table `{}` ({capacity})",
                table.name(),
            ),
        ));
    }
    let max_in_flight = match req.max_in_flight {
        0 => DEFAULT_MAX_IN_FLIGHT,
        m if m <= MAX_IN_FLIGHT => m,
        m => {
            return Err(RequestError::invalid(
                "max_in_flight",
                format!("{m} exceeds {MAX_IN_FLIGHT}"),
            ))
        }
    };
    Ok(SamplePlan {
        batch_size: n,
        max_batches: req.max_batches,
        max_in_flight: max_in_flight as usize,
        timeout: (req.timeout_ms > 0).then(|| Duration::from_millis(req.timeout_ms)),
        max_message_bytes,
    })
}

/// The receiving end the response stream reads.
pub(crate) type Replies = mpsc::Receiver<Result<SampleReply, Status>>;

/// The reply to a lone batch (`max_batches == 1`) when it can be sampled
/// now, made by the calling handler itself; `None` when it must wait for
/// items or the rate limiter (then [`spawn`] serves it).
///
/// Why: through [`spawn`], one batch costs a task spawned, a channel and a
/// wake-up of the connection's task by the producer: measured in
/// `replay_service_bench` (client and server in one 2-worker runtime, EPYC
/// 2-core VM), ~3 more context switches per `sample(128)` call than a bare
/// echo answering from its handler. A lone batch is bounded (one reply), so
/// flow control has nothing to pace. An error is the stream's one item, as
/// the producer sends it.
pub(crate) fn sample_lone<S: SampleSource>(
    table: &Arc<S>,
    plan: SamplePlan,
) -> Option<Result<SampleReply, Status>> {
    if plan.max_batches != 1 {
        return None;
    }
    let _open = StreamGuard::new(Arc::clone(table));
    let mut batch = table.new_batch(plan.batch_size);
    match table.sample_now(&mut batch, plan.batch_size) {
        Ok(()) => Some(
            table
                .reply(&batch, plan.max_message_bytes)
                .map_err(Status::from),
        ),
        Err(e) if not_now(&e) && table.can_grow() => None,
        Err(source) => Some(Err(RequestError::Replay {
            table: table.name().to_owned(),
            source,
        }
        .into())),
    }
}

/// Starts the producer task of one stream.
/// `closing` is the service's stop signal: a producer waiting for its
/// client ends when the server stops.
pub(crate) fn spawn<S: SampleSource>(
    table: Arc<S>,
    plan: SamplePlan,
    closing: watch::Receiver<bool>,
) -> Replies {
    let (tx, rx) = mpsc::channel(plan.max_in_flight);
    tokio::spawn(produce(table, plan, tx, closing));
    rx
}

async fn produce<S: SampleSource>(
    table: Arc<S>,
    plan: SamplePlan,
    tx: mpsc::Sender<Result<SampleReply, Status>>,
    mut closing: watch::Receiver<bool>,
) {
    let _open = StreamGuard::new(Arc::clone(&table));
    let mut batch = table.new_batch(plan.batch_size);
    let mut sent = 0u64;
    while plan.max_batches == 0 || sent < plan.max_batches {
        // Room first, then the sample (module docs: flow control).
        let permit = match tx.try_reserve() {
            Ok(p) => p,
            Err(TrySendError::Closed(())) => return,
            Err(TrySendError::Full(())) => {
                // Relaxed: a statistic.
                table.flow_control_waits().fetch_add(1, Ordering::Relaxed);
                tokio::select! {
                    p = tx.reserve() => match p {
                        Ok(p) => p,
                        Err(_) => return,
                    },
                    _ = stopping(&mut closing) => return,
                }
            }
        };
        let (result, returned) = sample_one(&table, batch, plan, &tx).await;
        batch = returned;
        match result {
            Ok(()) => match table.reply(&batch, plan.max_message_bytes) {
                Ok(r) => permit.send(Ok(r)),
                Err(e) => {
                    permit.send(Err(e.into()));
                    return;
                }
            },
            Err(None) => return,
            Err(Some(e)) => {
                permit.send(Err(e.into()));
                return;
            }
        }
        sent += 1;
    }
}

/// One batch into `batch`. `Err(None)`: the client went away while waiting.
async fn sample_one<S: SampleSource>(
    table: &Arc<S>,
    mut batch: S::Batch,
    plan: SamplePlan,
    tx: &mpsc::Sender<Result<SampleReply, Status>>,
) -> (Result<(), Option<RequestError>>, S::Batch) {
    let n = plan.batch_size;
    let replay_err = |source| {
        Some(RequestError::Replay {
            table: table.name().to_owned(),
            source,
        })
    };
    match table.sample_now(&mut batch, n) {
        Ok(()) => return (Ok(()), batch),
        // A table that cannot grow will not have more items later.
        Err(e) if !not_now(&e) || !table.can_grow() => return (Err(replay_err(e)), batch),
        Err(_) => {}
    }
    let deadline = plan.timeout.map(|t| Instant::now() + t);
    loop {
        if tx.is_closed() {
            return (Err(None), batch);
        }
        let slice = match deadline {
            None => WAIT_SLICE,
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    let waited_ms = plan.timeout.map_or(0, |t| t.as_millis() as u64);
                    return (
                        Err(replay_err(ReplayError::Timeout {
                            what: "items to sample (timeout_ms)",
                            waited_ms,
                        })),
                        batch,
                    );
                }
                left.min(WAIT_SLICE)
            }
        };
        let t = Arc::clone(table);
        let waited = tokio::task::spawn_blocking(move || {
            let r = t.sample_waiting(&mut batch, n, slice);
            (r, batch)
        })
        .await;
        let (result, returned) = match waited {
            Ok(pair) => pair,
            // The blocking task panicked: the batch is gone with it.
            Err(e) => {
                let fresh = table.new_batch(n);
                return (
                    Err(Some(RequestError::Precondition {
                        reason: format!("table `{}`: sampling failed: {e}", table.name()),
                    })),
                    fresh,
                );
            }
        };
        batch = returned;
        match result {
            Ok(()) => return (Ok(()), batch),
            Err(ReplayError::Timeout { .. }) => continue,
            Err(e) if not_now(&e) => continue,
            Err(e) => return (Err(replay_err(e)), batch),
        }
    }
}

/// Refusals that go away with time: too few items, the rate limiter.
fn not_now(e: &ReplayError) -> bool {
    matches!(
        e,
        ReplayError::NotEnoughItems { .. } | ReplayError::RateLimited { .. }
    )
}
