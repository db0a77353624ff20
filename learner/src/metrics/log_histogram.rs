//! A lock-free histogram of non-negative integers (microseconds, rows, ...).
//!
//! Log-linear buckets (HDR style): values up to 16 get one bucket each;
//! above, every power of two is split into 16 equal sub-buckets, so a
//! quantile is reported within 1/16 (6.25%) of the true value, up to ~2^40.
//! Buckets are closed above, `(lower, upper]`, like Prometheus' `le`: every
//! power of two is a bucket's upper bound, so [`HistogramSnapshot::at_most`]
//! is exact at those bounds and exporters need no approximation.
//!
//! Recording is two `fetch_add`s (Relaxed): the value's bucket and the sum.
//! Writers record, readers take
//! [`snapshot`](LogHistogram::snapshot)s. A snapshot taken while writers run
//! may be off by the few values recorded during the read (its sum and its
//! bucket counts may disagree by those); quantiles and scrapes tolerate
//! that, so no ordering is needed.
use std::sync::atomic::{AtomicU64, Ordering};

const SUB_BITS: u32 = 4;
const SUB: usize = 1 << SUB_BITS;
const OCTAVES: usize = 40;
/// Buckets of the floor scheme (`[low, next low)`) the closed-above buckets
/// are built from: bucket `b` of ours holds `v` when floor bucket `b - 1`
/// holds `v - 1`, plus bucket 0 for the value 0.
const FLOOR_BUCKETS: usize = SUB + (OCTAVES - SUB_BITS as usize) * SUB;
const BUCKETS: usize = FLOOR_BUCKETS + 1;

/// Floor bucket of `v`: values below 16 exact, then 16 per octave.
fn floor_bucket(v: u64) -> usize {
    if v < SUB as u64 {
        return v as usize;
    }
    let msb = 63 - v.leading_zeros(); // >= SUB_BITS
    let octave = (msb - SUB_BITS) as usize;
    let sub = ((v >> (msb - SUB_BITS)) as usize) & (SUB - 1);
    (SUB + octave * SUB + sub).min(FLOOR_BUCKETS - 1)
}

/// Lower bound of floor bucket `f`.
fn floor_low(f: usize) -> u64 {
    if f < SUB {
        return f as u64;
    }
    let octave = (f - SUB) / SUB;
    let sub = (f - SUB) % SUB;
    ((SUB + sub) as u64) << octave
}

/// Our bucket of `v`: the one with `lower < v <= upper`.
fn bucket_of(v: u64) -> usize {
    match v {
        0 => 0,
        v => floor_bucket(v - 1) + 1,
    }
}

/// Inclusive upper bound of bucket `b`; the last bucket is open.
fn bucket_upper(b: usize) -> u64 {
    if b + 1 >= BUCKETS {
        u64::MAX
    } else {
        floor_low(b)
    }
}

/// The value a quantile in bucket `b` reports: the middle of its range.
fn bucket_mid(b: usize) -> f64 {
    if b == 0 {
        return 0.0;
    }
    let low = bucket_upper(b - 1) + 1;
    let high = if b + 1 >= BUCKETS {
        low
    } else {
        bucket_upper(b)
    };
    (low as f64 + high as f64) / 2.0
}

/// Concurrent histogram; see the module docs.
#[derive(Debug)]
pub struct LogHistogram {
    buckets: Box<[AtomicU64]>,
    sum: AtomicU64,
}

impl Default for LogHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl LogHistogram {
    /// An empty histogram (about 5 KiB of counters).
    pub fn new() -> Self {
        LogHistogram {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            sum: AtomicU64::new(0),
        }
    }

    /// Records one value.
    pub fn record(&self, v: u64) {
        // Relaxed: independent counters; readers tolerate skew (module docs).
        self.buckets[bucket_of(v)].fetch_add(1, Ordering::Relaxed);
        self.sum.fetch_add(v, Ordering::Relaxed);
    }

    /// Copies the current counts.
    pub fn snapshot(&self) -> HistogramSnapshot {
        HistogramSnapshot {
            counts: self
                .buckets
                .iter()
                .map(|b| b.load(Ordering::Relaxed))
                .collect(),
            sum: self.sum.load(Ordering::Relaxed),
        }
    }
}

/// Bucket counts at one moment; subtract two for an interval.
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramSnapshot {
    counts: Vec<u64>,
    sum: u64,
}

impl Default for HistogramSnapshot {
    fn default() -> Self {
        HistogramSnapshot {
            counts: vec![0; BUCKETS],
            sum: 0,
        }
    }
}

impl HistogramSnapshot {
    /// Values recorded.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Sum of the values recorded (exact, not bucketed).
    pub fn sum(&self) -> u64 {
        self.sum
    }

    /// Values recorded that were `<= le`. Exact when `le` is a bucket's
    /// upper bound (every power of two is, as is every value up to 16);
    /// otherwise it counts up to the largest such bound below `le`.
    pub fn at_most(&self, le: u64) -> u64 {
        self.counts
            .iter()
            .enumerate()
            .take_while(|&(b, _)| bucket_upper(b) <= le)
            .map(|(_, &c)| c)
            .sum()
    }

    /// `(upper bound, count)` of every bucket, lowest first (the last
    /// bucket's bound is `u64::MAX`).
    pub fn buckets(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.counts
            .iter()
            .enumerate()
            .map(|(b, &c)| (bucket_upper(b), c))
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
            sum: self.sum.saturating_sub(earlier.sum),
        }
    }

    /// The `q` quantile (0..=1), within 1/16 of the true value; 0 when empty.
    pub fn quantile(&self, q: f64) -> f64 {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_closed_above_contiguous_and_monotonic() {
        assert_eq!(bucket_of(0), 0);
        for b in 1..BUCKETS - 1 {
            let upper = bucket_upper(b);
            assert!(upper > bucket_upper(b - 1), "bucket {b}");
            assert_eq!(bucket_of(upper), b, "bucket {b}");
            assert_eq!(bucket_of(upper + 1), b + 1, "bucket {b}");
            assert_eq!(bucket_of(bucket_upper(b - 1) + 1), b, "bucket {b}");
        }
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn powers_of_two_are_exact_bounds() {
        let h = LogHistogram::new();
        for v in 0..=5000u64 {
            h.record(v);
        }
        let s = h.snapshot();
        for k in 0..13 {
            let le = 1u64 << k;
            assert_eq!(s.at_most(le), le + 1, "le {le}");
        }
        assert_eq!(s.at_most(u64::MAX), 5001);
        assert_eq!(s.sum(), 5000 * 5001 / 2);
    }

    #[test]
    fn small_values_are_exact() {
        let h = LogHistogram::new();
        for v in [1, 3, 3, 16] {
            h.record(v);
        }
        let s = h.snapshot();
        assert_eq!(s.quantile(0.25), 1.0);
        assert_eq!(s.quantile(0.5), 3.0);
        assert_eq!(s.quantile(1.0), 16.0);
    }

    #[test]
    fn quantiles_are_within_one_sixteenth() {
        let h = LogHistogram::new();
        for us in 1..=10_000u64 {
            h.record(us);
        }
        let s = h.snapshot();
        assert_eq!(s.count(), 10_000);
        for (q, want) in [(0.5, 5_000.0), (0.99, 9_900.0), (0.01, 100.0)] {
            let got = s.quantile(q);
            assert!(
                (got - want).abs() / want <= 1.0 / 16.0,
                "q{q}: {got} vs {want}"
            );
        }
    }

    #[test]
    fn interval_snapshots_see_only_new_values() {
        let h = LogHistogram::new();
        for _ in 0..100 {
            h.record(10);
        }
        let before = h.snapshot();
        for _ in 0..100 {
            h.record(1000);
        }
        let interval = h.snapshot().since(&before);
        assert_eq!(interval.count(), 100);
        assert_eq!(interval.sum(), 100_000);
        assert!((interval.quantile(0.5) - 1000.0).abs() < 64.0);
        assert_eq!(HistogramSnapshot::default().quantile(0.5), 0.0);
    }
}
