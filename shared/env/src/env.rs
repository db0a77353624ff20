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

/// One environment with discrete actions.
///
/// `obs` is always exactly [`EnvSpec::obs_bytes`](seed_shared::EnvSpec::obs_bytes)
/// long; implementations write the whole observation into it, little-endian,
/// row-major.
pub trait Env: Send {
    /// Starts a new episode; `seed` determines the initial state.
    fn reset(&mut self, seed: u64, obs: &mut [u8]);
    /// Applies `action` (below the spec's `num_actions`) and writes the next observation.
    fn step(&mut self, action: u32, obs: &mut [u8]) -> Transition;
}
