//! [`Uniform`]: uniform with replacement over all stored items. Lock-free:
//! draws a slot below `min(claimed, capacity)` and copies it; a slot not
//! yet written is redrawn. Cost O(1) per item.
use crate::batch::SampleBatch;
use crate::error::ReplayError;
use crate::rng::WyRand;
use crate::shared::Shared;

#[derive(Debug)]
pub(crate) struct Uniform;

/// Redraws allowed per requested item before giving up (empty slots, lag
/// drops).
pub(crate) const MAX_REDRAWS_PER_ITEM: usize = 64;

/// Slots drawn and touched per pipeline stage.
const CHUNK: usize = 32;

impl Uniform {
    pub(crate) fn sample(
        &self,
        shared: &Shared,
        batch: &mut SampleBatch,
        n: usize,
        rng: &mut WyRand,
    ) -> Result<(), ReplayError> {
        let slots = shared.storage.slots();
        let range = shared.claimed().min(shared.capacity);
        if range == 0 || shared.stored() == 0 {
            return Err(ReplayError::NotEnoughItems {
                requested: n,
                available: 0,
            });
        }
        let mut budget = n * MAX_REDRAWS_PER_ITEM;
        // Software pipeline: chunk `k + 1` is drawn and prefetched before
        // chunk `k` is copied, so its misses are in flight while we copy
        // and only the first chunk's latency is exposed (previously each
        // chunk's first copy waited a full memory latency).
        let mut draw = |buf: &mut [usize; CHUNK], want: usize| {
            for s in &mut buf[..want] {
                *s = rng.below(range) as usize;
                slots.touch(*s);
            }
        };
        let (mut cur, mut next) = ([0usize; CHUNK], [0usize; CHUNK]);
        let mut cur_len = 0;
        loop {
            if cur_len == 0 {
                cur_len = (n - batch.len()).min(CHUNK).min(budget);
                if cur_len == 0 {
                    break;
                }
                budget -= cur_len;
                draw(&mut cur, cur_len);
            }
            // Rows still missing if every slot of `cur` holds an item.
            let next_len = n
                .saturating_sub(batch.len() + cur_len)
                .min(CHUNK)
                .min(budget);
            budget -= next_len;
            draw(&mut next, next_len);
            shared.gather(slots, batch, &cur[..cur_len], |_| 1.0);
            std::mem::swap(&mut cur, &mut next);
            cur_len = next_len;
        }
        Ok(())
    }
}
