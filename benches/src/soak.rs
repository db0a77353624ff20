//! The soak scenario of `liveness_bench`: real processes, training on.
//!
//! 1. `learner --local-actors 0` (training with its defaults) and
//!    `stable` actors that stay throughout;
//! 2. `kills` times: a victim actor joins, steps, and is SIGKILLed; the
//!    learner's live env slots must return to the stable actors' count
//!    each time (measured: how long that took);
//! 3. the learner is stopped (SIGINT) and started again on the same
//!    address with the stable actors attached; measured: seconds from the
//!    new learner's start until every stable actor is back (live slots),
//!    and until it trains again (learner steps rising).
//!
//! That no unroll mixes two runs under this churn is asserted by the test
//! `learner/tests/integration/soak.rs`, which can look inside the unrolls.
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde::Serialize;
use tracing::info;

use crate::child::ChildProcess;
use crate::error::HarnessError;
use crate::frozen_actor::StatusProbe;
use crate::scenario::wait_ready;
use crate::transport::Transport;

/// How long any one wait may take before the soak fails.
const WAIT: Duration = Duration::from_secs(60);

/// Settings of one soak.
#[derive(Debug, Clone, Serialize)]
pub struct SoakConfig {
    pub stable_actors: usize,
    pub envs: usize,
    pub kills: usize,
    pub transport: Transport,
}

/// What one soak measured.
#[derive(Debug, Clone, Serialize)]
pub struct SoakResult {
    pub kills: usize,
    /// Seconds from a victim's SIGKILL until the live slots were back to
    /// the stable count: median and max over the kills.
    pub slots_back_after_kill_median_s: f64,
    pub slots_back_after_kill_max_s: f64,
    /// Learner steps during the kills (it trained throughout).
    pub learner_steps_during_kills: u64,
    /// Seconds from the new learner's spawn until every stable actor was
    /// back, and until its first learner step.
    pub actors_back_after_restart_s: f64,
    pub training_after_restart_s: f64,
    /// Stream errors the learner counted during the kills (a killed
    /// connection is a transport error, counted).
    pub stream_errors: u64,
}

fn learner_cmd(bin: &Path, addr: &str) -> Command {
    let mut cmd = Command::new(bin);
    cmd.args(["--local-actors", "0", "--listen", addr])
        .args(["--progress-secs", "0"])
        .env("RAYON_NUM_THREADS", "1");
    cmd
}

fn actor_cmd(bin: &Path, addr: &str, envs: usize, id: &str, seed: usize) -> Command {
    let mut cmd = Command::new(bin);
    cmd.args(["--learner", addr])
        .args(["--envs", &envs.to_string()])
        .args(["--actor-id", id])
        .args(["--seed", &seed.to_string()]);
    cmd
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Runs the soak with logs in `dir`.
pub async fn run_soak(
    cfg: &SoakConfig,
    learner_bin: &Path,
    actor_bin: &Path,
    dir: &Path,
) -> Result<SoakResult, HarnessError> {
    std::fs::create_dir_all(dir)?;
    let addr = cfg.transport.allocate(dir, "learner")?;
    let mut learner = ChildProcess::spawn("learner-1", dir, &mut learner_cmd(learner_bin, &addr))?;
    wait_ready(&mut learner, &addr).await?;
    let mut probe = StatusProbe::connect(&addr).await?;
    let stable_slots = (cfg.stable_actors * cfg.envs) as u32;
    let mut stable = Vec::new();
    for i in 0..cfg.stable_actors {
        stable.push(ChildProcess::spawn(
            &format!("stable-{i}"),
            dir,
            &mut actor_cmd(actor_bin, &addr, cfg.envs, &format!("stable-{i}"), i),
        )?);
    }
    probe
        .wait_for("the stable actors", WAIT, |s| {
            s.live_env_slots == stable_slots
        })
        .await?;
    let steps_before = probe.get().await?.learner_steps;
    let mut back = Vec::with_capacity(cfg.kills);
    for k in 0..cfg.kills {
        let victim = ChildProcess::spawn(
            &format!("victim-{k}"),
            dir,
            &mut actor_cmd(actor_bin, &addr, cfg.envs, &format!("victim-{k}"), 1000 + k),
        )?;
        probe
            .wait_for("the victim", WAIT, |s| {
                s.live_env_slots == stable_slots + cfg.envs as u32
            })
            .await?;
        let env_steps = probe.get().await?.env_steps;
        probe
            .wait_for("steps with the victim in", WAIT, |s| {
                s.env_steps >= env_steps + 1_000
            })
            .await?;
        victim.signal(libc::SIGKILL);
        let killed = Instant::now();
        drop(victim);
        probe
            .wait_for("the victim's slots", WAIT, |s| {
                s.live_env_slots == stable_slots
            })
            .await?;
        back.push(killed.elapsed().as_secs_f64());
        if (k + 1) % 25 == 0 {
            info!(kills = k + 1, "soak");
        }
    }
    let after_kills = probe.get().await?;
    learner.signal(libc::SIGINT);
    learner.wait(WAIT).await?;

    let restarted = Instant::now();
    let mut learner = ChildProcess::spawn("learner-2", dir, &mut learner_cmd(learner_bin, &addr))?;
    wait_ready(&mut learner, &addr).await?;
    let mut probe = StatusProbe::connect(&addr).await?;
    probe
        .wait_for("the actors after the restart", WAIT, |s| {
            s.live_env_slots == stable_slots
        })
        .await?;
    let actors_back = restarted.elapsed().as_secs_f64();
    probe
        .wait_for("training after the restart", WAIT, |s| s.learner_steps > 0)
        .await?;
    let training_back = restarted.elapsed().as_secs_f64();
    drop(stable);
    learner.signal(libc::SIGINT);
    let _ = learner.wait(WAIT).await;
    Ok(SoakResult {
        kills: cfg.kills,
        slots_back_after_kill_median_s: median(back.clone()),
        slots_back_after_kill_max_s: back.iter().copied().fold(0.0, f64::max),
        learner_steps_during_kills: after_kills.learner_steps - steps_before,
        actors_back_after_restart_s: actors_back,
        training_after_restart_s: training_back,
        stream_errors: after_kills.stream_errors,
    })
}
