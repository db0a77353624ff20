//! What `/proc` says of one process: resident memory (now and peak),
//! threads, open file descriptors, CPU seconds, and of its file pages
//! those mapped with 2 MiB pages.
//!
//! The benchmarks read their children through this (the stream load's
//! learner, the hour soak's learner and replay server) rather than each
//! parsing `/proc` its own way. A process that has exited reads as zeros.
use serde::Serialize;

/// One reading of a process.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct ProcStats {
    /// `VmRSS`, MiB.
    pub rss_mib: f64,
    /// `VmHWM` (peak resident), MiB.
    pub hwm_mib: f64,
    /// `RssAnon`: the resident part of the process's own memory, MiB.
    pub rss_anon_mib: f64,
    /// `RssFile`: pages of mapped files resident in the page cache and
    /// mapped by the process (a memory-mapped table's), MiB.
    pub rss_file_mib: f64,
    pub threads: usize,
    /// Entries of `/proc/<pid>/fd`.
    pub fds: usize,
    /// User + system CPU seconds so far.
    pub cpu_seconds: f64,
}

impl ProcStats {
    /// Reads `pid` now.
    pub fn read(pid: libc::pid_t) -> Self {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let field = |name: &str| kib_field(&status, name).unwrap_or(0.0);
        ProcStats {
            rss_mib: field("VmRSS:") / 1024.0,
            hwm_mib: field("VmHWM:") / 1024.0,
            rss_anon_mib: field("RssAnon:") / 1024.0,
            rss_file_mib: field("RssFile:") / 1024.0,
            threads: field("Threads:") as usize,
            fds: std::fs::read_dir(format!("/proc/{pid}/fd"))
                .map(|d| d.count())
                .unwrap_or(0),
            cpu_seconds: cpu_seconds(pid),
        }
    }
}

/// The kB figure of the line starting with `name` in a `/proc` table
/// (`status`, `smaps_rollup`).
fn kib_field(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(name))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<f64>().ok())
}

/// Of `pid`'s file pages, those mapped with 2 MiB pages, MiB: the
/// `FilePmdMapped` line of `/proc/<pid>/smaps_rollup` (Linux 4.14+), which
/// says whether a memory-mapped table's huge-page advice took; `None`
/// where the kernel does not say.
pub fn file_huge_mib(pid: libc::pid_t) -> Option<f64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    kib_field(&text, "FilePmdMapped:").map(|kib| kib / 1024.0)
}

/// User + system CPU seconds of `pid` so far (`/proc/<pid>/stat`).
pub fn cpu_seconds(pid: libc::pid_t) -> f64 {
    let ticks = clock_ticks();
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            // Fields after the `(comm)`: utime is the 14th field, stime the 15th.
            let rest = &s[s.rfind(')')? + 2..];
            let f: Vec<&str> = rest.split_whitespace().collect();
            Some((f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?) / ticks)
        })
        .unwrap_or(0.0)
}

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`).
fn clock_ticks() -> f64 {
    // SAFETY: sysconf only reads a configuration value.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// Least-squares slope of `ys` against `xs` (units of y per unit of x);
/// 0 for fewer than two points.
pub fn slope(xs: &[f64], ys: &[f64]) -> f64 {
    let n = xs.len().min(ys.len());
    if n < 2 {
        return 0.0;
    }
    let mx = xs[..n].iter().sum::<f64>() / n as f64;
    let my = ys[..n].iter().sum::<f64>() / n as f64;
    let (mut sxy, mut sxx) = (0.0, 0.0);
    for i in 0..n {
        sxy += (xs[i] - mx) * (ys[i] - my);
        sxx += (xs[i] - mx) * (xs[i] - mx);
    }
    if sxx == 0.0 {
        0.0
    } else {
        sxy / sxx
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_reads_as_alive() {
        let s = ProcStats::read(std::process::id() as libc::pid_t);
        assert!(s.rss_mib > 0.0 && s.hwm_mib >= s.rss_mib);
        assert!(s.threads >= 1 && s.fds >= 1);
    }

    #[test]
    fn a_kib_figure_is_read_from_its_own_line() {
        let rollup = "Rss:             1048576 kB\nShmemPmdMapped:        0 kB\n\
                      FilePmdMapped:    524288 kB\nShared_Hugetlb:        0 kB\n";
        assert_eq!(kib_field(rollup, "FilePmdMapped:"), Some(524288.0));
        assert_eq!(kib_field(rollup, "Rss:"), Some(1048576.0));
        assert_eq!(kib_field("Rss: 4 kB\n", "FilePmdMapped:"), None);
    }

    #[test]
    fn slope_of_a_line_and_of_a_flat_series() {
        let xs = [10.0, 20.0, 30.0, 40.0];
        assert!((slope(&xs, &[1.0, 3.0, 5.0, 7.0]) - 0.2).abs() < 1e-12);
        assert_eq!(slope(&xs, &[4.0; 4]), 0.0);
        assert_eq!(slope(&xs[..1], &[1.0]), 0.0);
    }
}
