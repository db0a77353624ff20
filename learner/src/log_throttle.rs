//! [`LogThrottle`]: at most one log line per interval for a warning that can
//! repeat per step or per message, with the count of what it stands for.
//!
//! Why: a warning on a hot path floods the log when its cause persists (a
//! non-finite training step wrote two lines per step, 3.7 MB in 40 s; a
//! misbehaving actor that reconnects at once is refused per stream). The
//! first occurrence is logged at once; later ones within `interval` are
//! counted, and the next line after the interval carries that count.
//!
//! Cost: one `fetch_add` and one load per occurrence; a compare-exchange
//! when a line is due. Lock-free, so any thread may call [`LogThrottle::hit`].
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The interval the learner's throttled warnings use.
pub const WARN_INTERVAL: Duration = Duration::from_secs(10);

/// `last_ms` before the first line.
const NEVER: u64 = u64::MAX;

/// Rate limit for one warning site (see the module docs).
pub struct LogThrottle {
    interval_ms: u64,
    epoch: Instant,
    /// Milliseconds since `epoch` of the last line written; [`NEVER`] before
    /// the first. Relaxed: it only decides which caller writes the line, and
    /// the compare-exchange makes that one caller per interval.
    last_ms: AtomicU64,
    /// Occurrences since the last line (the one that writes it included).
    /// Relaxed: a count; the writer's swap takes whatever is in.
    pending: AtomicU64,
}

impl LogThrottle {
    /// One line per `interval` at most.
    pub fn new(interval: Duration) -> Self {
        LogThrottle {
            interval_ms: interval.as_millis().min(u64::MAX as u128 - 1) as u64,
            epoch: Instant::now(),
            last_ms: AtomicU64::new(NEVER),
            pending: AtomicU64::new(0),
        }
    }

    /// Records one occurrence. `Some(n)`: write the line now, standing for
    /// `n` occurrences (this one and those suppressed since the last line);
    /// `None`: stay quiet.
    pub fn hit(&self) -> Option<u64> {
        self.hit_at(self.epoch.elapsed().as_millis() as u64)
    }

    /// [`hit`](Self::hit) at `now_ms` milliseconds after creation.
    fn hit_at(&self, now_ms: u64) -> Option<u64> {
        self.pending.fetch_add(1, Ordering::Relaxed);
        let last = self.last_ms.load(Ordering::Relaxed);
        let due = last == NEVER || now_ms >= last.saturating_add(self.interval_ms);
        if due
            && self
                .last_ms
                .compare_exchange(last, now_ms, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            return Some(self.pending.swap(0, Ordering::Relaxed));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_hit_logs_then_one_line_per_interval_with_the_count() {
        let t = LogThrottle::new(Duration::from_secs(10));
        assert_eq!(t.hit_at(0), Some(1));
        for ms in 1..=500 {
            assert_eq!(t.hit_at(ms), None, "within the interval");
        }
        // The next line after the interval stands for the 500 suppressed
        // hits and itself.
        assert_eq!(t.hit_at(10_000), Some(501));
        assert_eq!(t.hit_at(10_001), None);
        assert_eq!(t.hit_at(25_000), Some(2));
    }

    #[test]
    fn threads_share_one_line_per_interval() {
        let t = std::sync::Arc::new(LogThrottle::new(Duration::from_secs(3600)));
        let lines: u64 = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|_| {
                    let t = &t;
                    s.spawn(move || (0..1000).filter(|_| t.hit_at(5).is_some()).count() as u64)
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert_eq!(lines, 1, "one line for 4000 hits inside one interval");
    }
}
