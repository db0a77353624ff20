//! The training thread: V-trace actor-critic or R2D2 updates on prefetched
//! batches, each followed by a weights publish for inference.
//!
//! R2D2 ([`Agent::R2d2`], its step in `learn/r2d2/train_step.rs`): the online network runs over each sequence after
//! its burn-in ([`ActorCritic::unroll_after_burn_in`]), the target network
//! (a frozen copy, refreshed every `--target-update-period` steps) over the
//! same steps, and `learn::r2d2::loss` gives the TD loss and each sequence's new
//! priority, which the trainer writes back into the replay buffer by the
//! sequence's key (a key whose item was overwritten meanwhile is ignored and
//! counted by the buffer: `replay/stale_priority_updates`).
//!
//! Per step ([`Trainer::step`]): run the model over the batch
//! (`model.unroll` on `[T+1, B, ...]`), compute the IMPALA loss
//! ([`impala_loss`]: clipped importance weights, V-trace value targets,
//! policy gradient with V-trace advantages, entropy bonus), backward,
//! clip the global gradient norm, apply Adam/RMSProp (optional LR schedule),
//! then publish a frozen snapshot through the [`WeightsHandle`] (one pointer
//! swap: inference never waits for it) and tell the replay buffer the new
//! version (for its policy-lag cap).
//!
//! The policy lag of every trained unroll (`version before the step − oldest
//! version in the unroll`) is measured: mean and max per step.
//!
//! Cost per step: one forward and backward over `(T+1)·B` rows, one
//! snapshot copy of the weights, a few scalars read back for logging.
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use candle_core::Tensor;
use tracing::{debug, error, warn};

use crate::error::LearnerError;
use crate::learn::algo::{impala_loss, Agent, ImpalaLossConfig, ImpalaLossInputs};
use crate::learn::optimizer::{Optimizer, OptimizerConfig, OptimizerError};
use crate::learn::prefetch::{NextBatchError, Prefetcher, TrainBatch};
use crate::log_throttle::{LogThrottle, WARN_INTERVAL};
use crate::metrics::log_histogram::LogHistogram;
use crate::model::weights::{PolicyVersion, WeightsHandle};
use crate::model::{ActorCritic, TrainableModel};
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
}

impl TrainerConfig {
    /// γ of the return the algorithm learns.
    pub fn discount(&self) -> f32 {
        match self.agent {
            Agent::VTrace => self.loss.discount,
            Agent::R2d2(r) => r.discount,
        }
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

/// The model being trained, its optimizer, and where its weights go.
pub struct Trainer {
    pub model: TrainableModel,
    pub optimizer: Optimizer,
    pub(crate) config: TrainerConfig,
    weights: Arc<WeightsHandle>,
    pub(crate) replay: Option<UnrollStore>,
    /// R2D2's target network.
    pub(crate) target: Option<ActorCritic>,
    /// Whether the buffer's sampler takes priorities (R2D2 writes them).
    pub(crate) prioritized: bool,
}

impl Trainer {
    pub fn new(
        model: TrainableModel,
        config: TrainerConfig,
        weights: Arc<WeightsHandle>,
        replay: Option<UnrollStore>,
    ) -> Result<Self, TrainError> {
        let optimizer = Optimizer::new(&model.varmap, config.optimizer)?;
        let target = match config.agent {
            Agent::VTrace => None,
            Agent::R2d2(_) => Some(model.snapshot()?),
        };
        let prioritized = replay.as_ref().is_some_and(UnrollStore::prioritized);
        Ok(Trainer {
            model,
            optimizer,
            config,
            weights,
            replay,
            target,
            prioritized,
        })
    }

    pub fn weights(&self) -> &Arc<WeightsHandle> {
        &self.weights
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

        let loss = match self.config.agent {
            Agent::VTrace => self.vtrace_loss(batch)?,
            Agent::R2d2(r2d2) => self.r2d2_loss(batch, &r2d2)?,
        };
        let total_loss = loss.total.to_scalar::<f32>()?;
        let mut grads = loss.total.backward()?;
        let grad_norm = self
            .optimizer
            .clip_grad_norm(&mut grads, self.config.max_grad_norm)?;
        let skipped = !grad_norm.is_finite();
        let (learning_rate, version) = if skipped {
            (self.optimizer.learning_rate(), current)
        } else {
            let applied = self.optimizer.step(&grads)?;
            if let (Agent::R2d2(r2d2), Some(target)) = (self.config.agent, self.target.as_mut()) {
                let period = r2d2.target_update_period.max(1);
                if self.optimizer.step_count().is_multiple_of(period) {
                    *target = self.model.snapshot()?;
                }
            }
            let version = self
                .weights
                .publish(self.model.snapshot_as(self.weights.dtype())?);
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

/// A step's loss before backward, with the figures it logs.
pub(crate) struct StepLoss {
    pub(crate) total: Tensor,
    pub(crate) pg_loss: f32,
    pub(crate) value_loss: f32,
    pub(crate) entropy: f32,
    pub(crate) priorities_written: usize,
    pub(crate) priority_update: Duration,
}

impl Trainer {
    fn vtrace_loss(&self, batch: &TrainBatch) -> Result<StepLoss, TrainError> {
        let out = self.model.model.unroll(
            &batch.obs,
            &batch.episode_start,
            batch.initial_state.as_ref(),
        )?;
        let loss = impala_loss(
            &ImpalaLossInputs {
                distribution: self.model.model.config().action,
                target_params: &out.policy_params,
                values: &out.values,
                behaviour_params: &batch.behaviour_params,
                actions: &batch.actions,
                rewards: &batch.rewards,
                terminated: &batch.terminated,
                truncated: &batch.truncated,
            },
            &self.config.loss,
        )?;
        Ok(StepLoss {
            total: loss.total,
            pg_loss: loss.pg_loss,
            value_loss: loss.value_loss,
            entropy: loss.entropy,
            priorities_written: 0,
            priority_update: Duration::ZERO,
        })
    }
}

/// A float gauge in an `AtomicU32` (f32 bits); Relaxed, reporting only.
#[derive(Debug, Default)]
pub struct F32Gauge(AtomicU32);

impl F32Gauge {
    pub fn set(&self, v: f32) {
        self.0.store(v.to_bits(), Ordering::Relaxed);
    }
    pub fn get(&self) -> f32 {
        f32::from_bits(self.0.load(Ordering::Relaxed))
    }
}

/// What the training thread reports (`train/<name>`): counters and the
/// latest step's figures. Written by the training thread only, read by the
/// progress line; every field is independent, so Relaxed.
#[derive(Debug, Default)]
pub struct TrainerStats {
    /// Updates applied.
    pub steps: AtomicU64,
    /// Steps skipped for non-finite gradients.
    pub skipped_steps: AtomicU64,
    /// Unrolls trained on, and the sum of their policy lags.
    pub unrolls: AtomicU64,
    pub policy_lag_sum: AtomicU64,
    /// Largest policy lag seen so far.
    pub policy_lag_max: AtomicU64,
    /// Each trained unroll's policy lag (TensorBoard's histogram).
    pub policy_lags: LogHistogram,
    /// Microseconds spent computing steps (not waiting).
    pub busy_us: AtomicU64,
    pub total_loss: F32Gauge,
    pub pg_loss: F32Gauge,
    pub value_loss: F32Gauge,
    pub entropy: F32Gauge,
    pub grad_norm: F32Gauge,
    pub learning_rate: F32Gauge,
    /// Sequence priorities written back (R2D2).
    pub priority_updates: AtomicU64,
    /// Microseconds of `busy_us` spent writing them back.
    pub priority_update_us: AtomicU64,
}

impl TrainerStats {
    fn record(&self, step: &TrainStep, unrolls: usize, busy: Duration) {
        self.busy_us
            .fetch_add(busy.as_micros() as u64, Ordering::Relaxed);
        self.priority_updates
            .fetch_add(step.priorities_written as u64, Ordering::Relaxed);
        self.priority_update_us
            .fetch_add(step.priority_update.as_micros() as u64, Ordering::Relaxed);
        if step.skipped {
            // Nothing was learned from these unrolls, and the loss gauges
            // keep the last finite step's figures (a NaN there would hide
            // them); the count says what happened.
            self.skipped_steps.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.steps.fetch_add(1, Ordering::Relaxed);
        self.unrolls.fetch_add(unrolls as u64, Ordering::Relaxed);
        self.policy_lag_sum.fetch_add(
            (step.mean_policy_lag * unrolls as f64).round() as u64,
            Ordering::Relaxed,
        );
        self.policy_lag_max
            .fetch_max(step.max_policy_lag, Ordering::Relaxed);
        for &lag in &step.policy_lags {
            self.policy_lags.record(lag);
        }
        self.total_loss.set(step.total_loss);
        self.pg_loss.set(step.pg_loss);
        self.value_loss.set(step.value_loss);
        self.entropy.set(step.entropy);
        self.grad_norm.set(step.grad_norm);
        self.learning_rate.set(step.learning_rate as f32);
    }
}

/// Called by the training thread after each step (periodic checkpoints).
pub type BetweenSteps = Box<dyn FnMut(&Trainer) + Send>;

/// Runs `trainer` on `prefetcher`'s batches until `stop` is set or the
/// prefetcher closes; returns the trainer (for the final checkpoint).
pub fn spawn_training_thread(
    mut trainer: Trainer,
    prefetcher: Arc<Prefetcher>,
    stats: Arc<TrainerStats>,
    stop: Arc<AtomicBool>,
    mut between_steps: Option<BetweenSteps>,
    on_step: Arc<dyn Fn(&TrainStep) + Send + Sync>,
) -> Result<JoinHandle<Result<Trainer, TrainError>>, LearnerError> {
    let skipped_log = LogThrottle::new(WARN_INTERVAL);
    std::thread::Builder::new()
        .name("trainer".into())
        .spawn(move || {
            // Relaxed: a plain request flag, re-checked at least every 50 ms.
            while !stop.load(Ordering::Relaxed) {
                let batch = match prefetcher.next(Duration::from_millis(50)) {
                    Ok(b) => b,
                    Err(NextBatchError::Timeout) => continue,
                    Err(NextBatchError::Closed) => break,
                };
                let started = Instant::now();
                let step = trainer.step(&batch).inspect_err(|e| {
                    // Said now: the run itself reports it only when it ends.
                    error!(error = %e, "training step failed; training stops");
                })?;
                if step.skipped {
                    if let Some(steps) = skipped_log.hit() {
                        warn!(
                            grad_norm = step.grad_norm,
                            steps,
                            "non-finite gradients; steps skipped since the last such line \
                             (at most one line per {} s)",
                            WARN_INTERVAL.as_secs()
                        );
                    }
                }
                stats.record(&step, batch.len(), started.elapsed());
                on_step(&step);
                if let Some(f) = between_steps.as_mut() {
                    f(&trainer);
                }
            }
            debug!("training thread stopped");
            Ok(trainer)
        })
        .map_err(|source| LearnerError::Io {
            what: "spawning the training thread".into(),
            source,
        })
}

#[cfg(test)]
mod tests {

    /// R2D2's settings as `--algo r2d2` resolves them.
    fn r2d2_defaults() -> crate::learn::r2d2::R2d2Config {
        let c = crate::app::settings::resolve_toml("[train]\nalgo = \"r2d2\"\n").unwrap();
        match c.train.expect("training").trainer.agent {
            Agent::R2d2(r) => r,
            Agent::VTrace => unreachable!("r2d2 was asked for"),
        }
    }
    use super::*;
    use crate::infer::sink::{InferredRow, SampledAction};
    use crate::infer::state_table::{EnvSlot, LeaseId};
    use crate::learn::optimizer::{AdamConfig, Algorithm, LrSchedule};
    use crate::learn::prefetch::Collator;
    use crate::learn::unroll::{PushOutcome, UnrollBuilder, UnrollSpec};
    use crate::model::{ActionDistribution, ActionSampler, ModelConfig};
    use candle_core::{Device, Tensor};
    use seed_replay::{ReplayBuffer, ReplayConfig, SamplerConfig};
    use seed_shared::{EnvSpec, ObsDType};

    /// A few training steps on u8 image observations through the conv torso
    /// and (optionally) the LSTM core: the loss is finite, the version rises,
    /// and the policy moves toward the rewarded action.
    fn train_on_images(lstm: Option<usize>) {
        let spec_env = EnvSpec::synthetic(vec![2, 20, 20], ObsDType::U8, 3);
        let mut cfg = ModelConfig::for_spec(&spec_env);
        cfg.conv_features = 16;
        cfg.lstm_size = lstm;
        let model = TrainableModel::new(&cfg, &Device::Cpu, 3).unwrap();
        let weights = Arc::new(WeightsHandle::new(
            model.snapshot().unwrap(),
            PolicyVersion(0),
        ));
        let spec = UnrollSpec {
            unroll_length: 4,
            obs_shape: vec![2, 20, 20],
            obs_dtype: ObsDType::U8,
            action: cfg.action,
            state_size: lstm.unwrap_or(0),
            stride: 4,
        };
        let replay = Arc::new(
            ReplayBuffer::new(
                spec.layout().unwrap(),
                ReplayConfig::new(64, SamplerConfig::Fifo),
            )
            .unwrap(),
        );
        let mut trainer = Trainer::new(
            model,
            TrainerConfig {
                agent: Agent::VTrace,
                loss: ImpalaLossConfig::impala_paper(),
                optimizer: OptimizerConfig {
                    algorithm: Algorithm::Adam(AdamConfig::kingma_ba()),
                    schedule: LrSchedule::Constant { lr: 1e-2 },
                },
                max_grad_norm: 40.0,
            },
            Arc::clone(&weights),
            Some(UnrollStore::from(Arc::clone(&replay))),
        )
        .unwrap();
        // Contextual bandit in disguise: reward 1 for action 2, else 0,
        // behaviour uniform (zero logits).
        let obs = vec![7u8; 20 * 20 * 2];
        let logits = [0f32; 3];
        let h = vec![0f32; lstm.unwrap_or(0)];
        let mut collator = Collator::new(spec.clone(), Device::Cpu, 8).unwrap();
        let mut sample = replay.new_batch(8);
        let prob_of_2 = |t: &Trainer| {
            let o = Tensor::from_slice(&obs, (1, 2, 20, 20), &Device::Cpu).unwrap();
            let step = t.model.model.step(&o, None).unwrap();
            let p = candle_nn::ops::softmax(&step.policy_params, 1)
                .unwrap()
                .to_vec2::<f32>()
                .unwrap();
            p[0][2]
        };
        let before = prob_of_2(&trainer);
        let mut k = 0u32;
        for step in 0..15 {
            for env in 0..8u64 {
                let mut b = UnrollBuilder::new(&spec);
                for t in 0..5u32 {
                    k = k.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                    let action = (k >> 16) % 3;
                    let row = InferredRow {
                        slot: EnvSlot(env as u32),
                        lease: LeaseId(1),
                        run_id: env,
                        observation: &obs,
                        reward: 0.0,
                        terminated: false,
                        truncated: false,
                        episode_start: t == 0,
                        action: SampledAction::Discrete(action),
                        policy_params: &logits,
                        value: 0.0,
                        recurrent_h: lstm.map(|_| h.as_slice()),
                        recurrent_c: lstm.map(|_| h.as_slice()),
                    };
                    if b.push(&row, trainer.weights().version()) == PushOutcome::Complete {
                        replay.insert_ref(b.fields().as_slice()).unwrap();
                    }
                }
            }
            // Rewards: the transition t's reward lives at step t+1; set them
            // in the collated tensor from the actions taken.
            replay.sample_into(&mut sample, 8).unwrap();
            let mut batch = collator.collate(&sample).unwrap();
            let actions = batch.actions.to_vec2::<u32>().unwrap();
            let mut rewards = vec![0f32; 5 * 8];
            for t in 0..4 {
                for b in 0..8 {
                    rewards[(t + 1) * 8 + b] = if actions[t][b] == 2 { 1.0 } else { 0.0 };
                }
            }
            batch.rewards = Tensor::from_slice(&rewards, (5, 8), &Device::Cpu).unwrap();
            let s = trainer.step(&batch).unwrap();
            assert!(s.total_loss.is_finite() && s.grad_norm.is_finite());
            assert_eq!(s.version, PolicyVersion(step + 1));
            assert_eq!(
                s.max_policy_lag, 0,
                "each batch was produced by the current version"
            );
        }
        assert_eq!(weights.version(), PolicyVersion(15));
        let after = prob_of_2(&trainer);
        assert!(
            after > before + 0.1,
            "p(rewarded action) {before} -> {after}"
        );
    }

    /// R2D2 through replay and collation: the trainer writes each sampled
    /// sequence's new priority back by key; sequences overwritten between
    /// the sample and the write-back are ignored and counted, the others
    /// are written, and the target network is refreshed every
    /// `target_update_period` steps only.
    #[test]
    fn r2d2_writes_priorities_back_by_key_and_ignores_overwritten_sequences() {
        let cfg = ModelConfig {
            lstm_size: Some(4),
            ..ModelConfig::for_spec(&EnvSpec::cartpole())
        };
        let model = TrainableModel::new(&cfg, &Device::Cpu, 5).unwrap();
        let weights = Arc::new(WeightsHandle::new(
            model.snapshot().unwrap(),
            PolicyVersion(0),
        ));
        let spec = UnrollSpec {
            unroll_length: 6,
            obs_shape: vec![4],
            obs_dtype: ObsDType::F32,
            action: cfg.action,
            state_size: 4,
            stride: 3,
        };
        let capacity = 8;
        let replay = Arc::new(
            ReplayBuffer::new(
                spec.layout().unwrap(),
                ReplayConfig::new(
                    capacity,
                    SamplerConfig::Prioritized(seed_replay::PrioritizedConfig {
                        alpha: 1.0,
                        beta: 0.6,
                        eps: 1e-6,
                    }),
                ),
            )
            .unwrap(),
        );
        let r2d2 = crate::learn::r2d2::R2d2Config {
            burn_in: 2,
            target_update_period: 2,
            ..r2d2_defaults()
        };
        let mut trainer = Trainer::new(
            model,
            TrainerConfig {
                agent: Agent::R2d2(r2d2),
                loss: ImpalaLossConfig::impala_paper(),
                optimizer: OptimizerConfig::constant_adam(6e-4),
                max_grad_norm: 40.0,
            },
            Arc::clone(&weights),
            Some(UnrollStore::from(Arc::clone(&replay))),
        )
        .unwrap();
        // One env slot's sequences: obs [k, 0, 0, 0], reward 1 per step.
        let mut b = UnrollBuilder::new(&spec);
        let mut k = 0u32;
        let h = [0f32; 4];
        let mut insert = |n: usize| {
            let mut done = 0;
            while done < n {
                let obs: Vec<u8> = [k as f32 * 0.01, 0.0, 0.0, 0.0]
                    .iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect();
                let row = InferredRow {
                    slot: EnvSlot(0),
                    lease: LeaseId(1),
                    run_id: 1,
                    observation: &obs,
                    reward: 1.0,
                    terminated: false,
                    truncated: false,
                    episode_start: k == 0,
                    action: SampledAction::Discrete(k % 2),
                    policy_params: &[0.0, 0.0],
                    value: 0.0,
                    recurrent_h: Some(&h),
                    recurrent_c: Some(&h),
                };
                if b.push(&row, PolicyVersion(0)) == PushOutcome::Complete {
                    replay.insert_ref(b.fields().as_slice()).unwrap();
                    b.advance();
                    done += 1;
                }
                k += 1;
            }
        };
        insert(capacity);
        let mut collator = Collator::new(spec.clone(), Device::Cpu, 4).unwrap();
        let mut sample = replay.new_batch(4);
        replay.sample_into(&mut sample, 4).unwrap();
        let batch = collator.collate(&sample).unwrap();
        assert_eq!(batch.keys, sample.keys());
        // Overwrite the oldest half of the ring before the write-back.
        insert(capacity / 2);
        let overwritten = batch
            .keys
            .iter()
            .filter(|key| key.0 < (capacity / 2) as u64)
            .count();
        let target_before = trainer.target.as_ref().unwrap().clone();
        let s = trainer.step(&batch).unwrap();
        assert!(s.total_loss.is_finite() && !s.skipped);
        assert_eq!(s.priorities_written, batch.len() - overwritten);
        assert_eq!(
            replay.stats().stale_priority_updates,
            overwritten as u64,
            "keys {:?}",
            batch.keys
        );
        // Step 1: the target network is still the initial one; after step 2
        // it is the online network.
        let probe = Tensor::new(&[[0.3f32, 0.0, 0.0, 0.0]], &Device::Cpu).unwrap();
        let values = |m: &ActorCritic| {
            m.step(&probe, None)
                .unwrap()
                .values
                .to_vec1::<f32>()
                .unwrap()
        };
        let target_now = trainer.target.as_ref().unwrap();
        assert_eq!(values(target_now), values(&target_before));
        assert_ne!(values(&trainer.model.model), values(&target_before));
        trainer.step(&batch).unwrap();
        assert_eq!(
            values(trainer.target.as_ref().unwrap()),
            values(&trainer.model.model)
        );
    }

    #[test]
    fn conv_torso_trains_on_u8_images() {
        train_on_images(None);
    }

    #[test]
    fn conv_lstm_trains_on_u8_images() {
        train_on_images(Some(8));
    }

    /// A continuous bandit through unrolls, replay and collation: the
    /// reward of a torque `a` is `−(a − 1)²`, actions are sampled on-policy
    /// from the Gaussian head. Training must move the mean towards 1.
    #[test]
    fn gaussian_policy_mean_moves_towards_the_rewarded_action() {
        let spec_env = EnvSpec {
            env_name: "Bandit".into(),
            obs_shape: vec![3],
            obs_dtype: ObsDType::F32,
            action: seed_shared::ActionSpace::uniform_box(1, -2.0, 2.0),
        };
        let cfg = ModelConfig::for_spec(&spec_env);
        assert_eq!(cfg.action, ActionDistribution::Gaussian { dim: 1 });
        let model = TrainableModel::new(&cfg, &Device::Cpu, 5).unwrap();
        let weights = Arc::new(WeightsHandle::new(
            model.snapshot().unwrap(),
            PolicyVersion(0),
        ));
        let spec = UnrollSpec {
            unroll_length: 4,
            obs_shape: vec![3],
            obs_dtype: ObsDType::F32,
            action: cfg.action,
            state_size: 0,
            stride: 4,
        };
        let replay = Arc::new(
            ReplayBuffer::new(
                spec.layout().unwrap(),
                ReplayConfig::new(64, SamplerConfig::Fifo),
            )
            .unwrap(),
        );
        let mut trainer = Trainer::new(
            model,
            TrainerConfig {
                agent: Agent::VTrace,
                loss: ImpalaLossConfig {
                    entropy_cost: 0.0,
                    ..ImpalaLossConfig::impala_paper()
                },
                optimizer: OptimizerConfig {
                    algorithm: Algorithm::Adam(AdamConfig::kingma_ba()),
                    schedule: LrSchedule::Constant { lr: 1e-2 },
                },
                max_grad_norm: 40.0,
            },
            Arc::clone(&weights),
            Some(UnrollStore::from(Arc::clone(&replay))),
        )
        .unwrap();
        let obs_f32 = [0.5f32, -0.5, 0.1];
        let obs: Vec<u8> = obs_f32.iter().flat_map(|x| x.to_le_bytes()).collect();
        let params_now = |t: &Trainer| {
            let o = Tensor::new(&[obs_f32], &Device::Cpu).unwrap();
            let step = t.model.model.step(&o, None).unwrap();
            step.policy_params
                .flatten_all()
                .unwrap()
                .to_vec1::<f32>()
                .unwrap()
        };
        let mut sampler = ActionSampler::new(9);
        let mut collator = Collator::new(spec.clone(), Device::Cpu, 16).unwrap();
        let mut sample = replay.new_batch(16);
        let before = params_now(&trainer);
        assert_eq!(before.len(), 2, "mean and log-std");
        assert_eq!(before[1], 0.0, "log σ starts at 0");
        for step in 0..30 {
            let params = params_now(&trainer);
            for env in 0..16u32 {
                let mut b = UnrollBuilder::new(&spec);
                for t in 0..5u32 {
                    let mut a = [0f32];
                    sampler.sample_gaussian(&params, 1, &mut a);
                    let row = InferredRow {
                        slot: EnvSlot(env),
                        lease: LeaseId(1),
                        run_id: u64::from(env),
                        observation: &obs,
                        reward: 0.0,
                        terminated: false,
                        truncated: false,
                        episode_start: t == 0,
                        action: SampledAction::Continuous(&a),
                        policy_params: &params,
                        value: 0.0,
                        recurrent_h: None,
                        recurrent_c: None,
                    };
                    if b.push(&row, trainer.weights().version()) == PushOutcome::Complete {
                        replay.insert_ref(b.fields().as_slice()).unwrap();
                    }
                }
            }
            replay.sample_into(&mut sample, 16).unwrap();
            let mut batch = collator.collate(&sample).unwrap();
            assert_eq!(batch.actions.dims(), &[5, 16, 1]);
            assert_eq!(batch.behaviour_params.dims(), &[5, 16, 2]);
            let actions = batch.actions.to_vec3::<f32>().unwrap();
            let mut rewards = vec![0f32; 5 * 16];
            for t in 0..4 {
                for b in 0..16 {
                    rewards[(t + 1) * 16 + b] = -(actions[t][b][0] - 1.0).powi(2);
                }
            }
            batch.rewards = Tensor::from_slice(&rewards, (5, 16), &Device::Cpu).unwrap();
            let s = trainer.step(&batch).unwrap();
            assert!(s.total_loss.is_finite() && s.grad_norm.is_finite(), "{s:?}");
            assert_eq!(s.version, PolicyVersion(step + 1));
        }
        let after = params_now(&trainer);
        assert!(
            after[0] > before[0] + 0.3,
            "mean {} -> {} (the reward peaks at 1)",
            before[0],
            after[0]
        );
    }

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
