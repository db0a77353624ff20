//! [`ProcessGuard`]: a clear error, instead of a hang, for a buffer or a
//! connection used in a process it was not made in.
//!
//! After `os.fork()` (multiprocessing's default start method on Linux) the
//! child has a copy of the parent's memory but none of its other threads:
//! a tokio runtime's workers, a thread blocked in `sample`, a lock some
//! thread held at the fork are all gone or stuck, so the first call would
//! wait for ever. Pickling (multiprocessing's other start methods) cannot
//! carry memory, locks or a connection either. So each object records the
//! fork generation it was made in; a child increments the generation
//! (a `pthread_atfork` handler), and every call in another generation
//! raises `RuntimeError` saying how to share a table across processes:
//! a replay server.
//!
//! Cost: one relaxed load per call.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Once;

use pyo3::exceptions::{PyRuntimeError, PyTypeError};
use pyo3::PyResult;

/// How to share a table across processes, for the messages.
const SHARE: &str = "to share a table across processes, serve it with a replay server and \
                     use `seed_rs.ReplayClient(addr).table(name)` in each process";

/// Forks since the module loaded, counted in the child.
static GENERATION: AtomicU64 = AtomicU64::new(0);
static REGISTER: Once = Once::new();

extern "C" fn forked_child() {
    // Relaxed: the child has one thread at this point; later loads on it
    // (and on threads it starts) follow in program order.
    GENERATION.fetch_add(1, Ordering::Relaxed);
}

/// The generation an object was made in.
#[derive(Debug, Clone, Copy)]
pub struct ProcessGuard {
    generation: u64,
}

impl ProcessGuard {
    pub fn new() -> Self {
        REGISTER.call_once(|| {
            // SAFETY: `forked_child` only increments an atomic, which is
            // async-signal-safe as the child handler of `pthread_atfork`
            // must be. A failed registration (ENOMEM) leaves the guard
            // blind to forks, not unsafe.
            unsafe {
                libc::pthread_atfork(None, None, Some(forked_child));
            }
        });
        ProcessGuard {
            // Relaxed: see `forked_child`.
            generation: GENERATION.load(Ordering::Relaxed),
        }
    }

    /// `Err` when called in a forked child of the process `what` was made
    /// in.
    pub fn check(&self, what: &str) -> PyResult<()> {
        // Relaxed: see `forked_child`.
        if GENERATION.load(Ordering::Relaxed) == self.generation {
            return Ok(());
        }
        Err(PyRuntimeError::new_err(format!(
            "this {what} was made in the parent of this process (os.fork or multiprocessing's \
             fork start method): its threads and locks did not come along, so it cannot be \
             used here; {SHARE}"
        )))
    }

    /// The error `__reduce__` raises.
    pub fn refuse_pickle(what: &str) -> PyResult<()> {
        Err(PyTypeError::new_err(format!(
            "a {what} cannot be pickled (it holds memory, threads and locks of this process); \
             {SHARE}"
        )))
    }
}
