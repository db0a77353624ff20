//! [`VTraceStep`]: V-trace's part of a training step, the model run over
//! the batch's `T + 1` steps and the IMPALA loss on its outputs. The rest of
//! a step (backward, clipping, the optimizer, the weights publish) is the
//! trainer's, shared with every algorithm: `learn/trainer.rs`.
//!
//! Cost: one forward pass over `(T+1)·B` rows (`ActorCritic::unroll`,
//! recurrent over `T` when the model has an LSTM core), then the loss
//! (`super::loss`).
use candle_core::Result;

use super::config::ImpalaLossConfig;
use super::loss::{impala_loss, ImpalaLossInputs};
use crate::learn::agent_step::{AgentStep, StepLoss};
use crate::learn::prefetch::TrainBatch;
use crate::model::ActorCritic;

/// V-trace's training step: the IMPALA loss with its settings.
#[derive(Debug, Clone, Copy)]
pub struct VTraceStep {
    config: ImpalaLossConfig,
}

impl VTraceStep {
    pub fn new(config: ImpalaLossConfig) -> Self {
        Self { config }
    }
}

impl AgentStep for VTraceStep {
    fn loss(&mut self, model: &ActorCritic, batch: &TrainBatch) -> Result<StepLoss> {
        let out = model.unroll(
            &batch.obs,
            &batch.episode_start,
            batch.initial_state.as_ref(),
        )?;
        let loss = impala_loss(
            &ImpalaLossInputs {
                distribution: model.config().action,
                target_params: &out.policy_params,
                values: &out.values,
                behaviour_params: &batch.behaviour_params,
                actions: &batch.actions,
                rewards: &batch.rewards,
                terminated: &batch.terminated,
                truncated: &batch.truncated,
            },
            &self.config,
        )?;
        Ok(StepLoss {
            total: loss.total,
            pg_loss: loss.pg_loss,
            value_loss: loss.value_loss,
            entropy: loss.entropy,
            priorities_written: 0,
            priority_update: std::time::Duration::ZERO,
        })
    }
}

#[cfg(test)]
mod tests {
    //! V-trace through the whole training path: unrolls built from
    //! inferred rows, replay, collation, then the trainer's steps.
    use std::sync::Arc;

    use super::*;
    use crate::infer::sink::{InferredRow, SampledAction};
    use crate::infer::state_table::{EnvSlot, LeaseId};
    use crate::learn::agent::Agent;
    use crate::learn::optimizer::{AdamConfig, Algorithm, LrSchedule, OptimizerConfig};
    use crate::learn::prefetch::Collator;
    use crate::learn::trainer::{Trainer, TrainerConfig};
    use crate::learn::unroll::{PushOutcome, UnrollBuilder, UnrollSpec};
    use crate::model::weights::{PolicyVersion, WeightsHandle};
    use crate::model::{ActionDistribution, ActionSampler, ModelConfig, TrainableModel};
    use crate::unroll_store::UnrollStore;
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
                acting_average: 0.0,
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
                acting_average: 0.0,
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
}
