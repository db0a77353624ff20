//! [`Thinned`]: at most a fixed number of a run's samples, spread evenly
//! over the whole run, plus the latest.
//!
//! Why: the learning curve keeps a sample every half second and a point per
//! finished episode for the PNG drawn at exit. Kept whole, that grows
//! without bound: CartPole at 500 finishes about 10,000 episodes a minute,
//! 24 bytes each, and in the hour soak the learner grew 0.28 MiB a minute
//! for it. A curve needs no more points than its PNG has pixels.
//!
//! How: every `stride`-th item pushed is kept. When `cap` are held, every
//! other one is dropped and the stride doubles; so the kept items are
//! always those whose index is a multiple of the stride, evenly spread from
//! the first item to the latest. The latest item is held aside as well, so
//! a curve always ends where the run is.
//!
//! Cost: `cap` items of memory for a run of any length; a push is O(1)
//! amortised (a halving moves `cap / 2` items, once per `cap / 2` kept
//! pushes).

/// A run's samples thinned to at most `cap` (see the module docs).
#[derive(Debug, Clone)]
pub struct Thinned<T> {
    /// Items whose index (in push order) is a multiple of `stride`.
    kept: Vec<T>,
    cap: usize,
    stride: u64,
    /// Items pushed so far.
    seen: u64,
    latest: Option<T>,
}

impl<T: Copy> Thinned<T> {
    /// Keeps at most `cap` (at least 2) items.
    pub fn new(cap: usize) -> Self {
        Thinned {
            kept: Vec::new(),
            cap: cap.max(2),
            stride: 1,
            seen: 0,
            latest: None,
        }
    }

    pub fn push(&mut self, item: T) {
        let index = self.seen;
        self.seen += 1;
        self.latest = Some(item);
        if !index.is_multiple_of(self.stride) {
            return;
        }
        if self.kept.len() == self.cap {
            // Kept indices are 0, s, 2s, ...: keeping every other one keeps
            // the multiples of 2s.
            let mut position = 0usize;
            self.kept.retain(|_| {
                position += 1;
                position % 2 == 1
            });
            self.stride *= 2;
            if !index.is_multiple_of(self.stride) {
                return;
            }
        }
        self.kept.push(item);
    }

    /// The latest item pushed.
    pub fn latest(&self) -> Option<&T> {
        self.latest.as_ref()
    }

    /// Items pushed so far (kept or not).
    pub fn seen(&self) -> u64 {
        self.seen
    }

    /// The kept items in push order, then the latest if it was not kept:
    /// what to draw.
    pub fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        let latest_kept = self.seen > 0 && (self.seen - 1).is_multiple_of(self.stride);
        let tail = if latest_kept {
            None
        } else {
            self.latest.as_ref()
        };
        self.kept.iter().chain(tail)
    }

    /// Items [`iter`](Self::iter) yields.
    pub fn len(&self) -> usize {
        self.iter().count()
    }

    pub fn is_empty(&self) -> bool {
        self.seen == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn under_the_cap_everything_is_kept() {
        let mut t = Thinned::new(8);
        for i in 0..8u64 {
            t.push(i);
        }
        assert_eq!(
            t.iter().copied().collect::<Vec<_>>(),
            (0..8).collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_long_run_keeps_at_most_the_cap_evenly_spread_and_ends_at_the_latest() {
        let mut t = Thinned::new(100);
        for i in 0..1_000_003u64 {
            t.push(i);
        }
        let v: Vec<u64> = t.iter().copied().collect();
        // At most the cap, plus the latest held aside.
        assert!(v.len() <= 101, "{} items", v.len());
        assert!(v.len() >= 50, "{} items", v.len());
        assert_eq!(v[0], 0);
        assert_eq!(*v.last().unwrap(), 1_000_002);
        // Evenly spread: every gap but the last (to the latest) is the same.
        let gaps: Vec<u64> = v.windows(2).map(|w| w[1] - w[0]).collect();
        let stride = gaps[0];
        assert!(
            gaps[..gaps.len() - 1].iter().all(|&g| g == stride),
            "{gaps:?}"
        );
        assert!(gaps[gaps.len() - 1] <= stride);
        // Spread over the whole run: the last kept is within one stride
        // of the end.
        assert!(1_000_002 - v[v.len() - 2] <= stride);
        assert_eq!(t.seen(), 1_000_003);
    }

    #[test]
    fn an_odd_cap_keeps_the_multiples_of_the_stride() {
        let mut t = Thinned::new(5);
        for i in 0..37u64 {
            t.push(i);
            let v: Vec<u64> = t.iter().copied().collect();
            assert!(v.len() <= 6, "{v:?}");
            let kept = &v[..if i % t.stride == 0 {
                v.len()
            } else {
                v.len() - 1
            }];
            assert!(kept.iter().all(|k| k % t.stride == 0), "{v:?}");
            assert_eq!(*v.last().unwrap(), i);
        }
    }
}
