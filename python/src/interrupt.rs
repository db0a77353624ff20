//! [`InterruptWatch`]: Ctrl-C while the actor waits on the network.
//!
//! Python's SIGINT handler only sets a flag; the `KeyboardInterrupt` is
//! raised the next time the interpreter checks it. While the actor waits
//! on the network the GIL is released and no Python code runs, so the
//! watch checks the flag itself every [`POLL`] (`PyErr_CheckSignals`,
//! briefly taking the GIL) and resolves when a handler raised: that is the
//! actor's shutdown future, so the stream is closed politely. The
//! exception is kept and re-raised once the actor has stopped. (A Ctrl-C
//! that lands while an env steps is raised inside the env's Python code
//! and stops the actor as an env error instead.)
//!
//! A process that ignores SIGINT (one a non-interactive shell started in the
//! background, `cmd &`) has no Python handler for it and never sees Ctrl-C;
//! the watch leaves that as it is, as Python does.
//!
//! Cost: one GIL acquisition per [`POLL`], nothing per step.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use pyo3::{PyErr, Python};
use tokio::time::MissedTickBehavior;

/// How often signals are checked: short enough that Ctrl-C feels immediate.
const POLL: Duration = Duration::from_millis(50);

/// The exception a Python signal handler raised during the run, if any.
#[derive(Clone, Default)]
pub struct InterruptWatch(Arc<Mutex<Option<PyErr>>>);

impl InterruptWatch {
    /// Resolves when a signal handler raises (`KeyboardInterrupt` for
    /// Ctrl-C), keeping the exception. Checks only on the main thread
    /// (elsewhere `PyErr_CheckSignals` does nothing): pending forever there.
    pub async fn triggered(self) {
        let mut tick = tokio::time::interval(POLL);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if let Err(e) = Python::attach(|py| py.check_signals()) {
                // Uncontended: `take` runs after the actor has stopped.
                if let Ok(mut slot) = self.0.lock() {
                    *slot = Some(e);
                }
                return;
            }
        }
    }

    /// The exception to re-raise, if a handler raised one.
    pub fn take(&self) -> Option<PyErr> {
        self.0.lock().ok().and_then(|mut slot| slot.take())
    }
}
