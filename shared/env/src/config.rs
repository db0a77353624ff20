//! [`EnvConfig`]: which environment every env of an actor (or of an
//! evaluation) runs, the [`EnvSpec`] it announces and how to build one.
//!
//! Why an enum rather than a trait object: the config travels through
//! command-line flags ([`crate::flags`]), the actor's hello and the learner's
//! evaluation, so it must be comparable, cloneable and printable; building a
//! `Box<dyn Env>` from it is one match. Cost: one allocation per env built.

use seed_shared::EnvSpec;

use crate::cartpole::CartPole;
use crate::cartpole_masked::MaskedCartPole;
use crate::env::Env;
use crate::pendulum::Pendulum;
use crate::synthetic::{SyntheticConfig, SyntheticEnv};

/// Which environment every env of an actor runs.
#[derive(Debug, Clone, PartialEq)]
pub enum EnvConfig {
    /// Gymnasium's CartPole-v1 (4 x f32 observation, 2 actions, 500-step limit).
    CartPole,
    /// CartPole-v1 observed through `[x, θ]` only (2 x f32, velocities
    /// hidden): a memory task.
    CartPoleMasked,
    /// Gymnasium's Pendulum-v1 (3 x f32 observation, one torque in [-2, 2],
    /// 200-step limit): continuous actions.
    Pendulum,
    /// The synthetic benchmark env.
    Synthetic(SyntheticConfig),
}

impl EnvConfig {
    /// The spec announced in the hello.
    pub fn spec(&self) -> EnvSpec {
        match self {
            EnvConfig::CartPole => EnvSpec::cartpole(),
            EnvConfig::CartPoleMasked => MaskedCartPole::spec(),
            EnvConfig::Pendulum => Pendulum::spec(),
            EnvConfig::Synthetic(cfg) => cfg.spec(),
        }
    }

    /// Creates one env; `seed` individualises it (e.g. the synthetic env's content).
    pub fn build(&self, seed: u64) -> Box<dyn Env> {
        match self {
            EnvConfig::CartPole => Box::new(CartPole::new()),
            EnvConfig::CartPoleMasked => Box::new(MaskedCartPole::new()),
            EnvConfig::Pendulum => Box::new(Pendulum::new()),
            EnvConfig::Synthetic(cfg) => Box::new(SyntheticEnv::new(cfg.clone(), seed)),
        }
    }
}
