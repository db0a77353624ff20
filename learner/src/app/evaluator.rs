//! [`Evaluator`]: `--eval-every N`, the policy played while it trains.
//!
//! Every `N` learner steps the training thread hands a copy of its weights
//! (with their counters) to this thread, which plays `--eval-episodes`
//! greedy episodes of them on the learner's own env ([`eval::play`]: the
//! same envs, side by side, as `learner eval`), episode `i` reset with
//! [`EVAL_SEED`]` + i` every time, so evaluations differ only by the
//! weights. Nothing of it is trained on. The best mean return so far is
//! kept as a policy checkpoint in `RUN_DIR/best/` (weights, config,
//! counters and `eval.json`; see [`checkpoint::save_policy`]); every
//! evaluation goes to the run monitor ([`Metrics::push_evaluation`]:
//! TensorBoard's `eval/*`, a log line).
//!
//! A resumed run starts from the best return its `best/eval.json` records,
//! so `best/` only moves to a better policy.
//!
//! Why a thread of its own: episodes take far longer than a training step;
//! the trainer only copies its weights (a few hundred KB for the MinAtar
//! torso) and goes on. While an evaluation runs, the next one due is
//! skipped rather than queued.
//!
//! Cost: one weights copy per `N` steps on the training thread; the
//! episodes on this thread (one batched forward per step of the longest
//! episode, on one core).
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;

use candle_core::Tensor;
use seed_env::EnvConfig;
use serde::{Deserialize, Serialize};
use tracing::{debug, warn};

use crate::app::eval::{self, EvalConfig, EvalPolicy};
use crate::app::policy::Policy;
use crate::error::LearnerError;
use crate::learn::checkpoint::{self, CheckpointConfig, CheckpointState, LoadedCheckpoint};
use crate::metrics::{Evaluation, Metrics};

/// Episode `i` of every evaluation is reset with this seed plus `i` (apart
/// from the actors' seeds, which start at `--seed`).
pub const EVAL_SEED: u64 = 1_000_000;

/// Episodes per evaluation (`--eval-episodes`, and `python -m
/// seed_rs.actor --eval`'s).
pub const DEFAULT_EVAL_EPISODES: usize = 10;

/// The best policy's directory in a run directory.
pub const BEST_DIR: &str = "best";

/// What `best/eval.json` records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BestRecord {
    pub mean_return: f64,
    pub returns: Vec<f64>,
    pub episodes: usize,
    pub learner_steps: u64,
    pub policy_version: u64,
    pub env_steps: u64,
}

struct Candidate {
    weights: HashMap<String, Tensor>,
    state: CheckpointState,
}

/// Hands weights to the evaluation thread (see the module docs).
pub struct Evaluator {
    tx: Option<SyncSender<Candidate>>,
    thread: Option<JoinHandle<()>>,
    every: u64,
    next: u64,
}

impl Evaluator {
    /// Starts the evaluation thread for `env` (the learner's own), keeping
    /// the best policy in `run_dir/best/`; evaluations every `every`
    /// learner steps from `learner_steps` on.
    pub fn start(
        env: EnvConfig,
        config: CheckpointConfig,
        run_dir: &Path,
        episodes: usize,
        every: u64,
        learner_steps: u64,
        metrics: Arc<Metrics>,
    ) -> Result<Self, LearnerError> {
        let (tx, rx) = mpsc::sync_channel(1);
        let best_dir = run_dir.join(BEST_DIR);
        let thread = std::thread::Builder::new()
            .name("evaluator".into())
            .spawn(move || evaluate_each(rx, env, config, best_dir, episodes, metrics))
            .map_err(|e| LearnerError::Io {
                what: "starting the evaluator thread".into(),
                source: e,
            })?;
        Ok(Evaluator {
            tx: Some(tx),
            thread: Some(thread),
            every: every.max(1),
            next: learner_steps + every.max(1),
        })
    }

    /// Called between training steps: when an evaluation is due, copies
    /// `weights()` with `state` to the thread (skipped while it is busy).
    pub fn maybe_send(
        &mut self,
        learner_steps: u64,
        weights: impl FnOnce() -> candle_core::Result<HashMap<String, Tensor>>,
        state: impl FnOnce() -> CheckpointState,
    ) {
        if learner_steps < self.next {
            return;
        }
        self.next = learner_steps + self.every;
        let Some(tx) = &self.tx else { return };
        let weights = match weights() {
            Ok(w) => w,
            Err(e) => {
                warn!(error = %e, "evaluation skipped: the weights could not be copied");
                return;
            }
        };
        match tx.try_send(Candidate {
            weights,
            state: state(),
        }) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                debug!(
                    learner_steps,
                    "evaluation skipped: the previous one still runs"
                )
            }
            Err(TrySendError::Disconnected(_)) => self.tx = None,
        }
    }
}

impl Drop for Evaluator {
    /// Ends the thread after the evaluation it runs, if any.
    fn drop(&mut self) {
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The best mean return `best_dir/eval.json` records, if any.
fn recorded_best(best_dir: &Path) -> Option<f64> {
    let text = std::fs::read_to_string(best_dir.join("eval.json")).ok()?;
    serde_json::from_str::<BestRecord>(&text)
        .ok()
        .map(|r| r.mean_return)
}

fn evaluate_each(
    rx: Receiver<Candidate>,
    env: EnvConfig,
    config: CheckpointConfig,
    best_dir: PathBuf,
    episodes: usize,
    metrics: Arc<Metrics>,
) {
    let mut best = recorded_best(&best_dir).unwrap_or(f64::NEG_INFINITY);
    let eval_config = EvalConfig {
        episodes: episodes.max(1),
        seed: EVAL_SEED,
        policy: EvalPolicy::Greedy,
        ..EvalConfig::default()
    };
    for c in rx {
        let ckpt = LoadedCheckpoint {
            dir: best_dir.clone(),
            state: c.state,
            config: config.clone(),
        };
        let played = Policy::from_parts(ckpt, c.weights.clone())
            .map_err(|e| LearnerError::Config(e.to_string()))
            .and_then(|mut policy| eval::play(&mut policy, &env, &eval_config));
        let report = match played {
            Ok(r) => r,
            Err(e) => {
                warn!(error = %e, learner_steps = c.state.learner_steps, "evaluation failed");
                continue;
            }
        };
        let mut is_best = false;
        if report.mean_return > best {
            let record = BestRecord {
                mean_return: report.mean_return,
                returns: report.returns.clone(),
                episodes: report.episodes,
                learner_steps: c.state.learner_steps,
                policy_version: c.state.policy_version,
                env_steps: c.state.env_steps,
            };
            let text = serde_json::to_string_pretty(&record).unwrap_or_default() + "\n";
            match checkpoint::save_policy(
                &best_dir,
                &c.weights,
                &c.state,
                &config,
                &[("eval.json", text)],
            ) {
                Ok(()) => {
                    best = report.mean_return;
                    is_best = true;
                }
                Err(e) => warn!(error = %e, dir = %best_dir.display(), "best policy not written"),
            }
        }
        metrics.push_evaluation(Evaluation {
            learner_steps: c.state.learner_steps,
            policy_version: c.state.policy_version,
            env_steps: c.state.env_steps,
            episodes: report.episodes,
            mean_return: report.mean_return,
            min_return: report.min_return,
            max_return: report.max_return,
            best: is_best,
        });
    }
}
