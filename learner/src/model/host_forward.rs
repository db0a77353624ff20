//! [`HostForward`]: a policy's inference step as plain code on `f32`
//! slices, for any batch of an f32 model on the CPU: the MLP, the conv
//! torsos, the LSTM core and the heads.
//!
//! Why: through candle every layer of a step allocates its output and goes
//! through the storage dispatch, and its matrix products split over the
//! pool by their own rule (two threads made a 256-row MLP step 1.8x
//! slower than one). Here a batch runs layer after layer over reused
//! buffers, and a large batch is split by rows over candle's pool, each
//! task running the whole network on its rows (`benches/cpu_math.py`
//! measures both against PyTorch).
//!
//! Two ways through the same layers:
//! - up to [`HOST_FORWARD_MAX_ROWS`] rows of an MLP, one row at a time:
//!   each weight matrix transposed to `[I, O]`, so every input adds a
//!   scaled weight row into the outputs, the sums kept in registers in
//!   blocks of 16 outputs (0.9 us for CartPole's one row, against 4.4
//!   through candle);
//! - otherwise a matrix product per layer over all the task's rows
//!   ([`super::cpu::gemm`], the kernels of candle's `matmul`), the conv
//!   layers as patches times weights ([`super::cpu::conv_relu`]), the
//!   bias and activation in one pass after each product.
//!
//! Same function as [`ActorCritic::step`]: the snapshot's own weights,
//! copied once per snapshot; tanh is [`super::cpu::tanh::tanh_f32`], the
//! function the candle path applies; u8 observations scaled by 1/255 as
//! the model's input; the LSTM cell's gates in PyTorch's order (input,
//! forget, cell, output); a Gaussian's log-std clamped and appended to
//! each row's means. Only the order in which sums are added differs from
//! candle's, so outputs agree to float rounding (tested within 1e-5).
//!
//! Which models: f32 weights on the CPU ([`HostForward::from_model`] gives
//! `None` for a bf16 inference copy or a GPU model, which keep candle).
//!
//! Cost of building: one copy of the weights (18 KB for CartPole's MLP,
//! 2.8 MB for the Atari torso), once per published snapshot, when the
//! first batch asks for it.
use candle_core::{DType, Result, Tensor};
use rayon::prelude::*;

use crate::model::actor_critic::ActorCritic;
use crate::model::cpu::conv_relu;
use crate::model::cpu::dense_act::Activation;
use crate::model::cpu::gemm::{matmul, MatMut, MatRef, Threads, PARALLEL_MIN_FLOPS};
use crate::model::cpu::im2col::{ConvGeometry, Frames};
use crate::model::cpu::simd::{wide, Kernel};
use crate::model::cpu::tanh::tanh_f32;
use crate::model::dense::Dense;
use crate::model::distribution;
use crate::model::torso::Torso;

/// Batches of at most this many rows of an MLP model run one row at a
/// time (see the module docs). Measured with `inference_bench --models mlp
/// --paths candle,host` on the 2-core EPYC VM (CartPole's MLP, forward plus
/// sampling, docs/performance.md): 0.9 against 4.4 us at one row, 3.3
/// against 7.9 at 4, 13.3 against 15.5 at 16; somewhere before 64 rows
/// blocked matrix products win (54.7 against 39.5 us at 64).
pub const HOST_FORWARD_MAX_ROWS: usize = 16;

/// Observations of a batch, in the gather buffers of an inference thread.
#[derive(Debug, Clone, Copy)]
pub enum HostObs<'a> {
    F32(&'a [f32]),
    U8(&'a [u8]),
}

/// One batch's inputs, in host buffers.
#[derive(Debug, Clone, Copy)]
pub struct HostBatch<'a> {
    /// `[rows, ...obs_shape]` observations (at least that many).
    pub obs: HostObs<'a>,
    pub rows: usize,
    /// `[rows, H]` each: the rows' recurrent state; empty for a
    /// feed-forward model.
    pub h: &'a [f32],
    pub c: &'a [f32],
}

/// One batch's outputs, reused from batch to batch.
#[derive(Debug, Default)]
pub struct BatchOutputs {
    /// `[rows, P]`: the action distribution's parameters.
    pub params: Vec<f32>,
    /// `[rows]` state values.
    pub values: Vec<f32>,
    /// `[rows, H]` each: the next recurrent state; empty for a
    /// feed-forward model.
    pub h: Vec<f32>,
    pub c: Vec<f32>,
    /// The layers' outputs on the calling thread.
    scratch: Scratch,
}

/// Layer outputs, reused.
#[derive(Debug, Default)]
struct Scratch {
    a: Vec<f32>,
    b: Vec<f32>,
    gates: Vec<f32>,
}

/// One dense layer's weights, transposed: `y = b + sum_i x[i] * w_t[i, ..]`.
#[derive(Debug, Clone)]
struct HostDense {
    in_dim: usize,
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
            in_dim,
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

    /// `out = act(x W^T + b)` for `n` rows (`x` `[n, I]`, `out` `[n, O]`):
    /// one matrix product, then the bias and activation in one pass.
    fn forward_rows(&self, x: &[f32], n: usize, out: &mut Vec<f32>, act: Activation) -> Result<()> {
        out.resize(n * self.out_dim, 0.0);
        matmul(
            MatMut::row_major(out, n, self.out_dim)?,
            MatRef::row_major(x, n, self.in_dim)?,
            MatRef::row_major(&self.weight_t, self.in_dim, self.out_dim)?,
            false,
            Threads::Serial,
        )?;
        for row in out.chunks_exact_mut(self.out_dim) {
            for (y, b) in row.iter_mut().zip(&self.bias) {
                *y = act.apply(*y + b);
            }
        }
        Ok(())
    }

    /// Multiply-adds per row.
    fn macs(&self) -> usize {
        self.in_dim * self.out_dim
    }
}

/// Outputs summed together in registers: 16 f32 are four SSE registers
/// (two AVX), leaving room for the weights being loaded.
const OUTPUT_BLOCK: usize = 16;

/// A conv layer and its ReLU.
#[derive(Debug, Clone)]
struct HostConv {
    geometry: ConvGeometry,
    /// `[O, C·k·k]`.
    weight: Vec<f32>,
    /// `[O]`.
    bias: Vec<f32>,
}

/// The layers before the core and heads.
#[derive(Debug, Clone)]
enum HostTorso {
    /// Dense layers, tanh after each.
    Mlp(Vec<HostDense>),
    /// Conv layers then a dense one, ReLU after each.
    Conv { convs: Vec<HostConv>, fc: HostDense },
}

/// The LSTM core's weights, transposed for row products.
#[derive(Debug, Clone)]
struct HostLstm {
    hidden: usize,
    /// `[in, 4H]`.
    w_ih_t: Vec<f32>,
    /// `[H, 4H]`.
    w_hh_t: Vec<f32>,
    /// `[4H]`: `b_ih + b_hh`.
    bias: Vec<f32>,
}

impl HostLstm {
    /// The next state of `n` rows into `h_out`, `c_out` (`[n, H]` each)
    /// from the torso's features `x` `[n, in]` and the state `h`, `c`.
    fn step(
        &self,
        x: &[f32],
        n: usize,
        (h, c): (&[f32], &[f32]),
        (h_out, c_out): (&mut [f32], &mut [f32]),
        gates: &mut Vec<f32>,
    ) -> Result<()> {
        let (hs, width) = (self.hidden, 4 * self.hidden);
        let input = self.w_ih_t.len() / width;
        gates.resize(n * width, 0.0);
        matmul(
            MatMut::row_major(gates, n, width)?,
            MatRef::row_major(x, n, input)?,
            MatRef::row_major(&self.w_ih_t, input, width)?,
            false,
            Threads::Serial,
        )?;
        matmul(
            MatMut::row_major(gates, n, width)?,
            MatRef::row_major(h, n, hs)?,
            MatRef::row_major(&self.w_hh_t, hs, width)?,
            true,
            Threads::Serial,
        )?;
        wide(LstmGates {
            gates: &gates[..n * width],
            bias: &self.bias[..width],
            c: &c[..n * hs],
            c_out: &mut c_out[..n * hs],
            h_out: &mut h_out[..n * hs],
        });
        Ok(())
    }
}

/// The LSTM cell's gates over `n` rows of pre-activations
/// (`[n, 4H]`: input, forget, cell, output), through [`wide`].
struct LstmGates<'a> {
    gates: &'a [f32],
    /// `[4H]`.
    bias: &'a [f32],
    c: &'a [f32],
    c_out: &'a mut [f32],
    h_out: &'a mut [f32],
}

impl Kernel for LstmGates<'_> {
    type Output = ();

    #[inline(always)]
    fn run(self) {
        let hs = self.bias.len() / 4;
        // σ(v) = (1 + tanh(v / 2)) / 2: the gates go through the vectorised
        // tanh too, where a libm `exp` per gate kept the loop scalar.
        let sigmoid = |v: f32| 0.5 + 0.5 * tanh_f32(0.5 * v);
        let b = self.bias;
        let (bi, bf, bc, bo) = (&b[..hs], &b[hs..2 * hs], &b[2 * hs..3 * hs], &b[3 * hs..]);
        let rows = self
            .gates
            .chunks_exact(4 * hs)
            .zip(self.c.chunks_exact(hs))
            .zip(
                self.c_out
                    .chunks_exact_mut(hs)
                    .zip(self.h_out.chunks_exact_mut(hs)),
            );
        for ((g, c), (c_out, h_out)) in rows {
            let (i, f) = (&g[..hs], &g[hs..2 * hs]);
            let (cell, o) = (&g[2 * hs..3 * hs], &g[3 * hs..]);
            for j in 0..hs {
                let ig = sigmoid(i[j] + bi[j]);
                let fg = sigmoid(f[j] + bf[j]);
                let cg = tanh_f32(cell[j] + bc[j]);
                let og = sigmoid(o[j] + bo[j]);
                let next = fg * c[j] + ig * cg;
                c_out[j] = next;
                h_out[j] = og * tanh_f32(next);
            }
        }
    }
}

/// A policy's step as plain code (see the module docs).
#[derive(Debug, Clone)]
pub struct HostForward {
    in_dim: usize,
    /// 1/255 for u8 observations, 1 for f32.
    obs_scale: f32,
    torso: HostTorso,
    core: Option<HostLstm>,
    /// The policy head's outputs, then the value.
    heads: HostDense,
    /// A Gaussian's clamped log-std, appended to each row's means; empty
    /// for a categorical.
    log_std: Vec<f32>,
    /// Rows a task of a split batch takes at least ([`PARALLEL_MIN_FLOPS`]).
    rows_per_task: usize,
}

/// `t`'s values, row-major.
fn values(t: &Tensor) -> Result<Vec<f32>> {
    t.flatten_all()?.to_vec1::<f32>()
}

impl HostForward {
    /// The code for `model`, or `None` when it is not an f32 model on the
    /// CPU.
    pub fn from_model(model: &ActorCritic) -> Result<Option<Self>> {
        let config = model.config();
        if model.dtype() != DType::F32 || !model.policy.weight().device().is_cpu() {
            return Ok(None);
        }
        let mut macs = 0;
        let torso = match &model.torso {
            Torso::Mlp(mlp) => {
                let layers = mlp
                    .layers()
                    .iter()
                    .map(|l| HostDense::concat(&[l]))
                    .collect::<Result<Vec<_>>>()?;
                macs += layers.iter().map(HostDense::macs).sum::<usize>();
                HostTorso::Mlp(layers)
            }
            Torso::Conv(conv) => {
                let convs = conv
                    .layers()
                    .map(|(geometry, weight, bias)| {
                        Ok(HostConv {
                            geometry,
                            weight: values(weight)?,
                            bias: values(bias)?,
                        })
                    })
                    .collect::<Result<Vec<_>>>()?;
                macs += convs
                    .iter()
                    .map(|c| c.geometry.positions() * c.weight.len())
                    .sum::<usize>();
                let fc = HostDense::concat(&[conv.fc()])?;
                macs += fc.macs();
                HostTorso::Conv { convs, fc }
            }
        };
        let core = match &model.core {
            None => None,
            Some(core) => {
                let [w_ih, w_hh, b_ih, b_hh] = core.weights();
                let (b_ih, b_hh) = (values(b_ih)?, values(b_hh)?);
                let lstm = HostLstm {
                    hidden: core.hidden(),
                    w_ih_t: values(&w_ih.t()?.contiguous()?)?,
                    w_hh_t: values(&w_hh.t()?.contiguous()?)?,
                    bias: b_ih.iter().zip(&b_hh).map(|(a, b)| a + b).collect(),
                };
                macs += lstm.w_ih_t.len() + lstm.w_hh_t.len();
                Some(lstm)
            }
        };
        let heads = HostDense::concat(&[&model.policy, &model.value])?;
        macs += heads.macs();
        let log_std = match &model.log_std {
            None => Vec::new(),
            Some(t) => t
                .clamp(distribution::LOG_STD_MIN, distribution::LOG_STD_MAX)?
                .to_dtype(DType::F32)?
                .to_vec1::<f32>()?,
        };
        Ok(Some(HostForward {
            in_dim: config.obs_len(),
            obs_scale: if config.obs_is_u8 { 1.0 / 255.0 } else { 1.0 },
            torso,
            core,
            heads,
            log_std,
            rows_per_task: PARALLEL_MIN_FLOPS.div_ceil(2 * macs.max(1)).max(1),
        }))
    }

    /// `[rows, H]`: the core's state size, 0 without one.
    pub fn state_size(&self) -> usize {
        self.core.as_ref().map_or(0, |c| c.hidden)
    }

    /// Distribution parameters per row (as [`ActorCritic::step`]'s
    /// `policy_params`, `[rows, P]` flattened), values `[rows]` and the
    /// next state (`[rows, H]` each, recurrent models) into `out`, over
    /// `threads` of candle's pool.
    pub fn step(
        &self,
        batch: &HostBatch<'_>,
        out: &mut BatchOutputs,
        threads: usize,
    ) -> Result<()> {
        self.step_split(batch, out, threads, self.rows_per_task)
    }

    /// [`HostForward::step`], a task taking at least `rows_per_task` rows.
    fn step_split(
        &self,
        batch: &HostBatch<'_>,
        out: &mut BatchOutputs,
        threads: usize,
        rows_per_task: usize,
    ) -> Result<()> {
        let rows = batch.rows;
        let hs = self.state_size();
        let param_width = self.heads.out_dim - 1 + self.log_std.len();
        if batch.h.len() < rows * hs || batch.c.len() < rows * hs {
            candle_core::bail!(
                "host forward: state of {} and {} values for {rows} rows of {hs}",
                batch.h.len(),
                batch.c.len()
            );
        }
        let obs_len = match batch.obs {
            HostObs::F32(v) => v.len(),
            HostObs::U8(v) => v.len(),
        };
        if obs_len < rows * self.in_dim {
            candle_core::bail!(
                "host forward: {obs_len} observation values for {rows} rows of {}",
                self.in_dim
            );
        }
        out.params.resize(rows * param_width, 0.0);
        out.values.resize(rows, 0.0);
        out.h.resize(rows * hs, 0.0);
        out.c.resize(rows * hs, 0.0);
        let tasks = if threads > 1 {
            (rows / rows_per_task.max(1)).clamp(1, threads)
        } else {
            1
        };
        if tasks == 1 {
            let outputs = TaskOutputs {
                params: &mut out.params,
                values: &mut out.values,
                h: &mut out.h,
                c: &mut out.c,
            };
            return self.run(batch, 0, rows, outputs, &mut out.scratch);
        }
        let per_task = rows.div_ceil(tasks);
        let mut slices = Vec::with_capacity(tasks);
        let (mut params, mut values, mut h, mut c) = (
            &mut out.params[..],
            &mut out.values[..],
            &mut out.h[..],
            &mut out.c[..],
        );
        for first in (0..rows).step_by(per_task) {
            let n = per_task.min(rows - first);
            let (p, rest_p) = params.split_at_mut(n * param_width);
            let (v, rest_v) = values.split_at_mut(n);
            let (hh, rest_h) = h.split_at_mut(n * hs);
            let (cc, rest_c) = c.split_at_mut(n * hs);
            (params, values, h, c) = (rest_p, rest_v, rest_h, rest_c);
            slices.push((
                first,
                n,
                TaskOutputs {
                    params: p,
                    values: v,
                    h: hh,
                    c: cc,
                },
            ));
        }
        slices
            .into_par_iter()
            .try_for_each_init(Scratch::default, |scratch, (first, n, outputs)| {
                self.run(batch, first, n, outputs, scratch)
            })
    }

    /// Rows `first..first + n` of `batch` into `out`.
    fn run(
        &self,
        batch: &HostBatch<'_>,
        first: usize,
        n: usize,
        out: TaskOutputs<'_>,
        scratch: &mut Scratch,
    ) -> Result<()> {
        let hs = self.state_size();
        let obs = match batch.obs {
            HostObs::F32(v) => Frames::F32(&v[first * self.in_dim..(first + n) * self.in_dim]),
            HostObs::U8(v) => Frames::U8(
                &v[first * self.in_dim..(first + n) * self.in_dim],
                self.obs_scale,
            ),
        };
        if let (HostTorso::Mlp(layers), None) = (&self.torso, &self.core) {
            if n <= HOST_FORWARD_MAX_ROWS {
                self.mlp_rows(layers, obs, n, out, scratch);
                return Ok(());
            }
        }
        let Scratch { a, b, gates } = scratch;
        // The torso's features in `a`.
        match &self.torso {
            HostTorso::Mlp(layers) => {
                a.clear();
                match obs {
                    Frames::F32(v) => a.extend_from_slice(v),
                    Frames::U8(v, s) => a.extend(v.iter().map(|&x| f32::from(x) * s)),
                }
                for layer in layers {
                    layer.forward_rows(a, n, b, Activation::Tanh)?;
                    std::mem::swap(a, b);
                }
            }
            HostTorso::Conv { convs, fc } => {
                let mut input = obs;
                for conv in convs {
                    b.resize(n * conv.geometry.out_len(), 0.0);
                    conv_relu::forward(&conv.geometry, input, &conv.weight, &conv.bias, b, 1)?;
                    std::mem::swap(a, b);
                    input = Frames::F32(a);
                }
                fc.forward_rows(a, n, b, Activation::Relu)?;
                std::mem::swap(a, b);
            }
        }
        if let Some(core) = &self.core {
            let span = first * hs..(first + n) * hs;
            core.step(
                a,
                n,
                (&batch.h[span.clone()], &batch.c[span]),
                (&mut *out.h, &mut *out.c),
                gates,
            )?;
            a.clear();
            a.extend_from_slice(out.h);
        }
        self.heads.forward_rows(a, n, b, Activation::None)?;
        self.write_heads(b, out.params, out.values);
        Ok(())
    }

    /// The MLP one row at a time (see the module docs).
    fn mlp_rows(
        &self,
        layers: &[HostDense],
        obs: Frames<'_>,
        n: usize,
        out: TaskOutputs<'_>,
        scratch: &mut Scratch,
    ) {
        let width = layers
            .iter()
            .map(|l| l.out_dim)
            .chain([self.heads.out_dim, self.in_dim])
            .max()
            .unwrap_or(0);
        scratch.a.resize(2 * width, 0.0);
        let heads_out = self.heads.out_dim;
        let param_width = heads_out - 1 + self.log_std.len();
        let (a, b) = scratch.a.split_at_mut(width);
        for r in 0..n {
            // The row's input, as f32, in `a`.
            let x = &mut a[..self.in_dim];
            let range = r * self.in_dim..(r + 1) * self.in_dim;
            match obs {
                Frames::F32(o) => x.copy_from_slice(&o[range]),
                Frames::U8(o, s) => {
                    for (xi, &v) in x.iter_mut().zip(&o[range]) {
                        *xi = f32::from(v) * s;
                    }
                }
            }
            let (mut input, mut output) = (&mut *a, &mut *b);
            let mut width = self.in_dim;
            for layer in layers {
                let y = &mut output[..layer.out_dim];
                layer.forward_row(&input[..width], y);
                for v in y.iter_mut() {
                    *v = tanh_f32(*v);
                }
                width = layer.out_dim;
                std::mem::swap(&mut input, &mut output);
            }
            let heads = &mut output[..heads_out];
            self.heads.forward_row(&input[..width], heads);
            let params = &mut out.params[r * param_width..(r + 1) * param_width];
            self.write_heads(heads, params, &mut out.values[r..r + 1]);
        }
    }

    /// Rows of `[policy outputs, value]` into parameters (the log-std
    /// appended) and values.
    fn write_heads(&self, heads: &[f32], params: &mut [f32], values: &mut [f32]) {
        let policy_out = self.heads.out_dim - 1;
        let param_width = policy_out + self.log_std.len();
        for ((row, p), v) in heads
            .chunks_exact(self.heads.out_dim)
            .zip(params.chunks_exact_mut(param_width))
            .zip(values.iter_mut())
        {
            p[..policy_out].copy_from_slice(&row[..policy_out]);
            p[policy_out..].copy_from_slice(&self.log_std);
            *v = row[policy_out];
        }
    }
}

/// One task's share of the outputs.
struct TaskOutputs<'a> {
    params: &'a mut [f32],
    values: &'a mut [f32],
    h: &'a mut [f32],
    c: &'a mut [f32],
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ModelConfig, RecurrentState, TrainableModel};
    use candle_core::{Device, Tensor};
    use seed_shared::{ActionSpace, EnvSpec, ObsDType};

    fn model(spec: &EnvSpec, hidden: &[usize], lstm: Option<usize>, seed: u64) -> ActorCritic {
        let mut cfg = ModelConfig::for_spec(spec);
        cfg.hidden_sizes = hidden.to_vec();
        cfg.lstm_size = lstm;
        let trainable = TrainableModel::new(&cfg, &Device::Cpu, seed).expect("model");
        // Non-zero biases, so a bias dropped or mixed up would show.
        for (name, var) in trainable.varmap.data().lock().unwrap().iter() {
            if name.contains("bias") {
                let b = Tensor::randn(0f32, 0.3, var.shape(), &Device::Cpu).unwrap();
                var.set(&b).unwrap();
            }
        }
        trainable.snapshot().expect("snapshot")
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

    /// The host forward against candle's step for `rows` rows, on one
    /// thread and split over three.
    fn check(spec: &EnvSpec, hidden: &[usize], lstm: Option<usize>, rows: usize) {
        let m = model(spec, hidden, lstm, 7);
        let host = HostForward::from_model(&m)
            .expect("build")
            .expect("an f32 CPU model has a host forward");
        let case = format!(
            "{} {:?} lstm {lstm:?}, {rows} rows",
            spec.env_name, spec.obs_shape
        );
        let len = spec.obs_len();
        let mut dims = vec![rows];
        dims.extend(&spec.obs_shape);
        let floats: Vec<f32> = (0..rows * len)
            .map(|i| ((i * 7919 % 1000) as f32 / 100.0) - 5.0)
            .collect();
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
        let hs = lstm.unwrap_or(0);
        let h: Vec<f32> = (0..rows * hs)
            .map(|i| (i % 13) as f32 / 13.0 - 0.5)
            .collect();
        let c: Vec<f32> = (0..rows * hs).map(|i| (i % 7) as f32 / 7.0 - 0.5).collect();
        let state = lstm.map(|hs| RecurrentState {
            h: Tensor::from_slice(&h, (rows, hs), &Device::Cpu).unwrap(),
            c: Tensor::from_slice(&c, (rows, hs), &Device::Cpu).unwrap(),
        });
        let theirs = m.step(&tensor.unwrap(), state.as_ref()).unwrap();
        let batch = HostBatch {
            obs,
            rows,
            h: &h,
            c: &c,
        };
        // One task; as many as the cost per row gives on three threads;
        // three of at least a row.
        for (threads, rows_per_task) in [(1, host.rows_per_task), (3, host.rows_per_task), (3, 1)] {
            let mut out = BatchOutputs::default();
            host.step_split(&batch, &mut out, threads, rows_per_task)
                .unwrap();
            let case = format!("{case}, {threads} threads of {rows_per_task}+ rows");
            let flat = |t: &Tensor| t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
            assert_close(
                &out.params,
                &flat(&theirs.policy_params),
                &format!("{case}: params"),
            );
            assert_close(
                &out.values,
                &flat(&theirs.values),
                &format!("{case}: values"),
            );
            match &theirs.state {
                Some(next) => {
                    assert_close(&out.h, &flat(&next.h), &format!("{case}: h"));
                    assert_close(&out.c, &flat(&next.c), &format!("{case}: c"));
                }
                None => assert!(out.h.is_empty() && out.c.is_empty(), "{case}: a state"),
            }
        }
    }

    /// Rows one at a time (up to 16 rows of an MLP) and as matrix products
    /// (more rows, or any other model), on one and three threads.
    const ROWS: [usize; 5] = [1, 3, 17, 40, 301];

    #[test]
    fn mlp_models_match_the_candle_step() {
        let pendulum = EnvSpec {
            env_name: "Pendulum-v1".into(),
            obs_shape: vec![3],
            obs_dtype: ObsDType::F32,
            action: ActionSpace::uniform_box(2, -2.0, 2.0),
        };
        let mut u8_vector = EnvSpec::cartpole();
        u8_vector.obs_dtype = ObsDType::U8;
        u8_vector.obs_shape = vec![10];
        for rows in ROWS {
            check(&EnvSpec::cartpole(), &[64, 64], None, rows);
            check(&EnvSpec::cartpole(), &[5], None, rows);
            check(&EnvSpec::cartpole(), &[32, 48, 16], None, rows);
            check(&pendulum, &[64, 64], None, rows);
            check(&u8_vector, &[16, 16], None, rows);
        }
    }

    #[test]
    fn lstm_models_match_the_candle_step() {
        let masked = EnvSpec::synthetic(vec![2], ObsDType::F32, 2);
        for rows in ROWS {
            check(&masked, &[64, 64], Some(64), rows);
            check(&EnvSpec::cartpole(), &[16], Some(24), rows);
        }
    }

    /// MinAtar's torso, the Atari torso, an odd small frame, f32 frames,
    /// and an image model with an LSTM core.
    #[test]
    fn conv_models_match_the_candle_step() {
        let minatar = EnvSpec::synthetic(vec![4, 10, 10], ObsDType::U8, 6);
        let atari = EnvSpec::synthetic(vec![4, 84, 84], ObsDType::U8, 6);
        let odd = EnvSpec::synthetic(vec![2, 7, 9], ObsDType::U8, 3);
        let floats = EnvSpec::synthetic(vec![3, 12, 11], ObsDType::F32, 4);
        for rows in [1, 3, 17] {
            check(&minatar, &[], None, rows);
            check(&atari, &[], None, rows);
            check(&odd, &[], None, rows);
            check(&floats, &[], Some(8), rows);
        }
    }

    #[test]
    fn the_one_row_mlp_path_is_unchanged_bit_for_bit() {
        // The row loops keep their sums' order: the same bits as a plain
        // dot product from the bias in input order, per output.
        // 20 hidden units: a block of 16 summed in registers, 4 one by one.
        let m = model(&EnvSpec::cartpole(), &[20], None, 3);
        let host = HostForward::from_model(&m).unwrap().unwrap();
        let x = [0.1f32, -0.4, 0.25, 2.0];
        let mut out = BatchOutputs::default();
        let batch = HostBatch {
            obs: HostObs::F32(&x),
            rows: 1,
            h: &[],
            c: &[],
        };
        host.step(&batch, &mut out, 1).unwrap();
        let HostTorso::Mlp(layers) = &host.torso else {
            panic!("an MLP")
        };
        let dot = |l: &HostDense, x: &[f32], j: usize| {
            let mut acc = l.bias[j];
            for (i, xi) in x.iter().enumerate() {
                acc += xi * l.weight_t[i * l.out_dim + j];
            }
            acc
        };
        let hidden: Vec<f32> = (0..20).map(|j| tanh_f32(dot(&layers[0], &x, j))).collect();
        let heads: Vec<f32> = (0..3).map(|j| dot(&host.heads, &hidden, j)).collect();
        assert_eq!(out.params, heads[..2]);
        assert_eq!(out.values, heads[2..]);
    }

    #[test]
    fn only_f32_cpu_models_have_one() {
        let mut cfg = ModelConfig::for_spec(&EnvSpec::cartpole());
        cfg.hidden_sizes = vec![8];
        let bf16 = TrainableModel::new(&cfg, &Device::Cpu, 1)
            .unwrap()
            .snapshot_as(DType::BF16)
            .unwrap();
        assert!(HostForward::from_model(&bf16).unwrap().is_none());
    }

    #[test]
    fn short_buffers_are_refused() {
        let m = model(&EnvSpec::cartpole(), &[8], Some(4), 1);
        let host = HostForward::from_model(&m).unwrap().unwrap();
        let mut out = BatchOutputs::default();
        let obs = [0f32; 8];
        let short = HostBatch {
            obs: HostObs::F32(&obs),
            rows: 2,
            h: &[0.0; 4],
            c: &[0.0; 8],
        };
        let e = host.step(&short, &mut out, 1).unwrap_err();
        assert!(
            e.to_string().contains("state of 4 and 8 values for 2 rows"),
            "{e}"
        );
        let state = [0f32; 12];
        let few = HostBatch {
            obs: HostObs::F32(&obs),
            rows: 3,
            h: &state,
            c: &state,
        };
        let e = host.step(&few, &mut out, 1).unwrap_err();
        assert!(
            e.to_string().contains("8 observation values for 3 rows"),
            "{e}"
        );
    }
}
