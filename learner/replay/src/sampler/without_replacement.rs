//! [`UniformWithoutReplacement`]: a shuffled pass over the slots stored when
//! the pass began; every item once per pass, then a new shuffle.
//!
//! The permutation sits under a short mutex (taking `n` indices); copies
//! happen after it is released. Cost O(1) per item plus an O(N) shuffle
//! per pass.
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::state::SamplerState;
use super::uniform::MAX_REDRAWS_PER_ITEM;
use crate::batch::SampleBatch;
use crate::error::ReplayError;
use crate::rng::WyRand;
use crate::shared::Shared;
use crate::slot::ReadOutcome;

#[derive(Debug, Default)]
struct Pass {
    permutation: Vec<u32>,
    position: usize,
}

#[derive(Debug)]
pub(crate) struct UniformWithoutReplacement {
    pass: Mutex<Pass>,
}

impl UniformWithoutReplacement {
    pub(crate) fn new() -> Self {
        UniformWithoutReplacement {
            pass: Mutex::new(Pass::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Pass> {
        // A pass is valid at every point a panic could occur.
        self.pass.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn sample(
        &self,
        shared: &Shared,
        batch: &mut SampleBatch,
        n: usize,
        rng: &mut WyRand,
    ) -> Result<(), ReplayError> {
        let slots = shared.storage.slots();
        let stored = shared.claimed().min(shared.capacity) as usize;
        if stored == 0 || shared.stored() == 0 {
            return Err(ReplayError::NotEnoughItems {
                requested: n,
                available: 0,
            });
        }
        let mut budget = n * MAX_REDRAWS_PER_ITEM;
        let mut picks = Vec::with_capacity(n);
        while batch.len() < n && budget > 0 {
            picks.clear();
            {
                let mut pass = self.lock();
                while picks.len() < n - batch.len() {
                    if pass.position >= pass.permutation.len() {
                        pass.permutation.clear();
                        pass.permutation.extend(0..stored as u32);
                        // Fisher-Yates.
                        for i in (1..stored).rev() {
                            let j = rng.below(i as u64 + 1) as usize;
                            pass.permutation.swap(i, j);
                        }
                        pass.position = 0;
                    }
                    picks.push(pass.permutation[pass.position] as usize);
                    pass.position += 1;
                }
            }
            for &slot in &picks {
                budget = budget.saturating_sub(1);
                if let ReadOutcome::Item(meta) = shared.copy_row(slots, slot, batch) {
                    shared.offer(batch, meta, 1.0);
                }
            }
        }
        Ok(())
    }

    pub(crate) fn save(&self, st: &mut SamplerState) {
        let pass = self.lock();
        st.permutation = pass.permutation.clone();
        st.position = pass.position;
    }

    pub(crate) fn restore(&self, st: &SamplerState, capacity: usize) -> Result<(), String> {
        if st.permutation.iter().any(|&s| s as usize >= capacity)
            || st.position > st.permutation.len()
        {
            return Err("pass state does not fit capacity".into());
        }
        let mut pass = self.lock();
        pass.permutation = st.permutation.clone();
        pass.position = st.position;
        Ok(())
    }
}
