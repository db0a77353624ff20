//! Sample-to-insert rate limiting with Reverb's semantics.
//!
//! Why: a replay ratio (each item sampled about `samples_per_insert` times)
//! must hold even when actors outrun the trainer or the reverse. As in
//! Reverb's `RateLimiter`: with `diff = inserts * samples_per_insert -
//! samples`, an insert of `n` is allowed while the buffer holds fewer than
//! `min_size_to_sample` items or `diff + n * spi <= max_diff`; a sample of `n`
//! is allowed once the buffer holds `min_size_to_sample` items and
//! `diff - n >= min_diff`. Refused calls block (with a timeout) or return
//! `WouldBlock`/`RateLimited`.
//! Cost: one CAS on a counter per insert or sample call; no lock.
use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_utils::CachePadded;
use serde::{Deserialize, Serialize};

use crate::error::ReplayError;

/// Configuration of the rate limiter.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RateLimiterConfig {
    /// Sampling waits until the buffer holds this many items.
    pub min_size_to_sample: usize,
    /// Target samples per inserted item.
    pub samples_per_insert: f64,
    /// Lower bound of `inserts * spi - samples` for sampling.
    pub min_diff: f64,
    /// Upper bound of `inserts * spi - samples` for inserting.
    pub max_diff: f64,
}

impl RateLimiterConfig {
    /// Only a minimum size; no ratio (Reverb's `MinSize`).
    pub fn min_size(min_size_to_sample: usize) -> Self {
        RateLimiterConfig {
            min_size_to_sample,
            samples_per_insert: 1.0,
            min_diff: f64::MIN,
            max_diff: f64::MAX,
        }
    }

    /// A samples-per-insert ratio kept within `error_buffer` of the ideal,
    /// centred at `min_size_to_sample * spi` (Reverb's `SampleToInsertRatio`).
    pub fn sample_to_insert_ratio(
        samples_per_insert: f64,
        min_size_to_sample: usize,
        error_buffer: f64,
    ) -> Self {
        let centre = min_size_to_sample as f64 * samples_per_insert;
        RateLimiterConfig {
            min_size_to_sample,
            samples_per_insert,
            min_diff: centre - error_buffer,
            max_diff: centre + error_buffer,
        }
    }

    /// Rejects configurations that are invalid or can reach a state where
    /// neither inserts nor samples may proceed.
    pub(crate) fn validate(
        &self,
        capacity: usize,
        max_samples_per_item: Option<u64>,
    ) -> Result<(), ReplayError> {
        let spi = self.samples_per_insert;
        if !(spi.is_finite() && spi > 0.0) {
            return Err(ReplayError::config(format!(
                "samples_per_insert must be > 0, is {spi}"
            )));
        }
        if self.min_diff.is_nan() || self.max_diff.is_nan() || self.min_diff > self.max_diff {
            return Err(ReplayError::config(format!(
                "min_diff {} must not exceed max_diff {}",
                self.min_diff, self.max_diff
            )));
        }
        if self.min_size_to_sample == 0 || self.min_size_to_sample > capacity {
            return Err(ReplayError::config(format!(
                "min_size_to_sample {} must be in 1..={capacity} (capacity), else sampling never starts",
                self.min_size_to_sample
            )));
        }
        // Width must hold one insert and one sample, else a diff in
        // (max_diff - spi, min_diff + 1) blocks both forever.
        if self.max_diff - self.min_diff < spi + 1.0 {
            return Err(ReplayError::config(format!(
                "max_diff - min_diff = {} < samples_per_insert + 1 = {}: inserts and samples could both block forever",
                self.max_diff - self.min_diff,
                spi + 1.0
            )));
        }
        // At exactly min_size items (nothing sampled yet) either a sample or an
        // insert must be allowed.
        let at_min = self.min_size_to_sample as f64 * spi;
        if at_min - 1.0 < self.min_diff && at_min + spi > self.max_diff {
            return Err(ReplayError::config(format!(
                "after warm-up (diff {at_min}) neither a sample (min_diff {}) nor an insert (max_diff {}) is allowed",
                self.min_diff, self.max_diff
            )));
        }
        if let Some(m) = max_samples_per_item {
            if spi > m as f64 {
                return Err(ReplayError::config(format!(
                    "samples_per_insert {spi} exceeds the {m} times an item may be sampled: the ratio can never be met"
                )));
            }
        }
        Ok(())
    }

    /// With a writer policy that blocks (`Block`) and a sampler that hands
    /// each item out at most `m` times and frees its slot after the `m`-th
    /// (FIFO and grouped: 1), a full buffer stops inserts, so a sample must
    /// then be allowed or both sides wait forever.
    ///
    /// When every one of the `capacity` slots holds an unconsumed item,
    /// the consumed items were sampled `m` times each and the others at
    /// most `m - 1`, so `samples <= m * inserts - capacity` and
    /// `diff = inserts * spi - samples >= inserts * (spi - m) + capacity`.
    /// With `spi == m` that bound is `capacity`, and a sample of one is
    /// allowed if `capacity - 1 >= min_diff`. With `spi < m` it falls
    /// without limit as inserts grow, so only an unbounded `min_diff`
    /// (`f64::MIN`, as [`min_size`](Self::min_size) sets) never refuses.
    pub(crate) fn validate_with_blocking_writers(
        &self,
        capacity: usize,
        m: u64,
    ) -> Result<(), ReplayError> {
        let (spi, m_f) = (self.samples_per_insert, m as f64);
        if spi < m_f && self.min_diff > f64::MIN {
            return Err(ReplayError::config(format!(
                "writer policy Block with samples_per_insert {spi} below the {m} samples that \
                 consume an item: unconsumed items pile up until the buffer is full, and then \
                 min_diff {} refuses every sample while Block holds every insert \
                 (use samples_per_insert {m}, an unbounded min_diff, or OverwriteOldest)",
                self.min_diff
            )));
        }
        let full = capacity as f64 - 1.0;
        if spi >= m_f && self.min_diff > full {
            return Err(ReplayError::config(format!(
                "writer policy Block with min_diff {} above capacity - 1 = {full}: once all \
                 {capacity} slots hold unconsumed items, Block holds every insert and the \
                 limiter refuses every sample",
                self.min_diff
            )));
        }
        Ok(())
    }
}

/// Counters and checks. Limits are decided per call by CAS on the counter
/// being advanced, so concurrent callers never overshoot a bound.
#[derive(Debug)]
pub(crate) struct RateLimiter {
    config: RateLimiterConfig,
    /// Items admitted by the limiter. Relaxed loads and CAS: the counters
    /// carry no data; each decision reads both counters once, and a stale
    /// read of the other one only makes it more conservative or is corrected
    /// by the next notify-and-retry.
    inserts: CachePadded<AtomicU64>,
    /// Items handed out by samples. Relaxed, as above.
    samples: CachePadded<AtomicU64>,
}

/// Snapshot of the limiter's counters (for checkpoints and stats).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RateLimiterCounters {
    pub inserts: u64,
    pub samples: u64,
}

impl RateLimiter {
    pub(crate) fn new(config: RateLimiterConfig, counters: RateLimiterCounters) -> Self {
        RateLimiter {
            config,
            inserts: CachePadded::new(AtomicU64::new(counters.inserts)),
            samples: CachePadded::new(AtomicU64::new(counters.samples)),
        }
    }

    pub(crate) fn counters(&self) -> RateLimiterCounters {
        RateLimiterCounters {
            inserts: self.inserts.load(Ordering::Relaxed),
            samples: self.samples.load(Ordering::Relaxed),
        }
    }

    fn diff(&self, inserts: u64, samples: u64) -> f64 {
        inserts as f64 * self.config.samples_per_insert - samples as f64
    }

    /// Requests that could never pass, whatever the state.
    pub(crate) fn check_request(&self, inserts: usize, samples: usize) -> Result<(), ReplayError> {
        let width = self.config.max_diff - self.config.min_diff;
        if inserts as f64 * self.config.samples_per_insert > width || samples as f64 > width {
            return Err(ReplayError::TooLarge {
                requested: inserts.max(samples),
                limit: width as usize,
            });
        }
        Ok(())
    }

    /// Admits `n` inserts into a buffer now holding `size` items.
    pub(crate) fn try_insert(&self, n: usize, size: usize) -> Result<(), ReplayError> {
        let mut i = self.inserts.load(Ordering::Relaxed);
        loop {
            let free = size + n <= self.config.min_size_to_sample;
            if !free
                && self.diff(i + n as u64, self.samples.load(Ordering::Relaxed))
                    > self.config.max_diff
            {
                return Err(ReplayError::WouldBlock {
                    reason: "rate limiter: inserts ahead of samples",
                });
            }
            match self.inserts.compare_exchange_weak(
                i,
                i + n as u64,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Ok(()),
                Err(now) => i = now,
            }
        }
    }

    /// Gives back an admitted insert that did not happen.
    pub(crate) fn cancel_insert(&self, n: usize) {
        self.inserts.fetch_sub(n as u64, Ordering::Relaxed);
    }

    /// Admits `n` samples from a buffer holding `size` items.
    pub(crate) fn try_sample(&self, n: usize, size: usize) -> Result<(), ReplayError> {
        if size < self.config.min_size_to_sample {
            return Err(ReplayError::RateLimited {
                reason: "rate limiter: fewer items than min_size_to_sample",
            });
        }
        let mut s = self.samples.load(Ordering::Relaxed);
        loop {
            if self.diff(self.inserts.load(Ordering::Relaxed), s + n as u64) < self.config.min_diff
            {
                return Err(ReplayError::RateLimited {
                    reason: "rate limiter: samples ahead of inserts",
                });
            }
            match self.samples.compare_exchange_weak(
                s,
                s + n as u64,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Ok(()),
                Err(now) => s = now,
            }
        }
    }

    /// Gives back admitted samples that were not handed out.
    pub(crate) fn cancel_sample(&self, n: usize) {
        self.samples.fetch_sub(n as u64, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_deadlocking_configs() {
        assert!(RateLimiterConfig::min_size(0).validate(10, None).is_err());
        assert!(RateLimiterConfig::min_size(11).validate(10, None).is_err());
        assert!(RateLimiterConfig::min_size(10).validate(10, None).is_ok());
        // Window narrower than one insert plus one sample.
        assert!(RateLimiterConfig::sample_to_insert_ratio(4.0, 5, 2.0)
            .validate(100, None)
            .is_err());
        assert!(RateLimiterConfig::sample_to_insert_ratio(4.0, 5, 3.0)
            .validate(100, None)
            .is_ok());
        // A consume-once sampler cannot sample an item twice.
        assert!(RateLimiterConfig::sample_to_insert_ratio(2.0, 5, 10.0)
            .validate(100, Some(1))
            .is_err());
        let nan = RateLimiterConfig {
            samples_per_insert: f64::NAN,
            ..RateLimiterConfig::min_size(1)
        };
        assert!(nan.validate(10, None).is_err());
    }

    #[test]
    fn reverb_semantics() {
        // spi 2, min size 2, diff kept in [2, 6].
        let l = RateLimiter::new(
            RateLimiterConfig::sample_to_insert_ratio(2.0, 2, 2.0),
            RateLimiterCounters {
                inserts: 0,
                samples: 0,
            },
        );
        assert!(l.try_sample(1, 0).is_err(), "below min size");
        l.try_insert(1, 0).unwrap();
        l.try_insert(1, 1).unwrap(); // free: warm-up
        l.try_insert(1, 2).unwrap(); // diff 6 <= 6
        assert!(l.try_insert(1, 3).is_err(), "diff would be 8 > 6");
        l.try_sample(4, 3).unwrap(); // diff 2
        assert!(l.try_sample(1, 3).is_err(), "diff would be 1 < 2");
        l.try_insert(1, 3).unwrap(); // diff 4
        assert_eq!(
            l.counters(),
            RateLimiterCounters {
                inserts: 4,
                samples: 4
            }
        );
        assert!(l.check_request(0, 5).is_err());
    }
}
