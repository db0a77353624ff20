//! [`raise_open_files_limit`]: a server's open-files limit raised to what
//! the system allows, once at start-up.
//!
//! Why: every actor stream (or replay client) is a socket, one file
//! descriptor, and most Linux systems start a process with a soft limit of
//! 1,024 under a hard limit of 524,288: a learner left at the soft limit
//! refuses connections past about a thousand streams, with nothing in its
//! own log saying why. Raising the soft limit to the hard one is what the
//! hard one is for (no privilege needed); what is left is reported so a
//! limit that is still low is named (`ulimit -n`) before the first stream
//! is refused. Cost: two system calls.

/// The open-files limit before and after [`raise_open_files_limit`]
/// (`rlim_t` is `u64` on the Linux targets this builds for).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenFilesLimit {
    /// The soft limit the process started with.
    pub before: u64,
    /// The soft limit now.
    pub now: u64,
    /// The hard limit (the most `now` could be).
    pub hard: u64,
}

/// File descriptors a server keeps for itself (listeners, logs, maps, the
/// runtime's), counted against the limit before any stream.
pub const RESERVED_FDS: u64 = 64;

impl OpenFilesLimit {
    /// Streams (one socket each) the limit leaves room for.
    pub fn streams(&self) -> u64 {
        self.now.saturating_sub(RESERVED_FDS)
    }
}

/// Raises `RLIMIT_NOFILE`'s soft limit to its hard limit.
pub fn raise_open_files_limit() -> std::io::Result<OpenFilesLimit> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `getrlimit` writes one `rlimit` through a valid pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let before = lim.rlim_cur;
    if lim.rlim_cur < lim.rlim_max {
        lim.rlim_cur = lim.rlim_max;
        // SAFETY: `setrlimit` reads one `rlimit` through a valid pointer.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(OpenFilesLimit {
        before,
        now: lim.rlim_cur,
        hard: lim.rlim_max,
    })
}

/// Logs the limit: at `info` as it is, and a warning naming `ulimit -n`
/// when it leaves room for fewer than `want_streams` streams.
pub fn report_open_files_limit(what: &str, want_streams: u64) {
    match raise_open_files_limit() {
        Ok(l) if l.streams() < want_streams => tracing::warn!(
            soft = l.now,
            hard = l.hard,
            "{what}: the open-files limit ({}) leaves room for about {} streams; \
             connections past it will be refused: raise the hard limit (`ulimit -Hn`, \
             or LimitNOFILE= under systemd) and the soft one (`ulimit -n`)",
            l.now,
            l.streams()
        ),
        Ok(l) => tracing::info!(
            before = l.before,
            now = l.now,
            "{what}: open-files limit {} (room for about {} streams)",
            l.now,
            l.streams()
        ),
        Err(e) => tracing::warn!(error = %e, "{what}: cannot read or raise the open-files limit"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn soft_and_hard() -> (u64, u64) {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: as above.
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
        (lim.rlim_cur, lim.rlim_max)
    }

    #[test]
    fn the_soft_limit_is_raised_to_the_hard_one() {
        let (_, hard) = soft_and_hard();
        // Start below the hard limit, as a login shell's default does.
        let low = libc::rlimit {
            rlim_cur: hard.min(256),
            rlim_max: hard,
        };
        // SAFETY: as above.
        assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &low) }, 0);
        let l = raise_open_files_limit().unwrap();
        assert_eq!(l.before, hard.min(256));
        assert_eq!((l.now, l.hard), (hard, hard));
        assert_eq!(soft_and_hard(), (hard, hard));
        assert_eq!(l.streams(), hard.saturating_sub(RESERVED_FDS));
        // Already at the hard limit: nothing to do, the same answer.
        assert_eq!(raise_open_files_limit().unwrap().before, hard);
    }
}
