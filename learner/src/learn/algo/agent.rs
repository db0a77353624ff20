//! [`Agent`]: which algorithm trains (`--algo`), with R2D2's settings.
//!
//! V-trace (IMPALA) is an actor-critic: inference samples the policy, the
//! trainer applies the IMPALA loss to consume-once or reused unrolls. R2D2
//! (Kapturowski et al., 2019) is value-based: inference acts ε-greedily on a
//! recurrent dueling Q-network, with one ε per env slot, and the trainer
//! learns from prioritized, half-overlapping sequences with burn-in, n-step
//! double-Q targets under value rescaling and a target network (all of it
//! in `learn/r2d2/`). Cost:
//! none; a plain value read once where the stages are built.
use serde::Serialize;

use crate::infer::exploration::EpsilonSchedule;
use crate::learn::r2d2::R2d2Config;

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
}
