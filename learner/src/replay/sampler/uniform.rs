//! [`Uniform`]: uniform with replacement over all stored items. Lock-free:
//! draws a slot below `min(claimed, capacity)` and copies it; a slot not
//! yet written is redrawn. Cost O(1) per item.
use super::super::batch::SampleBatch;
use super::super::buffer::Shared;
use super::super::error::ReplayError;
use super::super::rng::WyRand;
use super::super::slot::ReadOutcome;

#[derive(Debug)]
pub(crate) struct Uniform;

/// Redraws allowed per requested item before giving up (empty slots, lag
/// drops).
pub(crate) const MAX_REDRAWS_PER_ITEM: usize = 64;

/// Slots drawn and touched ahead of copying.
const CHUNK: usize = 32;

impl Uniform {
    pub(crate) fn sample(
        &self,
        shared: &Shared,
        batch: &mut SampleBatch,
        n: usize,
        rng: &mut WyRand,
    ) -> Result<(), ReplayError> {
        let range = shared.claimed().min(shared.capacity);
        if range == 0 || shared.stored() == 0 {
            return Err(ReplayError::NotEnoughItems {
                requested: n,
                available: 0,
            });
        }
        let mut budget = n * MAX_REDRAWS_PER_ITEM;
        // Draw a chunk, touch its slots, then copy: the misses overlap.
        let mut slots = [0usize; CHUNK];
        while batch.len() < n && budget > 0 {
            let want = (n - batch.len()).min(CHUNK).min(budget);
            budget -= want;
            for s in &mut slots[..want] {
                *s = rng.below(range) as usize;
                shared.storage.touch(*s);
            }
            for &slot in &slots[..want] {
                if let ReadOutcome::Item(meta) = shared.copy_row(slot, batch) {
                    shared.offer(batch, meta, 1.0);
                }
            }
        }
        Ok(())
    }
}
