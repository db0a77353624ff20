//! [`Trainer`]: one training step on a prefetched batch, the same for every
//! algorithm, followed by a weights publish for inference.
//!
//! Per step ([`Trainer::step`]):
//! 1. the policy lag of every unroll in the batch (`version before the
//!    step − oldest version in the unroll`), mean and max;
//! 2. the algorithm's loss ([`AgentStep::loss`]: V-trace's in
//!    `learn/vtrace/`, R2D2's in `learn/r2d2/`, the one `--algo` chose,
//!    built by [`Agent::step`]);
//! 3. backward, then the global gradient norm clipped; non-finite
//!    gradients skip the update (counted, the weights unchanged);
//! 4. Adam or RMSProp (optional LR schedule), then the algorithm's
//!    [`AgentStep::after_update`] (R2D2's target network refresh);
//! 5. a frozen snapshot published through the [`WeightsHandle`] (one
//!    pointer swap: inference never waits for it), of the weights or, with
//!    `--acting-average`, of their moving average ([`ActingAverage`]), and
//!    the new version told to the replay buffer (for its policy-lag cap).
//!
//! The trainer names no algorithm: it calls the chosen one through
//! [`AgentStep`]. Its counters are in `learn/trainer_stats.rs`, its thread
//! in `learn/training_thread.rs`.
//!
//! Cost per step: the algorithm's forward passes and loss, one backward
//! over `(T+1)·B` rows, one snapshot copy of the weights, a few scalars read
//! back for logging.
use std::sync::Arc;
use std::time::Duration;

use crate::error::LearnerError;
use crate::learn::acting_average::ActingAverage;
use crate::learn::agent::Agent;
use crate::learn::agent_step::AgentStep;
use crate::learn::optimizer::{Optimizer, OptimizerConfig, OptimizerError};
use crate::learn::prefetch::TrainBatch;
use crate::learn::vtrace::ImpalaLossConfig;
use crate::model::weights::{PolicyVersion, WeightsHandle};
use crate::model::TrainableModel;
use crate::unroll_store::UnrollStore;

/// What the trainer needs besides the model.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct TrainerConfig {
    /// V-trace or R2D2 (`--algo`).
    pub agent: Agent,
    /// The IMPALA loss (V-trace only; R2D2's γ and reward scale are in its
    /// own config).
    pub loss: ImpalaLossConfig,
    pub optimizer: OptimizerConfig,
    /// Global gradient norm bound.
    pub max_grad_norm: f32,
    /// τ of the moving average of the weights that inference acts with
    /// (`learn/acting_average.rs`); 0 publishes the latest weights.
    pub acting_average: f32,
}

impl TrainerConfig {
    /// γ of the return the algorithm learns.
    pub fn discount(&self) -> f32 {
        self.agent
            .r2d2()
            .map_or(self.loss.discount, |r2d2| r2d2.discount)
    }
}

/// Why a training step failed.
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    #[error("model or loss: {0}")]
    Tensor(#[from] candle_core::Error),
    #[error("optimizer: {0}")]
    Optimizer(#[from] OptimizerError),
}

impl From<TrainError> for LearnerError {
    fn from(e: TrainError) -> Self {
        LearnerError::Training(Box::new(e))
    }
}

/// The figures of one step (`train/<name>`).
#[derive(Debug, Clone, PartialEq)]
pub struct TrainStep {
    pub total_loss: f32,
    pub pg_loss: f32,
    pub value_loss: f32,
    pub entropy: f32,
    /// Gradient norm before clipping.
    pub grad_norm: f32,
    pub learning_rate: f64,
    /// Mean and max policy lag of the batch's unrolls, and each one's.
    pub mean_policy_lag: f64,
    pub max_policy_lag: u64,
    pub policy_lags: Vec<u64>,
    /// The version published after the step (unchanged when skipped).
    pub version: PolicyVersion,
    /// `true` when the gradients were not finite and no update was applied.
    pub skipped: bool,
    /// Sequence priorities written back to the replay buffer (R2D2).
    pub priorities_written: usize,
    /// Time spent in that write-back (part of the step's time).
    pub priority_update: Duration,
}

/// The model being trained, its optimizer, the algorithm's step, and where
/// the weights go.
pub struct Trainer {
    pub model: TrainableModel,
    pub optimizer: Optimizer,
    /// Global gradient norm bound ([`TrainerConfig::max_grad_norm`]).
    max_grad_norm: f32,
    weights: Arc<WeightsHandle>,
    replay: Option<UnrollStore>,
    algorithm: Box<dyn AgentStep>,
    /// What is published when `--acting-average` is on; `None` publishes
    /// the latest weights.
    acting_average: Option<ActingAverage>,
}

impl Trainer {
    pub fn new(
        model: TrainableModel,
        config: TrainerConfig,
        weights: Arc<WeightsHandle>,
        replay: Option<UnrollStore>,
    ) -> Result<Self, TrainError> {
        let optimizer = Optimizer::new(&model.varmap, config.optimizer)?;
        let algorithm = config.agent.step(config.loss, &model, replay.as_ref())?;
        let acting_average = if config.acting_average > 0.0 {
            Some(ActingAverage::new(
                &model,
                f64::from(config.acting_average),
            )?)
        } else {
            None
        };
        Ok(Trainer {
            model,
            optimizer,
            max_grad_norm: config.max_grad_norm,
            weights,
            replay,
            algorithm,
            acting_average,
        })
    }

    pub fn weights(&self) -> &Arc<WeightsHandle> {
        &self.weights
    }

    /// The algorithm's step, as `--algo` chose it.
    pub fn algorithm(&self) -> &dyn AgentStep {
        self.algorithm.as_ref()
    }

    /// One update on `batch`; see the module docs.
    pub fn step(&mut self, batch: &TrainBatch) -> Result<TrainStep, TrainError> {
        let current = self.weights.version();
        let (mut lag_sum, mut lag_max) = (0u64, 0u64);
        let mut policy_lags = Vec::with_capacity(batch.policy_versions.len());
        for &v in &batch.policy_versions {
            let lag = current.0.saturating_sub(v);
            lag_sum += lag;
            lag_max = lag_max.max(lag);
            policy_lags.push(lag);
        }
        let mean_policy_lag = lag_sum as f64 / batch.len().max(1) as f64;

        let loss = self.algorithm.loss(&self.model.model, batch)?;
        let total_loss = loss.total.to_scalar::<f32>()?;
        let mut grads = loss.total.backward()?;
        let grad_norm = self
            .optimizer
            .clip_grad_norm(&mut grads, self.max_grad_norm)?;
        let skipped = !grad_norm.is_finite();
        let (learning_rate, version) = if skipped {
            (self.optimizer.learning_rate(), current)
        } else {
            let applied = self.optimizer.step(&grads)?;
            self.algorithm
                .after_update(&self.model, self.optimizer.step_count())?;
            let dtype = self.weights.dtype();
            let snapshot = match &mut self.acting_average {
                Some(average) => {
                    average.update(&self.model)?;
                    average.snapshot_as(&self.model, dtype)?
                }
                None => self.model.snapshot_as(dtype)?,
            };
            let version = self.weights.publish(snapshot);
            if let Some(r) = &self.replay {
                r.set_policy_version(version.0);
            }
            (applied.learning_rate, version)
        };
        Ok(TrainStep {
            total_loss,
            pg_loss: loss.pg_loss,
            value_loss: loss.value_loss,
            entropy: loss.entropy,
            grad_norm,
            learning_rate,
            mean_policy_lag,
            max_policy_lag: lag_max,
            policy_lags,
            version,
            skipped,
            priorities_written: loss.priorities_written,
            priority_update: loss.priority_update,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ModelConfig;
    use candle_core::{Device, Tensor};
    use seed_shared::EnvSpec;

    #[test]
    fn policy_lag_is_measured_against_the_oldest_version() {
        let cfg = ModelConfig::for_spec(&EnvSpec::cartpole());
        let model = TrainableModel::new(&cfg, &Device::Cpu, 1).unwrap();
        let weights = Arc::new(WeightsHandle::new(
            model.snapshot().unwrap(),
            PolicyVersion(10),
        ));
        let mut trainer = Trainer::new(
            model,
            TrainerConfig {
                agent: Agent::VTrace,
                loss: ImpalaLossConfig::impala_paper(),
                optimizer: OptimizerConfig::constant_adam(6e-4),
                max_grad_norm: 1.0,
                acting_average: 0.0,
            },
            weights,
            None,
        )
        .unwrap();
        let d = Device::Cpu;
        let z = |shape: &[usize], dt| Tensor::zeros(shape, dt, &d).unwrap();
        let batch = TrainBatch {
            obs: z(&[3, 2, 4], candle_core::DType::F32),
            actions: z(&[3, 2], candle_core::DType::U32),
            rewards: z(&[3, 2], candle_core::DType::F32),
            terminated: z(&[3, 2], candle_core::DType::U8),
            truncated: z(&[3, 2], candle_core::DType::U8),
            episode_start: z(&[3, 2], candle_core::DType::F32),
            behaviour_params: z(&[3, 2, 2], candle_core::DType::F32),
            initial_state: None,
            policy_versions: vec![9, 4],
            keys: vec![seed_replay::ItemKey(0), seed_replay::ItemKey(1)],
            weights: vec![1.0; 2],
        };
        let s = trainer.step(&batch).unwrap();
        assert_eq!(s.max_policy_lag, 6);
        assert_eq!(s.mean_policy_lag, 3.5);
        assert_eq!(s.version, PolicyVersion(11));
    }
}
