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
        while batch.len() < n && budget > 0 {
            budget -= 1;
            let slot = rng.below(range) as usize;
            if let ReadOutcome::Item(meta) = shared.copy_row(slot, batch) {
                shared.offer(batch, meta, 1.0);
            }
        }
        Ok(())
    }
}
