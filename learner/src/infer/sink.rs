//! The hook between inference and learning: [`InferenceSink`] receives every
//! inferred batch (observations, actions, the behaviour policy's
//! distribution parameters, values, recurrent state) and every slot
//! release, on the inference thread.
//!
//! Inference defines the interface and the learning side implements it (the
//! unroll builder, `crate::learn::unroll`), so inference never names the
//! trainer: with `--no-train` there is simply no sink. Cost: one virtual call
//! per batch; rows are borrowed views into the batch's buffers, never copies.
use std::sync::Arc;

use crate::infer::state_table::{EnvSlot, LeaseId};
use crate::infer::step_request::StepRequest;
use crate::model::weights::PolicyVersion;
use crate::model::ActionDistribution;

/// Receives every inferred batch and every slot release, on the inference
/// thread, before the actions are sent. The unroll builder implements it.
///
/// With `--inference-threads N` there is one sink per thread (see
/// [`SinkFactory`]); rows of one env slot may reach any of them (in step
/// order: a slot never has two steps in flight), and a slot's release is
/// delivered to one sink only, so multi-threaded sinks share per-slot state.
/// Rows carry the slot's [`LeaseId`], which changes whenever the slot is
/// leased again, so stale per-slot data is always detectable.
pub trait InferenceSink: Send {
    /// Called once per batch, after actions are chosen.
    fn on_batch(&mut self, batch: &InferredBatch<'_>);
    /// `slot`'s lease `lease` ended (its stream is gone): drop partial data.
    /// Called before the slot can be leased again.
    fn on_slot_released(&mut self, slot: EnvSlot, lease: LeaseId);
}

/// Makes the sink of inference thread `index`.
pub type SinkFactory = Arc<dyn Fn(usize) -> Box<dyn InferenceSink> + Send + Sync>;

/// One inferred batch, as offered to an [`InferenceSink`].
pub struct InferredBatch<'a> {
    pub policy_version: PolicyVersion,
    /// The policy's action distribution (`P` parameters per row).
    pub distribution: ActionDistribution,
    /// Recurrent hidden size `H` (0: feed-forward).
    pub state_size: usize,
    /// `[B]` sampled actions of a categorical policy (empty for a Gaussian).
    pub actions: &'a [u32],
    /// `[B, D]` sampled, unclipped actions of a Gaussian policy (empty for
    /// a categorical).
    pub continuous_actions: &'a [f32],
    /// `[B, P]` distribution parameters of the behaviour policy (logits, or
    /// means then log-stds).
    pub policy_params: &'a [f32],
    /// `[B]` value estimates.
    pub values: &'a [f32],
    /// `[B]` this row starts a new episode (its recurrent state was zeroed).
    pub episode_start: &'a [bool],
    /// `[B, H]` recurrent `h` and `c` before the step (empty when feed-forward).
    pub recurrent_h: &'a [f32],
    pub recurrent_c: &'a [f32],
    pub(super) requests: &'a [StepRequest],
    pub(super) obs_bytes: usize,
}

/// The action the policy sampled for one row, as sent to the actor.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SampledAction<'a> {
    /// An index below the categorical's `A`.
    Discrete(u32),
    /// `D` floats, not clipped to the env's bounds (the actor clips them).
    Continuous(&'a [f32]),
}

/// One env's step within an [`InferredBatch`].
#[derive(Debug, Clone, Copy)]
pub struct InferredRow<'a> {
    pub slot: EnvSlot,
    pub lease: LeaseId,
    pub run_id: u64,
    /// The raw observation bytes as received (little-endian).
    pub observation: &'a [u8],
    pub reward: f32,
    pub terminated: bool,
    pub truncated: bool,
    pub episode_start: bool,
    pub action: SampledAction<'a>,
    /// `[P]` the behaviour policy's distribution parameters.
    pub policy_params: &'a [f32],
    pub value: f32,
    /// `[H]` each, before the step; `None` when feed-forward.
    pub recurrent_h: Option<&'a [f32]>,
    pub recurrent_c: Option<&'a [f32]>,
}

impl<'a> InferredBatch<'a> {
    /// Env rows in the batch.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The rows, in batch order (requests in order, then their env indices).
    pub fn rows(&self) -> impl Iterator<Item = InferredRow<'a>> + '_ {
        let (p, d, h) = (
            self.distribution.param_width(),
            self.distribution.continuous_dim(),
            self.state_size,
        );
        let this: &InferredBatch<'a> = self;
        self.requests
            .iter()
            .flat_map(|req| (0..req.batch.env_indices.len()).map(move |j| (req, j)))
            .enumerate()
            .map(move |(row, (req, j))| {
                let b = &req.batch;
                let env = b.env_indices[j];
                InferredRow {
                    slot: req.claim.slot(env),
                    lease: req.claim.lease().id(),
                    run_id: b.run_ids[j],
                    observation: &b.observations[j * this.obs_bytes..(j + 1) * this.obs_bytes],
                    reward: b.rewards[j],
                    terminated: b.terminated[j],
                    truncated: b.truncated[j],
                    episode_start: this.episode_start[row],
                    action: if d == 0 {
                        SampledAction::Discrete(this.actions[row])
                    } else {
                        SampledAction::Continuous(&this.continuous_actions[row * d..(row + 1) * d])
                    },
                    policy_params: &this.policy_params[row * p..(row + 1) * p],
                    value: this.values[row],
                    recurrent_h: (h > 0).then(|| &this.recurrent_h[row * h..(row + 1) * h]),
                    recurrent_c: (h > 0).then(|| &this.recurrent_c[row * h..(row + 1) * h]),
                }
            })
    }
}
