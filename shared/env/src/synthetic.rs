//! A synthetic env for benchmarks: any observation shape and dtype (e.g. an
//! Atari-sized 84x84x4 u8 frame), any number of actions, a fixed episode
//! length and a configurable per-step CPU cost.
//!
//! Its content is cheap and deterministic so that benchmarks measure the
//! system, not the env: step `t` of an env with salt `s` writes element `i`
//! as `(i + t + s) mod 256` (as a byte for u8, divided by 255 for f32), one
//! vectorisable pass over the buffer. The reward is 1 when the action equals
//! `t mod num_actions`, else 0, so a policy has something to learn. An
//! episode terminates after `episode_len` steps.
//!
//! The CPU cost is deterministic busy work (a serial integer recurrence)
//! whose iteration count per microsecond is calibrated once per process, so
//! every step does the same work regardless of scheduling noise.

use std::sync::OnceLock;
use std::time::Instant;

use seed_shared::{EnvSpec, ObsDType};

use crate::env::{Action, Env, EnvError, Transition};

/// Parameters of the synthetic env.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntheticConfig {
    /// Shape of one observation, e.g. `[4, 84, 84]` (images channels-first).
    pub obs_shape: Vec<usize>,
    /// Element type of the observation.
    pub obs_dtype: ObsDType,
    /// Number of discrete actions (at least 1).
    pub num_actions: u32,
    /// Busy work per step, in microseconds of this machine's CPU.
    pub step_cost_us: u64,
    /// Steps per episode (at least 1); the last one terminates.
    pub episode_len: u32,
}

impl Default for SyntheticConfig {
    /// An Atari-sized frame: 84x84x4 u8, 6 actions, no busy work, 1000-step episodes.
    fn default() -> Self {
        SyntheticConfig {
            obs_shape: vec![4, 84, 84],
            obs_dtype: ObsDType::U8,
            num_actions: 6,
            step_cost_us: 0,
            episode_len: 1000,
        }
    }
}

impl SyntheticConfig {
    /// The spec announced in the hello.
    pub fn spec(&self) -> EnvSpec {
        EnvSpec::synthetic(self.obs_shape.clone(), self.obs_dtype, self.num_actions)
    }
}

/// One synthetic env.
#[derive(Debug, Clone)]
pub struct SyntheticEnv {
    cfg: SyntheticConfig,
    /// Distinguishes envs (from the build seed) and episodes (from the reset seed).
    salt: u8,
    build_salt: u8,
    /// Steps taken in the current episode.
    t: u32,
    busy_iterations: u64,
}

impl SyntheticEnv {
    /// A synthetic env; `seed` individualises its content.
    pub fn new(cfg: SyntheticConfig, seed: u64) -> Self {
        let busy_iterations = if cfg.step_cost_us == 0 {
            0
        } else {
            cfg.step_cost_us.saturating_mul(busy_iterations_per_us())
        };
        let build_salt = seed as u8;
        SyntheticEnv {
            cfg,
            salt: build_salt,
            build_salt,
            t: 0,
            busy_iterations,
        }
    }

    fn write_obs(&self, obs: &mut [u8]) {
        let phase = (self.t as u8).wrapping_add(self.salt);
        match self.cfg.obs_dtype {
            ObsDType::U8 => {
                for (i, b) in obs.iter_mut().enumerate() {
                    *b = (i as u8).wrapping_add(phase);
                }
            }
            ObsDType::F32 => {
                for (i, dst) in obs.chunks_exact_mut(4).enumerate() {
                    let v = (i as u8).wrapping_add(phase) as f32 / 255.0;
                    dst.copy_from_slice(&v.to_le_bytes());
                }
            }
        }
    }
}

impl Env for SyntheticEnv {
    fn reset(&mut self, seed: u64, obs: &mut [u8]) -> Result<(), EnvError> {
        self.t = 0;
        self.salt = self.build_salt.wrapping_add(seed as u8);
        self.write_obs(obs);
        Ok(())
    }

    fn step(&mut self, action: Action<'_>, obs: &mut [u8]) -> Result<Transition, EnvError> {
        let action = action.discrete()?;
        if self.busy_iterations > 0 {
            busy_work(self.busy_iterations);
        }
        let reward = if action == self.t % self.cfg.num_actions {
            1.0
        } else {
            0.0
        };
        self.t += 1;
        self.write_obs(obs);
        Ok(Transition {
            reward,
            terminated: self.t >= self.cfg.episode_len,
            truncated: false,
        })
    }
}

/// Runs `iterations` steps of a serial 64-bit LCG; `black_box` keeps the
/// optimiser from shortening the chain.
fn busy_work(iterations: u64) -> u64 {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for _ in 0..std::hint::black_box(iterations) {
        x = std::hint::black_box(
            x.wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407),
        );
    }
    x
}

/// Busy-work iterations per microsecond on this machine, measured once
/// (about 2 ms) on first use and shared by every env of the process.
pub(crate) fn busy_iterations_per_us() -> u64 {
    static CALIBRATED: OnceLock<u64> = OnceLock::new();
    *CALIBRATED.get_or_init(|| {
        let mut iterations = 1u64 << 12;
        loop {
            let start = Instant::now();
            busy_work(iterations);
            let us = start.elapsed().as_micros() as u64;
            if us >= 2_000 || iterations >= 1 << 40 {
                return (iterations / us.max(1)).max(1);
            }
            iterations *= 2;
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(shape: &[usize], dtype: ObsDType) -> SyntheticConfig {
        SyntheticConfig {
            obs_shape: shape.to_vec(),
            obs_dtype: dtype,
            num_actions: 3,
            step_cost_us: 0,
            episode_len: 4,
        }
    }

    #[test]
    fn spec_matches_shape_and_dtype() {
        let atari = cfg(&[4, 84, 84], ObsDType::U8).spec();
        assert_eq!(atari.obs_bytes(), 84 * 84 * 4);
        assert_eq!(atari.num_actions(), Some(3));
        let vector = cfg(&[2, 5], ObsDType::F32).spec();
        assert_eq!(vector.obs_bytes(), 40);
        assert_eq!(vector.obs_dtype, ObsDType::F32);
    }

    #[test]
    fn u8_content_is_deterministic_and_changes_per_step() {
        let c = cfg(&[4, 84, 84], ObsDType::U8);
        let n = c.spec().obs_bytes();
        let (mut a, mut b) = (SyntheticEnv::new(c.clone(), 5), SyntheticEnv::new(c, 5));
        let (mut oa, mut ob) = (vec![0u8; n], vec![0u8; n]);
        a.reset(9, &mut oa).unwrap();
        b.reset(9, &mut ob).unwrap();
        assert_eq!(oa, ob);
        assert_eq!(oa[1], oa[0].wrapping_add(1));
        let first = oa.clone();
        a.step(Action::Discrete(0), &mut oa).unwrap();
        assert_ne!(oa, first);
        assert_eq!(oa[0], first[0].wrapping_add(1));
    }

    #[test]
    fn f32_content_is_in_unit_range() {
        let c = cfg(&[3, 7], ObsDType::F32);
        let mut env = SyntheticEnv::new(c, 0);
        let mut obs = vec![0u8; 84];
        env.reset(0, &mut obs).unwrap();
        let mut values = [0f32; 21];
        seed_shared::codec::read_f32_le_into(&obs, &mut values);
        assert!(values.iter().all(|v| (0.0..=1.0).contains(v)));
        assert_eq!(values[1], 1.0 / 255.0);
    }

    #[test]
    fn reward_follows_the_step_index_and_episode_terminates() {
        let mut env = SyntheticEnv::new(cfg(&[1], ObsDType::U8), 0);
        let mut obs = [0u8; 1];
        env.reset(0, &mut obs).unwrap();
        let rewards: Vec<f32> = (0..4)
            .map(|_| env.step(Action::Discrete(1), &mut obs).unwrap().reward)
            .collect();
        // t = 0, 1, 2, 3 with 3 actions: action 1 matches only t = 1.
        assert_eq!(rewards, [0.0, 1.0, 0.0, 0.0]);
        env.reset(0, &mut obs).unwrap();
        let ends: Vec<bool> = (0..4)
            .map(|t| {
                env.step(Action::Discrete(t % 3), &mut obs)
                    .unwrap()
                    .terminated
            })
            .collect();
        assert_eq!(ends, [false, false, false, true]);
    }

    #[test]
    fn busy_work_is_calibrated() {
        assert!(busy_iterations_per_us() >= 1);
        let c = SyntheticConfig {
            step_cost_us: 3,
            ..cfg(&[1], ObsDType::U8)
        };
        let env = SyntheticEnv::new(c, 0);
        assert_eq!(env.busy_iterations, 3 * busy_iterations_per_us());
    }
}
