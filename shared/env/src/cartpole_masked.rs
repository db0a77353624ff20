//! `cartpole-masked`: CartPole-v1 whose observation hides both velocities,
//! a memory task.
//!
//! The agent sees only `[x, θ]` (cart position and pole angle, f32); the
//! dynamics, rewards, termination, the 500-step time limit and the seeded
//! reset are exactly [`CartPole`]'s, which this env wraps. Without the
//! velocities the state is not Markov in one observation: a feed-forward
//! policy cannot tell a pole swinging up from one falling, while a recurrent
//! one (LSTM V-trace, R2D2) can infer the velocities from consecutive
//! observations. This is the partially observed CartPole of the R2D2 and
//! "recurrent policy" literature.
//!
//! Cost: one [`CartPole`] step plus writing 8 bytes instead of 16.

use seed_shared::{ActionSpace, EnvSpec, ObsDType};

use crate::cartpole::CartPole;
use crate::env::{Action, Env, EnvError, Transition};

/// CartPole-v1 observed through `[x, θ]` only.
#[derive(Debug, Clone, Default)]
pub struct MaskedCartPole {
    inner: CartPole,
    /// The wrapped env's full observation, written and discarded each step.
    full_obs: [u8; 16],
}

impl MaskedCartPole {
    /// A masked CartPole at rest; call [`Env::reset`] before stepping.
    pub fn new() -> Self {
        Self::default()
    }

    /// The spec: 2 f32 observations (`x`, `θ`), 2 actions.
    pub fn spec() -> EnvSpec {
        EnvSpec {
            env_name: "CartPole-v1-masked".into(),
            obs_shape: vec![2],
            obs_dtype: ObsDType::F32,
            action: ActionSpace::Discrete(2),
        }
    }

    /// The full hidden state `[x, x_dot, theta, theta_dot]`.
    pub fn state(&self) -> [f64; 4] {
        self.inner.state()
    }

    /// Copies `x` (bytes 0..4) and `θ` (bytes 8..12) of the full observation.
    fn write_obs(&self, obs: &mut [u8]) {
        debug_assert_eq!(obs.len(), 8);
        obs[..4].copy_from_slice(&self.full_obs[..4]);
        obs[4..8].copy_from_slice(&self.full_obs[8..12]);
    }
}

impl Env for MaskedCartPole {
    fn reset(&mut self, seed: u64, obs: &mut [u8]) -> Result<(), EnvError> {
        self.inner.reset(seed, &mut self.full_obs)?;
        self.write_obs(obs);
        Ok(())
    }

    fn step(&mut self, action: Action<'_>, obs: &mut [u8]) -> Result<Transition, EnvError> {
        let transition = self.inner.step(action, &mut self.full_obs)?;
        self.write_obs(obs);
        Ok(transition)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32s<const N: usize>(bytes: &[u8]) -> [f32; N] {
        let mut out = [0f32; N];
        seed_shared::codec::read_f32_le_into(bytes, &mut out);
        out
    }

    /// Same seed, same actions: the masked env's observations are the full
    /// env's `x` and `θ`, and every transition (reward, termination,
    /// truncation) is identical, through several episodes.
    #[test]
    fn observes_position_and_angle_of_the_same_dynamics() {
        let mut full = CartPole::new();
        let mut masked = MaskedCartPole::new();
        let (mut full_obs, mut masked_obs) = ([0u8; 16], [0u8; 8]);
        assert_eq!(MaskedCartPole::spec().obs_bytes(), masked_obs.len());
        let mut episodes = 0;
        let mut seed = 7;
        full.reset(seed, &mut full_obs).unwrap();
        masked.reset(seed, &mut masked_obs).unwrap();
        for step in 0..3000u32 {
            let f: [f32; 4] = f32s(&full_obs);
            assert_eq!(f32s::<2>(&masked_obs), [f[0], f[2]], "step {step}");
            assert_eq!(masked.state(), full.state());
            // A policy that balances for a while and then lets the pole fall.
            let balance = f[2] + 0.3 * f[3] > 0.0;
            let action = Action::Discrete(u32::from(balance ^ (step % 97 == 0)));
            let a = full.step(action, &mut full_obs).unwrap();
            let b = masked.step(action, &mut masked_obs).unwrap();
            assert_eq!(a, b, "step {step}");
            if a.terminated || a.truncated {
                episodes += 1;
                seed += 1;
                full.reset(seed, &mut full_obs).unwrap();
                masked.reset(seed, &mut masked_obs).unwrap();
            }
        }
        assert!(episodes >= 3, "only {episodes} episodes ended");
    }
}
