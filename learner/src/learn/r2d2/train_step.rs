//! [`R2d2Step`]: R2D2's part of a training step. The online network runs
//! over each sequence after its burn-in, the target network over the same
//! steps; then the loss and the new priorities, written back into the
//! replay by each sequence's key (a key whose item was overwritten meanwhile
//! is ignored, and counted by the buffer: `replay/stale_priority_updates`).
//! After each applied update it refreshes the target network every
//! `--target-update-period` steps. The rest of a step (backward, clipping,
//! the optimizer, the weights publish) is the trainer's, shared with every
//! algorithm: `learn/trainer.rs`.
//!
//! Cost: two forward passes over `(T+1)·B` rows (online and target), the
//! loss's host math, one priority write-back per batch, and a copy of the
//! weights every `--target-update-period` updates.
use std::time::{Duration, Instant};

use candle_core::{Result, Tensor};
use tracing::warn;

use super::config::R2d2Config;
use super::loss::{r2d2_loss, R2d2LossInputs};
use crate::learn::agent_step::{AgentStep, StepLoss};
use crate::learn::prefetch::TrainBatch;
use crate::model::{dueling_q, ActorCritic, TrainableModel};
use crate::unroll_store::UnrollStore;

/// R2D2's training step: its settings, the target network, and where the
/// priorities go.
pub struct R2d2Step {
    config: R2d2Config,
    /// A frozen copy of the online network, refreshed every
    /// `target_update_period` updates.
    target: ActorCritic,
    /// The replay store, when its sampler takes priorities (else nothing
    /// is written back).
    priorities: Option<UnrollStore>,
}

impl R2d2Step {
    /// Starts the target network as a copy of `model`.
    pub fn new(
        config: R2d2Config,
        model: &TrainableModel,
        replay: Option<&UnrollStore>,
    ) -> Result<Self> {
        Ok(Self {
            config,
            target: model.snapshot()?,
            priorities: replay.filter(|r| r.prioritized()).cloned(),
        })
    }
}

impl AgentStep for R2d2Step {
    /// R2D2's loss (module docs); writes the sequences' new priorities back
    /// by key. Logged as `value_loss` (the TD loss); `pg_loss` and
    /// `entropy` are 0.
    fn loss(&mut self, model: &ActorCritic, batch: &TrainBatch) -> Result<StepLoss> {
        let burn_in = self.config.burn_in;
        let q = |model: &ActorCritic| -> Result<Tensor> {
            let out = model.unroll_after_burn_in(
                &batch.obs,
                &batch.episode_start,
                batch.initial_state.as_ref(),
                burn_in,
            )?;
            dueling_q(&out.policy_params, &out.values)
        };
        let online_q = q(model)?;
        let target_q = q(&self.target)?.detach();
        let steps = online_q.dim(0)?;
        let tail = |t: &Tensor| t.narrow(0, burn_in, steps);
        let loss = r2d2_loss(&R2d2LossInputs {
            online_q: &online_q,
            target_q: &target_q,
            actions: &tail(&batch.actions)?,
            rewards: &tail(&batch.rewards)?,
            terminated: &tail(&batch.terminated)?,
            truncated: &tail(&batch.truncated)?,
            weights: &batch.weights,
            discount: f64::from(self.config.discount),
            reward_scale: self.config.reward_scale,
            n_step: self.config.n_step,
            priority_eta: self.config.priority_eta,
        })?;
        let mut priorities_written = 0;
        let mut priority_update = Duration::ZERO;
        if let Some(replay) = &self.priorities {
            // A refused update (wrong lengths) is a bug, not outside data;
            // training goes on with the old priorities.
            let started = Instant::now();
            match replay.update_priorities(&batch.keys, &loss.priorities) {
                Ok(applied) => priorities_written = applied,
                Err(e) => warn!(error = %e, "priority write-back failed"),
            }
            priority_update = started.elapsed();
        }
        Ok(StepLoss {
            total: loss.total,
            pg_loss: 0.0,
            value_loss: loss.td_loss,
            entropy: 0.0,
            priorities_written,
            priority_update,
        })
    }

    fn after_update(&mut self, model: &TrainableModel, updates: u64) -> Result<()> {
        if updates.is_multiple_of(self.config.target_update_period.max(1)) {
            self.target = model.snapshot()?;
        }
        Ok(())
    }

    fn target_network(&self) -> Option<&ActorCritic> {
        Some(&self.target)
    }
}

#[cfg(test)]
mod tests {
    //! R2D2 through the whole training path: sequences built from inferred
    //! rows, prioritized replay, collation, then the trainer's steps.
    use std::sync::Arc;

    use super::*;
    use crate::infer::sink::{InferredRow, SampledAction};
    use crate::infer::state_table::{EnvSlot, LeaseId};
    use crate::learn::agent::Agent;
    use crate::learn::optimizer::OptimizerConfig;
    use crate::learn::prefetch::Collator;
    use crate::learn::trainer::{Trainer, TrainerConfig};
    use crate::learn::unroll::{PushOutcome, UnrollBuilder, UnrollSpec};
    use crate::learn::vtrace::ImpalaLossConfig;
    use crate::model::weights::{PolicyVersion, WeightsHandle};
    use crate::model::ModelConfig;
    use candle_core::Device;
    use seed_replay::{ReplayBuffer, ReplayConfig, SamplerConfig};
    use seed_shared::{EnvSpec, ObsDType};

    /// R2D2's settings as `--algo r2d2` resolves them.
    fn r2d2_defaults() -> R2d2Config {
        let c = crate::app::settings::resolve_toml("[train]\nalgo = \"r2d2\"\n").unwrap();
        match c.train.expect("training").trainer.agent {
            Agent::R2d2(r) => r,
            Agent::VTrace => unreachable!("r2d2 was asked for"),
        }
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
        let r2d2 = R2d2Config {
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
                acting_average: 0.0,
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
        let target_before = trainer.algorithm().target_network().unwrap().clone();
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
        let target_now = trainer.algorithm().target_network().unwrap();
        assert_eq!(values(target_now), values(&target_before));
        assert_ne!(values(&trainer.model.model), values(&target_before));
        trainer.step(&batch).unwrap();
        assert_eq!(
            values(trainer.algorithm().target_network().unwrap()),
            values(&trainer.model.model)
        );
    }
}
