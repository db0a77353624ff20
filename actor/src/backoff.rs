//! [`Backoff`]: the reconnect delays of a [`ReconnectPolicy`].
//!
//! Exponential with "equal jitter": the n-th consecutive failure waits a
//! uniformly random time in `[d/2, d]`, `d = min(initial * 2^n, max)`. Half
//! the delay is guaranteed (the learner gets time to come back), the random
//! half spreads a fleet of actors so a restarted learner is not hit by all of
//! them in the same millisecond.

use std::time::Duration;

use rand::Rng;

use crate::config::ReconnectPolicy;

/// Counts consecutive failed connects and hands out the next delay.
#[derive(Debug, Clone)]
pub struct Backoff {
    policy: ReconnectPolicy,
    failures: u32,
}

impl Backoff {
    pub fn new(policy: ReconnectPolicy) -> Self {
        Backoff {
            policy,
            failures: 0,
        }
    }

    /// Consecutive failed connects so far.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// A session was established: the next failure starts from the initial delay.
    pub fn reset(&mut self) {
        self.failures = 0;
    }

    /// Records a failed connect; returns the delay before the next attempt,
    /// or `None` when `max_attempts` consecutive attempts have failed.
    pub fn fail(&mut self) -> Option<Duration> {
        self.failures = self.failures.saturating_add(1);
        if self
            .policy
            .max_attempts
            .is_some_and(|max| self.failures >= max)
        {
            return None;
        }
        Some(self.delay(self.failures - 1))
    }

    /// The jittered delay after `n` earlier consecutive failures.
    pub fn delay(&self, n: u32) -> Duration {
        let cap = self.ceiling(n);
        let half = cap / 2;
        half + rand::rng().random_range(Duration::ZERO..=cap - half)
    }

    /// The un-jittered delay `min(initial * 2^n, max)`.
    fn ceiling(&self, n: u32) -> Duration {
        let factor = 1u32.checked_shl(n.min(31)).unwrap_or(u32::MAX);
        self.policy
            .initial_backoff
            .checked_mul(factor)
            .map_or(self.policy.max_backoff, |d| d.min(self.policy.max_backoff))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(max_attempts: Option<u32>) -> ReconnectPolicy {
        ReconnectPolicy {
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(1000),
            max_attempts,
        }
    }

    #[test]
    fn delays_double_up_to_the_cap_within_the_jitter_band() {
        let b = Backoff::new(policy(None));
        for (n, ceiling_ms) in [
            (0, 100),
            (1, 200),
            (2, 400),
            (3, 800),
            (4, 1000),
            (40, 1000),
        ] {
            let ceiling = Duration::from_millis(ceiling_ms);
            for _ in 0..50 {
                let d = b.delay(n);
                assert!(d >= ceiling / 2 && d <= ceiling, "n={n}: {d:?}");
            }
        }
    }

    #[test]
    fn gives_up_after_max_attempts_and_reset_restarts_the_count() {
        let mut b = Backoff::new(policy(Some(3)));
        assert!(b.fail().is_some());
        assert!(b.fail().is_some());
        b.reset();
        assert!(b.fail().is_some());
        assert!(b.fail().is_some());
        assert_eq!(b.fail(), None);
        assert_eq!(b.failures(), 3);
        let mut forever = Backoff::new(policy(None));
        assert!((0..1000).all(|_| forever.fail().is_some()));
    }
}
