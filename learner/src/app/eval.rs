//! `learner eval`: greedy episodes of a checkpointed policy on in-process
//! envs, reporting mean/min/max return.
//!
//! All episodes run side by side: one batched forward per step over the
//! envs still running (recurrent state carried per env), greedy actions
//! (argmax of the logits). No server and no actors are involved.
//!
//! Cost: one forward per step of the longest episode.
use std::path::Path;

use candle_core::{Device, Tensor};
use seed_env::{EnvConfig, SyntheticConfig};
use seed_shared::codec::read_f32_le_into;
use seed_shared::ObsDType;
use serde::Serialize;

use crate::error::LearnerError;
use crate::learn::checkpoint::{EnvDescription, LoadedCheckpoint};
use crate::model::{ActionSampler, ActorCritic, RecurrentState};

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

fn env_config(d: &EnvDescription) -> Result<EnvConfig, LearnerError> {
    match d.kind.as_str() {
        "cartpole" => Ok(EnvConfig::CartPole),
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
        other => Err(LearnerError::Config(format!(
            "checkpoint env kind {other:?} is not cartpole or synthetic"
        ))),
    }
}

/// Runs `episodes` greedy episodes of the newest checkpoint in `run_dir`.
pub fn evaluate(
    run_dir: &Path,
    episodes: usize,
    seed: u64,
    max_steps: u64,
) -> Result<EvalReport, LearnerError> {
    let ckpt = LoadedCheckpoint::latest(run_dir)
        .map_err(|e| LearnerError::Config(format!("--checkpoint: {e}")))?;
    let device = Device::Cpu;
    let weights = ckpt
        .weights(&device)
        .map_err(|e| LearnerError::Config(format!("--checkpoint: {e}")))?;
    let model = ActorCritic::new(
        &ckpt.config.model,
        candle_nn::VarBuilder::from_tensors(weights, candle_core::DType::F32, &device),
    )?;
    let env_cfg = env_config(&ckpt.config.env)?;
    let spec = env_cfg.spec();
    let (n, obs_bytes, obs_len) = (episodes.max(1), spec.obs_bytes(), spec.obs_len());
    let a = spec.num_actions as usize;
    let mut envs: Vec<_> = (0..n)
        .map(|i| env_cfg.build(seed.wrapping_add(i as u64)))
        .collect();
    let mut obs = vec![0u8; n * obs_bytes];
    for (i, env) in envs.iter_mut().enumerate() {
        env.reset(
            seed.wrapping_add(i as u64),
            &mut obs[i * obs_bytes..(i + 1) * obs_bytes],
        );
    }
    let mut running: Vec<usize> = (0..n).collect();
    let mut returns = vec![0f64; n];
    let hsize = model.state_size();
    let mut h = vec![0f32; n * hsize];
    let mut c = vec![0f32; n * hsize];
    let mut obs_f32 = vec![0f32; n * obs_len];
    let mut obs_u8 = vec![0u8; n * obs_len];
    let mut actions = vec![0u32; n];
    let mut dims = vec![0];
    dims.extend(&spec.obs_shape);
    for _ in 0..max_steps {
        if running.is_empty() {
            break;
        }
        let k = running.len();
        dims[0] = k;
        // Gather the running envs' observations and states.
        let (mut hs, mut cs) = (Vec::with_capacity(k * hsize), Vec::with_capacity(k * hsize));
        for (row, &i) in running.iter().enumerate() {
            let src = &obs[i * obs_bytes..(i + 1) * obs_bytes];
            match spec.obs_dtype {
                ObsDType::F32 => {
                    read_f32_le_into(src, &mut obs_f32[row * obs_len..(row + 1) * obs_len])
                }
                ObsDType::U8 => obs_u8[row * obs_len..(row + 1) * obs_len].copy_from_slice(src),
            }
            hs.extend_from_slice(&h[i * hsize..(i + 1) * hsize]);
            cs.extend_from_slice(&c[i * hsize..(i + 1) * hsize]);
        }
        let x = match spec.obs_dtype {
            ObsDType::F32 => Tensor::from_slice(&obs_f32[..k * obs_len], dims.as_slice(), &device)?,
            ObsDType::U8 => Tensor::from_slice(&obs_u8[..k * obs_len], dims.as_slice(), &device)?,
        };
        let state = if hsize > 0 {
            Some(RecurrentState {
                h: Tensor::from_slice(&hs, (k, hsize), &device)?,
                c: Tensor::from_slice(&cs, (k, hsize), &device)?,
            })
        } else {
            None
        };
        let out = model.step(&x, state.as_ref())?;
        let logits = out.logits.flatten_all()?.to_vec1::<f32>()?;
        ActionSampler::greedy(&logits, a, &mut actions[..k]);
        if let Some(next) = &out.state {
            let (nh, nc) = (
                next.h.flatten_all()?.to_vec1::<f32>()?,
                next.c.flatten_all()?.to_vec1::<f32>()?,
            );
            for (row, &i) in running.iter().enumerate() {
                h[i * hsize..(i + 1) * hsize].copy_from_slice(&nh[row * hsize..(row + 1) * hsize]);
                c[i * hsize..(i + 1) * hsize].copy_from_slice(&nc[row * hsize..(row + 1) * hsize]);
            }
        }
        let mut still = Vec::with_capacity(k);
        for (row, &i) in running.iter().enumerate() {
            let t = envs[i].step(actions[row], &mut obs[i * obs_bytes..(i + 1) * obs_bytes]);
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
        policy_version: ckpt.state.policy_version,
    })
}
