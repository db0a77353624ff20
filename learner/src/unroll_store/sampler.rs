//! [`UnrollSampler`]: one prefetch thread's source of sampled batches from
//! an [`UnrollStore`]: the in-process buffer sampled into a reused
//! [`SampleBatch`], or a remote table's `Sample` stream
//! ([`RemoteSampler`]). Either way the batch is read through
//! [`SampledUnrolls`]. Cost: the store's sample; no copy added.
//!
//! A local sample is first tried without waiting, so that the time of one
//! that found its items and the rate limiter ready is the sampling cost
//! alone ([`UnrollSampler::last_sample_cost`], the replay's share of a
//! training step in the run summary); one that had to wait is not timed.
use std::sync::Arc;
use std::time::{Duration, Instant};

use seed_replay::{ReplayBuffer, ReplayError, SampleBatch};

use crate::unroll_store::remote::sampler::{RemoteSampleError, RemoteSampler};
use crate::unroll_store::sampled_unrolls::SampledUnrolls;
use crate::unroll_store::store::UnrollStore;

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
        /// The last batch's sampling time, when it did not wait.
        cost: Option<Duration>,
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
                cost: None,
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
                cost,
            } => {
                let started = Instant::now();
                let mut result = replay.sample_into(batch, *batch_size);
                *cost = result.is_ok().then(|| started.elapsed());
                if result.as_ref().is_err_and(Self::must_wait) {
                    result = replay.sample_into_timeout(batch, *batch_size, wait);
                }
                match result {
                    Ok(()) => Ok(&**batch as &dyn SampledUnrolls),
                    Err(ReplayError::Closed) => Err(SampleFailure::Closed),
                    Err(e) if Self::must_wait(&e) => Err(SampleFailure::NotYet),
                    Err(e) => Err(SampleFailure::Failed(e)),
                }
            }
            UnrollSampler::Remote(remote) => match remote.next(wait) {
                Ok(b) => Ok(b as &dyn SampledUnrolls),
                Err(RemoteSampleError::NotYet) => Err(SampleFailure::NotYet),
                Err(RemoteSampleError::Closed) => Err(SampleFailure::Closed),
            },
        }
    }

    /// Whether a sample failed only because items or the rate limiter are
    /// not ready yet (waiting may help).
    fn must_wait(e: &ReplayError) -> bool {
        matches!(
            e,
            ReplayError::Timeout { .. }
                | ReplayError::NotEnoughItems { .. }
                | ReplayError::RateLimited { .. }
                | ReplayError::WouldBlock { .. }
        )
    }

    /// How long the last batch took to sample, when it was local and did
    /// not wait; `None` otherwise (a remote sample's cost is the network's).
    pub fn last_sample_cost(&self) -> Option<Duration> {
        match self {
            UnrollSampler::Local { cost, .. } => *cost,
            UnrollSampler::Remote(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use seed_replay::{DType, FieldRef, ItemLayout, ReplayConfig, SamplerConfig, Values};

    /// A sample that found its items is timed; one that had to wait is not,
    /// so a wait never counts as sampling cost.
    #[test]
    fn only_samples_that_did_not_wait_are_timed() {
        let layout = ItemLayout::builder()
            .field("x", DType::F32, &[1])
            .build()
            .unwrap();
        let replay =
            Arc::new(ReplayBuffer::new(layout, ReplayConfig::new(8, SamplerConfig::Fifo)).unwrap());
        let store = UnrollStore::Local(Arc::clone(&replay));
        let mut sampler = UnrollSampler::new(&store, 2).unwrap();
        let wait = Duration::from_millis(1);
        assert!(matches!(sampler.next(wait), Err(SampleFailure::NotYet)));
        assert_eq!(sampler.last_sample_cost(), None, "empty: it waited");
        for v in [1.0f32, 2.0] {
            replay
                .insert_ref(&[FieldRef::new(&[1], Values::F32(&[v]))])
                .unwrap();
        }
        assert_eq!(sampler.next(wait).map(|b| b.rows()).ok(), Some(2));
        assert!(sampler.last_sample_cost().is_some(), "ready: timed");
        // FIFO handed both out: the next sample waits again.
        assert!(matches!(sampler.next(wait), Err(SampleFailure::NotYet)));
        assert_eq!(sampler.last_sample_cost(), None);
    }
}
