//! The frozen-actor scenario of `liveness_bench`: how much of its solo
//! throughput a good actor keeps when another actor freezes, and how long
//! the frozen actor's env slots stay leased.
//!
//! One trial, all real processes on this host:
//! 1. `learner --no-train --local-actors 0` with the settings under test;
//! 2. a good `actor` with K envs: after a warm-up its env steps/s are read
//!    from the learner's `Status` over a window (**solo**);
//! 3. a second actor with K envs joins, steps for a second, and is then
//!    stopped with SIGSTOP (a paused VM or a half-open connection looks the
//!    same to the learner: a peer that neither sends nor answers);
//! 4. one second after the freeze the good actor's rate is read over the same
//!    window (**beside frozen**); only the good actor steps by then, so the
//!    learner's env-step counter is its count;
//! 5. `Status` is polled until the live env slots are back to K: the frozen
//!    actor's stream was dropped (keepalive) and its slots freed.
//!
//! Children are SIGKILLed on drop (a stopped process dies of SIGKILL too).
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use seed_actor::learner_address::LearnerAddress;
use seed_shared::pb;
use seed_shared::pb::learner_client::LearnerClient;
use serde::Serialize;
use tonic::transport::Channel;
use tracing::info;

use crate::child::ChildProcess;
use crate::error::HarnessError;
use crate::scenario::wait_ready;
use crate::transport::Transport;

/// Poll interval of `Status` while waiting for slots or actors.
const POLL: Duration = Duration::from_millis(20);
/// How long an actor may take to connect.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// One trial's settings.
#[derive(Debug, Clone, Serialize)]
pub struct FrozenTrial {
    /// Envs per actor (both actors).
    pub envs: usize,
    /// Warm-up before each window.
    pub warmup: Duration,
    /// Length of each measuring window.
    pub window: Duration,
    /// Give up waiting for the frozen actor's slots after this long.
    pub free_timeout: Duration,
    /// Extra learner flags (the setting under test, e.g. `--actor-idle-ms 0`).
    pub learner_flags: Vec<String>,
    /// Extra flags for both actors (e.g. keepalive).
    pub actor_flags: Vec<String>,
    pub transport: Transport,
}

/// One trial's figures.
#[derive(Debug, Clone, Serialize)]
pub struct FrozenResult {
    pub learner_flags: Vec<String>,
    /// The good actor alone, env steps/s.
    pub solo_env_steps_per_s: f64,
    /// The good actor from 1 s after the other froze, env steps/s.
    pub beside_frozen_env_steps_per_s: f64,
    /// `beside_frozen / solo`.
    pub kept_fraction: f64,
    /// Seconds from the freeze until the live env slots were back to the
    /// good actor's; `None` if not within `free_timeout`.
    pub slots_freed_after_s: Option<f64>,
}

/// The learner's `Status`, over one channel reused across polls.
pub(crate) struct StatusProbe {
    client: LearnerClient<Channel>,
}

impl StatusProbe {
    pub(crate) async fn connect(addr: &str) -> Result<Self, HarnessError> {
        let address = LearnerAddress::parse(addr)
            .map_err(|e| HarnessError::Config(format!("address {addr}: {e}")))?;
        let channel = address
            .connect()
            .await
            .map_err(|e| HarnessError::Config(format!("connect {addr}: {e}")))?;
        Ok(StatusProbe {
            client: LearnerClient::new(channel),
        })
    }

    pub(crate) async fn get(&mut self) -> Result<pb::StatusReply, HarnessError> {
        self.client
            .status(pb::StatusRequest {})
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| HarnessError::Config(format!("Status: {s}")))
    }

    /// Polls until `cond` holds; `Err` after `timeout`.
    pub(crate) async fn wait_for(
        &mut self,
        what: &str,
        timeout: Duration,
        cond: impl Fn(&pb::StatusReply) -> bool,
    ) -> Result<Duration, HarnessError> {
        let started = Instant::now();
        loop {
            if cond(&self.get().await?) {
                return Ok(started.elapsed());
            }
            if started.elapsed() > timeout {
                return Err(HarnessError::Config(format!(
                    "timed out after {timeout:?} waiting for {what}"
                )));
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Env steps/s over `window`, from the learner's own counters.
    async fn rate(&mut self, window: Duration) -> Result<f64, HarnessError> {
        let a = self.get().await?;
        tokio::time::sleep(window).await;
        let b = self.get().await?;
        let secs = b.uptime_seconds - a.uptime_seconds;
        Ok((b.env_steps - a.env_steps) as f64 / secs.max(1e-9))
    }
}

fn actor_cmd(bin: &Path, addr: &str, trial: &FrozenTrial, id: &str) -> Command {
    let mut cmd = Command::new(bin);
    cmd.args(["--learner", addr])
        .args(["--envs", &trial.envs.to_string()])
        .args(["--actor-id", id])
        .args(&trial.actor_flags);
    cmd
}

/// Runs one trial with logs in `dir`.
pub async fn run_frozen_trial(
    trial: &FrozenTrial,
    learner_bin: &Path,
    actor_bin: &Path,
    dir: &Path,
) -> Result<FrozenResult, HarnessError> {
    std::fs::create_dir_all(dir)?;
    let addr = trial.transport.allocate(dir, "learner")?;
    let mut cmd = Command::new(learner_bin);
    cmd.args(["--no-train", "--local-actors", "0", "--listen", &addr])
        .args(["--progress-secs", "0"])
        .args(&trial.learner_flags)
        .env("RAYON_NUM_THREADS", "1");
    let mut learner = ChildProcess::spawn("learner", dir, &mut cmd)?;
    wait_ready(&mut learner, &addr).await?;
    let mut probe = StatusProbe::connect(&addr).await?;
    let k = trial.envs as u32;

    let _good = ChildProcess::spawn("good", dir, &mut actor_cmd(actor_bin, &addr, trial, "good"))?;
    probe
        .wait_for("the good actor", CONNECT_TIMEOUT, |s| {
            s.live_env_slots == k && s.env_steps > 0
        })
        .await?;
    tokio::time::sleep(trial.warmup).await;
    let solo = probe.rate(trial.window).await?;

    let frozen = ChildProcess::spawn(
        "frozen",
        dir,
        &mut actor_cmd(actor_bin, &addr, trial, "frozen"),
    )?;
    probe
        .wait_for("the second actor", CONNECT_TIMEOUT, |s| {
            s.live_env_slots == 2 * k
        })
        .await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    frozen.signal(libc::SIGSTOP);
    let frozen_at = Instant::now();
    info!("second actor frozen (SIGSTOP)");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let beside = probe.rate(trial.window).await?;
    let left = trial.free_timeout.saturating_sub(frozen_at.elapsed());
    let freed = probe
        .wait_for("the frozen actor's slots", left, |s| s.live_env_slots == k)
        .await
        .ok()
        .map(|_| frozen_at.elapsed().as_secs_f64());
    drop(frozen);
    learner.signal(libc::SIGINT);
    let _ = learner.wait(Duration::from_secs(10)).await;
    Ok(FrozenResult {
        learner_flags: trial.learner_flags.clone(),
        solo_env_steps_per_s: solo,
        beside_frozen_env_steps_per_s: beside,
        kept_fraction: beside / solo.max(1e-9),
        slots_freed_after_s: freed,
    })
}
