//! [`UnrollSampler`]: one prefetch thread's source of sampled batches from
//! an [`UnrollStore`]: the in-process buffer sampled into a reused
//! [`SampleBatch`], or a remote table's `Sample` stream
//! ([`RemoteSampler`]). Either way the batch is read through
//! [`SampledUnrolls`]. Cost: the store's sample; no copy added.
use std::sync::Arc;
use std::time::Duration;

use seed_replay::{ReplayBuffer, ReplayError, SampleBatch};

use crate::replay::remote_sampler::{RemoteSampleError, RemoteSampler};
use crate::replay::sampled_unrolls::SampledUnrolls;
use crate::replay::unroll_store::UnrollStore;

/// Why [`UnrollSampler::next`] gave no batch.
#[derive(Debug)]
pub enum SampleFailure {
    /// Nothing within the wait (too few items, the rate limiter, a stream
    /// being reopened): try again.
    NotYet,
    /// The store was closed: stop.
    Closed,
    /// The store failed for good (a bug: the batch did not fit).
    Failed(ReplayError),
}

/// One prefetch thread's sampler (see the module docs).
pub enum UnrollSampler {
    Local {
        replay: Arc<ReplayBuffer>,
        batch: Box<SampleBatch>,
        batch_size: usize,
    },
    Remote(Box<RemoteSampler>),
}

impl UnrollSampler {
    /// Batches of `batch_size` from `store`.
    pub fn new(store: &UnrollStore, batch_size: usize) -> Result<Self, String> {
        Ok(match store {
            UnrollStore::Local(replay) => UnrollSampler::Local {
                batch: Box::new(replay.new_batch(batch_size)),
                replay: Arc::clone(replay),
                batch_size,
            },
            UnrollStore::Remote(table) => {
                UnrollSampler::Remote(Box::new(RemoteSampler::new(Arc::clone(table), batch_size)?))
            }
        })
    }

    /// The next batch, waiting up to `wait`.
    pub fn next(&mut self, wait: Duration) -> Result<&dyn SampledUnrolls, SampleFailure> {
        match self {
            UnrollSampler::Local {
                replay,
                batch,
                batch_size,
            } => match replay.sample_into_timeout(batch, *batch_size, wait) {
                Ok(()) => Ok(&**batch as &dyn SampledUnrolls),
                Err(ReplayError::Closed) => Err(SampleFailure::Closed),
                Err(ReplayError::Timeout { .. })
                | Err(ReplayError::NotEnoughItems { .. })
                | Err(ReplayError::RateLimited { .. })
                | Err(ReplayError::WouldBlock { .. }) => Err(SampleFailure::NotYet),
                Err(e) => Err(SampleFailure::Failed(e)),
            },
            UnrollSampler::Remote(remote) => match remote.next(wait) {
                Ok(b) => Ok(b as &dyn SampledUnrolls),
                Err(RemoteSampleError::NotYet) => Err(SampleFailure::NotYet),
                Err(RemoteSampleError::Closed) => Err(SampleFailure::Closed),
            },
        }
    }
}
