//! Concurrency primitives, swapped for loom's under `cfg(loom)` so the
//! lock-free protocols can be model-checked: the dynamic batcher and the
//! env-slot state table (`infer/tests`). (The replay buffer's slot protocol
//! has its own copy in `seed-replay`.)
//!
//! What: atomics, `UnsafeCell`, a `OnceLock`, a `Mutex` (the state table's
//! free list), thread parking, the spin helper (`Backoff`), `store_flag` and
//! crossbeam's `SegQueue`, each under the name the code uses.
//! Why: loom only explores (and checks the happens-before of) operations it
//! sees; anything on std's or crossbeam's own atomics is invisible to it.
//! Cost: none in the normal build. Under `cfg(not(loom))` every item is a
//! re-export of the std/crossbeam item or an `#[inline(always)]` wrapper that
//! only forwards (`UnsafeCell::with_mut` calls the closure with `get()`,
//! `store_flag` stores), so the code compiles to what it was before.
//!
//! Under loom:
//! * the `Mutex` is loom's;
//! * the crossbeam queue becomes a `loom::sync::Mutex<VecDeque>` behind the
//!   same small API, with a loom-visible length for `is_empty` and `len`.
//!   Crossbeam's internal atomics are not loom's: loom would neither
//!   interleave them nor see the happens-before edge of a push and the pop
//!   that returns the item, which is what orders the state table's release
//!   queue and the batcher's hand-off. So the model is the queue's contract (FIFO,
//!   push happens-before its pop, `is_empty` a lock-free load that may be
//!   stale), not crossbeam's implementation;
//! * a thread parks on its own loom `Notify` (see `thread`), a timed park is
//!   a yield, and `Backoff::spin` does nothing (see there);
//! * `store_flag` is a swap, for loom's approximate modification order.
#[cfg(loom)]
pub(crate) use loom::sync::atomic;
#[cfg(not(loom))]
pub(crate) use std::sync::atomic;

/// `UnsafeCell` with loom's closure API, as tokio does: under loom every
/// access is checked against the cell's previous accesses (a "causality
/// violation" is a data race). The std wrapper has only `with_mut`, the one
/// the crate uses outside loom.
pub(crate) mod cell {
    #[cfg(loom)]
    pub(crate) use loom::cell::UnsafeCell;

    /// `std::cell::UnsafeCell` behind loom's closure API.
    #[cfg(not(loom))]
    #[derive(Debug)]
    pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

    #[cfg(not(loom))]
    impl<T> UnsafeCell<T> {
        #[inline(always)]
        pub(crate) const fn new(value: T) -> Self {
            UnsafeCell(std::cell::UnsafeCell::new(value))
        }

        /// Calls `f` with a mutable pointer to the value.
        #[inline(always)]
        pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
            f(self.0.get())
        }
    }
}

/// `std::sync::OnceLock`, and under loom a minimal loom-visible equivalent.
pub(crate) mod sync {
    #[cfg(not(loom))]
    pub(crate) use std::sync::{Mutex, OnceLock};

    #[cfg(loom)]
    pub(crate) use loom::sync::Mutex;

    #[cfg(loom)]
    pub(crate) use self::mock::OnceLock;

    #[cfg(loom)]
    mod mock {
        use crate::loom::atomic::{AtomicU8, Ordering};
        use crate::loom::cell::UnsafeCell;

        const EMPTY: u8 = 0;
        const WRITING: u8 = 1;
        const READY: u8 = 2;

        /// `OnceLock` with std's orderings: the value is published by a
        /// Release store of `READY` and read after an Acquire load of it.
        /// Only `set` and `get` (what the crate uses); a `set` racing
        /// another `set` fails instead of waiting (std waits, then fails).
        pub(crate) struct OnceLock<T> {
            /// EMPTY -> WRITING (the one `set` that wins the CAS) -> READY.
            /// READY is stored Release after the value is written and loaded
            /// Acquire by `get` before the value is read.
            state: AtomicU8,
            value: UnsafeCell<Option<T>>,
        }

        // SAFETY: the value is written once, by the thread that moved the
        // state EMPTY -> WRITING, before the Release store of READY, and only
        // read (shared) after an Acquire load of READY; so `&OnceLock<T>`
        // only ever hands out `&T` to initialised data, as std's does.
        unsafe impl<T: Send + Sync> Sync for OnceLock<T> {}

        impl<T> OnceLock<T> {
            pub(crate) fn new() -> Self {
                OnceLock {
                    state: AtomicU8::new(EMPTY),
                    value: UnsafeCell::new(None),
                }
            }

            pub(crate) fn set(&self, value: T) -> Result<(), T> {
                // Acquire on success, like std's `Once` (the winner reads
                // nothing others wrote); Relaxed on failure (nothing is read).
                // The write to `value` is published by the Release below.
                if self
                    .state
                    .compare_exchange(EMPTY, WRITING, Ordering::Acquire, Ordering::Relaxed)
                    .is_err()
                {
                    return Err(value);
                }
                // SAFETY: only the thread that won the CAS writes, and no
                // reader looks before it stores READY.
                self.value.with_mut(|p| unsafe { *p = Some(value) });
                // Release: pairs with the Acquire load in `get`.
                self.state.store(READY, Ordering::Release);
                Ok(())
            }

            pub(crate) fn get(&self) -> Option<&T> {
                // Acquire: pairs with the Release store in `set`.
                if self.state.load(Ordering::Acquire) != READY {
                    return None;
                }
                // SAFETY: READY was stored after the value was written and
                // the value is never written again; only shared borrows.
                self.value.with(|p| unsafe { (*p).as_ref() })
            }
        }
    }
}

/// Thread parking and the current thread's handle.
pub(crate) mod thread {
    #[cfg(not(loom))]
    pub(crate) use std::thread::{current, park, park_timeout, Thread};

    #[cfg(loom)]
    pub(crate) use self::mock::{current, park, park_timeout, Thread};

    /// Parking on a per-thread `loom::sync::Notify` instead of loom's own
    /// `park`/`unpark`: loom's `unpark` also wakes a thread that is blocked
    /// on a loom `Mutex` (which then panics), and the queue stand-in locks
    /// one. A `Notify` keeps one pending notification, like the park token,
    /// may wake spuriously once, like `park`, and orders the notifier's
    /// earlier writes before the woken wait's return, as `unpark` does.
    #[cfg(loom)]
    mod mock {
        use std::sync::Arc;

        use loom::sync::Notify;

        loom::thread_local! {
            static TOKEN: Arc<Notify> = Arc::new(Notify::new());
        }

        /// A handle to unpark one thread.
        #[derive(Clone, Debug)]
        pub(crate) struct Thread(Arc<Notify>);

        impl Thread {
            pub(crate) fn unpark(&self) {
                self.0.notify();
            }
        }

        pub(crate) fn current() -> Thread {
            TOKEN.with(|token| Thread(Arc::clone(token)))
        }

        pub(crate) fn park() {
            TOKEN.with(|token| token.wait());
        }

        /// Time is not modelled, so a timed park may end at any moment: a
        /// yield (the caller re-checks its deadline and state).
        pub(crate) fn park_timeout(_timeout: std::time::Duration) {
            loom::thread::yield_now();
        }
    }
}

/// Crossbeam's `SegQueue`, and under loom a lock-based stand-in (module docs).
pub(crate) mod queue {
    #[cfg(not(loom))]
    pub(crate) use crossbeam::queue::SegQueue;

    #[cfg(loom)]
    pub(crate) use self::mock::SegQueue;

    #[cfg(loom)]
    mod mock {
        use std::collections::VecDeque;

        use crate::loom::atomic::{AtomicUsize, Ordering};
        use loom::sync::{Mutex, MutexGuard};

        fn lock<T>(items: &Mutex<VecDeque<T>>) -> MutexGuard<'_, VecDeque<T>> {
            items.lock().expect("loom queue lock")
        }

        /// Unbounded MPMC FIFO: `crossbeam::queue::SegQueue`'s API.
        pub(crate) struct SegQueue<T> {
            items: Mutex<VecDeque<T>>,
            /// Items in the queue. Changed under the lock by `push`/`pop`,
            /// loaded without it by `is_empty`/`len`, like crossbeam's index
            /// loads. SeqCst like crossbeam's (loom models it as AcqRel), so
            /// the batcher's store-buffering argument still needs its own
            /// SeqCst fences: this queue does not hide a missing fence.
            len: AtomicUsize,
        }

        impl<T> SegQueue<T> {
            pub(crate) fn new() -> Self {
                SegQueue {
                    items: Mutex::new(VecDeque::new()),
                    len: AtomicUsize::new(0),
                }
            }

            pub(crate) fn push(&self, value: T) {
                let mut items = lock(&self.items);
                items.push_back(value);
                self.len.fetch_add(1, Ordering::SeqCst);
            }

            pub(crate) fn pop(&self) -> Option<T> {
                let mut items = lock(&self.items);
                let value = items.pop_front();
                if value.is_some() {
                    self.len.fetch_sub(1, Ordering::SeqCst);
                }
                value
            }

            pub(crate) fn is_empty(&self) -> bool {
                self.len.load(Ordering::SeqCst) == 0
            }

            pub(crate) fn len(&self) -> usize {
                self.len.load(Ordering::SeqCst)
            }
        }
    }
}

/// Exponential spin before parking: crossbeam's `Backoff`.
#[cfg(not(loom))]
pub(crate) use crossbeam_utils::Backoff;

/// Loom stand-in for `crossbeam_utils::Backoff` (only `new` and `spin`):
/// `spin` does nothing. The batcher's spin is bounded and waits for no one
/// (it only retries a pop before parking), and a loom yield would tell loom
/// the thread cannot progress alone, so loom would not explore it going on
/// first (a yield is right only for a spin-wait on another thread).
#[cfg(loom)]
pub(crate) struct Backoff;

#[cfg(loom)]
impl Backoff {
    pub(crate) fn new() -> Self {
        Backoff
    }

    pub(crate) fn spin(&self) {}
}

/// `flag.store(value, order)`; under loom a `swap` whose result is dropped.
///
/// Loom approximates each atomic's modification order with vector clocks: a
/// plain store is not ordered after another thread's RMW it has no
/// happens-before with, even one loom already executed, so a later RMW or
/// fenced load may read the RMW's older value, which C11 forbids (seen as
/// false lost wakeups in the batcher). An RMW reads the newest value, which
/// orders it. For flags that are also swapped (the batcher's `parked` and
/// `wake_requested`): there the swap allows the other threads the same
/// executions as the store. In the normal build it is the store.
#[inline(always)]
pub(crate) fn store_flag(flag: &atomic::AtomicBool, value: bool, order: atomic::Ordering) {
    #[cfg(not(loom))]
    flag.store(value, order);
    #[cfg(loom)]
    flag.swap(value, order);
}
