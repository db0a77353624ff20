//! [`ReplayClient::follow`]: a table's items from a cursor on, as the
//! server's `Follow` stream sends them ([`FollowEvent`]s on a
//! [`FollowStream`]).
//!
//! Every item inserted from the cursor on arrives once, in key order, in
//! [`FollowedBatch`]es of consecutive keys; resume a broken stream with
//! `follow(table, last.next_key())` and nothing is missed or repeated. When
//! items were overwritten before the server read them, a
//! [`FollowEvent::Gap`] names them, and the stream goes on after them. Each
//! batch also names the keys whose slots its items took
//! ([`FollowedBatch::replaced`]), which a copy of the table drops.
//! Cost: one HTTP/2 stream; the typed readers copy, the rest borrows the
//! received message.
use std::ops::Range;

use crate::client::field_blocks::FieldBlocks;
use crate::client::replay_client::ReplayClient;
use crate::error::ClientError;
use crate::pb::{follow_reply, FieldBlock, FollowItems, FollowRequest};
use tonic::Streaming;

/// A follow stream's parameters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FollowOptions {
    /// The first key wanted (0: every item still stored).
    pub cursor: u64,
    /// Items per message at most (0: the server's default, 1024).
    pub max_batch: u32,
    /// Messages the server may prepare ahead (0: its default, 2; at most
    /// 16).
    pub max_in_flight: u32,
}

/// What a follow stream delivers.
#[derive(Debug, Clone)]
pub enum FollowEvent {
    /// The next items, consecutive keys from where the last event ended.
    Items(FollowedBatch),
    /// Items `requested .. oldest` were overwritten before they were read
    /// and will never come; the stream goes on at `oldest`.
    Gap { requested: u64, oldest: u64 },
}

/// Consecutive items of one table, per field one `[rows, ...shape]` block
/// of little-endian bytes.
#[derive(Debug, Clone)]
pub struct FollowedBatch {
    items: FollowItems,
}

impl FollowedBatch {
    pub fn rows(&self) -> usize {
        self.items.rows as usize
    }
    /// The keys of the rows, in row order.
    pub fn keys(&self) -> Range<u64> {
        self.items.first_key..self.items.next_key
    }
    /// Where to resume: one past the last key.
    pub fn next_key(&self) -> u64 {
        self.items.next_key
    }
    /// The table's next key when the server read this batch: the follower
    /// is `head_key() - next_key()` items behind.
    pub fn head_key(&self) -> u64 {
        self.items.head_key
    }
    /// The keys whose slots these items took (overwrites).
    pub fn replaced(&self) -> Range<u64> {
        let first = self.items.replaced_first;
        first..first + u64::from(self.items.replaced_count)
    }
    pub fn policy_versions(&self) -> &[u64] {
        &self.items.policy_versions
    }
    /// The message as received.
    pub fn into_items(self) -> FollowItems {
        self.items
    }
}

/// Its fields' blocks: `field`, `field_f32`, `field_u64`.
impl FieldBlocks for FollowedBatch {
    fn fields(&self) -> &[FieldBlock] {
        &self.items.fields
    }
}

/// A follow stream: events as the server reads them. It never ends on its
/// own while the server runs.
#[derive(Debug)]
pub struct FollowStream {
    replies: Streaming<crate::pb::FollowReply>,
    /// The key the next event must start at.
    expected: u64,
}

impl FollowStream {
    /// The next event; `None` when the server ended the stream.
    pub async fn next(&mut self) -> Result<Option<FollowEvent>, ClientError> {
        let Some(reply) = self.replies.message().await? else {
            return Ok(None);
        };
        let bad = |reason: String| ClientError::Protocol { reason };
        match reply.event {
            None => Err(bad("a follow reply without an event".into())),
            Some(follow_reply::Event::Gap(g)) => {
                if g.requested != self.expected || g.oldest <= g.requested {
                    return Err(bad(format!(
                        "gap {}..{} where the stream stood at {}",
                        g.requested, g.oldest, self.expected
                    )));
                }
                self.expected = g.oldest;
                Ok(Some(FollowEvent::Gap {
                    requested: g.requested,
                    oldest: g.oldest,
                }))
            }
            Some(follow_reply::Event::Items(items)) => {
                let rows = u64::from(items.rows);
                if items.first_key != self.expected
                    || items.next_key != items.first_key + rows
                    || rows == 0
                {
                    return Err(bad(format!(
                        "items {}..{} ({} rows) where the stream stood at {}",
                        items.first_key, items.next_key, items.rows, self.expected
                    )));
                }
                self.expected = items.next_key;
                Ok(Some(FollowEvent::Items(FollowedBatch { items })))
            }
        }
    }

    /// The key the next event starts at (the cursor to resume from).
    pub fn cursor(&self) -> u64 {
        self.expected
    }
}

impl ReplayClient {
    /// Follows `table` from `cursor` (0: every item still stored) with the
    /// server's default batch and flow-control settings.
    pub async fn follow(&mut self, table: &str, cursor: u64) -> Result<FollowStream, ClientError> {
        self.follow_with(
            table,
            FollowOptions {
                cursor,
                ..FollowOptions::default()
            },
        )
        .await
    }

    /// Follows `table` with explicit options.
    pub async fn follow_with(
        &mut self,
        table: &str,
        options: FollowOptions,
    ) -> Result<FollowStream, ClientError> {
        let replies = self
            .raw()
            .follow(FollowRequest {
                table: table.to_owned(),
                cursor: options.cursor,
                max_batch: options.max_batch,
                max_in_flight: options.max_in_flight,
            })
            .await?
            .into_inner();
        Ok(FollowStream {
            replies,
            expected: options.cursor,
        })
    }
}
