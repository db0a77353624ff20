//! [`EnvPool`]: K envs stepped in two halves, each half encoded as one
//! `StepBatch`.
//!
//! # Why halves
//!
//! While the learner infers actions for one half, the actor steps the other
//! (SEED RL's actor pipelining), so neither side waits on the other when the
//! env step and the round trip take similar time. With K = 1 there is a single
//! half.
//!
//! # Episode protocol (see `StepBatch` in `proto/seed/v1/seed.proto`)
//!
//! - Termination: the env is reset at once; the row carries the first
//!   observation of the next episode, the final reward and `terminated`.
//! - Truncation (time limit): the row carries the final observation, its
//!   reward and `truncated`. The action the learner returns for it is
//!   ignored: the env is reset and its next row is the first observation of
//!   the next episode with reward 0 and both flags false.
//!   If an env reports both, termination wins (the state is terminal).
//! - Every finished episode's return and length ride along in the next batch
//!   of its half.
//! - [`EnvPool::restart`] (every new session) resets every env and draws a
//!   fresh random run id per env, so no trajectory continues across a
//!   reconnect.
//!
//! # Cost
//!
//! Stepping allocates nothing per env: each env writes its observation into
//! its row of the half's one observation buffer, which is reused once the
//! previous batch's bytes have been encoded and dropped. Taking a batch costs
//! a handful of allocations per *batch* (the protobuf's per-env vectors).

use std::ops::Range;

use bytes::BytesMut;
use rand::rngs::SmallRng;
use rand::{Rng, RngCore, SeedableRng};
use seed_env::{Action, Env, EnvConfig, EnvError};
use seed_shared::{pb, ActionSpace, EnvSpec};

/// The actions for one half's envs, one row per env in the half's order.
#[derive(Debug, Clone, Copy)]
pub enum HalfActions<'a> {
    /// One action per env.
    Discrete(&'a [u32]),
    /// `dim` floats per env, row-major, as the policy sampled them: the pool
    /// clips each row to the action space's bounds before stepping.
    Continuous(&'a [f32]),
}

/// One half of the pool: its env index range and the batch being assembled.
#[derive(Debug)]
struct Half {
    envs: Range<usize>,
    env_indices: Vec<u32>,
    /// `envs.len() x obs_bytes`, one row per env.
    obs: BytesMut,
    rewards: Vec<f32>,
    terminated: Vec<bool>,
    truncated: Vec<bool>,
    /// Episodes of this half finished since its previous batch.
    episodes: Vec<pb::EpisodeStats>,
}

/// K envs, their per-env episode bookkeeping and the two halves' batches.
pub struct EnvPool {
    envs: Vec<Box<dyn Env>>,
    obs_bytes: usize,
    action_space: ActionSpace,
    /// One clipped continuous action (empty for discrete spaces).
    clipped: Vec<f32>,
    halves: Vec<Half>,
    run_ids: Vec<u64>,
    episode_return: Vec<f64>,
    episode_length: Vec<u32>,
    /// The env's last row was truncated: its next action is ignored and it resets.
    reset_pending: Vec<bool>,
    /// Seeds of episode resets; deterministic given the pool seed.
    reset_seeds: SmallRng,
    episodes_finished: u64,
}

impl std::fmt::Debug for EnvPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EnvPool")
            .field("num_envs", &self.envs.len())
            .field("obs_bytes", &self.obs_bytes)
            .field("episodes_finished", &self.episodes_finished)
            .finish_non_exhaustive()
    }
}

impl EnvPool {
    /// `num_envs` envs built from `env`, env `i` with seed `seed + i`.
    pub fn from_config(env: &EnvConfig, num_envs: usize, seed: u64) -> Result<Self, EnvError> {
        let envs = (0..num_envs)
            .map(|i| env.build(seed.wrapping_add(i as u64)))
            .collect();
        Self::new(envs, &env.spec(), seed)
    }

    /// A pool over the given envs, which must all match `spec`; resets
    /// every env (an env that fails to reset fails the pool).
    ///
    /// # Panics
    /// If `envs` is empty (configs are validated before this).
    pub fn new(envs: Vec<Box<dyn Env>>, spec: &EnvSpec, seed: u64) -> Result<Self, EnvError> {
        let k = envs.len();
        assert!(k > 0, "an env pool needs at least one env");
        let obs_bytes = spec.obs_bytes();
        // Half boundaries: [0, ceil(K/2), K], or a single half when K = 1.
        let split = k.div_ceil(2);
        let bounds: &[usize] = if k == 1 { &[0, 1] } else { &[0, split, k] };
        let ranges = bounds.windows(2).map(|w| w[0]..w[1]);
        let halves = ranges
            .map(|envs| {
                let n = envs.len();
                Half {
                    env_indices: envs.clone().map(|i| i as u32).collect(),
                    envs,
                    obs: BytesMut::with_capacity(n * obs_bytes),
                    rewards: vec![0.0; n],
                    terminated: vec![false; n],
                    truncated: vec![false; n],
                    episodes: Vec::new(),
                }
            })
            .collect();
        let clipped = match &spec.action {
            ActionSpace::Discrete(_) => Vec::new(),
            space @ ActionSpace::Box { .. } => vec![0.0; space.dim()],
        };
        let mut pool = EnvPool {
            envs,
            obs_bytes,
            action_space: spec.action.clone(),
            clipped,
            halves,
            run_ids: vec![0; k],
            episode_return: vec![0.0; k],
            episode_length: vec![0; k],
            reset_pending: vec![false; k],
            reset_seeds: SmallRng::seed_from_u64(seed),
            episodes_finished: 0,
        };
        pool.restart()?;
        Ok(pool)
    }

    /// Number of envs K.
    pub fn num_envs(&self) -> usize {
        self.envs.len()
    }

    /// 2, or 1 when K = 1.
    pub fn num_halves(&self) -> usize {
        self.halves.len()
    }

    /// Env indices of half `half`.
    pub fn half_envs(&self, half: usize) -> Range<usize> {
        self.halves[half].envs.clone()
    }

    /// Episodes finished since the pool was created.
    pub fn episodes_finished(&self) -> u64 {
        self.episodes_finished
    }

    /// Current run id of every env.
    pub fn run_ids(&self) -> &[u64] {
        &self.run_ids
    }

    /// Starts fresh episodes in every env with fresh random run ids; each
    /// half's next batch carries the reset observations (reward 0, no flags).
    /// Unsent episode statistics of the previous session are dropped.
    pub fn restart(&mut self) -> Result<(), EnvError> {
        // Run ids come from the OS-seeded thread RNG, not the pool seed, so a
        // restarted actor with the same seed still never reuses one.
        let mut fresh = rand::rng();
        for id in &mut self.run_ids {
            *id = fresh.random();
        }
        self.episode_return.fill(0.0);
        self.episode_length.fill(0);
        self.reset_pending.fill(false);
        let ob = self.obs_bytes;
        for half in &mut self.halves {
            half.obs.clear();
            half.obs.resize(half.envs.len() * ob, 0);
            for (row, i) in half.envs.clone().enumerate() {
                let obs = &mut half.obs[row * ob..(row + 1) * ob];
                self.envs[i].reset(self.reset_seeds.next_u64(), obs)?;
            }
            half.rewards.fill(0.0);
            half.terminated.fill(false);
            half.truncated.fill(false);
            half.episodes.clear();
        }
        Ok(())
    }

    /// Steps every env of `half` with its discrete action (`actions[row]`
    /// for the half's row-th env) and assembles the half's next batch.
    ///
    /// The caller has checked that there is one action per env and each is
    /// below `num_actions`.
    pub fn step_half(&mut self, half: usize, actions: &[u32]) -> Result<(), EnvError> {
        self.step_half_with(half, HalfActions::Discrete(actions))
    }

    /// Steps every env of `half` with its row of `actions` and assembles the
    /// half's next batch. Continuous rows are clipped to the action space's
    /// bounds first. The caller has checked the actions against the spec
    /// ([`EnvSpec::check_actions`]). An env's error stops the step there.
    pub fn step_half_with(
        &mut self,
        half: usize,
        actions: HalfActions<'_>,
    ) -> Result<(), EnvError> {
        let ob = self.obs_bytes;
        let dim = self.action_space.dim();
        let h = &mut self.halves[half];
        debug_assert_eq!(
            match actions {
                HalfActions::Discrete(a) => a.len(),
                HalfActions::Continuous(a) => a.len() / dim.max(1),
            },
            h.envs.len()
        );
        // Reclaims the previous batch's allocation once its bytes were
        // encoded and dropped; only allocates if they are still alive.
        h.obs.clear();
        h.obs.resize(h.envs.len() * ob, 0);
        for (row, i) in h.envs.clone().enumerate() {
            let obs = &mut h.obs[row * ob..(row + 1) * ob];
            let env = &mut self.envs[i];
            if self.reset_pending[i] {
                // The action answers a truncated final observation: ignored.
                self.reset_pending[i] = false;
                env.reset(self.reset_seeds.next_u64(), obs)?;
                h.rewards[row] = 0.0;
                h.terminated[row] = false;
                h.truncated[row] = false;
                continue;
            }
            let action = match actions {
                HalfActions::Discrete(a) => Action::Discrete(a[row]),
                HalfActions::Continuous(a) => {
                    self.clipped.copy_from_slice(&a[row * dim..(row + 1) * dim]);
                    self.action_space.clip(&mut self.clipped);
                    Action::Continuous(&self.clipped)
                }
            };
            let t = env.step(action, obs)?;
            self.episode_return[i] += f64::from(t.reward);
            self.episode_length[i] += 1;
            h.rewards[row] = t.reward;
            h.terminated[row] = t.terminated;
            h.truncated[row] = t.truncated && !t.terminated;
            if t.terminated || t.truncated {
                h.episodes.push(pb::EpisodeStats {
                    env_index: i as u32,
                    episode_return: self.episode_return[i] as f32,
                    episode_length: self.episode_length[i],
                });
                self.episodes_finished += 1;
                self.episode_return[i] = 0.0;
                self.episode_length[i] = 0;
                if t.terminated {
                    env.reset(self.reset_seeds.next_u64(), obs)?;
                } else {
                    self.reset_pending[i] = true;
                }
            }
        }
        Ok(())
    }

    /// The half's current batch as a `StepBatch` with sequence number `seq`.
    ///
    /// Moves the observation bytes out (no copy) and drains the half's
    /// finished-episode list; call once per [`restart`](Self::restart) or
    /// [`step_half`](Self::step_half) of that half.
    pub fn take_batch(&mut self, half: usize, seq: u64) -> pb::StepBatch {
        let h = &mut self.halves[half];
        pb::StepBatch {
            seq,
            env_indices: h.env_indices.clone(),
            observations: h.obs.split().freeze(),
            rewards: h.rewards.clone(),
            terminated: h.terminated.clone(),
            truncated: h.truncated.clone(),
            run_ids: self.run_ids[h.envs.clone()].to_vec(),
            episodes: std::mem::take(&mut h.episodes),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use seed_env::Transition;
    use seed_shared::ObsDType;
    use std::sync::{Arc, Mutex};

    /// Observation = `[id, steps in episode, last action, resets]` as u8;
    /// reward = 1 + action; ends after `len` steps, by `truncate` or termination.
    struct ScriptedEnv {
        id: u8,
        len: u8,
        truncate: bool,
        t: u8,
        resets: u8,
        last_action: u8,
        actions_seen: Arc<Mutex<Vec<u32>>>,
    }

    impl ScriptedEnv {
        fn write(&self, obs: &mut [u8]) {
            obs.copy_from_slice(&[self.id, self.t, self.last_action, self.resets]);
        }
    }

    impl Env for ScriptedEnv {
        fn reset(&mut self, _seed: u64, obs: &mut [u8]) -> Result<(), EnvError> {
            self.t = 0;
            self.resets += 1;
            self.last_action = 0;
            self.write(obs);
            Ok(())
        }
        fn step(&mut self, action: Action<'_>, obs: &mut [u8]) -> Result<Transition, EnvError> {
            let action = action.discrete()?;
            self.actions_seen.lock().unwrap().push(action);
            self.t += 1;
            self.last_action = action as u8;
            self.write(obs);
            let end = self.t >= self.len;
            Ok(Transition {
                reward: 1.0 + action as f32,
                terminated: end && !self.truncate,
                truncated: end && self.truncate,
            })
        }
    }

    fn spec() -> EnvSpec {
        EnvSpec::synthetic(vec![4], ObsDType::U8, 3)
    }

    fn pool(k: usize, len: u8, truncate: bool) -> (EnvPool, Arc<Mutex<Vec<u32>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let envs = (0..k)
            .map(|i| {
                Box::new(ScriptedEnv {
                    id: i as u8,
                    len,
                    truncate,
                    t: 0,
                    resets: 0,
                    last_action: 0,
                    actions_seen: seen.clone(),
                }) as Box<dyn Env>
            })
            .collect();
        (EnvPool::new(envs, &spec(), 0).unwrap(), seen)
    }

    #[test]
    fn halves_split_the_envs_and_batches_validate() {
        let (mut p, _) = pool(5, 10, false);
        assert_eq!(p.num_halves(), 2);
        assert_eq!((p.half_envs(0), p.half_envs(1)), (0..3, 3..5));
        let b0 = p.take_batch(0, 0);
        let b1 = p.take_batch(1, 1);
        assert_eq!(b0.env_indices, [0, 1, 2]);
        assert_eq!(b1.env_indices, [3, 4]);
        assert_eq!((b0.seq, b1.seq), (0, 1));
        for b in [&b0, &b1] {
            spec().validate_step_batch(b, 5).unwrap();
            assert!(b.rewards.iter().all(|&r| r == 0.0));
            assert!(b.episodes.is_empty());
        }
        let (single, _) = pool(1, 10, false);
        assert_eq!(single.num_halves(), 1);
        assert_eq!(single.half_envs(0), 0..1);
    }

    #[test]
    fn observations_are_rows_in_env_order() {
        let (mut p, _) = pool(4, 10, false);
        p.take_batch(1, 0);
        p.step_half(1, &[2, 1]).unwrap();
        let b = p.take_batch(1, 1);
        // Env 2 took action 2, env 3 action 1; both at step 1 after one reset.
        assert_eq!(&b.observations[..], &[2, 1, 2, 1, 3, 1, 1, 1]);
        assert_eq!(b.rewards, [3.0, 2.0]);
        // Half 0 was not stepped: still its reset observations.
        let b0 = p.take_batch(0, 2);
        assert_eq!(&b0.observations[..], &[0, 0, 0, 1, 1, 0, 0, 1]);
    }

    #[test]
    fn observation_buffer_is_reused_once_the_batch_is_dropped() {
        let (mut p, _) = pool(2, 100, false);
        let first = p.take_batch(0, 0);
        let ptr = first.observations.as_ptr();
        drop(first);
        p.step_half(0, &[0]).unwrap();
        let second = p.take_batch(0, 1);
        assert_eq!(second.observations.as_ptr(), ptr);
        // While a batch is still alive its bytes are never overwritten.
        p.step_half(0, &[1]).unwrap();
        let third = p.take_batch(0, 2);
        assert_ne!(third.observations.as_ptr(), second.observations.as_ptr());
        assert_eq!(second.observations[1], 1);
        assert_eq!(third.observations[1], 2);
    }

    #[test]
    fn termination_resets_at_once_and_reports_the_episode() {
        let (mut p, _) = pool(1, 2, false);
        p.take_batch(0, 0);
        p.step_half(0, &[1]).unwrap();
        let b = p.take_batch(0, 1);
        assert_eq!((b.terminated[0], b.truncated[0]), (false, false));
        p.step_half(0, &[2]).unwrap();
        let b = p.take_batch(0, 2);
        assert!(b.terminated[0] && !b.truncated[0]);
        assert_eq!(b.rewards[0], 3.0, "the final reward");
        assert_eq!(&b.observations[..], &[0, 0, 0, 2], "the reset observation");
        assert_eq!(
            b.episodes,
            [pb::EpisodeStats {
                env_index: 0,
                episode_return: 5.0,
                episode_length: 2
            }]
        );
        assert_eq!(p.episodes_finished(), 1);
        p.step_half(0, &[0]).unwrap();
        let b = p.take_batch(0, 3);
        assert!(b.episodes.is_empty());
        assert_eq!(&b.observations[..], &[0, 1, 0, 2]);
    }

    #[test]
    fn truncation_sends_the_final_observation_then_ignores_its_action() {
        let (mut p, seen) = pool(2, 2, true);
        p.take_batch(1, 0);
        p.step_half(1, &[0]).unwrap();
        p.take_batch(1, 1);
        p.step_half(1, &[1]).unwrap();
        let b = p.take_batch(1, 2);
        assert!(b.truncated[0] && !b.terminated[0]);
        assert_eq!(b.rewards[0], 2.0);
        assert_eq!(&b.observations[..], &[1, 2, 1, 1], "the final observation");
        assert_eq!(
            b.episodes,
            [pb::EpisodeStats {
                env_index: 1,
                episode_return: 3.0,
                episode_length: 2
            }]
        );
        // The learner's action for the final observation must not reach the env.
        p.step_half(1, &[2]).unwrap();
        let b = p.take_batch(1, 3);
        assert_eq!(*seen.lock().unwrap(), [0, 1]);
        assert_eq!(
            (b.rewards[0], b.terminated[0], b.truncated[0]),
            (0.0, false, false)
        );
        assert_eq!(&b.observations[..], &[1, 0, 0, 2], "the reset observation");
        assert!(b.episodes.is_empty());
        // And the new episode counts from there.
        p.step_half(1, &[2]).unwrap();
        let b = p.take_batch(1, 4);
        assert_eq!(
            (b.rewards[0], &b.observations[..]),
            (3.0, &[1u8, 1, 2, 2][..])
        );
    }

    #[test]
    fn restart_draws_fresh_run_ids_and_resets_every_env() {
        let (mut p, _) = pool(4, 10, false);
        let before = p.run_ids().to_vec();
        let distinct: std::collections::HashSet<_> = before.iter().collect();
        assert_eq!(distinct.len(), 4);
        p.take_batch(0, 0);
        p.step_half(0, &[1, 1]).unwrap();
        p.restart().unwrap();
        assert!(p.run_ids().iter().all(|id| !before.contains(id)));
        let b = p.take_batch(0, 0);
        assert_eq!(b.run_ids, p.run_ids()[0..2]);
        assert_eq!(&b.observations[..], &[0, 0, 0, 2, 1, 0, 0, 2]);
        assert!(b.rewards.iter().all(|&r| r == 0.0));
    }

    /// Records the continuous actions it is given; observation = its step count.
    struct RecordingBoxEnv {
        seen: Arc<Mutex<Vec<Vec<f32>>>>,
    }

    impl Env for RecordingBoxEnv {
        fn reset(&mut self, _seed: u64, obs: &mut [u8]) -> Result<(), EnvError> {
            obs.fill(0);
            Ok(())
        }
        fn step(&mut self, action: Action<'_>, obs: &mut [u8]) -> Result<Transition, EnvError> {
            let Action::Continuous(a) = action else {
                return Err(EnvError::msg("wants a box action"));
            };
            self.seen.lock().unwrap().push(a.to_vec());
            obs.fill(1);
            Ok(Transition {
                reward: 0.0,
                terminated: false,
                truncated: false,
            })
        }
    }

    #[test]
    fn continuous_actions_are_clipped_per_element_before_the_env_sees_them() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let spec = EnvSpec {
            env_name: "box".into(),
            obs_shape: vec![1],
            obs_dtype: ObsDType::U8,
            action: ActionSpace::Box {
                shape: vec![2],
                low: vec![-1.0, 0.0],
                high: vec![1.0, f32::INFINITY],
            },
        };
        let envs = (0..4)
            .map(|_| Box::new(RecordingBoxEnv { seen: seen.clone() }) as Box<dyn Env>)
            .collect();
        let mut p = EnvPool::new(envs, &spec, 0).unwrap();
        p.take_batch(1, 0);
        p.step_half_with(1, HalfActions::Continuous(&[-3.0, -3.0, 0.5, 1e9]))
            .unwrap();
        assert_eq!(*seen.lock().unwrap(), [vec![-1.0, 0.0], vec![0.5, 1e9]]);
        // An env's error surfaces from the step.
        let err = p.step_half(1, &[0, 0]).unwrap_err();
        assert!(err.to_string().contains("wants a box action"), "{err}");
    }
}
