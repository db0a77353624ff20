//! A lock-free latency histogram in microseconds.
//!
//! Log-linear buckets (HDR style): values below 16 us get one bucket each;
//! above, every power of two is split into 16 equal sub-buckets, so a
//! quantile is reported within 1/16 (6.25%) of the true value, up to ~2^40 us.
//! Recording is one `fetch_add` (Relaxed) on one bucket and one on the count:
//! inference threads record, readers take [`snapshot`](LatencyHistogram::snapshot)s.
//! A snapshot taken while writers run may be off by the few values recorded
//! during the read; quantiles tolerate that, so no ordering is needed.
use std::sync::atomic::{AtomicU64, Ordering};

const SUB_BITS: u32 = 4;
const SUB: usize = 1 << SUB_BITS;
const OCTAVES: usize = 40;
const BUCKETS: usize = SUB + (OCTAVES - SUB_BITS as usize) * SUB;

fn bucket_of(us: u64) -> usize {
    if us < SUB as u64 {
        return us as usize;
    }
    let msb = 63 - us.leading_zeros(); // >= SUB_BITS
    let octave = (msb - SUB_BITS) as usize;
    let sub = ((us >> (msb - SUB_BITS)) as usize) & (SUB - 1);
    (SUB + octave * SUB + sub).min(BUCKETS - 1)
}

/// Lower bound (us) of bucket `b`; quantiles report the bucket midpoint.
fn bucket_low(b: usize) -> u64 {
    if b < SUB {
        return b as u64;
    }
    let octave = (b - SUB) / SUB;
    let sub = (b - SUB) % SUB;
    ((SUB + sub) as u64) << octave
}

fn bucket_mid(b: usize) -> f64 {
    if b < SUB {
        return b as f64;
    }
    let width = 1u64 << ((b - SUB) / SUB);
    bucket_low(b) as f64 + (width as f64 - 1.0) / 2.0
}

/// Concurrent histogram; see the module docs.
pub struct LatencyHistogram {
    buckets: Box<[AtomicU64]>,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyHistogram {
    pub fn new() -> Self {
        LatencyHistogram {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Records one value in microseconds.
    pub fn record_us(&self, us: u64) {
        // Relaxed: an independent counter; readers tolerate skew (module docs).
        self.buckets[bucket_of(us)].fetch_add(1, Ordering::Relaxed);
    }

    /// Copies the current counts.
    pub fn snapshot(&self) -> HistogramSnapshot {
        HistogramSnapshot {
            counts: self
                .buckets
                .iter()
                .map(|b| b.load(Ordering::Relaxed))
                .collect(),
        }
    }
}

/// Bucket counts at one moment; subtract two for an interval.
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramSnapshot {
    counts: Vec<u64>,
}

impl Default for HistogramSnapshot {
    fn default() -> Self {
        HistogramSnapshot {
            counts: vec![0; BUCKETS],
        }
    }
}

impl HistogramSnapshot {
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Values recorded after `earlier` was taken.
    pub fn since(&self, earlier: &HistogramSnapshot) -> HistogramSnapshot {
        HistogramSnapshot {
            counts: self
                .counts
                .iter()
                .zip(&earlier.counts)
                .map(|(a, b)| a.saturating_sub(*b))
                .collect(),
        }
    }

    /// The `q` quantile (0..=1) in microseconds; 0 when empty.
    pub fn quantile_us(&self, q: f64) -> f64 {
        let total = self.count();
        if total == 0 {
            return 0.0;
        }
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (b, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return bucket_mid(b);
            }
        }
        bucket_mid(BUCKETS - 1)
    }

    /// Non-empty buckets as `(upper bound us, count)`, for exporters.
    pub fn buckets(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.counts
            .iter()
            .enumerate()
            .filter(|(_, &c)| c > 0)
            .map(|(b, &c)| {
                let upper = if b + 1 < BUCKETS {
                    bucket_low(b + 1)
                } else {
                    u64::MAX
                };
                (upper, c)
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_contiguous_and_monotonic() {
        for b in 1..BUCKETS {
            assert!(bucket_low(b) > bucket_low(b - 1), "bucket {b}");
            assert_eq!(bucket_of(bucket_low(b)), b, "bucket {b}");
            assert_eq!(bucket_of(bucket_low(b) - 1), b - 1, "bucket {b}");
        }
    }

    #[test]
    fn quantiles_are_within_one_sixteenth() {
        let h = LatencyHistogram::new();
        for us in 1..=10_000u64 {
            h.record_us(us);
        }
        let s = h.snapshot();
        assert_eq!(s.count(), 10_000);
        for (q, want) in [(0.5, 5_000.0), (0.99, 9_900.0), (0.01, 100.0)] {
            let got = s.quantile_us(q);
            assert!(
                (got - want).abs() / want <= 1.0 / 16.0,
                "q{q}: {got} vs {want}"
            );
        }
    }

    #[test]
    fn interval_snapshots_see_only_new_values() {
        let h = LatencyHistogram::new();
        for _ in 0..100 {
            h.record_us(10);
        }
        let before = h.snapshot();
        for _ in 0..100 {
            h.record_us(1000);
        }
        let interval = h.snapshot().since(&before);
        assert_eq!(interval.count(), 100);
        assert!((interval.quantile_us(0.5) - 1000.0).abs() < 64.0);
        assert_eq!(HistogramSnapshot::default().quantile_us(0.5), 0.0);
    }
}
