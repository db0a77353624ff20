//! The live streams, so shutdown can end each with UNAVAILABLE.
//!
//! Touched when a stream opens and when it closes (never per step), hence
//! a mutex; the id counter is a relaxed atomic (ids only need to be unique).
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use tokio::task::AbortHandle;
use tonic::Status;

use crate::infer::step_request::ReplySender;
use crate::serve::stream_error::StreamError;

/// The live streams, so shutdown can end each with UNAVAILABLE. Touched at
/// stream start and end only (never per step), hence the mutex.
#[derive(Default)]
pub(crate) struct StreamRegistry {
    next_id: AtomicU64,
    live: Mutex<RegistryState>,
}

#[derive(Default)]
struct RegistryState {
    closed: bool,
    streams: HashMap<u64, (ReplySender, Option<AbortHandle>)>,
}

impl StreamRegistry {
    fn lock(&self) -> std::sync::MutexGuard<'_, RegistryState> {
        // A panic while holding this lock cannot leave the map inconsistent.
        self.live.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a new stream; `None` once shutting down.
    pub(crate) fn register(&self, tx: ReplySender) -> Option<u64> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut live = self.lock();
        if live.closed {
            return None;
        }
        live.streams.insert(id, (tx, None));
        Some(id)
    }

    pub(crate) fn set_abort(&self, id: u64, abort: AbortHandle) {
        if let Some(entry) = self.lock().streams.get_mut(&id) {
            entry.1 = Some(abort);
        }
    }

    pub(crate) fn remove(&self, id: u64) {
        self.lock().streams.remove(&id);
    }

    /// Ends every stream with UNAVAILABLE and refuses new ones.
    pub(crate) fn close(&self) {
        let mut live = self.lock();
        live.closed = true;
        for (_, (tx, abort)) in live.streams.drain() {
            let _ = tx.send(Err(Status::from(StreamError::ShuttingDown)));
            if let Some(a) = abort {
                a.abort();
            }
        }
    }
}
