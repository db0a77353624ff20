//! [`MaxTimesSampled`]: uniform with replacement among live items; an item
//! leaves after its `max_times`-th sample (Reverb's `max_times_sampled`).
//!
//! The live set is a dense array plus a position index, under a short mutex
//! (pick and bookkeeping only; copies happen after it is released). Cost
//! O(1) per item.
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::state::SamplerState;
use crate::batch::SampleBatch;
use crate::error::ReplayError;
use crate::rng::WyRand;
use crate::shared::Shared;
use crate::slot::ReadOutcome;

const NONE: u32 = u32::MAX;

/// Slots whose entries `save` copies per hold of the lock: an insert,
/// whose `on_publish` takes the same lock, waits for at most one chunk
/// (as in the prioritized sampler's save).
const SAVE_CHUNK: usize = 4096;

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
                // Saturating: a live item has `times < m` (restore refuses
                // anything else), but a wrap here would turn one bad entry
                // into a ticket count near 2^64.
                let left = u64::from(m.saturating_sub(live.times[slot]));
                live.tickets = live.tickets.saturating_sub(left);
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
                // `>=`, not `==`: an item can never outlive its last sample.
                let last = live.times[slot] >= self.max_times;
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
        self.save_in_chunks(st, || {});
    }

    /// Copies the state [`SAVE_CHUNK`] slots per hold of the lock, calling
    /// `between_chunks` with the lock released (tests insert there).
    ///
    /// Why a chunked (fuzzy) copy is consistent with the checkpoint's
    /// contents: those are copied slot by slot, without a lock, before
    /// this runs, so even a copy in one hold of the lock would be from a
    /// later moment than the contents, and `restore` already reconciles
    /// the two per slot (the key comes from the restored slot, tickets are
    /// recomputed from `times`, an empty slot is not made live). What a
    /// chunk copies is per slot (`times`, and `position` for the live
    /// ones), each slot's entry taken whole under the lock; the one
    /// cross-slot fact, the dense order of `slots`, is rebuilt by sorting
    /// on `position`. When nothing runs meanwhile the positions are
    /// exactly `0..len`, so the order, and the sampling after restore, is
    /// the same; when writers moved entries between chunks it is a
    /// different but valid order. So chunks add no inconsistency that the
    /// slot-by-slot copy of the contents did not already allow.
    fn save_in_chunks(&self, st: &mut SamplerState, mut between_chunks: impl FnMut()) {
        let capacity = self.lock().times.len();
        st.times_sampled = Vec::with_capacity(capacity);
        // `(position, slot)` of each live slot.
        let mut live_at: Vec<(u32, u32)> = Vec::new();
        let mut start = 0;
        while start < capacity {
            let end = (start + SAVE_CHUNK).min(capacity);
            {
                let live = self.lock();
                st.times_sampled.extend_from_slice(&live.times[start..end]);
                live_at.extend(
                    (start..end)
                        .filter(|&slot| live.position[slot] != NONE)
                        .map(|slot| (live.position[slot], slot as u32)),
                );
            }
            start = end;
            if start < capacity {
                between_chunks();
            }
        }
        live_at.sort_unstable();
        st.live = live_at.into_iter().map(|(_, slot)| slot).collect();
    }

    pub(crate) fn restore(&self, st: &SamplerState, shared: &Shared) -> Result<(), String> {
        let capacity = shared.capacity as usize;
        if st.times_sampled.len() != capacity || st.live.iter().any(|&s| s as usize >= capacity) {
            return Err("max_times_sampled state does not fit capacity".into());
        }
        // A live item leaves at its `max_times`-th sample, so a live slot
        // at or past it was not written under this `max_times`.
        if let Some(&slot) = st
            .live
            .iter()
            .find(|&&s| st.times_sampled[s as usize] >= self.max_times)
        {
            return Err(format!(
                "max_times_sampled: live slot {slot} was sampled {} times, max_times is {}",
                st.times_sampled[slot as usize], self.max_times
            ));
        }
        let mut live = self.lock();
        live.slots.clear();
        live.position.iter_mut().for_each(|p| *p = NONE);
        live.tickets = 0;
        live.times.copy_from_slice(&st.times_sampled);
        for &slot in &st.live {
            let published = shared.storage.published(slot as usize);
            if published == 0 {
                // Made live after the checkpoint copied this slot (empty
                // then): no item of its own to hand out.
                continue;
            }
            live.add(slot as usize);
            live.keys[slot as usize] = published - 1;
            let left = self.max_times.saturating_sub(live.times[slot as usize]);
            live.tickets += u64::from(left);
        }
        Ok(())
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::sampler::Sampler;
    use crate::{DType, FieldRef, ItemLayout, ReplayBuffer, ReplayConfig, SamplerConfig, Values};

    /// `save` lets inserts run between its chunks (an insert's
    /// `on_publish` takes the lock `save` holds), and when nothing runs
    /// meanwhile its copy is exact, the dense order of live slots included
    /// (the order decides which slot a random draw picks after restore).
    #[test]
    fn save_releases_the_lock_between_chunks_and_is_exact_when_idle() {
        let capacity = 2 * SAVE_CHUNK + 100;
        let layout = ItemLayout::builder()
            .field("x", DType::U64, &[])
            .build()
            .expect("layout");
        let config = ReplayConfig::new(capacity, SamplerConfig::MaxTimesSampled { max_times: 1 });
        let b = ReplayBuffer::new(layout, config).expect("buffer");
        let insert = |v: u64| {
            b.insert_ref(&[FieldRef::new(&[], Values::U64(&[v]))])
                .expect("insert");
        };
        for v in 0..capacity as u64 {
            insert(v);
        }
        let Sampler::MaxTimes(sampler) = &b.sampler else {
            panic!("max_times buffer without a max_times sampler");
        };
        let mut st = SamplerState::default();
        let mut between = 0;
        sampler.save_in_chunks(&mut st, || {
            assert!(
                sampler.live.try_lock().is_ok(),
                "lock released between chunks"
            );
            // Overwrites a slot of the chunk already copied.
            insert(capacity as u64 + between);
            between += 1;
        });
        assert_eq!(between, 2, "three chunks, two gaps");
        assert_eq!(st.live.len(), capacity);
        assert_eq!(st.times_sampled.len(), capacity);

        // Each sampled item leaves (max_times 1) by a swap with the last
        // live slot, so the dense order is now far from slot order.
        let mut batch = b.new_batch(64);
        for _ in 0..20 {
            b.sample_into(&mut batch, 64).expect("sample");
        }
        let mut st = SamplerState::default();
        sampler.save(&mut st);
        let live = sampler.lock();
        assert_eq!(live.slots.len(), capacity - 20 * 64);
        assert_eq!(st.live, live.slots, "dense order rebuilt exactly");
        assert_eq!(st.times_sampled, live.times);
    }
}
