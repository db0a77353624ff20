//! The producer behind one `Follow` stream: reads the items inserted from
//! the client's cursor on ([`seed_replay::ReplayBuffer::read_since`], the
//! slot seqlock read, so never a torn item) into a preallocated batch and
//! hands them to the response stream through a bounded channel.
//!
//! # The protocol
//! - The cursor is the next key the follower wants. Each `FollowItems`
//!   message carries keys `first_key .. next_key`, consecutive, in key
//!   order (the order inserts claimed them); the follower resumes a broken
//!   stream by asking again from the last `next_key`, with no gap and no
//!   duplicate.
//! - Overwrites: key `k` lives in slot `k % capacity`, so item `k` takes the
//!   slot of `k - capacity`; each message names those keys
//!   (`replaced_first`, `replaced_count`) and a follower drops them.
//! - Gaps: when the item at the cursor was overwritten before it was read
//!   (the follower is more than a ring behind, or started at 0 on a table
//!   that wrapped), the stream sends `FollowGap { requested, oldest }` and
//!   goes on at `oldest`: a follower learns exactly which keys it will
//!   never see, and re-syncs from there instead of silently missing them.
//! - Waiting: when nothing new is published, the producer waits for the
//!   table's insert signal (`Table::published`, notified after every
//!   insert the service stores), or at most [`POLL`], for inserts that
//!   bypass the service.
//!
//! # Flow control
//! As in `sample_stream.rs`: the producer reserves a place in the channel
//! (capacity `max_in_flight`) *before* it reads, and tonic takes a message
//! off the channel only when HTTP/2 flow control lets it write. A slow
//! follower therefore holds the server to `max_in_flight + 1` messages plus
//! the HTTP/2 window; meanwhile the ring goes on, and if the follower falls
//! a lap behind it gets a gap rather than making the server buffer. Waits
//! for room count in `sample_flow_control_waits`.
//!
//! Cost per message: one seqlock read per item into the reused batch, one
//! copy of each field block into the reply.
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use seed_replay::{FollowRead, SampleBatch};
use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::{mpsc, watch};
use tonic::Status;

use crate::error::RequestError;
use crate::pb::{follow_reply, FollowGap, FollowItems, FollowReply, FollowRequest};
use crate::server::closing::stopping;
use crate::server::field_block::{batch_blocks, prefix_field_bytes};
use crate::server::sample_stream::{DEFAULT_MAX_IN_FLIGHT, MAX_IN_FLIGHT};
use crate::server::table::Table;

/// Items per message when the request leaves it to the server.
pub const DEFAULT_FOLLOW_BATCH: u32 = 1024;
/// Longest wait for new items without a signal (inserts made in-process,
/// not through the service, signal nothing).
pub const POLL: Duration = Duration::from_millis(10);

/// A checked `FollowRequest` (a stream's, or an in-process follower's:
/// `seed_rs.ReplayBuffer.follow`).
#[derive(Debug, Clone, Copy)]
pub struct FollowPlan {
    /// The first key to read.
    pub cursor: u64,
    /// Items per message (or per read in process).
    pub max_batch: usize,
    /// Messages prepared ahead of the reader.
    pub max_in_flight: usize,
    /// The server's message limit (in process: `usize::MAX`): a read of
    /// variable-length rows is cut to what fits ([`fit`]).
    pub max_message_bytes: usize,
}

/// Checks the request against the table and the message limit (in
/// process: `usize::MAX`, no message).
pub fn plan(
    table: &Table,
    req: &FollowRequest,
    max_message_bytes: usize,
) -> Result<FollowPlan, RequestError> {
    let next = table.buffer.next_key();
    if req.cursor > next {
        return Err(RequestError::invalid(
            "cursor",
            format!(
                "{} is ahead of table `{}`'s next key {next}: was the table rebuilt?",
                req.cursor, table.name
            ),
        ));
    }
    // A variable-length field counts one element here: a read is cut to
    // the rows that fit as it is made (`fit`).
    let item_bytes = table.buffer.layout().item_bytes();
    // Versions take at most 10 bytes per row; 16 per row and 4 KiB of
    // headers cover them.
    let per_row = item_bytes.saturating_add(16);
    let fits = max_message_bytes.saturating_sub(4096) / per_row.max(1);
    if fits == 0 {
        return Err(RequestError::invalid(
            "table",
            format!(
                "one item of table `{}` ({item_bytes} bytes) does not fit the server's \
                 {max_message_bytes}-byte message limit (--max-message-bytes)",
                table.name
            ),
        ));
    }
    let asked = match req.max_batch {
        0 => DEFAULT_FOLLOW_BATCH as usize,
        n => n as usize,
    };
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
    Ok(FollowPlan {
        cursor: req.cursor,
        max_batch: asked.min(fits).min(table.buffer.capacity()),
        max_in_flight: max_in_flight as usize,
        max_message_bytes,
    })
}

/// Cuts a read of items `cursor ..` to the rows whose message fits the
/// limit, and returns the key after the last one kept; an error when not
/// even the first fits (its variable-length rows alone pass the limit).
/// Fixed-shape rows always fit: `plan` sized `max_batch` for them.
pub fn fit(
    table: &Table,
    batch: &mut SampleBatch,
    cursor: u64,
    max_message_bytes: usize,
) -> Result<u64, RequestError> {
    let layout = table.buffer.layout();
    let message = |rows: usize| {
        prefix_field_bytes(layout, batch, rows)
            .saturating_add(rows.saturating_mul(16))
            .saturating_add(4096)
    };
    if layout.has_variable() && message(batch.len()) > max_message_bytes {
        let rows = (0..batch.len())
            .take_while(|&r| message(r + 1) <= max_message_bytes)
            .count();
        if rows == 0 {
            return Err(RequestError::Exhausted {
                field: "table".into(),
                reason: format!(
                    "item {cursor} of table `{}` holds {} bytes of values, over the server's \
                     {max_message_bytes}-byte message limit (--max-message-bytes)",
                    table.name,
                    message(1)
                ),
            });
        }
        batch.truncate(rows);
    }
    Ok(cursor + batch.len() as u64)
}

/// The receiving end the response stream reads.
pub(crate) type Replies = mpsc::Receiver<Result<FollowReply, Status>>;

/// Starts the producer task of one stream. `closing` is the service's stop
/// signal.
pub(crate) fn spawn(
    table: Arc<Table>,
    plan: FollowPlan,
    closing: watch::Receiver<bool>,
) -> Replies {
    let (tx, rx) = mpsc::channel(plan.max_in_flight);
    tokio::spawn(produce(table, plan, tx, closing));
    rx
}

async fn produce(
    table: Arc<Table>,
    plan: FollowPlan,
    tx: mpsc::Sender<Result<FollowReply, Status>>,
    mut closing: watch::Receiver<bool>,
) {
    let mut batch = table.buffer.new_batch(plan.max_batch);
    let mut cursor = plan.cursor;
    loop {
        // Room first, then the read (module docs: flow control).
        let permit = match tx.try_reserve() {
            Ok(p) => p,
            Err(TrySendError::Closed(())) => return,
            Err(TrySendError::Full(())) => {
                // Relaxed: a statistic.
                table.flow_control_waits.fetch_add(1, Ordering::Relaxed);
                tokio::select! {
                    p = tx.reserve() => match p {
                        Ok(p) => p,
                        Err(_) => return,
                    },
                    _ = stopping(&mut closing) => return,
                }
            }
        };
        let event = loop {
            // Registered before the read, so an insert signalled between
            // the read and the wait is not missed.
            let signal = table.published.notified();
            tokio::pin!(signal);
            signal.as_mut().enable();
            if table.buffer.is_closed() {
                permit.send(Err(Status::unavailable("the replay server is stopping")));
                return;
            }
            match table.buffer.read_since(cursor, &mut batch, plan.max_batch) {
                FollowRead::Gap { oldest } => {
                    let gap = FollowGap {
                        requested: cursor,
                        oldest,
                    };
                    cursor = oldest;
                    break follow_reply::Event::Gap(gap);
                }
                FollowRead::Items { next } if next > cursor => {
                    let next = match fit(&table, &mut batch, cursor, plan.max_message_bytes) {
                        Ok(next) => next,
                        Err(e) => {
                            permit.send(Err(e.into()));
                            return;
                        }
                    };
                    let items = items(&table, &batch, cursor, next);
                    cursor = next;
                    break follow_reply::Event::Items(items);
                }
                FollowRead::Items { .. } => {}
            }
            tokio::select! {
                _ = &mut signal => {}
                _ = tokio::time::sleep(POLL) => {}
                _ = tx.closed() => return,
                _ = stopping(&mut closing) => return,
            }
        };
        permit.send(Ok(FollowReply { event: Some(event) }));
    }
}

/// The keys whose slots items `first .. next` took in a ring of
/// `capacity` (item `k >= capacity` takes the slot of `k - capacity`), as
/// `FollowItems` names them: empty (`0..0`) when none did.
pub fn replaced_keys(first: u64, next: u64, capacity: u64) -> std::ops::Range<u64> {
    let from = first.max(capacity);
    let count = next.saturating_sub(from);
    if count == 0 {
        return 0..0;
    }
    from - capacity..from - capacity + count
}

/// The message for items `first .. next` in `batch`.
fn items(table: &Table, batch: &SampleBatch, first: u64, next: u64) -> FollowItems {
    let layout = table.buffer.layout();
    let replaced = replaced_keys(first, next, table.buffer.capacity() as u64);
    FollowItems {
        first_key: first,
        rows: batch.len() as u32,
        fields: batch_blocks(layout, batch),
        policy_versions: batch.policy_versions().to_vec(),
        replaced_first: replaced.start,
        replaced_count: (replaced.end - replaced.start) as u32,
        next_key: next,
        head_key: table.buffer.next_key(),
    }
}
