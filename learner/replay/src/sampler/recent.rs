//! [`Recent`]: uniform over the `window` most recently claimed keys.
//! Lock-free; a key not yet published (or already lapped) is redrawn.
//! Cost O(1) per item.
use super::uniform::MAX_REDRAWS_PER_ITEM;
use crate::batch::SampleBatch;
use crate::error::ReplayError;
use crate::rng::WyRand;
use crate::shared::Shared;
use crate::slot::ReadOutcome;

#[derive(Debug)]
pub(crate) struct Recent {
    window: u64,
}

impl Recent {
    pub(crate) fn new(window: usize) -> Self {
        Recent {
            window: window as u64,
        }
    }

    pub(crate) fn sample(
        &self,
        shared: &Shared,
        batch: &mut SampleBatch,
        n: usize,
        rng: &mut WyRand,
    ) -> Result<(), ReplayError> {
        let slots = shared.storage.slots();
        let end = shared.claimed();
        let start = end.saturating_sub(self.window);
        if end == 0 || shared.stored() == 0 {
            return Err(ReplayError::NotEnoughItems {
                requested: n,
                available: 0,
            });
        }
        let mut budget = n * MAX_REDRAWS_PER_ITEM;
        while batch.len() < n && budget > 0 {
            budget -= 1;
            let key = start + rng.below(end - start);
            match shared.copy_row(slots, shared.slot_of(key), batch) {
                ReadOutcome::Item(meta) if meta.key == key => {
                    shared.offer(batch, meta, 1.0);
                }
                _ => {}
            }
        }
        Ok(())
    }
}
