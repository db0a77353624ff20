//! Blocking waits without a lock on the non-blocking path.
//!
//! Why: writers blocked on a full buffer, samplers waiting for items and
//! rate-limited callers must sleep, not spin, and must wake when state
//! changes or the buffer closes. Every state change calls [`Notifier::notify`],
//! which costs one `SeqCst` fence and one load while nobody waits; the mutex
//! and condvar are touched only when someone does.
//!
//! Protocol (the store-buffering pattern, as in rayon's sleep module): a
//! waiter registers (`waiters += 1`), issues a SeqCst fence, then re-tries the
//! operation; a notifier changes state, issues a SeqCst fence, then reads
//! `waiters`. The two fences are totally ordered, so either the notifier sees
//! the waiter or the waiter's retry sees the change: no lost wake-up. The
//! `epoch` (under the mutex) closes the window between the waiter's retry and
//! its `wait`.
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::error::ReplayError;
use std::sync::atomic::{fence, AtomicBool, AtomicUsize, Ordering};

#[derive(Debug, Default)]
pub(crate) struct Notifier {
    /// Threads inside `run_blocking`'s slow path. Relaxed increments and
    /// loads: ordered by the SeqCst fences described above.
    waiters: AtomicUsize,
    /// Bumped by each notify that saw a waiter.
    epoch: Mutex<u64>,
    cond: Condvar,
}

impl Notifier {
    fn lock(&self) -> MutexGuard<'_, u64> {
        // A panic while holding this lock cannot leave the epoch invalid.
        self.epoch.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Wakes every waiter if there is one. Call after any state change.
    /// Always inlined, the wake-up out of line: it runs once per insert,
    /// and with no waiter it is a fence and a load.
    #[inline(always)]
    pub(crate) fn notify(&self) {
        // SeqCst fence: pairs with the one in `run_blocking` (see module doc).
        fence(Ordering::SeqCst);
        if self.waiters.load(Ordering::Relaxed) != 0 {
            self.wake_all();
        }
    }

    #[cold]
    #[inline(never)]
    fn wake_all(&self) {
        *self.lock() += 1;
        self.cond.notify_all();
    }

    /// Runs `attempt`; while it fails with a would-block error and `timeout`
    /// allows, sleeps until notified and retries. `None` never waits.
    pub(crate) fn run_blocking<T>(
        &self,
        timeout: Option<Duration>,
        closed: &AtomicBool,
        mut attempt: impl FnMut() -> Result<T, ReplayError>,
    ) -> Result<T, ReplayError> {
        let first = attempt();
        let timeout = match (first, timeout) {
            (Ok(t), _) => return Ok(t),
            (Err(e), None) => return Err(e),
            (Err(e), Some(_)) if !would_block(&e) => return Err(e),
            (Err(_), Some(t)) => t,
        };
        let start = Instant::now();
        let deadline = start.checked_add(timeout);
        self.waiters.fetch_add(1, Ordering::Relaxed);
        let _registered = Registered(&self.waiters);
        // SeqCst fence: pairs with the one in `notify`.
        fence(Ordering::SeqCst);
        loop {
            // Acquire, pairs with the Release in `close`.
            if closed.load(Ordering::Acquire) {
                return Err(ReplayError::Closed);
            }
            let seen = *self.lock();
            let what = match attempt() {
                Ok(t) => return Ok(t),
                Err(e) if !would_block(&e) => return Err(e),
                Err(e) => blocked_on(&e),
            };
            let mut epoch = self.lock();
            while *epoch == seen {
                let now = Instant::now();
                let remaining = match deadline {
                    Some(d) if now >= d => {
                        return Err(ReplayError::Timeout {
                            what,
                            waited_ms: u64::try_from(now.duration_since(start).as_millis())
                                .unwrap_or(u64::MAX),
                        })
                    }
                    Some(d) => d - now,
                    None => Duration::from_secs(3600),
                };
                epoch = self
                    .cond
                    .wait_timeout(epoch, remaining)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
            }
        }
    }

    /// Marks `closed` and wakes everyone.
    pub(crate) fn close(&self, closed: &AtomicBool) {
        // Release, pairs with the Acquire in `run_blocking`.
        closed.store(true, Ordering::Release);
        fence(Ordering::SeqCst);
        *self.lock() += 1;
        self.cond.notify_all();
    }
}

struct Registered<'a>(&'a AtomicUsize);

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        // Relaxed: a stale non-zero only costs a notifier one lock.
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

fn would_block(e: &ReplayError) -> bool {
    matches!(
        e,
        ReplayError::WouldBlock { .. }
            | ReplayError::RateLimited { .. }
            | ReplayError::NotEnoughItems { .. }
    )
}

fn blocked_on(e: &ReplayError) -> &'static str {
    match e {
        ReplayError::WouldBlock { reason } | ReplayError::RateLimited { reason } => reason,
        _ => "items to sample",
    }
}
