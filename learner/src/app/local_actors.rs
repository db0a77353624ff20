//! Actor processes the learner spawns on its own host (`--local-actors`).
//!
//! Each runs `<this executable> actor <flags>` (or `--actor-bin <flags>`), so
//! the embedded default needs no second binary. A watcher task per child
//! reports an unexpected exit at once; on stop, each child gets SIGTERM (the
//! actor exits cleanly), and SIGKILL if it is still there after a grace
//! period. Signals are sent only by the watcher, while it still owns the
//! unreaped child, so a recycled pid is never signalled.
//!
//! When the learner serves TLS, local actors do not speak it: they connect
//! in plaintext to a unix socket in a private directory
//! ([`crate::app::Learner::local_actor_addr`]), so neither a certificate
//! for them nor a server name that matches the listen address is needed.
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;
use tokio::sync::{mpsc, oneshot};
use tracing::{info, warn};

use crate::app::config::SelfCommand;
use crate::error::LearnerError;
use crate::serve::transport::ListenAddr;

/// How long a child may take to exit after SIGTERM.
const TERM_GRACE: Duration = Duration::from_secs(3);

/// What every local actor is started with.
#[derive(Debug, Clone)]
pub struct LocalActorSpec {
    /// `None`: this program ([`LocalActorSpec::self_command`]) with the
    /// hidden `actor` subcommand.
    pub actor_bin: Option<PathBuf>,
    /// How this program runs itself; `None`: this executable.
    pub self_command: Option<SelfCommand>,
    /// Where they connect ([`crate::app::Learner::local_actor_addr`]).
    pub learner: ListenAddr,
    /// Actor flags besides `--learner`, `--actor-id` and `--seed`.
    pub args: Vec<String>,
    pub token: Option<seed_shared::Token>,
    pub seed: u64,
}

/// An actor process that exited on its own.
#[derive(Debug, Clone)]
pub struct ActorExit {
    pub index: usize,
    pub pid: u32,
    pub status: String,
    pub success: bool,
}

/// The running local actors.
pub struct LocalActors {
    stops: Vec<Option<oneshot::Sender<()>>>,
    watchers: Vec<tokio::task::JoinHandle<()>>,
    exits: mpsc::UnboundedReceiver<ActorExit>,
    alive: usize,
}

impl LocalActors {
    /// Spawns `n` actors.
    pub fn spawn(spec: &LocalActorSpec, n: usize) -> Result<Self, LearnerError> {
        let (program, self_args) = match (&spec.actor_bin, &spec.self_command) {
            (Some(p), _) => (p.clone(), Vec::new()),
            (None, Some(me)) => (me.program.clone(), me.args.clone()),
            (None, None) => (
                std::env::current_exe().map_err(|source| LearnerError::Io {
                    what: "finding the learner executable to spawn local actors".into(),
                    source,
                })?,
                Vec::new(),
            ),
        };
        let (exit_tx, exits) = mpsc::unbounded_channel();
        let mut stops = Vec::with_capacity(n);
        let mut watchers = Vec::with_capacity(n);
        for index in 0..n {
            let mut cmd = Command::new(&program);
            if spec.actor_bin.is_none() {
                cmd.args(&self_args).arg("actor");
            }
            cmd.arg("--learner")
                .arg(spec.learner.to_string())
                .arg("--actor-id")
                .arg(format!("local-{index}"))
                .arg("--seed")
                .arg(spec.seed.wrapping_add(index as u64 + 1).to_string())
                .args(&spec.args)
                .stdin(Stdio::null())
                .kill_on_drop(true);
            // The token goes through the environment, not argv (visible in ps).
            match &spec.token {
                Some(t) => cmd.env("SEED_TOKEN", t.reveal()),
                None => cmd.env_remove("SEED_TOKEN"),
            };
            let mut child = cmd.spawn().map_err(|source| LearnerError::Io {
                what: format!("spawning local actor {index} ({})", program.display()),
                source,
            })?;
            let pid = child.id().unwrap_or(0);
            info!(index, pid, "local actor started");
            let (stop_tx, stop_rx) = oneshot::channel::<()>();
            let exit_tx = exit_tx.clone();
            watchers.push(tokio::spawn(async move {
                tokio::select! {
                    status = child.wait() => {
                        let (status, success) = match status {
                            Ok(s) => (s.to_string(), s.success()),
                            Err(e) => (e.to_string(), false),
                        };
                        let _ = exit_tx.send(ActorExit { index, pid, status, success });
                    }
                    _ = stop_rx => {
                        // SAFETY: plain syscall; `pid` is our unreaped child
                        // (we still own `child` and have not waited on it).
                        unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
                        if tokio::time::timeout(TERM_GRACE, child.wait()).await.is_err() {
                            warn!(index, pid, "local actor ignored SIGTERM; killing it");
                            let _ = child.kill().await;
                        }
                    }
                }
            }));
            stops.push(Some(stop_tx));
        }
        Ok(LocalActors {
            stops,
            watchers,
            exits,
            alive: n,
        })
    }

    /// Actors not known to have exited.
    pub fn alive(&self) -> usize {
        self.alive
    }

    /// The next actor that exited on its own (pending forever if none does).
    pub async fn next_exit(&mut self) -> Option<ActorExit> {
        let exit = self.exits.recv().await?;
        self.alive = self.alive.saturating_sub(1);
        if let Some(stop) = self.stops.get_mut(exit.index) {
            stop.take();
        }
        Some(exit)
    }

    /// Stops every actor still running and waits for them.
    pub async fn stop(mut self) {
        for stop in self.stops.iter_mut() {
            if let Some(s) = stop.take() {
                let _ = s.send(());
            }
        }
        for w in self.watchers.drain(..) {
            let _ = w.await;
        }
    }
}
