//! Atomics and cells, swapped for loom's under `cfg(loom)` so the replay
//! buffer's slot protocol can be model-checked.
// Unused since the replay buffer moved to `seed-replay` (which has its own
// copy); kept for the learner's other modules.
#![allow(dead_code, unused_imports)]
#[cfg(loom)]
pub(crate) use loom::sync::atomic;
#[cfg(not(loom))]
pub(crate) use std::sync::atomic;

/// Busy-wait hint inside spin loops; under loom a yield, so the model
/// checker can schedule the thread being waited for.
#[inline]
pub(crate) fn spin_loop() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::hint::spin_loop();
}
