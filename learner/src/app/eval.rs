//! `learner eval`: episodes of a checkpointed policy on in-process envs,
//! reporting mean/min/max return.
//!
//! All episodes run side by side: one batched forward per step over the
//! envs still running (recurrent state carried per env). Actions are greedy
//! (the most likely action: argmax of the logits, or a Gaussian's mean; the
//! default) or sampled from the policy as the actors do in training
//! ([`EvalPolicy::Sample`]): a stochastic policy's argmax can score far below
//! its samples (a policy that relies on its randomness to balance), so the
//! two answer different questions. Continuous actions are clipped to the
//! env's bounds before the step, as actors do. No server and no actors are
//! involved.
//!
//! The checkpoint's model must fit the env its `config.json` names (same
//! observations and action space), else evaluation is refused.
//!
//! Cost: one forward per step of the longest episode.
use std::path::Path;

use seed_env::{Action, EnvConfig, EnvError, SyntheticConfig};
use seed_shared::codec::read_f32_le_into;
use seed_shared::ObsDType;
use serde::Serialize;

use crate::app::policy::{Actions, LstmState, Observations, Policy, PolicyError};
use crate::error::LearnerError;
use crate::learn::checkpoint::EnvDescription;

/// How `evaluate` picks actions from the policy's distribution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EvalPolicy {
    /// The most likely action (argmax of the logits, or the Gaussian's
    /// mean, clipped): deterministic given the env seeds.
    #[default]
    Greedy,
    /// Sampled from the policy (softmax, or `μ + σ ε` clipped), as actors
    /// do in training, from a sampler seeded with the eval seed.
    Sample,
}

/// What `evaluate` runs.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalConfig {
    /// Episodes, one env each, run side by side (at least 1).
    pub episodes: usize,
    /// Env `i` is seeded with `seed + i`; the action sampler with `seed`.
    pub seed: u64,
    /// An episode still running after this many steps is cut (envs without
    /// a time limit).
    pub max_steps: u64,
    pub policy: EvalPolicy,
}

impl Default for EvalConfig {
    /// `learner eval`'s defaults: 10 greedy episodes from seed 0, cut at
    /// 10,000 steps.
    fn default() -> Self {
        EvalConfig {
            episodes: 10,
            seed: 0,
            max_steps: 10_000,
            policy: EvalPolicy::Greedy,
        }
    }
}

/// Returns of the evaluated episodes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EvalReport {
    pub episodes: usize,
    pub mean_return: f64,
    pub min_return: f64,
    pub max_return: f64,
    pub returns: Vec<f64>,
    pub policy_version: u64,
}

fn env_failed(e: EnvError) -> LearnerError {
    LearnerError::Config(format!("evaluation env failed: {e}"))
}

/// The learner's own env `d` describes; for an env only actors ran, an
/// error that says how to evaluate the checkpoint at `path` instead.
pub fn env_config(d: &EnvDescription, path: &Path) -> Result<EnvConfig, LearnerError> {
    match d.kind.as_str() {
        "cartpole" => Ok(EnvConfig::CartPole),
        "cartpole-masked" => Ok(EnvConfig::CartPoleMasked),
        "pendulum" => Ok(EnvConfig::Pendulum),
        "synthetic" => Ok(EnvConfig::Synthetic(SyntheticConfig {
            obs_shape: d.obs_shape.clone(),
            obs_dtype: d
                .obs_dtype
                .parse::<ObsDType>()
                .map_err(|e| LearnerError::Config(format!("checkpoint env obs_dtype: {e}")))?,
            num_actions: d.num_actions,
            step_cost_us: d.step_cost_us,
            episode_len: d.episode_len,
        })),
        "remote" => Err(LearnerError::Config(format!(
            "the checkpoint's env {} was run by actors, not by the learner: evaluate it where \
             its env is, with the Python package: python -m seed_rs.eval {} --env {}",
            d.env_name.as_deref().unwrap_or("(unnamed)"),
            path.display(),
            d.env_name.as_deref().unwrap_or("ENV_ID"),
        ))),
        other => Err(LearnerError::Config(format!(
            "checkpoint env kind {other:?} is not cartpole, cartpole-masked, pendulum or synthetic"
        ))),
    }
}

/// Runs `config.episodes` episodes of the checkpoint at `path` (a run
/// directory's newest, or a checkpoint directory: see [`Policy::load`]).
pub fn evaluate(path: &Path, config: &EvalConfig) -> Result<EvalReport, LearnerError> {
    let mut policy =
        Policy::load(path).map_err(|e| LearnerError::Config(format!("--checkpoint: {e}")))?;
    let env_cfg = env_config(policy.env(), path)?;
    play(&mut policy, &env_cfg, config)
}

/// Runs `config.episodes` episodes of `policy` on envs of `env_cfg` (the
/// learner's own), side by side (see the module docs).
pub fn play(
    policy: &mut Policy,
    env_cfg: &EnvConfig,
    config: &EvalConfig,
) -> Result<EvalReport, LearnerError> {
    let &EvalConfig {
        episodes,
        seed,
        max_steps,
        policy: mode,
    } = config;
    let spec = env_cfg.spec();
    policy
        .check_env(&spec)
        .map_err(|e| LearnerError::Config(format!("--checkpoint: {e}")))?;
    policy.seed(seed);
    let (n, obs_bytes, obs_len) = (episodes.max(1), spec.obs_bytes(), spec.obs_len());
    let mut envs: Vec<_> = (0..n)
        .map(|i| env_cfg.build(seed.wrapping_add(i as u64)))
        .collect();
    let mut obs = vec![0u8; n * obs_bytes];
    for (i, env) in envs.iter_mut().enumerate() {
        env.reset(
            seed.wrapping_add(i as u64),
            &mut obs[i * obs_bytes..(i + 1) * obs_bytes],
        )
        .map_err(env_failed)?;
    }
    let mut running: Vec<usize> = (0..n).collect();
    let mut returns = vec![0f64; n];
    let hsize = policy.state_size();
    let mut state = LstmState {
        h: vec![0f32; n * hsize],
        c: vec![0f32; n * hsize],
    };
    let mut obs_f32 = vec![0f32; n * obs_len];
    let mut obs_u8 = vec![0u8; n * obs_len];
    let failed = |e: PolicyError| LearnerError::Config(format!("--checkpoint: {e}"));
    for _ in 0..max_steps {
        if running.is_empty() {
            break;
        }
        let k = running.len();
        // Gather the running envs' observations and states.
        let mut rows = LstmState {
            h: Vec::with_capacity(k * hsize),
            c: Vec::with_capacity(k * hsize),
        };
        for (row, &i) in running.iter().enumerate() {
            let src = &obs[i * obs_bytes..(i + 1) * obs_bytes];
            match spec.obs_dtype {
                ObsDType::F32 => {
                    read_f32_le_into(src, &mut obs_f32[row * obs_len..(row + 1) * obs_len])
                }
                ObsDType::U8 => obs_u8[row * obs_len..(row + 1) * obs_len].copy_from_slice(src),
            }
            rows.h
                .extend_from_slice(&state.h[i * hsize..(i + 1) * hsize]);
            rows.c
                .extend_from_slice(&state.c[i * hsize..(i + 1) * hsize]);
        }
        let x = match spec.obs_dtype {
            ObsDType::F32 => Observations::F32(&obs_f32[..k * obs_len]),
            ObsDType::U8 => Observations::U8(&obs_u8[..k * obs_len]),
        };
        let out = policy
            .forward(x, (hsize > 0).then_some(&rows))
            .map_err(failed)?;
        let actions = policy.actions(&out, mode == EvalPolicy::Greedy);
        if let Some(next) = &out.state {
            for (row, &i) in running.iter().enumerate() {
                let (to, from) = (i * hsize..(i + 1) * hsize, row * hsize..(row + 1) * hsize);
                state.h[to.clone()].copy_from_slice(&next.h[from.clone()]);
                state.c[to].copy_from_slice(&next.c[from]);
            }
        }
        let mut still = Vec::with_capacity(k);
        for (row, &i) in running.iter().enumerate() {
            let action = match &actions {
                Actions::Discrete(a) => Action::Discrete(a[row]),
                Actions::Continuous(a) => {
                    let dim = a.len() / k;
                    Action::Continuous(&a[row * dim..(row + 1) * dim])
                }
            };
            let t = envs[i]
                .step(action, &mut obs[i * obs_bytes..(i + 1) * obs_bytes])
                .map_err(env_failed)?;
            returns[i] += f64::from(t.reward);
            if !(t.terminated || t.truncated) {
                still.push(i);
            }
        }
        running = still;
    }
    let mean = returns.iter().sum::<f64>() / n as f64;
    Ok(EvalReport {
        episodes: n,
        mean_return: mean,
        min_return: returns.iter().copied().fold(f64::INFINITY, f64::min),
        max_return: returns.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        returns,
        policy_version: policy.state().policy_version,
    })
}

#[cfg(test)]
mod tests {
    use candle_core::{DType, Device, Tensor};
    use seed_env::Action;
    use seed_shared::EnvSpec;

    use crate::app::eval::{evaluate, EvalConfig, EvalPolicy};
    use crate::learn::checkpoint::{save, CheckpointConfig, CheckpointState, EnvDescription};
    use crate::learn::optimizer::{Optimizer, OptimizerConfig};
    use crate::model::{ActionDistribution, ModelConfig, ModelShape, TrainableModel};

    /// A checkpoint of a hand-set CartPole controller: one tanh unit reads
    /// `theta + 0.5 * theta_dot` and the policy head pushes towards the
    /// side the pole falls to (`sign` 1.0), or away from it (`sign` -1.0).
    fn controller_checkpoint(dir: &std::path::Path, sign: f32) {
        let shape = ModelShape {
            hidden_sizes: vec![1],
            ..crate::app::LearnerConfig::default().model
        };
        let config = ModelConfig::new(&EnvSpec::cartpole(), &shape);
        let mut model = TrainableModel::new(&config, &Device::Cpu, 0).unwrap();
        let d = Device::Cpu;
        let mut set = |name: &str, t: Tensor| model.varmap.set_one(name, t).unwrap();
        set(
            "torso.0.weight",
            Tensor::new(&[[0f32, 0.0, 10.0, 5.0]], &d).unwrap(),
        );
        set("torso.0.bias", Tensor::new(&[0f32], &d).unwrap());
        set(
            "policy.weight",
            Tensor::new(&[[-20f32 * sign], [20.0 * sign]], &d).unwrap(),
        );
        set("policy.bias", Tensor::new(&[0f32, 0.0], &d).unwrap());
        let optimizer =
            Optimizer::new(&model.varmap, OptimizerConfig::constant_adam(6e-4)).unwrap();
        let state = CheckpointState {
            policy_version: 7,
            ..CheckpointState::default()
        };
        let config = CheckpointConfig {
            model: config,
            env: EnvDescription {
                env_name: None,
                kind: "cartpole".into(),
                obs_shape: vec![4],
                obs_dtype: "f32".into(),
                num_actions: 2,
                action_box: None,
                episode_len: 500,
                step_cost_us: 0,
            },
            flags: serde_json::Value::Null,
        };
        save(dir, &model, &optimizer, &state, &config).unwrap();
    }

    fn run(dir: &std::path::Path, policy: EvalPolicy) -> super::EvalReport {
        let config = EvalConfig {
            episodes: 8,
            seed: 1,
            max_steps: 1_000,
            policy,
        };
        evaluate(dir, &config).unwrap()
    }

    #[test]
    fn eval_plays_the_checkpointed_weights() {
        let good = tempfile::tempdir().unwrap();
        controller_checkpoint(good.path(), 1.0);
        let bad = tempfile::tempdir().unwrap();
        controller_checkpoint(bad.path(), -1.0);
        for policy in [EvalPolicy::Greedy, EvalPolicy::Sample] {
            let g = run(good.path(), policy);
            let b = run(bad.path(), policy);
            assert_eq!((g.episodes, g.returns.len(), g.policy_version), (8, 8, 7));
            assert!(g.min_return <= g.mean_return && g.mean_return <= g.max_return);
            // A random policy averages about 22 on CartPole.
            assert!(g.mean_return > 150.0, "{policy:?} controller: {g:?}");
            assert!(
                b.mean_return < 20.0,
                "{policy:?} reversed controller: {b:?}"
            );
        }
    }

    /// A Pendulum checkpoint whose Gaussian policy ignores the observation:
    /// mean `mean`, log-std `log_std`. With `categorical`, a model of the
    /// wrong kind for Pendulum (one discrete action) instead.
    fn pendulum_checkpoint(dir: &std::path::Path, mean: f32, log_std: f32, categorical: bool) {
        let spec = seed_env::EnvConfig::Pendulum.spec();
        let shape = ModelShape {
            hidden_sizes: vec![4],
            ..crate::app::LearnerConfig::default().model
        };
        let mut config = ModelConfig::new(&spec, &shape);
        if categorical {
            config.action = ActionDistribution::Categorical { num_actions: 1 };
        }
        let mut model = TrainableModel::new(&config, &Device::Cpu, 0).unwrap();
        if !categorical {
            let d = Device::Cpu;
            let mut set = |name: &str, t: Tensor| model.varmap.set_one(name, t).unwrap();
            set(
                "policy.weight",
                Tensor::zeros((1, 4), DType::F32, &d).unwrap(),
            );
            set("policy.bias", Tensor::new(&[mean], &d).unwrap());
            set("log_std", Tensor::new(&[log_std], &d).unwrap());
        }
        let optimizer =
            Optimizer::new(&model.varmap, OptimizerConfig::constant_adam(6e-4)).unwrap();
        let config = CheckpointConfig {
            model: config,
            env: EnvDescription {
                env_name: None,
                kind: "pendulum".into(),
                obs_shape: vec![3],
                obs_dtype: "f32".into(),
                num_actions: 0,
                action_box: EnvDescription::action_box_of(&spec.action),
                episode_len: 0,
                step_cost_us: 0,
            },
            flags: serde_json::Value::Null,
        };
        save(
            dir,
            &model,
            &optimizer,
            &CheckpointState::default(),
            &config,
        )
        .unwrap();
    }

    /// Returns of Pendulum episodes (env `i` seeded `1 + i`, as [`run`]
    /// seeds them) under a constant torque.
    fn constant_torque_returns(torque: f32) -> Vec<f64> {
        (0..8u64)
            .map(|i| {
                let mut env = seed_env::EnvConfig::Pendulum.build(1 + i);
                let mut obs = [0u8; 12];
                env.reset(1 + i, &mut obs).unwrap();
                let mut total = 0.0;
                loop {
                    let t = env.step(Action::Continuous(&[torque]), &mut obs).unwrap();
                    total += f64::from(t.reward);
                    if t.truncated || t.terminated {
                        return total;
                    }
                }
            })
            .collect()
    }

    #[test]
    fn pendulum_greedy_plays_the_clipped_mean_and_sample_draws_around_it() {
        let dir = tempfile::tempdir().unwrap();
        // Mean 2.5 is outside [-2, 2]: greedy play is the torque 2
        // throughout; σ = 1 puts 31% of the samples below 2.
        pendulum_checkpoint(dir.path(), 2.5, 0.0, false);
        let greedy = run(dir.path(), EvalPolicy::Greedy);
        assert_eq!(greedy.returns, constant_torque_returns(2.0));
        assert_ne!(greedy.returns, constant_torque_returns(0.0));
        let sample = run(dir.path(), EvalPolicy::Sample);
        assert_eq!(sample, run(dir.path(), EvalPolicy::Sample), "seeded");
        assert_ne!(sample.returns, greedy.returns, "σ = 1 moves the torque");
        // 200 steps of rewards in [-16.3, 0] each.
        assert!(sample.min_return >= -16.3 * 200.0 && sample.max_return <= 0.0);
    }

    #[test]
    fn an_env_only_actors_ran_is_pointed_to_seed_rs_eval() {
        let dir = tempfile::tempdir().unwrap();
        controller_checkpoint(dir.path(), 1.0);
        let policy = crate::app::policy::Policy::load(dir.path()).unwrap();
        let config_path = policy.dir().join("config.json");
        let mut config: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&config_path).unwrap()).unwrap();
        config["env"]["kind"] = "remote".into();
        config["env"]["env_name"] = "MyCartPole-v0".into();
        std::fs::write(&config_path, config.to_string()).unwrap();
        let err = evaluate(dir.path(), &EvalConfig::default())
            .unwrap_err()
            .to_string();
        let hint = format!(
            "python -m seed_rs.eval {} --env MyCartPole-v0",
            dir.path().display()
        );
        assert!(err.contains(&hint), "{err}");
    }

    #[test]
    fn eval_refuses_a_model_of_another_action_space() {
        let dir = tempfile::tempdir().unwrap();
        pendulum_checkpoint(dir.path(), 0.0, 0.0, true);
        let config = EvalConfig {
            episodes: 1,
            seed: 1,
            max_steps: 10,
            policy: EvalPolicy::Greedy,
        };
        let err = evaluate(dir.path(), &config).unwrap_err().to_string();
        assert!(
            err.contains("categorical over 1 actions") && err.contains("Box([1], -2..2)"),
            "{err}"
        );
    }

    #[test]
    fn greedy_is_deterministic_and_sampling_follows_the_seed() {
        let dir = tempfile::tempdir().unwrap();
        // A weak policy (small logits), so sampled actions really vary.
        controller_checkpoint(dir.path(), 0.05);
        assert_eq!(
            run(dir.path(), EvalPolicy::Greedy),
            run(dir.path(), EvalPolicy::Greedy)
        );
        assert_eq!(
            run(dir.path(), EvalPolicy::Sample),
            run(dir.path(), EvalPolicy::Sample)
        );
        assert_ne!(
            run(dir.path(), EvalPolicy::Greedy).returns,
            run(dir.path(), EvalPolicy::Sample).returns
        );
    }
}
