//! [`TrainConfig`]: the learning side's settings (unrolls, replay, loss and
//! optimizer, checkpoints), their defaults and checks. Part of
//! `crate::app::LearnerConfig`; recorded in each checkpoint's `config.json`.
use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use crate::error::LearnerError;
use crate::learn::algo::{ImpalaLossConfig, VTraceClip};
use crate::learn::optimizer::{AdamConfig, Algorithm, LrSchedule, OptimizerConfig};
use crate::learn::train::TrainerConfig;

/// The learning side: unrolls, replay, model, loss and optimizer, checkpoints.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrainConfig {
    /// T: transitions per unroll (`--unroll-length`).
    pub unroll_length: usize,
    /// B: unrolls per batch (`--batch-size`).
    pub batch_size: usize,
    /// Loss, optimizer and gradient clip.
    pub trainer: TrainerConfig,
    /// Replay capacity, reuse and backpressure.
    pub replay: ReplaySettings,
    /// `--prefetch-threads`.
    pub prefetch_threads: usize,
    /// `--prefetch-depth`.
    pub prefetch_depth: usize,
    /// `--checkpoint-secs`, `--resume`.
    pub checkpoints: CheckpointSettings,
}

/// How unrolls are stored and reused.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplaySettings {
    /// `--replay-ratio`: updates per collated batch (1 = consume once).
    pub ratio: u32,
    /// `--replay-capacity` in unrolls; `None`: one batch.
    pub capacity: Option<usize>,
    /// `--insert-timeout-ms`: how long inference waits on a full buffer.
    pub insert_timeout: Duration,
    /// `--max-policy-lag`: drop sampled unrolls older than this many versions.
    pub max_policy_lag: Option<u64>,
}

/// How often the run is saved, and where it resumes from (the directory
/// saved into is the run directory, `crate::app::LearnerConfig::run_dir`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckpointSettings {
    /// `--checkpoint-secs`.
    pub every: Duration,
    /// `--resume`: continue from the newest checkpoint here.
    pub resume: Option<PathBuf>,
}

impl Default for TrainConfig {
    fn default() -> Self {
        TrainConfig {
            unroll_length: 16,
            batch_size: 16,
            trainer: TrainerConfig {
                loss: ImpalaLossConfig {
                    discount: 0.99,
                    baseline_cost: 0.5,
                    entropy_cost: 0.01,
                    reward_scale: 1.0,
                    clip: VTraceClip {
                        rho: 1.0,
                        c: 1.0,
                        pg_rho: 1.0,
                    },
                },
                optimizer: OptimizerConfig {
                    algorithm: Algorithm::Adam(AdamConfig::default()),
                    schedule: LrSchedule::Constant { lr: 2e-3 },
                },
                max_grad_norm: 40.0,
            },
            replay: ReplaySettings {
                ratio: 4,
                capacity: None,
                insert_timeout: Duration::from_millis(5000),
                max_policy_lag: None,
            },
            prefetch_threads: 1,
            prefetch_depth: 1,
            checkpoints: CheckpointSettings {
                every: Duration::from_secs(60),
                resume: None,
            },
        }
    }
}

impl TrainConfig {
    /// Replay capacity in unrolls: `--replay-capacity`, at least one batch.
    pub fn replay_capacity(&self) -> usize {
        self.replay
            .capacity
            .unwrap_or(self.batch_size)
            .max(self.batch_size)
    }

    /// The initial learning rate.
    pub fn learning_rate(&self) -> f64 {
        self.trainer.optimizer.schedule.lr_at(0)
    }

    /// Refuses settings that cannot train, naming the flag.
    pub fn validate(&self) -> Result<(), LearnerError> {
        let bad = |m: &str| Err(LearnerError::Config(m.into()));
        let t = &self.trainer;
        if self.unroll_length == 0 {
            return bad("--unroll-length must be at least 1");
        }
        if self.batch_size == 0 {
            return bad("--batch-size must be at least 1");
        }
        if self.replay.ratio == 0 {
            return bad("--replay-ratio must be at least 1");
        }
        let lr = match t.optimizer.schedule {
            LrSchedule::Constant { lr } => lr,
            LrSchedule::LinearDecay { initial, .. } => initial,
        };
        if !(lr.is_finite() && lr > 0.0) {
            return bad("--learning-rate must be positive");
        }
        if !(t.max_grad_norm.is_finite() && t.max_grad_norm > 0.0) {
            return bad("--max-grad-norm must be positive");
        }
        if !(0.0..=1.0).contains(&t.loss.discount) {
            return bad("--discount must be in [0, 1]");
        }
        if !(t.loss.reward_scale.is_finite() && t.loss.reward_scale > 0.0) {
            return bad("--reward-scale must be positive");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replay_capacity_is_at_least_one_batch() {
        let mut t = TrainConfig::default();
        assert_eq!(t.replay_capacity(), t.batch_size);
        t.replay.capacity = Some(1);
        assert_eq!(t.replay_capacity(), t.batch_size);
        t.replay.capacity = Some(100);
        assert_eq!(t.replay_capacity(), 100);
    }
}
