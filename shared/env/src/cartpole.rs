//! CartPole-v1 with exactly Gymnasium's dynamics and constants.
//!
//! Mirrors `gymnasium/envs/classic_control/cartpole.py` (Gymnasium 1.x):
//! Euler integration in f64, observations emitted as f32, reward 1 on every
//! step including the terminating one, termination when |x| > 2.4 or
//! |θ| > 12°, reset uniform in ±0.05 on all four state variables, and the
//! `TimeLimit` wrapper of `gym.make("CartPole-v1")` truncating at 500 steps.
//! `shared/env/tests/cartpole_reference.rs` checks transitions against the real
//! Gymnasium to 1e-6.
//!
//! Cost: one `sin`, one `cos` and about twenty flops per step.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::env::{Action, Env, EnvError, Transition};

const GRAVITY: f64 = 9.8;
const MASSCART: f64 = 1.0;
const MASSPOLE: f64 = 0.1;
const TOTAL_MASS: f64 = MASSPOLE + MASSCART;
/// Half the pole's length, as Gymnasium names it.
const LENGTH: f64 = 0.5;
const POLEMASS_LENGTH: f64 = MASSPOLE * LENGTH;
const FORCE_MAG: f64 = 10.0;
/// Seconds between state updates.
const TAU: f64 = 0.02;
/// 12 degrees, computed as Gymnasium does (`12 * 2 * math.pi / 360`).
const THETA_THRESHOLD_RADIANS: f64 = 12.0 * 2.0 * std::f64::consts::PI / 360.0;
const X_THRESHOLD: f64 = 2.4;
/// Reset draws every state variable uniformly from `[-0.05, 0.05)`.
const RESET_BOUND: f64 = 0.05;

/// `max_episode_steps` of Gymnasium's CartPole-v1 registration.
pub const CARTPOLE_MAX_EPISODE_STEPS: u32 = 500;

/// The cart-pole state `[x, x_dot, theta, theta_dot]` plus the time-limit counter.
#[derive(Debug, Clone)]
pub struct CartPole {
    state: [f64; 4],
    elapsed_steps: u32,
    rng: SmallRng,
}

impl Default for CartPole {
    fn default() -> Self {
        Self::new()
    }
}

impl CartPole {
    /// A CartPole at rest; call [`Env::reset`] before stepping.
    pub fn new() -> Self {
        CartPole {
            state: [0.0; 4],
            elapsed_steps: 0,
            rng: SmallRng::seed_from_u64(0),
        }
    }

    /// The full-precision state `[x, x_dot, theta, theta_dot]`.
    pub fn state(&self) -> [f64; 4] {
        self.state
    }

    /// Overwrites the state, like `env.unwrapped.state = ...` in Gymnasium;
    /// the time-limit counter is kept.
    pub fn set_state(&mut self, state: [f64; 4]) {
        self.state = state;
    }

    fn write_obs(&self, obs: &mut [u8]) {
        debug_assert_eq!(obs.len(), 16);
        for (dst, &v) in obs.chunks_exact_mut(4).zip(&self.state) {
            dst.copy_from_slice(&(v as f32).to_le_bytes());
        }
    }
}

impl Env for CartPole {
    fn reset(&mut self, seed: u64, obs: &mut [u8]) -> Result<(), EnvError> {
        self.rng = SmallRng::seed_from_u64(seed);
        for v in &mut self.state {
            *v = self.rng.random_range(-RESET_BOUND..RESET_BOUND);
        }
        self.elapsed_steps = 0;
        self.write_obs(obs);
        Ok(())
    }

    fn step(&mut self, action: Action<'_>, obs: &mut [u8]) -> Result<Transition, EnvError> {
        let action = action.discrete()?;
        let [x, x_dot, theta, theta_dot] = self.state;
        let force = if action == 1 { FORCE_MAG } else { -FORCE_MAG };
        let costheta = theta.cos();
        let sintheta = theta.sin();
        // Same operation order as Gymnasium, so results agree to the last bits.
        let temp = (force + POLEMASS_LENGTH * (theta_dot * theta_dot) * sintheta) / TOTAL_MASS;
        let thetaacc = (GRAVITY * sintheta - costheta * temp)
            / (LENGTH * (4.0 / 3.0 - MASSPOLE * (costheta * costheta) / TOTAL_MASS));
        let xacc = temp - POLEMASS_LENGTH * thetaacc * costheta / TOTAL_MASS;
        // Euler: positions advance with the old velocities.
        self.state = [
            x + TAU * x_dot,
            x_dot + TAU * xacc,
            theta + TAU * theta_dot,
            theta_dot + TAU * thetaacc,
        ];
        let [x, _, theta, _] = self.state;
        // Gymnasium's comparison, kept literally (it is false for NaN).
        #[allow(clippy::manual_range_contains)]
        let terminated = x < -X_THRESHOLD
            || x > X_THRESHOLD
            || theta < -THETA_THRESHOLD_RADIANS
            || theta > THETA_THRESHOLD_RADIANS;
        // TimeLimit: truncated once the step counter reaches the limit, even on
        // a terminating step (the pool lets termination win).
        self.elapsed_steps += 1;
        let truncated = self.elapsed_steps >= CARTPOLE_MAX_EPISODE_STEPS;
        self.write_obs(obs);
        Ok(Transition {
            reward: 1.0,
            terminated,
            truncated,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obs_f32(obs: &[u8; 16]) -> [f32; 4] {
        let mut out = [0f32; 4];
        seed_shared::codec::read_f32_le_into(obs, &mut out);
        out
    }

    #[test]
    fn reset_is_uniform_in_bounds_and_seeded() {
        let mut env = CartPole::new();
        let mut obs = [0u8; 16];
        let mut seen_negative = false;
        let mut seen_positive = false;
        for seed in 0..200 {
            env.reset(seed, &mut obs).unwrap();
            for v in env.state() {
                assert!((-RESET_BOUND..RESET_BOUND).contains(&v), "{v}");
                seen_negative |= v < 0.0;
                seen_positive |= v > 0.0;
            }
            assert_eq!(obs_f32(&obs), env.state().map(|v| v as f32));
        }
        assert!(seen_negative && seen_positive);
        let mut other = CartPole::new();
        let mut other_obs = [0u8; 16];
        env.reset(42, &mut obs).unwrap();
        other.reset(42, &mut other_obs).unwrap();
        assert_eq!(obs, other_obs);
        other.reset(43, &mut other_obs).unwrap();
        assert_ne!(obs, other_obs);
    }

    #[test]
    fn reset_restarts_the_time_limit() {
        let mut env = CartPole::new();
        let mut obs = [0u8; 16];
        env.reset(1, &mut obs).unwrap();
        for _ in 0..CARTPOLE_MAX_EPISODE_STEPS - 1 {
            env.set_state([0.0; 4]);
            assert!(!env.step(Action::Discrete(0), &mut obs).unwrap().truncated);
        }
        env.reset(2, &mut obs).unwrap();
        env.set_state([0.0; 4]);
        assert!(!env.step(Action::Discrete(0), &mut obs).unwrap().truncated);
    }
}
