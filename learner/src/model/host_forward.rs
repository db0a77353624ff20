//! [`HostForward`]: a feed-forward policy's inference step as loops over
//! `f32` slices, for batches of a few rows on the CPU.
//!
//! Why: through candle, one CartPole-sized step (4 -> 64 -> 64 -> 2 + 1,
//! about 4,500 multiply-adds) costs 4-8 us for one row (`inference_bench`,
//! batch 1, forward plus sampling): every tensor op (two matrix products, two bias adds, two tanh
//! per hidden layer, then the heads, the upload and the download)
//! allocates its output and goes through candle's storage dispatch. On a
//! 1 x 1 stream that was two thirds of the learner's own share of a step
//! round trip (`perf` of the latency harness). The same arithmetic as plain
//! loops over reused buffers costs 0.9 us per row; above
//! [`HOST_FORWARD_MAX_ROWS`] candle's blocked matrix products win.
//!
//! Same function as [`ActorCritic::step`]: the snapshot's own weights,
//! copied once per snapshot (each weight matrix transposed to `[I, O]`, so
//! every input adds a scaled weight row into the outputs: a loop the
//! compiler vectorises without reordering any sum); tanh is
//! [`super::cpu::tanh::tanh_f32`], the function the candle path applies; u8
//! observations scaled by 1/255 as [`ActorCritic`]'s torso input; a
//! Gaussian's log-std clamped and appended to each row's means. Only the
//! order in which a dot product's terms are added differs from the matrix
//! product's, so outputs agree to float rounding (tested within 1e-5).
//!
//! Which models: f32 weights on the CPU, an MLP torso and no LSTM core
//! ([`HostForward::from_model`] gives `None` for any other: a conv torso
//! or a recurrent core keeps candle, as does a bf16 inference copy).
//!
//! Cost of building: one copy of the weights (18 KB for CartPole's MLP),
//! once per published snapshot and only when a small batch asks for it.
use candle_core::{DType, Result};

use crate::model::actor_critic::ActorCritic;
use crate::model::cpu::tanh::tanh_f32;
use crate::model::dense::Dense;
use crate::model::distribution;
use crate::model::torso::Torso;

/// Batches of at most this many rows run on [`HostForward`] when the
/// model has one. Measured with `inference_bench --models mlp --paths
/// candle,host` on the 2-core EPYC VM (CartPole's MLP, forward plus
/// sampling, docs/performance.md): 0.9 against 4.4 us at one row, 3.3
/// against 7.9 at 4, 13.3 against 15.5 at 16; somewhere before 64 rows
/// candle's blocked matrix products win (54.7 against 39.5 us at 64).
pub const HOST_FORWARD_MAX_ROWS: usize = 16;

/// Observations of a batch, in the gather buffers of an inference thread.
#[derive(Debug, Clone, Copy)]
pub enum HostObs<'a> {
    F32(&'a [f32]),
    U8(&'a [u8]),
}

/// One dense layer's weights, transposed: `y = b + sum_i x[i] * w_t[i, ..]`.
#[derive(Debug, Clone)]
struct HostDense {
    out_dim: usize,
    /// `[I, O]`, row `i` the weights from input `i` to every output.
    weight_t: Vec<f32>,
    /// `[O]`.
    bias: Vec<f32>,
}

impl HostDense {
    /// Copies `layers`' weights side by side: one `[I, sum O]` layer whose
    /// outputs are those of each layer in turn (the two heads in one pass).
    fn concat(layers: &[&Dense]) -> Result<Self> {
        let mut parts = Vec::with_capacity(layers.len());
        for layer in layers {
            // `[O, I]` -> `[I, O]`.
            let w = layer.weight().t()?.contiguous()?.to_vec2::<f32>()?;
            parts.push((w, layer.bias().to_vec1::<f32>()?));
        }
        let in_dim = parts.first().map_or(0, |(w, _)| w.len());
        let out_dim = parts.iter().map(|(_, b)| b.len()).sum();
        let mut weight_t = Vec::with_capacity(in_dim * out_dim);
        for i in 0..in_dim {
            for (w, _) in &parts {
                let Some(row) = w.get(i) else {
                    candle_core::bail!("host forward: heads of different input widths");
                };
                weight_t.extend_from_slice(row);
            }
        }
        let bias = parts.iter().flat_map(|(_, b)| b.iter().copied()).collect();
        Ok(HostDense {
            out_dim,
            weight_t,
            bias,
        })
    }

    /// `out = x W^T + b` for one row. Outputs go in blocks of
    /// [`OUTPUT_BLOCK`], whose sums stay in registers over the inputs (one
    /// store per output, not one per input); every output's terms are
    /// added in input order, from its bias.
    #[inline]
    fn forward_row(&self, x: &[f32], out: &mut [f32]) {
        let o = self.out_dim;
        let mut start = 0;
        while start + OUTPUT_BLOCK <= o {
            let mut acc = [0f32; OUTPUT_BLOCK];
            acc.copy_from_slice(&self.bias[start..start + OUTPUT_BLOCK]);
            for (&xi, w) in x.iter().zip(self.weight_t.chunks_exact(o)) {
                let w: &[f32; OUTPUT_BLOCK] = w[start..start + OUTPUT_BLOCK]
                    .try_into()
                    .expect("a block of OUTPUT_BLOCK weights");
                for (a, &wi) in acc.iter_mut().zip(w) {
                    *a += xi * wi;
                }
            }
            out[start..start + OUTPUT_BLOCK].copy_from_slice(&acc);
            start += OUTPUT_BLOCK;
        }
        for (j, out_j) in out.iter_mut().enumerate().take(o).skip(start) {
            let mut acc = self.bias[j];
            for (&xi, w) in x.iter().zip(self.weight_t.chunks_exact(o)) {
                acc += xi * w[j];
            }
            *out_j = acc;
        }
    }
}

/// Outputs summed together in registers: 16 f32 are four SSE registers
/// (two AVX), leaving room for the weights being loaded.
const OUTPUT_BLOCK: usize = 16;

/// A feed-forward f32 policy's step, as loops (see the module docs).
#[derive(Debug, Clone)]
pub struct HostForward {
    in_dim: usize,
    /// 1/255 for u8 observations, 1 for f32.
    obs_scale: f32,
    /// The MLP torso; tanh after each.
    torso: Vec<HostDense>,
    /// The policy head's outputs, then the value.
    heads: HostDense,
    /// A Gaussian's clamped log-std, appended to each row's means; empty
    /// for a categorical.
    log_std: Vec<f32>,
    /// Widest layer output (scratch size per buffer).
    width: usize,
}

impl HostForward {
    /// The loops for `model`, or `None` when it is not a feed-forward f32
    /// model on the CPU.
    pub fn from_model(model: &ActorCritic) -> Result<Option<Self>> {
        let config = model.config();
        let Torso::Mlp(mlp) = &model.torso else {
            return Ok(None);
        };
        if model.core.is_some()
            || model.dtype() != DType::F32
            || !model.policy.weight().device().is_cpu()
        {
            return Ok(None);
        }
        let torso = mlp
            .layers()
            .iter()
            .map(|l| HostDense::concat(&[l]))
            .collect::<Result<Vec<_>>>()?;
        let heads = HostDense::concat(&[&model.policy, &model.value])?;
        let log_std = match &model.log_std {
            None => Vec::new(),
            Some(t) => t
                .clamp(distribution::LOG_STD_MIN, distribution::LOG_STD_MAX)?
                .to_dtype(DType::F32)?
                .to_vec1::<f32>()?,
        };
        let width = torso
            .iter()
            .map(|l| l.out_dim)
            .chain([heads.out_dim, config.obs_len()])
            .max()
            .unwrap_or(0);
        Ok(Some(HostForward {
            in_dim: config.obs_len(),
            obs_scale: if config.obs_is_u8 { 1.0 / 255.0 } else { 1.0 },
            torso,
            heads,
            log_std,
            width,
        }))
    }

    /// Distribution parameters per row (as [`ActorCritic::step`]'s
    /// `policy_params`, `[rows, P]` flattened) into `params`, and values
    /// `[rows]` into `values`. `obs` holds at least `rows` observations.
    pub fn step(
        &self,
        obs: HostObs<'_>,
        rows: usize,
        params: &mut Vec<f32>,
        values: &mut Vec<f32>,
        scratch: &mut Vec<f32>,
    ) {
        let policy_out = self.heads.out_dim - 1;
        let param_width = policy_out + self.log_std.len();
        params.clear();
        params.resize(rows * param_width, 0.0);
        values.clear();
        values.resize(rows, 0.0);
        scratch.resize(2 * self.width, 0.0);
        let (a, b) = scratch.split_at_mut(self.width);
        for r in 0..rows {
            // The row's input, as f32, in `a`.
            let x = &mut a[..self.in_dim];
            let range = r * self.in_dim..(r + 1) * self.in_dim;
            match obs {
                HostObs::F32(o) => x.copy_from_slice(&o[range]),
                HostObs::U8(o) => {
                    for (xi, &v) in x.iter_mut().zip(&o[range]) {
                        *xi = f32::from(v) * self.obs_scale;
                    }
                }
            }
            let (mut input, mut output) = (&mut *a, &mut *b);
            let mut width = self.in_dim;
            for layer in &self.torso {
                let y = &mut output[..layer.out_dim];
                layer.forward_row(&input[..width], y);
                for v in y.iter_mut() {
                    *v = tanh_f32(*v);
                }
                width = layer.out_dim;
                std::mem::swap(&mut input, &mut output);
            }
            let heads = &mut output[..self.heads.out_dim];
            self.heads.forward_row(&input[..width], heads);
            let row = &mut params[r * param_width..(r + 1) * param_width];
            row[..policy_out].copy_from_slice(&heads[..policy_out]);
            row[policy_out..].copy_from_slice(&self.log_std);
            values[r] = heads[policy_out];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ModelConfig, TrainableModel};
    use candle_core::{Device, Tensor};
    use seed_shared::{ActionSpace, EnvSpec, ObsDType};

    /// The candle step's outputs for the same rows: `(params, values)` flattened.
    fn candle_step(model: &ActorCritic, obs: &Tensor) -> Result<(Vec<f32>, Vec<f32>)> {
        let step = model.step(obs, None)?;
        Ok((
            step.policy_params.flatten_all()?.to_vec1::<f32>()?,
            step.values.to_vec1::<f32>()?,
        ))
    }

    fn trainable(spec: &EnvSpec, hidden: &[usize], seed: u64) -> TrainableModel {
        let mut cfg = ModelConfig::for_spec(spec);
        cfg.hidden_sizes = hidden.to_vec();
        TrainableModel::new(&cfg, &Device::Cpu, seed).expect("model")
    }

    fn model(spec: &EnvSpec, hidden: &[usize], seed: u64) -> ActorCritic {
        trainable(spec, hidden, seed).snapshot().expect("snapshot")
    }

    /// Observations spread over a few units (and past tanh's saturation
    /// after the first layer for some rows).
    fn obs_f32(rows: usize, len: usize) -> Vec<f32> {
        (0..rows * len)
            .map(|i| ((i * 7919 % 1000) as f32 / 100.0) - 5.0)
            .collect()
    }

    fn assert_close(ours: &[f32], theirs: &[f32], what: &str) {
        assert_eq!(ours.len(), theirs.len(), "{what}: lengths");
        for (i, (a, b)) in ours.iter().zip(theirs).enumerate() {
            assert!(
                (a - b).abs() <= 1e-5 * (1.0 + b.abs()),
                "{what}[{i}]: host {a} vs candle {b}"
            );
        }
    }

    fn check(spec: &EnvSpec, hidden: &[usize]) {
        let m = model(spec, hidden, 7);
        let host = HostForward::from_model(&m)
            .expect("build")
            .expect("an MLP model has a host forward");
        let len = spec.obs_len();
        for rows in [1, 3, 17] {
            let mut dims = vec![rows];
            dims.extend(&spec.obs_shape);
            let (mut params, mut values, mut scratch) = (Vec::new(), Vec::new(), Vec::new());
            let floats = obs_f32(rows, len);
            let bytes: Vec<u8> = (0..rows * len).map(|i| (i * 37 % 256) as u8).collect();
            let (obs, tensor) = match spec.obs_dtype {
                ObsDType::F32 => (
                    HostObs::F32(&floats),
                    Tensor::from_slice(&floats, dims.as_slice(), &Device::Cpu),
                ),
                ObsDType::U8 => (
                    HostObs::U8(&bytes),
                    Tensor::from_slice(&bytes, dims.as_slice(), &Device::Cpu),
                ),
            };
            host.step(obs, rows, &mut params, &mut values, &mut scratch);
            let (theirs_p, theirs_v) = candle_step(&m, &tensor.unwrap()).unwrap();
            assert_close(&params, &theirs_p, "params");
            assert_close(&values, &theirs_v, "values");
        }
    }

    #[test]
    fn matches_the_candle_step_for_categorical_gaussian_and_u8_models() {
        check(&EnvSpec::cartpole(), &[64, 64]);
        check(&EnvSpec::cartpole(), &[5]);
        check(&EnvSpec::cartpole(), &[32, 48, 16]);
        let pendulum = EnvSpec {
            env_name: "Pendulum-v1".into(),
            obs_shape: vec![3],
            obs_dtype: ObsDType::F32,
            action: ActionSpace::uniform_box(2, -2.0, 2.0),
        };
        check(&pendulum, &[64, 64]);
        let mut u8_vector = EnvSpec::cartpole();
        u8_vector.obs_dtype = ObsDType::U8;
        u8_vector.obs_shape = vec![10];
        check(&u8_vector, &[16, 16]);
    }

    #[test]
    fn only_feed_forward_f32_cpu_models_have_one() {
        let mut cfg = ModelConfig::for_spec(&EnvSpec::cartpole());
        cfg.lstm_size = Some(8);
        let recurrent = TrainableModel::new(&cfg, &Device::Cpu, 1)
            .unwrap()
            .snapshot()
            .unwrap();
        assert!(HostForward::from_model(&recurrent).unwrap().is_none());
        let bf16 = trainable(&EnvSpec::cartpole(), &[8], 1)
            .snapshot_as(DType::BF16)
            .unwrap();
        assert!(HostForward::from_model(&bf16).unwrap().is_none());
        let image = model(
            &EnvSpec::synthetic(vec![4, 84, 84], ObsDType::U8, 6),
            &[],
            1,
        );
        assert!(HostForward::from_model(&image).unwrap().is_none());
    }
}
