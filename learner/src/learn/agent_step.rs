//! [`AgentStep`]: the one interface through which the trainer runs an
//! algorithm's part of a training step, and [`StepLoss`], what that part
//! hands back.
//!
//! Why an interface: the trainer (`learn/trainer.rs`) does what every
//! algorithm shares (policy lag, backward, gradient clipping, the optimizer,
//! the weights publish) and nothing else; each algorithm's folder
//! (`learn/vtrace/`, `learn/r2d2/`) implements this trait and never names
//! the trainer, and `learn/agent.rs` builds the one `--algo` chose. A new
//! algorithm is one folder implementing it plus its variant in
//! [`crate::learn::agent::Agent`] (CONTRIBUTING.md, "Adding an algorithm").
//!
//! Cost: one virtual call per training step and per applied update.
use std::time::Duration;

use candle_core::{Result, Tensor};

use crate::learn::prefetch::TrainBatch;
use crate::model::{ActorCritic, TrainableModel};

/// An algorithm's part of a training step.
pub trait AgentStep: Send {
    /// The loss of `batch` under `model` (with gradient, for the trainer's
    /// backward) and the figures it logs. An algorithm that keeps state in
    /// the replay writes it back here (R2D2's priorities).
    fn loss(&mut self, model: &ActorCritic, batch: &TrainBatch) -> Result<StepLoss>;

    /// Called after each applied update (not after a skipped one), with the
    /// optimizer's step count after it: R2D2 refreshes its target network
    /// here. Does nothing by default.
    fn after_update(&mut self, _model: &TrainableModel, _updates: u64) -> Result<()> {
        Ok(())
    }

    /// The frozen network the algorithm bootstraps from, if it keeps one
    /// (R2D2's target network); `None` by default.
    fn target_network(&self) -> Option<&ActorCritic> {
        None
    }
}

/// A step's loss before backward, with the figures it logs (`train/<name>`).
pub struct StepLoss {
    /// The scalar the trainer differentiates.
    pub total: Tensor,
    /// The policy-gradient term (0 for a value-based algorithm).
    pub pg_loss: f32,
    /// The value or TD term.
    pub value_loss: f32,
    /// The mean policy entropy (0 for a value-based algorithm).
    pub entropy: f32,
    /// Sequence priorities written back to the replay buffer (R2D2).
    pub priorities_written: usize,
    /// Time spent in that write-back (part of the step's time).
    pub priority_update: Duration,
}
