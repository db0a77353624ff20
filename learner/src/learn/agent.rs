//! [`Agent`]: which algorithm trains (`--algo`), and the one place that
//! turns that choice into the algorithm's parts.
//!
//! V-trace (IMPALA, `learn/vtrace/`) is an actor-critic: inference samples
//! the policy, the trainer applies the IMPALA loss to consume-once or
//! reused unrolls. R2D2 (Kapturowski et al., 2019, `learn/r2d2/`) is
//! value-based: inference acts ε-greedily on a recurrent dueling Q-network,
//! with one ε per env slot, and the trainer learns from prioritized,
//! half-overlapping sequences with burn-in, n-step double-Q targets under
//! value rescaling and a target network.
//!
//! Every `match` on the algorithm is in this file: what inference explores
//! with, how unrolls overlap, and the training step the trainer calls
//! ([`Agent::step`]). A new algorithm is a folder beside those two plus a
//! variant here (CONTRIBUTING.md, "Adding an algorithm"). Cost: none; plain
//! values read where the stages are built.
use serde::Serialize;

use crate::infer::exploration::EpsilonSchedule;
use crate::learn::agent_step::AgentStep;
use crate::learn::r2d2::{R2d2Config, R2d2Step};
use crate::learn::vtrace::{ImpalaLossConfig, VTraceStep};
use crate::model::TrainableModel;
use crate::unroll_store::UnrollStore;

/// The algorithm that trains.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Agent {
    /// IMPALA's V-trace actor-critic (the default).
    VTrace,
    /// Recurrent replay distributed DQN.
    R2d2(R2d2Config),
}

impl Agent {
    /// R2D2's settings, `None` for V-trace.
    pub fn r2d2(&self) -> Option<&R2d2Config> {
        match self {
            Agent::VTrace => None,
            Agent::R2d2(c) => Some(c),
        }
    }

    /// The exploration inference applies, for value-based agents.
    pub fn exploration(&self) -> Option<EpsilonSchedule> {
        self.r2d2().map(|c| c.exploration)
    }

    /// Steps between the starts of one env slot's consecutive unrolls of
    /// `unroll_length` transitions: all of them for V-trace (unrolls share
    /// one step), half for R2D2 (sequences overlap by half).
    pub fn unroll_stride(&self, unroll_length: usize) -> usize {
        match self {
            Agent::VTrace => unroll_length,
            Agent::R2d2(_) => (unroll_length / 2).max(1),
        }
    }

    /// The algorithm's training step, which the trainer calls through
    /// [`AgentStep`]: V-trace's with the IMPALA loss `loss`, or R2D2's with
    /// a target network copied from `model` and priorities written into
    /// `replay`.
    pub fn step(
        &self,
        loss: ImpalaLossConfig,
        model: &TrainableModel,
        replay: Option<&UnrollStore>,
    ) -> candle_core::Result<Box<dyn AgentStep>> {
        Ok(match *self {
            Agent::VTrace => Box::new(VTraceStep::new(loss)),
            Agent::R2d2(config) => Box::new(R2d2Step::new(config, model, replay)?),
        })
    }
}
