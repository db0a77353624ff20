//! Pendulum-v1 with Gymnasium's dynamics and constants: the continuous-action
//! env every continuous-control method is first tried on.
//!
//! Mirrors `gymnasium/envs/classic_control/pendulum.py` (Gymnasium 1.x): the
//! state is the angle θ (0 = upright) and the angular velocity θ̇; the
//! observation is `[cos θ, sin θ, θ̇]` as f32; the action is one torque in
//! `[-2, 2]` (clipped again here); the reward is
//! `-(normalize(θ)² + 0.1 θ̇² + 0.001 u²)`, so it lies in `[-16.27, 0]`;
//! semi-implicit Euler with dt = 0.05, θ̇ clipped to ±8; reset uniform in
//! θ ∈ [-π, π], θ̇ ∈ [-1, 1]; never terminates, and the `TimeLimit` of
//! `gym.make("Pendulum-v1")` truncates at 200 steps.
//!
//! Why in Rust: it gives the learner's continuous-action path (the Gaussian
//! policy head) an env that needs no Python, for tests and benchmarks.
//! Cost: one `sin`, one `cos` and a dozen flops per step.

use std::f64::consts::PI;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use seed_shared::{ActionSpace, EnvSpec, ObsDType};

use crate::env::{Action, Env, EnvError, Transition};

const MAX_SPEED: f64 = 8.0;
/// Largest torque.
pub const PENDULUM_MAX_TORQUE: f32 = 2.0;
const DT: f64 = 0.05;
const G: f64 = 10.0;
const M: f64 = 1.0;
const L: f64 = 1.0;

/// `max_episode_steps` of Gymnasium's Pendulum-v1 registration.
pub const PENDULUM_MAX_EPISODE_STEPS: u32 = 200;

/// The pendulum's angle and angular velocity plus the time-limit counter.
#[derive(Debug, Clone)]
pub struct Pendulum {
    theta: f64,
    theta_dot: f64,
    elapsed_steps: u32,
}

impl Default for Pendulum {
    fn default() -> Self {
        Self::new()
    }
}

impl Pendulum {
    /// A pendulum hanging still; call [`Env::reset`] before stepping.
    pub fn new() -> Self {
        Pendulum {
            theta: PI,
            theta_dot: 0.0,
            elapsed_steps: 0,
        }
    }

    /// Pendulum-v1's spec: 3 f32 observations, one torque in `[-2, 2]`.
    pub fn spec() -> EnvSpec {
        EnvSpec {
            env_name: "Pendulum-v1".into(),
            obs_shape: vec![3],
            obs_dtype: ObsDType::F32,
            action: ActionSpace::uniform_box(1, -PENDULUM_MAX_TORQUE, PENDULUM_MAX_TORQUE),
        }
    }

    /// `(θ, θ̇)`.
    pub fn state(&self) -> (f64, f64) {
        (self.theta, self.theta_dot)
    }

    fn write_obs(&self, obs: &mut [u8]) {
        debug_assert_eq!(obs.len(), 12);
        let values = [self.theta.cos(), self.theta.sin(), self.theta_dot];
        for (dst, v) in obs.chunks_exact_mut(4).zip(values) {
            dst.copy_from_slice(&(v as f32).to_le_bytes());
        }
    }
}

/// θ mapped into `[-π, π)`, as Gymnasium's `angle_normalize`.
fn angle_normalize(x: f64) -> f64 {
    (x + PI).rem_euclid(2.0 * PI) - PI
}

impl Env for Pendulum {
    fn reset(&mut self, seed: u64, obs: &mut [u8]) -> Result<(), EnvError> {
        let mut rng = SmallRng::seed_from_u64(seed);
        self.theta = rng.random_range(-PI..PI);
        self.theta_dot = rng.random_range(-1.0..1.0);
        self.elapsed_steps = 0;
        self.write_obs(obs);
        Ok(())
    }

    fn step(&mut self, action: Action<'_>, obs: &mut [u8]) -> Result<Transition, EnvError> {
        let u = match action {
            Action::Continuous(&[u]) => u,
            other => {
                return Err(EnvError::msg(format!(
                    "Pendulum-v1 takes one continuous torque, got {other:?}"
                )))
            }
        };
        let u = f64::from(u.clamp(-PENDULUM_MAX_TORQUE, PENDULUM_MAX_TORQUE));
        let (th, thdot) = (self.theta, self.theta_dot);
        let cost = angle_normalize(th).powi(2) + 0.1 * thdot * thdot + 0.001 * u * u;
        let new_thdot = thdot + (3.0 * G / (2.0 * L) * th.sin() + 3.0 / (M * L * L) * u) * DT;
        let new_thdot = new_thdot.clamp(-MAX_SPEED, MAX_SPEED);
        self.theta = th + new_thdot * DT;
        self.theta_dot = new_thdot;
        self.elapsed_steps += 1;
        self.write_obs(obs);
        Ok(Transition {
            reward: -cost as f32,
            terminated: false,
            truncated: self.elapsed_steps >= PENDULUM_MAX_EPISODE_STEPS,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obs_f32(obs: &[u8; 12]) -> [f32; 3] {
        let mut out = [0f32; 3];
        seed_shared::codec::read_f32_le_into(obs, &mut out);
        out
    }

    #[test]
    fn one_step_matches_the_closed_form_and_clips_the_torque() {
        let mut env = Pendulum::new();
        let mut obs = [0u8; 12];
        env.reset(3, &mut obs).unwrap();
        let (th, thdot) = env.state();
        let o = obs_f32(&obs);
        assert_eq!(o, [th.cos() as f32, th.sin() as f32, thdot as f32]);
        // A torque of 5 acts as 2.
        let t = env.step(Action::Continuous(&[5.0]), &mut obs).unwrap();
        let norm = angle_normalize(th);
        let cost = norm * norm + 0.1 * thdot * thdot + 0.001 * 4.0;
        assert!((f64::from(t.reward) + cost).abs() < 1e-5);
        let want_thdot = (thdot + (15.0 * th.sin() + 3.0 * 2.0) * 0.05).clamp(-8.0, 8.0);
        let (th2, thdot2) = env.state();
        assert!((thdot2 - want_thdot).abs() < 1e-12);
        assert!((th2 - (th + want_thdot * 0.05)).abs() < 1e-12);
        assert!(!t.terminated && !t.truncated);
    }

    #[test]
    fn truncates_at_200_steps_and_refuses_discrete_actions() {
        let mut env = Pendulum::new();
        let mut obs = [0u8; 12];
        env.reset(0, &mut obs).unwrap();
        for step in 1..=PENDULUM_MAX_EPISODE_STEPS {
            let t = env.step(Action::Continuous(&[0.0]), &mut obs).unwrap();
            assert_eq!(t.truncated, step == PENDULUM_MAX_EPISODE_STEPS);
            assert!(t.reward <= 0.0 && t.reward >= -16.3);
        }
        assert!(env.step(Action::Discrete(1), &mut obs).is_err());
        assert!(env.step(Action::Continuous(&[0.0, 1.0]), &mut obs).is_err());
    }

    #[test]
    fn angles_normalize_into_minus_pi_to_pi() {
        for (x, want) in [
            (0.0, 0.0),
            (2.0 * PI, 0.0),
            (PI + 0.5, -PI + 0.5),
            (-PI - 0.5, PI - 0.5),
        ] {
            assert!((angle_normalize(x) - want).abs() < 1e-12, "{x}");
        }
    }
}
