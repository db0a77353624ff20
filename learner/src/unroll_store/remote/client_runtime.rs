//! [`ClientRuntime`]: the small tokio runtime the remote replay table's
//! client runs on, apart from the learner's server runtime.
//!
//! Why its own: the learner's hot threads (inference, prefetch, training)
//! are plain threads that must reach the table without being async, and a
//! runtime of our own makes `block_on` from those threads legal whatever
//! runtime (if any) the embedding program runs; it also keeps replay I/O
//! from queueing behind actor streams on the server's workers. One worker
//! thread: the client only moves bytes. Dropping it never blocks (a runtime
//! dropped inside async code would panic otherwise): its tasks are shut
//! down in the background.
use std::future::Future;

use tokio::runtime::{Builder, Handle, Runtime};

use crate::unroll_store::remote::error::RemoteReplayError;

/// The replay client's runtime (see the module docs).
#[derive(Debug)]
pub struct ClientRuntime {
    /// `Some` until dropped.
    runtime: Option<Runtime>,
    handle: Handle,
}

impl ClientRuntime {
    /// One worker thread called `replay-client`.
    pub fn new() -> Result<Self, RemoteReplayError> {
        let runtime = Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("replay-client")
            .enable_all()
            .build()
            .map_err(|e| RemoteReplayError::Runtime(e.to_string()))?;
        let handle = runtime.handle().clone();
        Ok(ClientRuntime {
            runtime: Some(runtime),
            handle,
        })
    }

    pub fn handle(&self) -> &Handle {
        &self.handle
    }

    /// Runs `f` to completion on the calling thread (which must not be a
    /// runtime worker: inference, prefetch and training threads are not).
    pub fn block_on<F: Future>(&self, f: F) -> F::Output {
        self.handle.block_on(f)
    }
}

impl Drop for ClientRuntime {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}
