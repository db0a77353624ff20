//! Env slots: learner-wide indices for every connected env, and the state the
//! learner keeps per env between steps (run id, truncation flag, recurrent
//! state).
//!
//! # Leases
//! A stream's hello leases `num_envs` slots ([`StateTable::lease`]); the
//! [`SlotLease`] carries a fresh [`LeaseId`] so a reused slot is never mistaken
//! for its previous occupant (rows handed to the [`InferenceSink`] carry it).
//! The lease is an `Arc` held by the stream task and by every step request in
//! flight, so the slots are released only when the last of them is gone: no
//! request can ever touch a slot that was already handed to another stream.
//! Released slots are queued ([`StateTable::take_released`]) for the inference
//! thread, which tells its sink (partial unrolls are dropped) and only then
//! returns them to the free list ([`StateTable::recycle`]).
//!
//! # Per-slot state without a lock
//! A step request *claims* its env indices ([`SlotLease::claim`]): one bit per
//! env in the lease, set with `fetch_or` by the stream task and cleared when
//! the [`StepClaim`] is dropped by the inference thread after it is done with
//! the rows. An env whose bit is set already has a step awaiting its action;
//! a second one is a protocol error. So at most one claim covers a slot at a
//! time, which is what makes [`StepClaim::slot_state`] a safe `&mut`.
//!
//! Cost: two atomic RMWs per request and 64 envs (one word each), an `Arc`
//! clone per request; no allocation on the step path except the claim's word
//! list. Leasing and releasing pop/push one lock-free queue entry per slot.
//!
//! # Model checking
//! The atomics, the cells, the queues and the hook's `OnceLock` come from
//! [`crate::loom`], so under `cfg(loom)` the tests in `infer/tests`
//! (`loom_state_table`) check claims, leases and recycling over every
//! interleaving, with every slot-state access checked for a data race; in
//! the normal build they are the std/crossbeam items themselves (no cost).
//! The leases stay in std's `Arc` (`self: &Arc<Self>` receivers cannot be
//! loom's `Arc`), whose refcount loom cannot see: see `SlotLease`'s `Drop`
//! for the one edge it provides that the model restates.
use std::sync::Arc;

use crate::loom::atomic::{AtomicU64, AtomicUsize, Ordering};
use crate::loom::cell::UnsafeCell;
use crate::loom::queue::{ArrayQueue, SegQueue};
use crate::loom::sync::OnceLock;

/// A learner-wide env slot index, `0..max_env_slots`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EnvSlot(pub u32);

/// Identifies one lease of slots (one welcomed stream); never reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LeaseId(pub u64);

/// What the learner remembers about one env between its steps.
#[derive(Debug, Clone)]
pub struct SlotState {
    /// Run id of the env's previous step; `None` before its first step.
    pub run_id: Option<u64>,
    /// The previous step was truncated, so the next one starts an episode.
    pub after_truncation: bool,
    /// Recurrent state `[2, H]` (h then c); empty for feed-forward models.
    pub recurrent: Box<[f32]>,
}

impl SlotState {
    fn new(state_size: usize) -> Self {
        SlotState {
            run_id: None,
            after_truncation: false,
            recurrent: vec![0.0; 2 * state_size].into_boxed_slice(),
        }
    }

    fn reset(&mut self) {
        self.run_id = None;
        self.after_truncation = false;
        self.recurrent.fill(0.0);
    }
}

/// One slot's state. Access rules in the module docs: only the holder of the
/// claim on the slot's env (or, between leases, the recycling thread) touches it.
struct SlotCell(UnsafeCell<SlotState>);

// SAFETY: the cell is only accessed through `StepClaim::slot_state` (the claim
// bit makes that access exclusive, with Acquire/Release on the bit ordering
// successive accesses) or by `recycle`, which runs after the lease's last
// reference is gone (the `SegQueue` hand-off orders it after the last claim).
unsafe impl Sync for SlotCell {}

/// Slots released by a lease, waiting for the inference thread.
#[derive(Debug)]
pub struct ReleasedLease {
    pub lease: LeaseId,
    pub slots: Box<[EnvSlot]>,
}

/// Error leasing slots: not enough free.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotsExhausted {
    pub asked: usize,
    pub free: usize,
    pub capacity: usize,
}

/// Error claiming envs for a step: one of them already has a step in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EnvBusy {
    pub position: usize,
    pub index: u32,
}

/// Every env slot of the learner and its per-env state.
pub struct StateTable {
    cells: Box<[SlotCell]>,
    state_size: usize,
    /// Free slot indices. Pop at lease, push at recycle.
    free: ArrayQueue<u32>,
    /// Leases whose last reference is gone, for the inference thread.
    released: SegQueue<ReleasedLease>,
    /// Source of lease ids; only uniqueness matters (Relaxed: the RMW alone
    /// makes each id distinct; nothing is published through it).
    next_lease: AtomicU64,
    /// Slots currently leased. Written at lease/release, read by metrics and
    /// by the batcher's "every live env is in" check; a stale value only
    /// makes one flush a little early or late (Relaxed).
    live: AtomicUsize,
    /// Called after a lease is released, to wake the thread that recycles.
    on_release: OnceLock<Box<dyn Fn() + Send + Sync>>,
}

impl StateTable {
    /// A table of `capacity` slots; `state_size` is the model's recurrent
    /// hidden size (0 for feed-forward).
    pub fn new(capacity: usize, state_size: usize) -> Arc<Self> {
        let capacity = capacity.clamp(1, u32::MAX as usize);
        let free = ArrayQueue::new(capacity);
        for i in 0..capacity {
            // Cannot fail: the queue has exactly `capacity` places.
            let _ = free.push(i as u32);
        }
        Arc::new(StateTable {
            cells: (0..capacity)
                .map(|_| SlotCell(UnsafeCell::new(SlotState::new(state_size))))
                .collect(),
            state_size,
            free,
            released: SegQueue::new(),
            next_lease: AtomicU64::new(1),
            live: AtomicUsize::new(0),
            on_release: OnceLock::new(),
        })
    }

    /// Total number of slots (`--max-env-slots`).
    pub fn capacity(&self) -> usize {
        self.cells.len()
    }

    /// Recurrent hidden size per slot (0: feed-forward).
    pub fn state_size(&self) -> usize {
        self.state_size
    }

    /// Slots currently leased to streams.
    pub fn live_slots(&self) -> usize {
        // Relaxed: a count for flush decisions and metrics (field docs).
        self.live.load(Ordering::Relaxed)
    }

    /// Sets the function called whenever a lease is released (once).
    pub fn set_release_hook(&self, hook: Box<dyn Fn() + Send + Sync>) {
        let _ = self.on_release.set(hook);
    }

    /// Leases `n` free slots to a new stream. Not on the step path.
    pub fn lease(self: &Arc<Self>, n: usize) -> Result<Arc<SlotLease>, SlotsExhausted> {
        let mut slots = Vec::with_capacity(n);
        while slots.len() < n {
            match self.free.pop() {
                Some(i) => slots.push(EnvSlot(i)),
                None => {
                    let got = slots.len();
                    for s in slots {
                        let _ = self.free.push(s.0);
                    }
                    return Err(SlotsExhausted {
                        asked: n,
                        free: got,
                        capacity: self.capacity(),
                    });
                }
            }
        }
        // Relaxed: `live` is a hint (field docs); the slots themselves were
        // handed over by the `free` queue (its pop pairs with `recycle`'s push).
        self.live.fetch_add(n, Ordering::Relaxed);
        let words = n.div_ceil(64);
        Ok(Arc::new(SlotLease {
            table: Arc::clone(self),
            // Relaxed: uniqueness only (field docs).
            id: LeaseId(self.next_lease.fetch_add(1, Ordering::Relaxed)),
            slots: slots.into_boxed_slice(),
            awaiting: (0..words).map(|_| AtomicU64::new(0)).collect(),
        }))
    }

    /// The next released lease whose slots must be recycled, if any.
    pub fn take_released(&self) -> Option<ReleasedLease> {
        self.released.pop()
    }

    /// Resets the released slots' state and makes them free again. Call after
    /// everything downstream (the inference sink) has forgotten them.
    pub fn recycle(&self, released: ReleasedLease) {
        for &slot in released.slots.iter() {
            // SAFETY: the lease's last reference is gone, so no claim on this
            // slot exists, and the slot is not free yet, so no new lease can
            // hold it; we popped it from `released` (Acquire, pairs with the
            // Release push in `SlotLease::drop`), ordering us after the last
            // claim's accesses.
            self.cells[slot.0 as usize]
                .0
                .with_mut(|state| unsafe { (*state).reset() });
            // Cannot fail: every slot is either free, leased or released once.
            // The push (Release inside the queue) pairs with the pop in
            // `lease`: the next lease's claims see the reset state.
            let _ = self.free.push(slot.0);
        }
    }
}

/// Slots leased to one stream; released when the last `Arc` is dropped.
pub struct SlotLease {
    table: Arc<StateTable>,
    id: LeaseId,
    /// `slots[env_index]` is the learner slot of that env of the actor.
    slots: Box<[EnvSlot]>,
    /// Bit `i` set: env `i` has a step awaiting its action. Set by the stream
    /// task in `claim` (Acquire, pairs with the Release clear in
    /// `StepClaim::drop`, so the next claimant sees the previous step's
    /// writes to the slot state).
    awaiting: Box<[AtomicU64]>,
}

impl SlotLease {
    pub fn id(&self) -> LeaseId {
        self.id
    }

    /// The slot of each env index of the actor.
    pub fn slots(&self) -> &[EnvSlot] {
        &self.slots
    }

    /// Claims the envs of one step batch. `env_indices` must already be
    /// validated (in range, distinct); fails if any has a step in flight, in
    /// which case nothing stays claimed.
    pub fn claim(self: &Arc<Self>, env_indices: &[u32]) -> Result<StepClaim, EnvBusy> {
        let mut words: Vec<(u32, u64)> = Vec::with_capacity(1);
        for &index in env_indices {
            let (w, bit) = (index / 64, 1u64 << (index % 64));
            match words.iter_mut().find(|(word, _)| *word == w) {
                Some((_, mask)) => *mask |= bit,
                None => words.push((w, bit)),
            }
        }
        for (done, &(w, mask)) in words.iter().enumerate() {
            // Acquire: pairs with the Release clear in `StepClaim::drop` (the
            // previous claimant's slot-state writes happen before ours). The
            // RMW makes the claim exclusive: of two claims of one env, the
            // later in the word's modification order sees the earlier's bit.
            let before = self.awaiting[w as usize].fetch_or(mask, Ordering::Acquire);
            if before & mask != 0 {
                // Undo the bits this claim set, then name the first busy env.
                // Release, like `StepClaim::drop` (we touched no slot state,
                // but the clear stays in the words' release sequence).
                let ours = mask & !before;
                self.awaiting[w as usize].fetch_and(!ours, Ordering::Release);
                for &(w2, m2) in &words[..done] {
                    self.awaiting[w2 as usize].fetch_and(!m2, Ordering::Release);
                }
                let (position, &index) = env_indices
                    .iter()
                    .enumerate()
                    .find(|(_, &i)| i / 64 == w && before & (1 << (i % 64)) != 0)
                    .unwrap_or((0, &env_indices[0]));
                return Err(EnvBusy { position, index });
            }
        }
        Ok(StepClaim {
            lease: Arc::clone(self),
            words,
        })
    }
}

impl Drop for SlotLease {
    fn drop(&mut self) {
        // Under loom only. std's `Arc` orders every clone's drop before the
        // last one's `Drop` (Release decrement, Acquire fence), so the
        // recycler's reset of a slot happens after the slot-state accesses of
        // every claim (a `StepClaim` holds a clone). Loom cannot see std's
        // refcount; each `StepClaim::drop` clears its bits with a Release RMW
        // just before dropping its clone, so an Acquire RMW of every word
        // here restates that edge for the model. Not compiled in the normal
        // build, where `Arc` provides it.
        #[cfg(loom)]
        for word in self.awaiting.iter() {
            word.fetch_or(0, Ordering::Acquire);
        }
        let slots = std::mem::take(&mut self.slots);
        // Relaxed: a hint (field docs).
        self.table.live.fetch_sub(slots.len(), Ordering::Relaxed);
        // Release push (inside SegQueue), pairs with the pop in `take_released`.
        self.table.released.push(ReleasedLease {
            lease: self.id,
            slots,
        });
        if let Some(wake) = self.table.on_release.get() {
            wake();
        }
    }
}

/// Exclusive access to the slot state of the envs of one step request.
pub struct StepClaim {
    lease: Arc<SlotLease>,
    /// `(word, mask)` of the claimed bits in `lease.awaiting`.
    words: Vec<(u32, u64)>,
}

impl StepClaim {
    pub fn lease(&self) -> &SlotLease {
        &self.lease
    }

    /// The slot of env `env_index` of this claim's actor.
    pub fn slot(&self, env_index: u32) -> EnvSlot {
        self.lease.slots[env_index as usize]
    }

    /// The state of env `env_index`'s slot.
    ///
    /// # Panics
    /// If `env_index` is not part of this claim (a bug in the caller).
    pub fn slot_state(&mut self, env_index: u32) -> &mut SlotState {
        let (w, bit) = (env_index / 64, 1u64 << (env_index % 64));
        assert!(
            self.words
                .iter()
                .any(|&(word, mask)| word == w && mask & bit != 0),
            "env {env_index} is not claimed"
        );
        let slot = self.lease.slots[env_index as usize];
        // SAFETY: this claim holds env `env_index`'s bit, so no other claim
        // covers the slot (module docs), and `&mut self` keeps this borrow
        // unique within the claim. The reference outlives the `with_mut`
        // call; under loom the access is checked at this call (each call is
        // one checked access), and the claim's Release clear on drop orders
        // the whole borrow before the next claimant's.
        self.lease.table.cells[slot.0 as usize]
            .0
            .with_mut(|state| unsafe { &mut *state })
    }
}

impl Drop for StepClaim {
    fn drop(&mut self) {
        for &(w, mask) in &self.words {
            // Release: publishes our slot-state writes to the next claimant
            // (pairs with the Acquire `fetch_or` in `SlotLease::claim`).
            self.lease.awaiting[w as usize].fetch_and(!mask, Ordering::Release);
        }
    }
}

// Plain unit tests; under loom they are compiled out (loom's types only
// work inside a model; the loom tests are in `infer/tests`).
#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn leases_get_distinct_slots_and_fresh_ids() {
        let table = StateTable::new(8, 0);
        let a = table.lease(3).unwrap();
        let b = table.lease(5).unwrap();
        assert_ne!(a.id(), b.id());
        let mut all: Vec<u32> = a.slots().iter().chain(b.slots()).map(|s| s.0).collect();
        all.sort();
        assert_eq!(all, (0..8).collect::<Vec<_>>());
        assert_eq!(table.live_slots(), 8);
        let err = table.lease(1).err().unwrap();
        assert_eq!(err.asked, 1);
        assert_eq!(err.free, 0);
    }

    #[test]
    fn released_slots_are_reusable_only_after_recycle_with_a_new_lease_id() {
        let table = StateTable::new(2, 0);
        let a = table.lease(2).unwrap();
        let first_id = a.id();
        drop(a);
        assert_eq!(table.live_slots(), 0);
        assert!(
            table.lease(1).is_err(),
            "not free before the inference thread recycles"
        );
        let released = table.take_released().unwrap();
        assert_eq!(released.lease, first_id);
        assert_eq!(released.slots.len(), 2);
        table.recycle(released);
        let b = table.lease(2).unwrap();
        assert_ne!(b.id(), first_id);
    }

    #[test]
    fn a_claim_keeps_its_lease_alive() {
        let table = StateTable::new(4, 0);
        let lease = table.lease(4).unwrap();
        let claim = lease.claim(&[0, 1]).unwrap();
        drop(lease);
        assert!(
            table.take_released().is_none(),
            "claim still holds the lease"
        );
        drop(claim);
        assert!(table.take_released().is_some());
    }

    #[test]
    fn an_env_with_a_step_in_flight_cannot_be_claimed_twice() {
        let table = StateTable::new(200, 0);
        let lease = table.lease(200).unwrap();
        let first = lease.claim(&[3, 130]).unwrap();
        let err = lease.claim(&[5, 64, 130]).err().unwrap();
        assert_eq!(
            err,
            EnvBusy {
                position: 2,
                index: 130
            }
        );
        // The failed claim left nothing behind: 5 and 64 are claimable.
        let other = lease.claim(&[5, 64]).unwrap();
        drop(first);
        let again = lease.claim(&[3, 130]).unwrap();
        drop((other, again));
    }

    #[test]
    fn slot_state_persists_between_claims_and_resets_on_recycle() {
        let table = StateTable::new(2, 3);
        let lease = table.lease(2).unwrap();
        {
            let mut c = lease.claim(&[1]).unwrap();
            let s = c.slot_state(1);
            assert_eq!(s.recurrent.len(), 6);
            s.run_id = Some(9);
            s.recurrent[0] = 1.5;
        }
        {
            let mut c = lease.claim(&[1]).unwrap();
            assert_eq!(c.slot_state(1).run_id, Some(9));
            assert_eq!(c.slot_state(1).recurrent[0], 1.5);
        }
        drop(lease);
        table.recycle(table.take_released().unwrap());
        let lease = table.lease(2).unwrap();
        let mut c = lease.claim(&[0, 1]).unwrap();
        for i in 0..2 {
            assert_eq!(c.slot_state(i).run_id, None);
            assert!(c.slot_state(i).recurrent.iter().all(|&x| x == 0.0));
        }
    }

    #[test]
    #[should_panic(expected = "not claimed")]
    fn state_of_an_unclaimed_env_is_refused() {
        let table = StateTable::new(2, 0);
        let lease = table.lease(2).unwrap();
        let mut c = lease.claim(&[0]).unwrap();
        c.slot_state(1);
    }
}
