//! [`Shared`]: what samplers need from the buffer: the storage, the key
//! counter, the statistic counters and the policy-lag cap, with the row
//! copies (`copy_row`, the batched `gather`) and consumption bookkeeping
//! (`retire`, `drop_item`) every sampler uses.
//!
//! Why its own file: every sampler takes it, and the buffer owns one beside
//! its sampler; here it sits below both, so no sampler imports the buffer.
//! Cost: see `gather`, the sampling hot path (a seqlock read per row, split
//! into halves around one field-major copy of up to 32 rows).
use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_utils::CachePadded;

use crate::batch::SampleBatch;
use crate::counters::Counters;
use crate::item_key::ItemKey;
use crate::policy_lag::{LagVerdict, PolicyLagCap};
use crate::slot::{self, ItemMeta, ReadOutcome};
use crate::storage::{Slots, Storage};

/// Rows copied per batched read in [`Shared::gather`] (at most 32: one
/// bit per row of a `u32` marks the rows that validated).
pub(crate) const GATHER_CHUNK: usize = 32;
const _: () = assert!(GATHER_CHUNK <= 32);

/// What samplers need from the buffer.
#[derive(Debug)]
pub(crate) struct Shared {
    pub storage: Storage,
    pub capacity: u64,
    /// Keys handed to writers so far (= next key). Writers: inserts
    /// (`fetch_add`, or CAS under `Block`); readers: samplers bounding their
    /// draws. AcqRel/Acquire so that a `Block` writer's slot checks happen
    /// before its claim is visible and samplers see claims in order; item
    /// data is ordered by the slot protocol, not by this counter.
    pub claimed: CachePadded<AtomicU64>,
    pub counters: Counters,
    pub lag: Option<PolicyLagCap>,
    /// Learner's current policy version. Relaxed: a slightly stale value
    /// only shifts the lag judgement by one training step.
    pub current_policy: AtomicU64,
    pub consumes: bool,
}

impl Shared {
    #[inline]
    pub(crate) fn slot_of(&self, key: u64) -> usize {
        (key % self.capacity) as usize
    }

    #[inline]
    pub(crate) fn claimed(&self) -> u64 {
        self.claimed.load(Ordering::Acquire)
    }

    /// Items stored and not yet removed (approximate under concurrency).
    pub(crate) fn stored(&self) -> usize {
        let inserted = self.counters.inserted.load(Ordering::Relaxed);
        if self.consumes {
            inserted.saturating_sub(self.counters.removed.load(Ordering::Relaxed)) as usize
        } else {
            inserted.min(self.capacity) as usize
        }
    }

    /// Copies `slot` into the batch's next row (not yet committed).
    #[inline]
    pub(crate) fn copy_row(
        &self,
        slots: Slots<'_>,
        slot: usize,
        batch: &mut SampleBatch,
    ) -> ReadOutcome {
        slot::read(slots, slot, |field, words| {
            slot::copy_out(words, batch.next_row_mut(field));
        })
    }

    /// Copies the items in `chunk` (slots) into the batch's next rows and
    /// commits each consistent one that the lag cap keeps, with `weight(j)`
    /// as the importance weight of `chunk[j]`; empty slots are skipped.
    ///
    /// Why not [`copy_row`](Self::copy_row) per slot: that is the whole
    /// seqlock read per row, and a cache-resident `sample(128)` spent about
    /// two thirds of its time in per-row setup (field lookups, the copy
    /// loop's entry, reloading the batch's columns after every byte store).
    /// Here the reads are split into their halves (`slot::begin_read`,
    /// `end_reads`, `validate`) around one field-major copy of up to
    /// [`GATHER_CHUNK`] rows, and the metadata goes straight into the
    /// batch's uncommitted rows. When every row of the chunk validates and
    /// no lag cap applies, the chunk is committed at once (its weights
    /// stored, the length moved); otherwise row by row. A slot caught
    /// mid-write, or whose version moved during the copy, is read again
    /// alone.
    #[inline]
    pub(crate) fn gather(
        &self,
        slots: Slots<'_>,
        batch: &mut SampleBatch,
        chunk: &[usize],
        weight: impl Fn(usize) -> f32,
    ) {
        for (c, sub) in chunk.chunks(GATHER_CHUNK).enumerate() {
            let first_weight = c * GATHER_CHUNK;
            let mut v1s = [0u64; GATHER_CHUNK];
            for (v1, &slot) in v1s.iter_mut().zip(sub) {
                *v1 = slot::begin_read(slots, slot);
            }
            // Loaded once, after every `Acquire` sequence load above: that
            // order is all `slot::metadata` needs, per row.
            let groups = slots.groups_recorded();
            batch.begin_rows(slots, sub, &v1s, groups);
            batch.copy_rows(slots, sub);
            slot::end_reads();
            // Bit `j`: row `j` is a consistent copy of an item.
            let mut consistent = 0u32;
            for (j, (&slot, &v1)) in sub.iter().zip(&v1s).enumerate() {
                consistent |= u32::from(slot::validate(slots, slot, v1)) << j;
            }
            if consistent == u32::MAX >> (GATHER_CHUNK - sub.len()) && self.lag.is_none() {
                // The common case: every row stands, no lag judgement.
                batch.commit_pending_rows(sub.len(), |j| weight(first_weight + j));
                continue;
            }
            let first = batch.len();
            for (j, &slot) in sub.iter().enumerate() {
                let w = weight(first_weight + j);
                if consistent & (1 << j) != 0 {
                    // Rows before this one may have been dropped: close the
                    // gap (rare: lag drops and empty slots only).
                    if batch.len() != first + j {
                        batch.move_row(first + j, batch.len());
                    }
                    let pv = batch.pending_policy_version();
                    if let Some(w) = self.lag_weight(pv, w) {
                        batch.commit_pending(w);
                    }
                } else if let ReadOutcome::Item(meta) = self.copy_row(slots, slot, batch) {
                    // Into row `batch.len()`, at or before this slot's row:
                    // no later slot's copy was overwritten.
                    self.offer(batch, meta, w);
                }
            }
        }
    }

    /// `weight` times the lag cap's down-weight for an item of
    /// `policy_version`; `None` (and counted) if the cap drops it.
    #[inline]
    fn lag_weight(&self, policy_version: u64, weight: f32) -> Option<f32> {
        match &self.lag {
            None => Some(weight),
            Some(cap) => {
                match cap.judge(self.current_policy.load(Ordering::Relaxed), policy_version) {
                    LagVerdict::Keep(w) => Some(weight * w),
                    LagVerdict::Drop => {
                        self.counters.dropped_lag.fetch_add(1, Ordering::Relaxed);
                        None
                    }
                }
            }
        }
    }

    /// Applies the lag cap and commits the copied row; false if dropped.
    #[inline]
    pub(crate) fn offer(&self, batch: &mut SampleBatch, meta: ItemMeta, weight: f32) -> bool {
        match self.lag_weight(meta.policy_version, weight) {
            Some(w) => {
                batch.commit_row(ItemKey(meta.key), w, meta.policy_version, meta.group);
                true
            }
            None => false,
        }
    }

    /// Marks an item consumed.
    #[inline]
    pub(crate) fn retire(&self, slot: usize, key: u64) {
        self.storage.retire(slot, key);
        self.counters.removed.fetch_add(1, Ordering::Relaxed);
    }

    /// Marks an item dropped (its group was broken), unless a writer has
    /// displaced it already (that writer counted it evicted, and the
    /// slot's retire stamp now belongs to the newer item).
    pub(crate) fn drop_item(&self, slot: usize, key: u64) {
        if self.storage.published(slot) != key + 1 {
            return;
        }
        self.storage.retire(slot, key);
        self.counters.removed.fetch_add(1, Ordering::Relaxed);
        self.counters.dropped_group.fetch_add(1, Ordering::Relaxed);
    }
}
