//! Environments an actor steps: the [`Env`] trait, Gymnasium's CartPole-v1
//! ([`CartPole`]) and a synthetic benchmark env ([`SyntheticEnv`]).
//!
//! # Why observations go into the caller's buffer
//!
//! The pool steps hundreds of envs per batch and ships their observations as
//! one little-endian byte buffer (see `StepBatch.observations`). Each env
//! writes its observation straight into its row of that buffer, so a step
//! costs no allocation and no copy beyond the write itself.
//!
//! # Cost
//!
//! One virtual call per step; CartPole's step is a few dozen floating-point
//! operations, the synthetic env's is its configured busy work plus one pass
//! over its observation bytes.

mod cartpole;
mod synthetic;

pub use cartpole::{CartPole, CARTPOLE_MAX_EPISODE_STEPS};
pub use synthetic::{SyntheticConfig, SyntheticEnv};

use seed_shared::EnvSpec;

/// What one step of an env produced (its observation went into the caller's buffer).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Transition {
    /// Reward for the transition.
    pub reward: f32,
    /// The episode reached a terminal state (its value is zero).
    pub terminated: bool,
    /// The episode was cut by a time limit; the state is not terminal.
    pub truncated: bool,
}

/// One environment with discrete actions.
///
/// `obs` is always exactly [`EnvSpec::obs_bytes`] long; implementations write
/// the whole observation into it, little-endian, row-major.
pub trait Env: Send {
    /// Starts a new episode; `seed` determines the initial state.
    fn reset(&mut self, seed: u64, obs: &mut [u8]);
    /// Applies `action` (below the spec's `num_actions`) and writes the next observation.
    fn step(&mut self, action: u32, obs: &mut [u8]) -> Transition;
}

/// Which environment every env of an actor runs.
#[derive(Debug, Clone, PartialEq)]
pub enum EnvConfig {
    /// Gymnasium's CartPole-v1 (4 x f32 observation, 2 actions, 500-step limit).
    CartPole,
    /// The synthetic benchmark env.
    Synthetic(SyntheticConfig),
}

impl EnvConfig {
    /// The spec announced in the hello.
    pub fn spec(&self) -> EnvSpec {
        match self {
            EnvConfig::CartPole => EnvSpec::cartpole(),
            EnvConfig::Synthetic(cfg) => cfg.spec(),
        }
    }

    /// Creates one env; `seed` individualises it (e.g. the synthetic env's content).
    pub fn build(&self, seed: u64) -> Box<dyn Env> {
        match self {
            EnvConfig::CartPole => Box::new(CartPole::new()),
            EnvConfig::Synthetic(cfg) => Box::new(SyntheticEnv::new(cfg.clone(), seed)),
        }
    }
}
