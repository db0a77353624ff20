//! Atomics swapped for loom's under `cfg(loom)`, so the slot protocol
//! (`slot.rs`) can be model-checked (`src/tests/loom_slot.rs`).
//!
//! Why a shim: the slot protocol and the storage it runs on name their
//! atomics through this module; a normal build gets `std`'s at no cost,
//! a `--cfg loom` build gets loom's, which explore every interleaving.
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
