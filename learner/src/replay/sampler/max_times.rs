//! [`MaxTimesSampled`]: uniform with replacement among live items; an item
//! leaves after its `max_times`-th sample (Reverb's `max_times_sampled`).
//!
//! The live set is a dense array plus a position index, under a short mutex
//! (pick and bookkeeping only; copies happen after it is released). Cost
//! O(1) per item.
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::super::batch::SampleBatch;
use super::super::buffer::Shared;
use super::super::error::ReplayError;
use super::super::rng::WyRand;
use super::super::slot::ReadOutcome;
use super::SamplerState;

const NONE: u32 = u32::MAX;

#[derive(Debug)]
struct Live {
    /// Live slots, dense.
    slots: Vec<u32>,
    /// Position of each slot in `slots`, or `NONE`.
    position: Vec<u32>,
    /// Samples taken of each slot's current item.
    times: Vec<u32>,
    /// Key of each live slot's item.
    keys: Vec<u64>,
    /// Samples still allowed, summed over live items.
    tickets: u64,
}

#[derive(Debug)]
pub(crate) struct MaxTimesSampled {
    max_times: u32,
    live: Mutex<Live>,
}

impl Live {
    fn remove(&mut self, slot: usize) {
        let p = self.position[slot];
        if p == NONE {
            return;
        }
        let last = self.slots.len() - 1;
        self.slots.swap(p as usize, last);
        self.position[self.slots[p as usize] as usize] = p;
        self.slots.pop();
        self.position[slot] = NONE;
    }
    fn add(&mut self, slot: usize) {
        if self.position[slot] == NONE {
            self.position[slot] = self.slots.len() as u32;
            self.slots.push(slot as u32);
        }
    }
}

impl MaxTimesSampled {
    pub(crate) fn new(max_times: u32, capacity: usize) -> Self {
        MaxTimesSampled {
            max_times,
            live: Mutex::new(Live {
                slots: Vec::with_capacity(capacity),
                position: vec![NONE; capacity],
                times: vec![0; capacity],
                keys: vec![0; capacity],
                tickets: 0,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Live> {
        // Every mutation below keeps the set consistent before it can panic.
        self.live.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn on_publish(&self, shared: &Shared, first: u64, count: usize) {
        let m = self.max_times;
        let mut live = self.lock();
        for key in first..first + count as u64 {
            let slot = shared.slot_of(key);
            if live.position[slot] != NONE {
                let left = u64::from(m - live.times[slot]);
                live.tickets -= left;
            }
            live.add(slot);
            live.times[slot] = 0;
            live.keys[slot] = key;
            live.tickets += u64::from(m);
        }
    }

    pub(crate) fn available(&self) -> usize {
        self.lock().tickets as usize
    }

    pub(crate) fn sample(
        &self,
        shared: &Shared,
        batch: &mut SampleBatch,
        n: usize,
        rng: &mut WyRand,
    ) -> Result<(), ReplayError> {
        let slots = shared.storage.slots();
        let mut picks = Vec::with_capacity(n);
        {
            let mut live = self.lock();
            if live.tickets < n as u64 {
                return Err(ReplayError::NotEnoughItems {
                    requested: n,
                    available: live.tickets as usize,
                });
            }
            for _ in 0..n {
                let slot = live.slots[rng.below(live.slots.len() as u64) as usize] as usize;
                live.times[slot] += 1;
                live.tickets -= 1;
                let last = live.times[slot] == self.max_times;
                if last {
                    live.remove(slot);
                }
                picks.push((slot, live.keys[slot], last));
            }
        }
        for (slot, key, last) in picks {
            match shared.copy_row(slots, slot, batch) {
                ReadOutcome::Item(meta) if meta.key == key => {
                    shared.offer(batch, meta, 1.0);
                    if last {
                        shared.retire(slot, key);
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    pub(crate) fn save(&self, st: &mut SamplerState) {
        let live = self.lock();
        st.live = live.slots.clone();
        st.times_sampled = live.times.clone();
    }

    pub(crate) fn restore(&self, st: &SamplerState, shared: &Shared) -> Result<(), String> {
        let capacity = shared.capacity as usize;
        if st.times_sampled.len() != capacity || st.live.iter().any(|&s| s as usize >= capacity) {
            return Err("max_times_sampled state does not fit capacity".into());
        }
        let mut live = self.lock();
        live.slots.clear();
        live.position.iter_mut().for_each(|p| *p = NONE);
        live.tickets = 0;
        live.times.copy_from_slice(&st.times_sampled);
        for &slot in &st.live {
            live.add(slot as usize);
            live.keys[slot as usize] = shared.storage.published(slot as usize).saturating_sub(1);
            let left = self.max_times.saturating_sub(live.times[slot as usize]);
            live.tickets += u64::from(left);
        }
        Ok(())
    }
}
