//! The [`Env`] trait every environment implements and the [`Transition`]
//! one step of it produces.
//!
//! # Why observations go into the caller's buffer
//!
//! The actor's pool steps hundreds of envs per batch and ships their
//! observations as one little-endian byte buffer (see
//! `StepBatch.observations`). Each env writes its observation straight into
//! its row of that buffer, so a step costs no allocation and no copy beyond
//! the write itself.
//!
//! # Cost
//!
//! One virtual call per step plus the env's own work: CartPole's step is a
//! few dozen floating-point operations, the synthetic env's is its
//! configured busy work plus one pass over its observation bytes.

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

/// One action, as the env's [`ActionSpace`](seed_shared::ActionSpace) says.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Action<'a> {
    /// Below the space's `n`.
    Discrete(u32),
    /// The space's `dim()` floats, row-major, already clipped to its bounds.
    Continuous(&'a [f32]),
}

impl Action<'_> {
    /// The discrete action, or an error for an env that takes only those.
    pub fn discrete(self) -> Result<u32, EnvError> {
        match self {
            Action::Discrete(a) => Ok(a),
            Action::Continuous(_) => Err(EnvError::msg(
                "this env takes discrete actions, got a continuous one",
            )),
        }
    }
}

/// An env that failed to reset or step: the actor stops with it (a Python
/// env's exception, say). Boxed so that any error type fits and can be
/// recovered by downcasting ([`EnvError::into_inner`]).
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct EnvError(Box<dyn std::error::Error + Send + Sync>);

impl EnvError {
    pub fn new(e: impl std::error::Error + Send + Sync + 'static) -> Self {
        EnvError(Box::new(e))
    }

    /// An error carrying only a message.
    pub fn msg(message: impl Into<String>) -> Self {
        EnvError(message.into().into())
    }

    /// The original error, for downcasting.
    pub fn into_inner(self) -> Box<dyn std::error::Error + Send + Sync> {
        self.0
    }
}

/// One environment, with discrete or continuous actions.
///
/// `obs` is always exactly [`EnvSpec::obs_bytes`](seed_shared::EnvSpec::obs_bytes)
/// long; implementations write the whole observation into it, little-endian,
/// row-major. Implement it to drive your own env with the Rust actor
/// (`seed_actor::run_actor_with_envs`); the Python package implements it
/// over Gymnasium envs.
pub trait Env: Send {
    /// Starts a new episode; `seed` determines the initial state.
    fn reset(&mut self, seed: u64, obs: &mut [u8]) -> Result<(), EnvError>;
    /// Applies `action` (valid for the spec's action space) and writes the
    /// next observation.
    fn step(&mut self, action: Action<'_>, obs: &mut [u8]) -> Result<Transition, EnvError>;
}
