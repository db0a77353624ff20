//! [`ChildProcess`]: a learner, actor or echo server started by the harness,
//! killed when dropped (so an error or Ctrl-C never leaves one behind), and
//! reaped with `wait4` so its CPU time (user + system) is known.
//!
//! Each child's stdout and stderr go to `<run dir>/<name>.log`; errors name
//! that file. Waiting polls `wait4(WNOHANG)` every few milliseconds: the
//! harness is not latency-sensitive while it waits for a process to exit,
//! and polling keeps std's `Child` from reaping the pid before we read its
//! rusage.
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tracing::{debug, warn};

use crate::error::HarnessError;

/// How often [`ChildProcess::wait`] checks whether the child has exited.
const POLL: Duration = Duration::from_millis(5);

/// How a reaped child ended.
#[derive(Debug, Clone, Copy)]
pub struct Exited {
    /// Exit code, or `None` if a signal ended it.
    pub code: Option<i32>,
    /// Signal that ended it, if any.
    pub signal: Option<i32>,
    /// User plus system CPU time over the child's whole life.
    pub cpu: Duration,
}

impl Exited {
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }

    fn describe(&self) -> String {
        match (self.code, self.signal) {
            (Some(c), _) => format!("exit code {c}"),
            (None, Some(s)) => format!("signal {s}"),
            (None, None) => "unknown status".into(),
        }
    }
}

/// A running child process; SIGKILLed and reaped on drop unless already reaped.
pub struct ChildProcess {
    name: String,
    log: PathBuf,
    child: Child,
    reaped: bool,
}

impl ChildProcess {
    /// Starts `cmd` with stdout and stderr appended to `dir/name.log`.
    pub fn spawn(name: &str, dir: &Path, cmd: &mut Command) -> Result<Self, HarnessError> {
        let log = dir.join(format!("{name}.log"));
        let out = File::create(&log)?;
        let err = out.try_clone()?;
        let program = PathBuf::from(cmd.get_program());
        debug!(name, ?cmd, "spawning");
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|source| HarnessError::Spawn {
                name: name.to_owned(),
                program,
                source,
            })?;
        Ok(ChildProcess {
            name: name.to_owned(),
            log,
            child,
            reaped: false,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn log(&self) -> &Path {
        &self.log
    }

    /// The child's process id (for `/proc` readings).
    pub fn pid(&self) -> libc::pid_t {
        self.child.id() as libc::pid_t
    }

    /// Context switches (voluntary and involuntary) of every thread of the
    /// child so far ([`context_switches`]).
    pub fn context_switches(&self) -> u64 {
        context_switches(self.pid() as u32)
    }

    /// Sends `signal` (e.g. `libc::SIGINT`); a child already gone is not an error.
    pub fn signal(&self, signal: libc::c_int) {
        if self.reaped {
            return;
        }
        // SAFETY: kill(2) with a pid we spawned and have not reaped, so it
        // cannot have been reused by another process.
        unsafe {
            libc::kill(self.pid(), signal);
        }
    }

    /// Reaps the child if it has exited (`WNOHANG`), with its rusage.
    pub fn try_reap(&mut self) -> Result<Option<Exited>, HarnessError> {
        if self.reaped {
            return Err(HarnessError::Config(format!("{} reaped twice", self.name)));
        }
        let mut status: libc::c_int = 0;
        // SAFETY: an all-zero rusage is a valid value of this plain C struct.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: both pointers are to live locals of the right types; the
        // pid is our unreaped child.
        let r = unsafe { libc::wait4(self.pid(), &mut status, libc::WNOHANG, &mut usage) };
        if r < 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        if r == 0 {
            return Ok(None);
        }
        self.reaped = true;
        let tv = |t: libc::timeval| {
            Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
        };
        Ok(Some(Exited {
            code: libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)),
            signal: libc::WIFSIGNALED(status).then(|| libc::WTERMSIG(status)),
            cpu: tv(usage.ru_utime) + tv(usage.ru_stime),
        }))
    }

    /// Waits up to `timeout` for the child to exit; after that it is killed
    /// and [`HarnessError::ChildTimeout`] returned.
    pub async fn wait(&mut self, timeout: Duration) -> Result<Exited, HarnessError> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(exited) = self.try_reap()? {
                return Ok(exited);
            }
            if Instant::now() >= deadline {
                warn!(name = %self.name, "did not exit in time; killing it");
                self.kill();
                return Err(HarnessError::ChildTimeout {
                    name: self.name.clone(),
                    seconds: timeout.as_secs_f64(),
                    log: self.log.clone(),
                });
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Like [`wait`](Self::wait), but a failure exit status is an error too.
    pub async fn wait_success(&mut self, timeout: Duration) -> Result<Exited, HarnessError> {
        let exited = self.wait(timeout).await?;
        if exited.success() {
            Ok(exited)
        } else {
            Err(self.failed(&exited))
        }
    }

    /// The error for a child that ended with `exited` when it should not have.
    pub fn failed(&self, exited: &Exited) -> HarnessError {
        HarnessError::ChildFailed {
            name: self.name.clone(),
            status: exited.describe(),
            log: self.log.clone(),
        }
    }

    /// SIGKILL and a blocking reap (a killed process exits at once).
    fn kill(&mut self) {
        if self.reaped {
            return;
        }
        self.signal(libc::SIGKILL);
        let mut status: libc::c_int = 0;
        // SAFETY: our unreaped child; blocking is bounded because SIGKILL
        // cannot be caught.
        unsafe {
            libc::waitpid(self.pid(), &mut status, 0);
        }
        self.reaped = true;
    }
}

impl Drop for ChildProcess {
    fn drop(&mut self) {
        if !self.reaped {
            debug!(name = %self.name, "killing leftover child");
            self.kill();
        }
    }
}

/// Context switches (voluntary and involuntary) of every thread of process
/// `pid` so far, from `/proc/<pid>/task/*/status`; 0 where unreadable (not
/// Linux, or already reaped). Threads that exited are not counted.
pub fn context_switches(pid: u32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("status")).ok())
        .map(|status| {
            status
                .lines()
                .filter(|l| {
                    l.starts_with("voluntary_ctxt_switches")
                        || l.starts_with("nonvoluntary_ctxt_switches")
                })
                .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                .sum::<u64>()
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn exit_status_and_cpu_time_are_reported() {
        let dir = tempfile::tempdir().unwrap();
        let mut ok = ChildProcess::spawn("ok", dir.path(), Command::new("true").arg("x")).unwrap();
        let exited = ok.wait_success(Duration::from_secs(30)).await.unwrap();
        assert_eq!(exited.code, Some(0));

        let mut bad = ChildProcess::spawn("bad", dir.path(), &mut Command::new("false")).unwrap();
        let err = bad.wait_success(Duration::from_secs(30)).await.unwrap_err();
        assert!(matches!(err, HarnessError::ChildFailed { .. }), "{err}");
        assert!(err.to_string().contains("bad.log"), "{err}");
    }

    #[tokio::test]
    async fn signalled_and_dropped_children_are_reaped() {
        let dir = tempfile::tempdir().unwrap();
        let mut sleeper =
            ChildProcess::spawn("sleep", dir.path(), Command::new("sleep").arg("600")).unwrap();
        sleeper.signal(libc::SIGTERM);
        let exited = sleeper.wait(Duration::from_secs(30)).await.unwrap();
        assert_eq!(exited.signal, Some(libc::SIGTERM));

        let dropped =
            ChildProcess::spawn("sleep2", dir.path(), Command::new("sleep").arg("600")).unwrap();
        let pid = dropped.pid();
        drop(dropped);
        // SAFETY: signal 0 only checks existence; the pid was reaped on drop.
        let alive = unsafe { libc::kill(pid, 0) } == 0;
        assert!(!alive, "dropped child {pid} still exists");
    }
}
