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
//! returns them to the free list ([`StateTable::recycle`]). A lease takes the
//! lowest free slot numbers, so slots freed by a disconnect are reused before
//! fresh ones: everything kept per slot downstream (the unroll builder's
//! buffers) follows the peak of concurrent envs, not the envs ever seen.
//!
//! # Active and parked leases
//! The batcher flushes a batch once every env that can still report is in
//! it. An actor that has stopped stepping (frozen, paused, stuck in a slow
//! env) would hold every batch to its deadline, so a lease that has sent no
//! step batch for the idle threshold (`--actor-idle-ms`) is *parked*
//! ([`StateTable::park_idle`], run by the inference threads) and its envs
//! leave the [`active`](StateTable::active_slots) count that batches wait
//! for. Its next step batch ([`SlotLease::touch`]) makes it active again.
//! A race between the two only makes one batch flush a little early.
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
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use crate::loom::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use crate::loom::cell::UnsafeCell;
use crate::loom::queue::SegQueue;
use crate::loom::sync::{Mutex, OnceLock};

/// Default of `--actor-idle-ms`: far above a healthy actor's gap between
/// step batches (sub-millisecond to a few ms), far below a human's notice.
pub const DEFAULT_IDLE_THRESHOLD: Duration = Duration::from_millis(100);

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
    /// Free slot indices, lowest first. Pop at lease, push at recycle (both
    /// at stream start and end, never per step, hence the lock). The lock
    /// orders a recycle's slot reset before the next lease of the slot.
    free: Mutex<BinaryHeap<Reverse<u32>>>,
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
    /// Slots of leases that are not parked (module docs). Written by lease,
    /// release, `touch` and `park_idle`, each transition by the winner of a
    /// swap on the lease's `parked` flag; read as a flush target, where a
    /// stale value makes one flush a little early or late (Relaxed).
    active: AtomicUsize,
    /// Leases to look at in `park_idle` (dead ones pruned there). Touched at
    /// lease time and by the sweep, never per step.
    leases: std::sync::Mutex<Vec<Weak<SlotLease>>>,
    /// Park a lease after this long without a step batch; `None`: never.
    idle_threshold: Option<Duration>,
    /// Milliseconds since `epoch` of the last sweep, so that concurrent
    /// inference threads sweep at most once per quarter threshold (the CAS
    /// elects one; Relaxed: nothing is published through it).
    last_sweep_ms: AtomicU64,
    /// Origin of the millisecond clocks (`last_sweep_ms`, `last_step_ms`).
    epoch: Instant,
}

impl StateTable {
    /// A table of `capacity` slots; `state_size` is the model's recurrent
    /// hidden size (0 for feed-forward). Leases are parked after
    /// [`DEFAULT_IDLE_THRESHOLD`].
    pub fn new(capacity: usize, state_size: usize) -> Arc<Self> {
        Self::with_idle_threshold(capacity, state_size, Some(DEFAULT_IDLE_THRESHOLD))
    }

    /// Like [`new`](Self::new), parking leases after `idle_threshold`
    /// without a step batch (`None`: never; batches then wait for every
    /// live env up to their deadline).
    pub fn with_idle_threshold(
        capacity: usize,
        state_size: usize,
        idle_threshold: Option<Duration>,
    ) -> Arc<Self> {
        let capacity = capacity.clamp(1, u32::MAX as usize);
        let mut free = BinaryHeap::with_capacity(capacity);
        free.extend((0..capacity as u32).map(Reverse));
        Arc::new(StateTable {
            cells: (0..capacity)
                .map(|_| SlotCell(UnsafeCell::new(SlotState::new(state_size))))
                .collect(),
            state_size,
            free: Mutex::new(free),
            released: SegQueue::new(),
            next_lease: AtomicU64::new(1),
            live: AtomicUsize::new(0),
            on_release: OnceLock::new(),
            active: AtomicUsize::new(0),
            leases: std::sync::Mutex::new(Vec::new()),
            idle_threshold: idle_threshold.filter(|d| !d.is_zero()),
            last_sweep_ms: AtomicU64::new(0),
            epoch: Instant::now(),
        })
    }

    fn free_list(&self) -> impl std::ops::DerefMut<Target = BinaryHeap<Reverse<u32>>> + '_ {
        // Every critical section leaves the heap consistent (a push or pops
        // of whole entries), so a panic elsewhere cannot poison its meaning.
        self.free.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn millis_since_epoch(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.epoch).as_millis() as u64
    }

    /// Slots of leases that are not parked: what a batch can still expect
    /// to receive (module docs).
    pub fn active_slots(&self) -> usize {
        // Relaxed: a flush target (field docs).
        self.active.load(Ordering::Relaxed)
    }

    /// Parks every lease that has sent no step batch for the idle threshold
    /// (module docs); returns the slots parked. Cheap to call per batch: it
    /// sweeps at most once per quarter threshold, on one thread.
    pub fn park_idle(&self, now: Instant) -> usize {
        let Some(threshold) = self.idle_threshold else {
            return 0;
        };
        let threshold_ms = threshold.as_millis().max(1) as u64;
        let now_ms = self.millis_since_epoch(now);
        // Relaxed: an election among sweepers; nothing is published.
        let last = self.last_sweep_ms.load(Ordering::Relaxed);
        if now_ms < last + threshold_ms / 4
            || self
                .last_sweep_ms
                .compare_exchange(last, now_ms, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            return 0;
        }
        let Ok(mut leases) = self.leases.try_lock() else {
            return 0;
        };
        let mut parked = 0;
        leases.retain(|weak| {
            let Some(lease) = weak.upgrade() else {
                return false;
            };
            // Relaxed: an activity hint; a stale read parks a lease that just
            // stepped, whose next step batch rejoins it (module docs).
            let last_step = lease.last_step_ms.load(Ordering::Relaxed);
            if now_ms.saturating_sub(last_step) >= threshold_ms
                && !lease.parked.swap(true, Ordering::Relaxed)
            {
                // The swap's winner moves the lease's slots out of `active`.
                self.active.fetch_sub(lease.slots.len(), Ordering::Relaxed);
                parked += lease.slots.len();
            }
            true
        });
        parked
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
    /// Slot numbers are the lowest free ones (module docs).
    pub fn lease(self: &Arc<Self>, n: usize) -> Result<Arc<SlotLease>, SlotsExhausted> {
        let slots: Vec<EnvSlot> = {
            let mut free = self.free_list();
            if free.len() < n {
                return Err(SlotsExhausted {
                    asked: n,
                    free: free.len(),
                    capacity: self.capacity(),
                });
            }
            (0..n)
                .filter_map(|_| free.pop().map(|Reverse(i)| EnvSlot(i)))
                .collect()
        };
        // Relaxed: `live` and `active` are hints (field docs); the slots
        // themselves were handed over by the free list's lock.
        self.live.fetch_add(n, Ordering::Relaxed);
        self.active.fetch_add(n, Ordering::Relaxed);
        let words = n.div_ceil(64);
        let lease = Arc::new(SlotLease {
            table: Arc::clone(self),
            // Relaxed: uniqueness only (field docs).
            id: LeaseId(self.next_lease.fetch_add(1, Ordering::Relaxed)),
            slots: slots.into_boxed_slice(),
            awaiting: (0..words).map(|_| AtomicU64::new(0)).collect(),
            last_step_ms: AtomicU64::new(self.millis_since_epoch(Instant::now())),
            parked: AtomicBool::new(false),
        });
        if self.idle_threshold.is_some() {
            self.leases
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(Arc::downgrade(&lease));
        }
        Ok(lease)
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
        }
        // The lock's release pairs with its acquire in `lease`: the next
        // lease's claims see the reset state.
        self.free_list()
            .extend(released.slots.iter().map(|s| Reverse(s.0)));
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
    /// When the stream last sent a step batch, in ms since the table's
    /// epoch (Relaxed: an activity hint, see `StateTable::park_idle`).
    last_step_ms: AtomicU64,
    /// Parked as idle: its slots are not in the table's `active` count.
    /// Whoever flips it (swap) moves the slots in or out of `active`.
    parked: AtomicBool,
}

impl SlotLease {
    pub fn id(&self) -> LeaseId {
        self.id
    }

    /// The slot of each env index of the actor.
    pub fn slots(&self) -> &[EnvSlot] {
        &self.slots
    }

    /// Records a step batch received at `now`; rejoins the active envs if
    /// the lease was parked. Two relaxed atomics in the common case.
    pub fn touch(&self, now: Instant) {
        // Relaxed: activity hint and parking flag (see `StateTable::park_idle`).
        self.last_step_ms
            .store(self.table.millis_since_epoch(now), Ordering::Relaxed);
        if self.parked.load(Ordering::Relaxed) && self.parked.swap(false, Ordering::Relaxed) {
            self.table
                .active
                .fetch_add(self.slots.len(), Ordering::Relaxed);
        }
    }

    /// Whether the lease is parked as idle.
    pub fn is_parked(&self) -> bool {
        self.parked.load(Ordering::Relaxed)
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
        // Relaxed: hints (field docs). A parked lease's slots already left
        // `active`; the swap decides who takes them out.
        self.table.live.fetch_sub(slots.len(), Ordering::Relaxed);
        if !self.parked.swap(true, Ordering::Relaxed) {
            self.table.active.fetch_sub(slots.len(), Ordering::Relaxed);
        }
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

    /// Releases `lease` and recycles every released lease.
    fn release(table: &StateTable, lease: Arc<SlotLease>) {
        drop(lease);
        while let Some(r) = table.take_released() {
            table.recycle(r);
        }
    }

    #[test]
    fn freed_slots_are_reused_before_fresh_ones() {
        let table = StateTable::new(1_000, 0);
        let keep = table.lease(3).unwrap();
        // 100 actors of 4 envs come and go, at most 2 at once.
        let mut highest = 0;
        let mut previous = table.lease(4).unwrap();
        for _ in 0..100 {
            let next = table.lease(4).unwrap();
            highest = highest.max(next.slots().iter().map(|s| s.0).max().unwrap());
            release(&table, previous);
            previous = next;
        }
        assert_eq!(
            highest,
            3 + 2 * 4 - 1,
            "slot numbers follow the peak of 11 envs"
        );
        assert_eq!(table.live_slots(), 7);
        drop(keep);
    }

    #[test]
    fn an_idle_lease_is_parked_and_its_next_step_rejoins_it() {
        let idle = Duration::from_millis(100);
        let table = StateTable::with_idle_threshold(16, 0, Some(idle));
        let t0 = table.epoch;
        let a = table.lease(4).unwrap();
        let b = table.lease(8).unwrap();
        assert_eq!(table.active_slots(), 12);
        // `a` steps at 150 ms, `b` never: at 200 ms only `b` is idle.
        a.touch(t0 + Duration::from_millis(150));
        assert_eq!(table.park_idle(t0 + Duration::from_millis(200)), 8);
        assert!(b.is_parked() && !a.is_parked());
        assert_eq!((table.active_slots(), table.live_slots()), (4, 12));
        // By 500 ms `a` has been idle for 350 ms too.
        assert_eq!(table.park_idle(t0 + Duration::from_millis(500)), 4);
        assert_eq!(table.active_slots(), 0);
        // A step batch rejoins; touching an active lease changes nothing.
        b.touch(t0 + Duration::from_millis(510));
        b.touch(t0 + Duration::from_millis(511));
        assert_eq!(table.active_slots(), 8);
        assert_eq!(
            table.park_idle(t0 + Duration::from_millis(515)),
            0,
            "too soon"
        );
        // Releasing a parked lease and an active one both leave `active` right.
        release(&table, a);
        assert_eq!(table.active_slots(), 8);
        release(&table, b);
        assert_eq!((table.active_slots(), table.live_slots()), (0, 0));
        let c = table.lease(2).unwrap();
        assert_eq!(table.active_slots(), 2);
        drop(c);
    }

    #[test]
    fn without_an_idle_threshold_nothing_is_parked() {
        let table = StateTable::with_idle_threshold(4, 0, None);
        let t0 = table.epoch;
        let a = table.lease(4).unwrap();
        assert_eq!(table.park_idle(t0 + Duration::from_secs(3600)), 0);
        assert_eq!(table.active_slots(), 4);
        drop(a);
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
