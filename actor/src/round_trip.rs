//! [`RoundTripHistogram`]: the step round trip as the actor sees it, from
//! queueing a step batch on the stream to receiving its action batch.
//!
//! This is the latency an environment waits for its action, so it is the
//! figure the benchmarks compare against a bare gRPC echo. It includes the
//! actor's own encode and send, the wire both ways, the learner's
//! validation, batching and inference, and the actor's decode; it excludes
//! stepping the envs.
//!
//! Cost: one `Instant::now()` when a batch is sent and one when its answer
//! arrives, plus one histogram increment (a bucket index computation and an
//! add). The histogram is per actor, so nothing is shared or locked.
//!
//! Precision: values are kept in nanoseconds with 3 significant digits
//! (0.1% relative error), from 1 ns to 60 s; slower round trips are clamped
//! to 60 s rather than dropped.

use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

/// Largest value tracked exactly; longer round trips are recorded as this.
const MAX_TRACKED: Duration = Duration::from_secs(60);
/// Significant decimal digits kept per value.
const SIGNIFICANT_DIGITS: u8 = 3;

/// Per-batch round-trip times of one actor.
#[derive(Debug, Clone)]
pub struct RoundTripHistogram {
    nanos: Histogram<u64>,
}

impl Default for RoundTripHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl RoundTripHistogram {
    pub fn new() -> Self {
        // Bounds are constants within hdrhistogram's documented limits
        // (low >= 1, high >= 2 * low, sigfig <= 5), so creation cannot fail.
        let nanos =
            Histogram::new_with_bounds(1, MAX_TRACKED.as_nanos() as u64, SIGNIFICANT_DIGITS)
                .unwrap_or_else(|e| unreachable!("constant histogram bounds rejected: {e}"));
        RoundTripHistogram { nanos }
    }

    /// Records one round trip.
    #[inline]
    pub fn record(&mut self, round_trip: Duration) {
        let ns = (round_trip.as_nanos() as u64).clamp(1, self.nanos.high());
        // In range by the clamp above, so `record` cannot fail.
        let _ = self.nanos.record(ns);
    }

    /// Round trips recorded.
    pub fn len(&self) -> u64 {
        self.nanos.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nanos.is_empty()
    }

    /// The percentiles reported in [`ActorReport`](crate::ActorReport).
    pub fn percentiles(&self) -> RoundTripPercentiles {
        if self.nanos.is_empty() {
            return RoundTripPercentiles::default();
        }
        let us = |q: f64| self.nanos.value_at_quantile(q) as f64 / 1_000.0;
        RoundTripPercentiles {
            count: self.nanos.len(),
            mean_us: self.nanos.mean() / 1_000.0,
            p50_us: us(0.5),
            p90_us: us(0.9),
            p99_us: us(0.99),
            p999_us: us(0.999),
            max_us: self.nanos.max() as f64 / 1_000.0,
        }
    }
}

/// Round-trip percentiles in microseconds (all zero when nothing was recorded).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct RoundTripPercentiles {
    /// Round trips recorded.
    pub count: u64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    /// The 99.9th percentile.
    pub p999_us: f64,
    pub max_us: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_follow_the_recorded_values() {
        let mut h = RoundTripHistogram::new();
        assert_eq!(h.percentiles(), RoundTripPercentiles::default());
        // 1..=1000 µs, once each.
        for us in 1..=1000u64 {
            h.record(Duration::from_micros(us));
        }
        let p = h.percentiles();
        assert_eq!(p.count, 1000);
        let close = |got: f64, want: f64| (got - want).abs() <= want * 0.002;
        assert!(close(p.p50_us, 500.0), "{p:?}");
        assert!(close(p.p90_us, 900.0), "{p:?}");
        assert!(close(p.p99_us, 990.0), "{p:?}");
        assert!(close(p.p999_us, 999.0), "{p:?}");
        assert!(close(p.max_us, 1000.0), "{p:?}");
        assert!(close(p.mean_us, 500.5), "{p:?}");
    }

    #[test]
    fn out_of_range_values_are_clamped_not_dropped() {
        let mut h = RoundTripHistogram::new();
        h.record(Duration::ZERO);
        h.record(Duration::from_secs(3600));
        assert_eq!(h.len(), 2);
        assert!(h.percentiles().max_us >= 59.9e6);
    }
}
