//! [`Keepalive`]: how each end of an actor stream checks that the other is
//! still there (HTTP/2 PING frames, `--keepalive-secs` and
//! `--keepalive-timeout-secs` on both binaries).
//!
//! A peer that is frozen (SIGSTOP, a hung host) or whose host vanished
//! without closing the connection sends nothing and answers nothing; TCP
//! alone would keep such a connection open for hours. With keepalive on,
//! each end pings after `interval` without traffic from the other and
//! closes the connection when a ping stays unanswered for `timeout`: the
//! learner then frees the actor's env slots, the actor reconnects. A live
//! peer answers pings in its HTTP/2 layer (no application code runs), so an
//! idle but healthy actor keeps its stream.
//!
//! Cost: one 17-byte frame each way per `interval` of silence, nothing on a
//! busy connection (traffic resets the timer).
use std::time::Duration;

/// Default of `--keepalive-secs` on both binaries.
pub const DEFAULT_KEEPALIVE_SECS: u64 = 10;
/// Default of `--keepalive-timeout-secs` on both binaries: with
/// [`DEFAULT_KEEPALIVE_SECS`], a frozen peer is dropped within about 20 s.
pub const DEFAULT_KEEPALIVE_TIMEOUT_SECS: u64 = 10;

/// HTTP/2 keepalive of one end of the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keepalive {
    /// Ping after this long without traffic; `None`: never ping.
    pub interval: Option<Duration>,
    /// Close the connection when a ping is unanswered this long.
    pub timeout: Duration,
}

impl Keepalive {
    /// From the flags' whole seconds: `interval_secs` 0 turns pings off.
    pub fn from_secs(interval_secs: u64, timeout_secs: u64) -> Self {
        Keepalive {
            interval: (interval_secs > 0).then(|| Duration::from_secs(interval_secs)),
            timeout: Duration::from_secs(timeout_secs),
        }
    }

    /// Keepalive off.
    pub fn disabled() -> Self {
        Keepalive {
            interval: None,
            timeout: Duration::from_secs(DEFAULT_KEEPALIVE_TIMEOUT_SECS),
        }
    }

    /// Why this cannot run, naming the flags; `None` when it can. A zero
    /// timeout would close every connection at its first ping.
    pub fn problem(&self) -> Option<&'static str> {
        (self.interval.is_some() && self.timeout.is_zero())
            .then_some("--keepalive-timeout-secs must be at least 1 while --keepalive-secs is on")
    }
}

impl Default for Keepalive {
    /// 10 s interval, 10 s timeout.
    fn default() -> Self {
        Keepalive::from_secs(DEFAULT_KEEPALIVE_SECS, DEFAULT_KEEPALIVE_TIMEOUT_SECS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_interval_disables_and_zero_timeout_is_refused() {
        assert_eq!(Keepalive::from_secs(0, 5).interval, None);
        assert_eq!(Keepalive::from_secs(0, 0).problem(), None);
        assert!(Keepalive::from_secs(3, 0).problem().is_some());
        let d = Keepalive::default();
        assert_eq!(d.interval, Some(Duration::from_secs(10)));
        assert_eq!(d.timeout, Duration::from_secs(10));
        assert_eq!(d.problem(), None);
    }
}
