//! The trainer's R2D2 step: the online network over each sequence after its
//! burn-in, the target network over the same steps, the loss and the new
//! priorities, written back into the replay by each sequence's key (a key
//! whose item was overwritten meanwhile is ignored, and counted by the
//! buffer). The rest of a step (backward, clipping, the optimizer, the
//! target network's refresh, the weights publish) is the trainer's, shared
//! with V-trace: `learn/train.rs`.
//!
//! Cost: two forward passes over `(T+1)·B` rows (online and target), the
//! loss's host math, one priority write-back per batch.
use std::time::{Duration, Instant};

use candle_core::Tensor;
use tracing::warn;

use crate::learn::prefetch::TrainBatch;
use crate::learn::r2d2::loss::{r2d2_loss, R2d2LossInputs};
use crate::learn::r2d2::R2d2Config;
use crate::learn::train::{StepLoss, TrainError, Trainer};
use crate::model::{dueling_q, ActorCritic};

impl Trainer {
    /// R2D2's loss (module docs); writes the sequences' new priorities back
    /// by key. Logged as `value_loss` (the TD loss); `pg_loss` and
    /// `entropy` are 0.
    pub(crate) fn r2d2_loss(
        &self,
        batch: &TrainBatch,
        r2d2: &R2d2Config,
    ) -> Result<StepLoss, TrainError> {
        let burn_in = r2d2.burn_in;
        let q = |model: &ActorCritic| -> candle_core::Result<Tensor> {
            let out = model.unroll_after_burn_in(
                &batch.obs,
                &batch.episode_start,
                batch.initial_state.as_ref(),
                burn_in,
            )?;
            dueling_q(&out.policy_params, &out.values)
        };
        let online_q = q(&self.model.model)?;
        let target_q = match &self.target {
            Some(t) => q(t)?.detach(),
            None => online_q.detach(),
        };
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
            discount: f64::from(r2d2.discount),
            reward_scale: r2d2.reward_scale,
            n_step: r2d2.n_step,
            priority_eta: r2d2.priority_eta,
        })?;
        let mut priorities_written = 0;
        let mut priority_update = Duration::ZERO;
        if let (true, Some(replay)) = (self.prioritized, &self.replay) {
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
}
