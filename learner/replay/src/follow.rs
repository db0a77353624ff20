//! Incremental reads and replica writes: [`ReplayBuffer::read_since`] hands
//! a follower every item inserted from a cursor on, in key (insertion)
//! order, and [`ReplayBuffer::insert_batch_at`] stores items under the keys
//! they had in another buffer, so a replica ends with the same keys and the
//! same bytes.
//!
//! Why here, on the buffer: keys are consecutive and item `key` lives in
//! slot `key % capacity`, so "everything after key `c`" is a walk of the
//! ring from `c`'s slot, each slot read with the ordinary seqlock read
//! (`slot::read`: a torn item is never returned). No index, no log and no
//! lock is added to the insert path; following costs the writers nothing.
//!
//! What a read at key `k` can find in `k`'s slot:
//! - key `k`: the item; it is returned and the walk goes on;
//! - an older key, or nothing: `k` was claimed but its writer has not
//!   published it yet (or `k` was not claimed): the walk stops there, so
//!   items are handed out in key order with no hole, and the caller asks
//!   again later;
//! - a newer key: `k` was overwritten (or its write was superseded by a
//!   writer a lap ahead) before the follower read it. The follower is more
//!   than a ring behind; [`FollowRead::Gap`] says so and names the oldest
//!   key that may still be stored, where it can start again.
//!
//! A replica write takes the same slot protocol as an insert
//! (`slot::write`), raises the key counter to one past the newest key
//! stored (`fetch_max`), and tells the sampler and blocked samplers. It is
//! for buffers that never consume or block (keys may arrive with holes
//! where the replica missed items): consume-once and grouped samplers,
//! writer policy `Block` and a rate limiter are refused.
//!
//! Cost: `read_since` is one seqlock read per item into the caller's
//! batch; `insert_batch_at` is an insert's cost per item plus one
//! `fetch_max`.
use std::sync::atomic::Ordering;

use crate::batch::{LostRows, SampleBatch};
use crate::buffer::ReplayBuffer;
use crate::error::ReplayError;
use crate::group_id::NO_GROUP;
use crate::item::{check_fields, FieldRef};
use crate::item_key::ItemKey;
use crate::slot::{self, ReadOutcome, WriteOutcome};
use crate::writer_policy::WriterPolicy;

/// What [`ReplayBuffer::read_since`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FollowRead {
    /// The batch holds items `cursor .. next`, in key order (none when the
    /// item at the cursor is not published yet); continue at `next`.
    Items { next: u64 },
    /// The item at the cursor was overwritten before it was read: items
    /// `cursor .. oldest` are gone. `oldest` is the oldest key that may
    /// still be stored (one lap below the newest claimed key); continue
    /// there.
    Gap { oldest: u64 },
}

/// What [`ReplayBuffer::insert_batch_at`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReplicaWrites {
    /// Items stored.
    pub written: usize,
    /// Items not stored because their slot already held that key or a
    /// newer one.
    pub superseded: usize,
    /// Items whose slot held an older item, now replaced.
    pub replaced: usize,
}

impl ReplayBuffer {
    /// The next key an insert would get: one past the newest key claimed.
    /// Keys below it were handed out; the newest ones may still be being
    /// written.
    pub fn next_key(&self) -> u64 {
        self.shared.claimed()
    }

    /// The oldest key that may still be stored: one lap below
    /// [`next_key`](Self::next_key) (0 until the ring has wrapped).
    pub fn oldest_key(&self) -> u64 {
        self.next_key().saturating_sub(self.shared.capacity)
    }

    /// Copies the items with keys `cursor, cursor + 1, ...` into `batch`
    /// (cleared first), up to `max` (and the batch's `max_rows`), stopping
    /// at the first key not yet published. Never waits. Each row's key,
    /// policy version and group are the item's; its weight is 1.
    pub fn read_since(&self, cursor: u64, batch: &mut SampleBatch, max: usize) -> FollowRead {
        batch.clear();
        let s = &self.shared;
        let slots = s.storage.slots();
        let max = max.min(batch.max_rows());
        let end = s.claimed();
        let mut key = cursor;
        while key < end && batch.len() < max {
            match s.copy_row(slots, s.slot_of(key), batch) {
                ReadOutcome::Item(meta) if meta.key == key => {
                    batch.commit_row(ItemKey(key), 1.0, meta.policy_version, meta.group);
                    key += 1;
                }
                ReadOutcome::Item(meta) if meta.key > key => {
                    if !batch.is_empty() {
                        // Hand out what was read; the next call reports
                        // the gap.
                        break;
                    }
                    // `meta.key >= key + capacity` was claimed, so this is
                    // above `key`.
                    let oldest = self.oldest_key().max(key + 1);
                    return FollowRead::Gap { oldest };
                }
                // An older item or none: `key` is not published yet.
                _ => break,
            }
        }
        if let Some(heap) = s.storage.heap() {
            // Rows whose values were overwritten since their slot was read
            // end the batch there (key order, no hole); with none left, the
            // cursor's item is gone: a gap, as above.
            if batch.resolve_variable(heap, LostRows::Stop) > 0 {
                key = cursor + batch.len() as u64;
                if batch.is_empty() {
                    return FollowRead::Gap {
                        oldest: self.oldest_key().max(key + 1),
                    };
                }
            }
        }
        FollowRead::Items { next: key }
    }

    /// Stores `rows` items (fields in layout order, shapes `[rows, ...]`)
    /// under keys `first .. first + rows`, as a replica of a buffer with
    /// the same layout and capacity. An item whose slot already holds its
    /// key or a newer one is skipped (counted in `superseded`).
    ///
    /// Refused (`Config`) for consume-once and grouped samplers, writer
    /// policy `Block` and a rate limiter (module docs); `Closed` once the
    /// buffer is closed.
    pub fn insert_batch_at(
        &self,
        first: ItemKey,
        fields: &[FieldRef<'_>],
        rows: usize,
    ) -> Result<ReplicaWrites, ReplayError> {
        let config = self.config();
        if config.sampler.consumes()
            || matches!(config.sampler, crate::sampler::SamplerConfig::Grouped)
            || config.writer_policy != WriterPolicy::OverwriteOldest
            || config.rate_limiter.is_some()
        {
            return Err(ReplayError::config(
                "replica writes need a table that never consumes, groups, blocks or \
                 rate-limits: a non-consuming sampler, writer policy overwrite_oldest \
                 and no rate limiter",
            ));
        }
        if self.is_closed() {
            return Err(ReplayError::Closed);
        }
        check_fields(self.layout(), fields, Some(rows))?;
        let mut report = ReplicaWrites::default();
        if rows == 0 {
            return Ok(report);
        }
        let s = &self.shared;
        let slots = s.storage.slots();
        let first = first.0;
        // Only the last lap's worth can still be stored: earlier items of
        // the batch would be overwritten by later ones in the same slots.
        let skip = rows.saturating_sub(self.capacity());
        report.superseded += skip;
        let staged = match s.storage.heap() {
            Some(heap) => {
                // Keys are given, not claimed: the region is recorded
                // under them at once (`heap.rs`).
                let staged = heap.stage(self.layout(), fields, skip, rows, s.claimed())?;
                staged.keys(first + rows as u64 - 1);
                Some(staged)
            }
            None => None,
        };
        for i in skip..rows {
            let key = first + i as u64;
            let outcome = slot::write(slots, s.slot_of(key), key, NO_GROUP, |f, bytes, words| {
                let heap_ref = staged.as_ref().and_then(|st| st.row_ref(i, f));
                slot::store_row!(words, fields[f], i, bytes, heap_ref)
            });
            match outcome {
                WriteOutcome::Superseded => report.superseded += 1,
                WriteOutcome::Written { previous } => {
                    report.written += 1;
                    report.replaced += usize::from(previous != 0);
                }
            }
        }
        drop(staged);
        let last = first + rows as u64;
        // AcqRel: the slot writes above are published by their own Release
        // stores; this only bounds samplers' draws (pairs with the Acquire
        // loads in `Shared::claimed`), as the insert's `fetch_add` does.
        s.claimed.fetch_max(last, Ordering::AcqRel);
        // Relaxed: a statistic (`Counters`).
        s.counters
            .inserted
            .fetch_add(report.written as u64, Ordering::Relaxed);
        let from = first + skip as u64;
        self.sampler.on_publish(s, from, rows - skip, &|_| NO_GROUP);
        self.notifier.notify();
        Ok(report)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::buffer::ReplayConfig;
    use crate::dtype::DType;
    use crate::item::Values;
    use crate::layout::ItemLayout;
    use crate::sampler::SamplerConfig;

    fn buffer(capacity: usize) -> ReplayBuffer {
        let layout = ItemLayout::builder()
            .field("x", DType::U64, &[2])
            .build()
            .expect("layout");
        ReplayBuffer::new(layout, ReplayConfig::new(capacity, SamplerConfig::Uniform))
            .expect("buffer")
    }

    fn insert(b: &ReplayBuffer, v: u64) -> ItemKey {
        b.insert_ref(&[FieldRef::new(&[2], Values::U64(&[v, !v]))])
            .expect("insert")
    }

    fn values(batch: &SampleBatch) -> Vec<u64> {
        batch
            .field_u64("x")
            .expect("x")
            .chunks(2)
            .map(|c| c[0])
            .collect()
    }

    #[test]
    fn reads_every_item_from_the_cursor_in_key_order_then_stops() {
        let b = buffer(8);
        for v in 0..5 {
            insert(&b, 100 + v);
        }
        let mut batch = b.new_batch(3);
        assert_eq!(
            b.read_since(1, &mut batch, 16),
            FollowRead::Items { next: 4 }
        );
        assert_eq!(values(&batch), vec![101, 102, 103]);
        let keys: Vec<u64> = batch.keys().iter().map(|k| k.0).collect();
        assert_eq!(keys, vec![1, 2, 3]);
        assert_eq!(
            b.read_since(4, &mut batch, 16),
            FollowRead::Items { next: 5 }
        );
        assert_eq!(values(&batch), vec![104]);
        assert_eq!(
            b.read_since(5, &mut batch, 16),
            FollowRead::Items { next: 5 }
        );
        assert!(batch.is_empty());
    }

    #[test]
    fn a_cursor_a_lap_behind_gets_a_gap_naming_the_oldest_key() {
        let b = buffer(4);
        for v in 0..10 {
            insert(&b, v);
        }
        let mut batch = b.new_batch(8);
        assert_eq!(
            b.read_since(2, &mut batch, 8),
            FollowRead::Gap { oldest: 6 }
        );
        assert!(batch.is_empty());
        assert_eq!(
            b.read_since(6, &mut batch, 8),
            FollowRead::Items { next: 10 }
        );
        assert_eq!(values(&batch), vec![6, 7, 8, 9]);
    }

    #[test]
    fn replica_writes_keep_keys_and_bytes_and_skip_older_keys() {
        let primary = buffer(4);
        for v in 0..6 {
            insert(&primary, 7 * v);
        }
        let replica = buffer(4);
        let mut batch = primary.new_batch(4);
        assert_eq!(
            primary.read_since(2, &mut batch, 4),
            FollowRead::Items { next: 6 }
        );
        let bytes = batch.field("x").expect("x").to_vec();
        let raw = Values::Raw {
            dtype: DType::U64,
            bytes: &bytes,
        };
        let w = replica
            .insert_batch_at(ItemKey(2), &[FieldRef::new(&[4, 2], raw)], 4)
            .expect("replica write");
        assert_eq!(
            w,
            ReplicaWrites {
                written: 4,
                superseded: 0,
                replaced: 0
            }
        );
        assert_eq!(replica.next_key(), 6);
        let mut copy = replica.new_batch(4);
        assert_eq!(
            replica.read_since(2, &mut copy, 4),
            FollowRead::Items { next: 6 }
        );
        assert_eq!(copy.keys(), batch.keys());
        assert_eq!(copy.field("x"), batch.field("x"));
        // The same keys again: every slot already holds them.
        let again = replica
            .insert_batch_at(ItemKey(2), &[FieldRef::new(&[4, 2], raw)], 4)
            .expect("replica write");
        assert_eq!(again.superseded, 4);
    }

    #[test]
    fn replica_writes_are_refused_for_consume_once_tables() {
        let layout = ItemLayout::builder()
            .field("x", DType::U64, &[2])
            .build()
            .expect("layout");
        let b =
            ReplayBuffer::new(layout, ReplayConfig::new(4, SamplerConfig::Fifo)).expect("buffer");
        let r = b.insert_batch_at(
            ItemKey(0),
            &[FieldRef::new(&[1, 2], Values::U64(&[1, 2]))],
            1,
        );
        assert!(matches!(r, Err(ReplayError::Config { .. })), "{r:?}");
    }
}
