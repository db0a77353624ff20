//! V-trace off-policy value targets and policy-gradient advantages.
//!
//! IMPALA (Espeholt et al. 2018, "IMPALA: Scalable Distributed Deep-RL with
//! Importance Weighted Actor-Learner Architectures", eq. 1) corrects for the lag
//! between the behaviour policy μ that acted and the target policy π being
//! trained. For an unroll of transitions `t = s .. s+n-1`:
//!
//! ```text
//! vs_s = V(x_s) + Σ_{t=s}^{s+n-1} ( Π_{i=s}^{t-1} γ_i c_i ) ρ_t δ_t
//! δ_t  = r_t + γ_t V(x_{t+1}) − V(x_t)
//! ρ_t  = min(ρ̄, π(a_t|x_t) / μ(a_t|x_t))      (rhos)
//! c_t  = min(c̄, π(a_t|x_t) / μ(a_t|x_t))      (cs)
//! ```
//!
//! where the paper's `γ^{t-s}` becomes the product of per-step discounts `γ_i`
//! (zero across a termination). The sum obeys the backward recursion
//!
//! ```text
//! vs_t − V(x_t) = ρ_t δ_t + γ_t c_t (vs_{t+1} − V(x_{t+1})),   vs_T = V(x_T)
//! ```
//!
//! which is what we compute. The policy-gradient advantage is
//! `pg_advantages_t = ρ^pg_t (r_t + γ_t vs_{t+1} − V(x_t))` with
//! `ρ^pg_t = min(ρ̄_pg, π/μ)`.
//!
//! Masking: `valid_t = 0` marks a transition whose action is a dummy (the step
//! was the final observation of a truncated episode). Its `ρ_t = c_t = ρ^pg_t = 0`,
//! so `δ_t` contributes nothing, `vs_t = V(x_t)`, and the transition before it
//! bootstraps through `V(x_t)`.
//!
//! All tensors are time-major: `[T, B]`, with `T` transitions and `B` unrolls;
//! every input is `f32`. Outputs carry no gradient.
//!
//! # Cost and the choice of recursion
//!
//! O(T·B) work. The backward recursion is sequential in `T`, so it is computed
//! one of two ways ([`Recursion`]):
//! - [`Recursion::HostLoop`]: copy the seven inputs to host memory once, run
//!   [`vtrace_slices`] (one fused pass, no allocations per step), copy three
//!   outputs back. On a CPU device the copies are plain memcpys and this avoids
//!   ~2T+20 separate tensor ops, each with its own allocation and dispatch.
//! - [`Recursion::DeviceOps`]: elementwise tensor ops for `ρ, c, δ`, then `T`
//!   multiply-adds on `[B]` slices. On an accelerator this stays on the device:
//!   no host synchronisation, only `O(T)` small kernel launches.
//!
//! [`vtrace`] picks `HostLoop` on CPU, and on an accelerator too while the
//! batch is small (`T·B` at most [`HOST_RECURSION_MAX_ELEMENTS`]), else
//! `DeviceOps` ([`Recursion::Auto`]). On an accelerator the host loop moves
//! its data in one transfer each way: the seven inputs are concatenated on
//! the device (one op) and downloaded together, the three outputs uploaded
//! as one buffer and split into views. That is 2 transfers and 1 op in
//! place of `~2T+20` launches; the download waits for the forward pass,
//! which the trainer waits for anyway (it reads the loss back every step).
//! `benches/benches/vtrace.rs` measures both recursions on CPU.
use candle_core::{DType, Device, Error, Result, Shape, Tensor};

/// Inputs to [`vtrace`], time-major. Every tensor is `f32` and on one device.
#[derive(Debug, Clone, Copy)]
pub struct VTraceInputs<'a> {
    /// `log μ(a_t|x_t)`, `[T, B]`: the behaviour policy that acted.
    pub behaviour_log_probs: &'a Tensor,
    /// `log π(a_t|x_t)`, `[T, B]`: the policy being trained.
    pub target_log_probs: &'a Tensor,
    /// `γ_t`, `[T, B]`: zero where the transition ends at a terminal state.
    pub discounts: &'a Tensor,
    /// `r_t`, `[T, B]`: reward of the transition `x_t -> x_{t+1}`.
    pub rewards: &'a Tensor,
    /// `V(x_t)`, `[T, B]`.
    pub values: &'a Tensor,
    /// `V(x_T)`, `[B]`: the value the last transition bootstraps from.
    pub bootstrap_value: &'a Tensor,
    /// `valid_t ∈ {0, 1}`, `[T, B]`: 0 where the action at `x_t` is a dummy.
    pub valid: &'a Tensor,
}

/// Truncation levels of the importance weights. `f32::INFINITY` disables a clip.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct VTraceClip {
    /// ρ̄: clips the `rhos` in `δ_t`; sets the fixed point the values converge to
    /// (π at ρ̄ = ∞, nearer μ below). IMPALA default 1.0.
    pub rho: f32,
    /// c̄: clips the trace cutting `cs`; controls the contraction speed only.
    /// IMPALA default 1.0.
    pub c: f32,
    /// ρ̄_pg: clips the weight on the policy-gradient advantage. Default 1.0.
    pub pg_rho: f32,
}

impl Default for VTraceClip {
    fn default() -> Self {
        Self {
            rho: 1.0,
            c: 1.0,
            pg_rho: 1.0,
        }
    }
}

impl VTraceClip {
    /// No clipping at all: plain importance sampling (`ρ̄ = c̄ = ρ̄_pg = ∞`).
    pub const NONE: Self = Self {
        rho: f32::INFINITY,
        c: f32::INFINITY,
        pg_rho: f32::INFINITY,
    };
}

/// V-trace outputs, all `[T, B]`, `f32`, detached from any graph.
#[derive(Debug, Clone)]
pub struct VTraceReturns {
    /// `vs_t`: the value targets.
    pub vs: Tensor,
    /// `ρ^pg_t (r_t + γ_t vs_{t+1} − V(x_t))`: advantages for the policy gradient.
    pub pg_advantages: Tensor,
    /// `ρ_t = valid_t · min(ρ̄, π/μ)`, for logging how off-policy the data is.
    pub clipped_rhos: Tensor,
}

/// Largest `T·B` that [`Recursion::Auto`] sends to the host on an
/// accelerator: 64 Ki elements is 2 MiB down (seven inputs) and under 1 MiB
/// up, tens of microseconds over PCIe, and a host loop of well under a
/// millisecond; beyond it the device ops' launches cost less than the
/// transfers.
pub const HOST_RECURSION_MAX_ELEMENTS: usize = 1 << 16;

/// How the sequential backward recursion is run; see the module docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Recursion {
    /// `HostLoop` on a CPU device, and elsewhere while `T·B` is at most
    /// [`HOST_RECURSION_MAX_ELEMENTS`]; `DeviceOps` beyond that.
    #[default]
    Auto,
    /// One copy to host, a fused loop, one copy back.
    HostLoop,
    /// Tensor ops only: `T` multiply-adds on `[B]` slices, stays on device.
    DeviceOps,
}

/// Computes V-trace targets with the recursion suited to the inputs' device.
///
/// Errors if shapes disagree (`[T, B]` everywhere, `[B]` for the bootstrap) or,
/// on the host path, if the inputs are not `f32`.
pub fn vtrace(inputs: &VTraceInputs<'_>, clip: &VTraceClip) -> Result<VTraceReturns> {
    vtrace_with(inputs, clip, Recursion::Auto)
}

/// [`vtrace`] with an explicit choice of [`Recursion`].
pub fn vtrace_with(
    inputs: &VTraceInputs<'_>,
    clip: &VTraceClip,
    recursion: Recursion,
) -> Result<VTraceReturns> {
    let (t_len, batch) = check_shapes(inputs)?;
    let device = inputs.values.device();
    let host = match recursion {
        Recursion::Auto => auto_uses_host(device.is_cpu(), t_len * batch),
        Recursion::HostLoop => true,
        Recursion::DeviceOps => false,
    };
    if host && device.is_cpu() {
        vtrace_host_loop(inputs, clip, t_len, batch, device)
    } else if host {
        vtrace_host_loop_staged(inputs, clip, t_len, batch, device)
    } else {
        vtrace_device_ops(inputs, clip, t_len)
    }
}

/// Time-major `f32` slices for [`vtrace_slices`]: element `(t, b)` is at
/// `t * batch + b`; `bootstrap_value` has `batch` elements.
#[derive(Debug, Clone, Copy)]
pub struct VTraceSlices<'a> {
    /// `B`: unrolls per time step.
    pub batch: usize,
    /// `log μ(a_t|x_t)`, `T·B`.
    pub behaviour_log_probs: &'a [f32],
    /// `log π(a_t|x_t)`, `T·B`.
    pub target_log_probs: &'a [f32],
    /// `γ_t`, `T·B`.
    pub discounts: &'a [f32],
    /// `r_t`, `T·B`.
    pub rewards: &'a [f32],
    /// `V(x_t)`, `T·B`.
    pub values: &'a [f32],
    /// `V(x_T)`, `B`.
    pub bootstrap_value: &'a [f32],
    /// `valid_t ∈ {0, 1}`, `T·B`.
    pub valid: &'a [f32],
}

/// Output buffers for [`vtrace_slices`], each `T·B`, time-major.
#[derive(Debug)]
pub struct VTraceSlicesOut<'a> {
    /// `vs_t`.
    pub vs: &'a mut [f32],
    /// `pg_advantages_t`.
    pub pg_advantages: &'a mut [f32],
    /// `ρ_t`, clipped and masked.
    pub clipped_rhos: &'a mut [f32],
}

/// V-trace on plain `f32` slices: one backward pass, no allocation.
///
/// This is the kernel of [`Recursion::HostLoop`]; it is public so benchmarks
/// and host-side callers can skip tensors. Errors if a slice length disagrees.
pub fn vtrace_slices(
    inputs: &VTraceSlices<'_>,
    clip: &VTraceClip,
    out: VTraceSlicesOut<'_>,
) -> Result<()> {
    let batch = inputs.batch;
    let t_len = inputs.values.len().checked_div(batch).unwrap_or(0);
    let n = t_len * batch;
    if t_len == 0 || inputs.values.len() != n {
        return Err(shape_error(
            "values",
            (t_len.max(1), batch),
            inputs.values.len(),
        ));
    }
    for (name, len) in [
        ("behaviour_log_probs", inputs.behaviour_log_probs.len()),
        ("target_log_probs", inputs.target_log_probs.len()),
        ("discounts", inputs.discounts.len()),
        ("rewards", inputs.rewards.len()),
        ("valid", inputs.valid.len()),
        ("out.vs", out.vs.len()),
        ("out.pg_advantages", out.pg_advantages.len()),
        ("out.clipped_rhos", out.clipped_rhos.len()),
    ] {
        if len != n {
            return Err(shape_error(name, (t_len, batch), len));
        }
    }
    if inputs.bootstrap_value.len() != batch {
        return Err(Error::UnexpectedShape {
            msg: "vtrace: bootstrap_value".to_string(),
            expected: Shape::from(batch),
            got: Shape::from(inputs.bootstrap_value.len()),
        });
    }

    // Walk t = T-1 .. 0. Invariant at the top of step t, for every b:
    // `next_value[b] = V(x_{t+1})` and `next_vs[b] = vs_{t+1}` (both V(x_T) at t = T-1),
    // so `next_vs - next_value` is the accumulated correction of the recursion.
    let mut next_value = inputs.bootstrap_value.to_vec();
    let mut next_vs = inputs.bootstrap_value.to_vec();
    for t in (0..t_len).rev() {
        let row = t * batch..(t + 1) * batch;
        let behaviour = &inputs.behaviour_log_probs[row.clone()];
        let target = &inputs.target_log_probs[row.clone()];
        let discounts = &inputs.discounts[row.clone()];
        let rewards = &inputs.rewards[row.clone()];
        let values = &inputs.values[row.clone()];
        let valid = &inputs.valid[row.clone()];
        let vs = &mut out.vs[row.clone()];
        let pg_advantages = &mut out.pg_advantages[row.clone()];
        let clipped_rhos = &mut out.clipped_rhos[row];
        for b in 0..batch {
            // `if` rather than a product: 0 · ∞ would be NaN when a dummy action
            // has an overflowing ratio and a clip is disabled.
            let (rho, c, pg_rho) = if valid[b] > 0.0 {
                let ratio = (target[b] - behaviour[b]).exp();
                (
                    ratio.min(clip.rho),
                    ratio.min(clip.c),
                    ratio.min(clip.pg_rho),
                )
            } else {
                (0.0, 0.0, 0.0)
            };
            let gamma = discounts[b];
            let delta = rho * (rewards[b] + gamma * next_value[b] - values[b]);
            let correction = delta + gamma * c * (next_vs[b] - next_value[b]);
            let vs_t = values[b] + correction;
            pg_advantages[b] = pg_rho * (rewards[b] + gamma * next_vs[b] - values[b]);
            clipped_rhos[b] = rho;
            vs[b] = vs_t;
            next_vs[b] = vs_t;
            next_value[b] = values[b];
        }
    }
    Ok(())
}

/// [`Recursion::Auto`]'s choice: the host loop on a CPU, or for at most
/// [`HOST_RECURSION_MAX_ELEMENTS`] elements on an accelerator.
fn auto_uses_host(on_cpu: bool, elements: usize) -> bool {
    on_cpu || elements <= HOST_RECURSION_MAX_ELEMENTS
}

/// The host loop for an accelerator: one concatenation on the device, one
/// download, one upload (see the module docs). Same arithmetic as
/// [`vtrace_host_loop`], so the same results.
fn vtrace_host_loop_staged(
    inputs: &VTraceInputs<'_>,
    clip: &VTraceClip,
    t_len: usize,
    batch: usize,
    device: &Device,
) -> Result<VTraceReturns> {
    let n = t_len * batch;
    let flat = |t: &Tensor| t.detach().flatten_all();
    let staged = Tensor::cat(
        &[
            flat(inputs.behaviour_log_probs)?,
            flat(inputs.target_log_probs)?,
            flat(inputs.discounts)?,
            flat(inputs.rewards)?,
            flat(inputs.values)?,
            flat(inputs.valid)?,
            flat(inputs.bootstrap_value)?,
        ],
        0,
    )?
    .to_vec1::<f32>()?;
    let part = |i: usize| &staged[i * n..(i + 1) * n];
    let mut out = vec![0f32; 3 * n];
    let (vs, rest) = out.split_at_mut(n);
    let (pg_advantages, clipped_rhos) = rest.split_at_mut(n);
    vtrace_slices(
        &VTraceSlices {
            batch,
            behaviour_log_probs: part(0),
            target_log_probs: part(1),
            discounts: part(2),
            rewards: part(3),
            values: part(4),
            valid: part(5),
            bootstrap_value: &staged[6 * n..],
        },
        clip,
        VTraceSlicesOut {
            vs,
            pg_advantages,
            clipped_rhos,
        },
    )?;
    let out = Tensor::from_vec(out, (3, t_len, batch), device)?;
    Ok(VTraceReturns {
        vs: out.get(0)?,
        pg_advantages: out.get(1)?,
        clipped_rhos: out.get(2)?,
    })
}

fn vtrace_host_loop(
    inputs: &VTraceInputs<'_>,
    clip: &VTraceClip,
    t_len: usize,
    batch: usize,
    device: &Device,
) -> Result<VTraceReturns> {
    let host = |t: &Tensor| t.flatten_all()?.to_vec1::<f32>();
    let behaviour_log_probs = host(inputs.behaviour_log_probs)?;
    let target_log_probs = host(inputs.target_log_probs)?;
    let discounts = host(inputs.discounts)?;
    let rewards = host(inputs.rewards)?;
    let values = host(inputs.values)?;
    let bootstrap_value = host(inputs.bootstrap_value)?;
    let valid = host(inputs.valid)?;
    let n = t_len * batch;
    let mut vs = vec![0f32; n];
    let mut pg_advantages = vec![0f32; n];
    let mut clipped_rhos = vec![0f32; n];
    vtrace_slices(
        &VTraceSlices {
            batch,
            behaviour_log_probs: &behaviour_log_probs,
            target_log_probs: &target_log_probs,
            discounts: &discounts,
            rewards: &rewards,
            values: &values,
            bootstrap_value: &bootstrap_value,
            valid: &valid,
        },
        clip,
        VTraceSlicesOut {
            vs: &mut vs,
            pg_advantages: &mut pg_advantages,
            clipped_rhos: &mut clipped_rhos,
        },
    )?;
    let shape = (t_len, batch);
    Ok(VTraceReturns {
        vs: Tensor::from_vec(vs, shape, device)?,
        pg_advantages: Tensor::from_vec(pg_advantages, shape, device)?,
        clipped_rhos: Tensor::from_vec(clipped_rhos, shape, device)?,
    })
}

fn vtrace_device_ops(
    inputs: &VTraceInputs<'_>,
    clip: &VTraceClip,
    t_len: usize,
) -> Result<VTraceReturns> {
    let behaviour_log_probs = inputs.behaviour_log_probs.detach();
    let target_log_probs = inputs.target_log_probs.detach();
    let discounts = inputs.discounts.detach();
    let rewards = inputs.rewards.detach();
    let values = inputs.values.detach();
    let bootstrap_value = inputs.bootstrap_value.detach().unsqueeze(0)?;
    let valid = inputs.valid.detach();

    // where_cond rather than a product, for the reason given in `vtrace_slices`.
    let is_valid = valid.gt(0.0)?;
    let zeros = values.zeros_like()?;
    let ratios = (target_log_probs - behaviour_log_probs)?.exp()?;
    let clipped = |bar: f32| is_valid.where_cond(&ratios.minimum(bar)?, &zeros);
    let rhos = clipped(clip.rho)?;
    let cs = clipped(clip.c)?;
    let pg_rhos = clipped(clip.pg_rho)?;

    // V(x_{t+1}) for t = 0..T-1: values shifted by one, then the bootstrap.
    let values_next = Tensor::cat(&[&values.narrow(0, 1, t_len - 1)?, &bootstrap_value], 0)?;
    let deltas = (&rhos * ((&rewards + (&discounts * &values_next)?)? - &values)?)?;
    let discounted_cs = (&discounts * &cs)?;

    // vs_t − V(x_t) = δ_t + γ_t c_t (vs_{t+1} − V(x_{t+1})), from vs_T − V(x_T) = 0.
    let mut corrections = Vec::with_capacity(t_len);
    let mut correction = bootstrap_value.zeros_like()?;
    for t in (0..t_len).rev() {
        correction = (deltas.narrow(0, t, 1)? + (discounted_cs.narrow(0, t, 1)? * &correction)?)?;
        corrections.push(correction.clone());
    }
    corrections.reverse();
    let vs = (Tensor::cat(&corrections, 0)? + &values)?;

    let vs_next = Tensor::cat(&[&vs.narrow(0, 1, t_len - 1)?, &bootstrap_value], 0)?;
    let pg_advantages = (pg_rhos * ((&rewards + (&discounts * &vs_next)?)? - &values)?)?;
    Ok(VTraceReturns {
        vs,
        pg_advantages,
        clipped_rhos: rhos,
    })
}

/// Checks every input is `[T, B]` (bootstrap `[B]`) with `T, B ≥ 1`, all `f32`;
/// returns `(T, B)`.
fn check_shapes(inputs: &VTraceInputs<'_>) -> Result<(usize, usize)> {
    let (t_len, batch) = inputs.values.dims2()?;
    if t_len == 0 || batch == 0 {
        return Err(Error::UnexpectedShape {
            msg: "vtrace: values must have T >= 1 and B >= 1".to_string(),
            expected: Shape::from((1, 1)),
            got: inputs.values.shape().clone(),
        });
    }
    let expected = Shape::from((t_len, batch));
    for (name, tensor) in [
        ("behaviour_log_probs", inputs.behaviour_log_probs),
        ("target_log_probs", inputs.target_log_probs),
        ("discounts", inputs.discounts),
        ("rewards", inputs.rewards),
        ("values", inputs.values),
        ("valid", inputs.valid),
    ] {
        if tensor.shape() != &expected {
            return Err(Error::UnexpectedShape {
                msg: format!("vtrace: {name}"),
                expected,
                got: tensor.shape().clone(),
            });
        }
    }
    if inputs.bootstrap_value.dims() != [batch] {
        return Err(Error::UnexpectedShape {
            msg: "vtrace: bootstrap_value".to_string(),
            expected: Shape::from(batch),
            got: inputs.bootstrap_value.shape().clone(),
        });
    }
    for (name, tensor) in [
        ("behaviour_log_probs", inputs.behaviour_log_probs),
        ("target_log_probs", inputs.target_log_probs),
        ("discounts", inputs.discounts),
        ("rewards", inputs.rewards),
        ("values", inputs.values),
        ("bootstrap_value", inputs.bootstrap_value),
        ("valid", inputs.valid),
    ] {
        if tensor.dtype() != DType::F32 {
            return Err(Error::Msg(format!(
                "vtrace: {name} must be f32, got {:?}",
                tensor.dtype()
            )));
        }
    }
    Ok((t_len, batch))
}

fn shape_error(name: &str, expected: (usize, usize), got_len: usize) -> Error {
    Error::UnexpectedShape {
        msg: format!("vtrace_slices: {name} (flat length)"),
        expected: Shape::from(expected),
        got: Shape::from(got_len),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    /// Inputs as f64 host rows `[T][B]`, the shape the reference reads.
    #[derive(Debug, Clone)]
    struct Case {
        behaviour_log_probs: Vec<Vec<f64>>,
        target_log_probs: Vec<Vec<f64>>,
        discounts: Vec<Vec<f64>>,
        rewards: Vec<Vec<f64>>,
        values: Vec<Vec<f64>>,
        bootstrap_value: Vec<f64>,
        valid: Vec<Vec<f64>>,
    }

    struct Reference {
        vs: Vec<Vec<f64>>,
        pg_advantages: Vec<Vec<f64>>,
        clipped_rhos: Vec<Vec<f64>>,
    }

    /// Slow ground truth straight from IMPALA eq. 1, the sum form:
    /// vs_s = V(x_s) + Σ_{t=s}^{T-1} (Π_{i=s}^{t-1} γ_i c_i) ρ_t δ_t.
    fn reference(case: &Case, clip: &VTraceClip) -> Reference {
        let t_len = case.values.len();
        let batch = case.bootstrap_value.len();
        let value_at = |t: usize, b: usize| {
            if t == t_len {
                case.bootstrap_value[b]
            } else {
                case.values[t][b]
            }
        };
        let weight = |t: usize, b: usize, bar: f32| {
            if case.valid[t][b] > 0.0 {
                let ratio = (case.target_log_probs[t][b] - case.behaviour_log_probs[t][b]).exp();
                ratio.min(f64::from(bar))
            } else {
                0.0
            }
        };
        let mut vs = vec![vec![0.0; batch]; t_len];
        let mut clipped_rhos = vec![vec![0.0; batch]; t_len];
        for b in 0..batch {
            for s in 0..t_len {
                let mut sum = 0.0;
                for t in s..t_len {
                    let mut trace = 1.0;
                    for i in s..t {
                        trace *= case.discounts[i][b] * weight(i, b, clip.c);
                    }
                    let delta = case.rewards[t][b] + case.discounts[t][b] * value_at(t + 1, b)
                        - value_at(t, b);
                    sum += trace * weight(t, b, clip.rho) * delta;
                }
                vs[s][b] = value_at(s, b) + sum;
                clipped_rhos[s][b] = weight(s, b, clip.rho);
            }
        }
        let mut pg_advantages = vec![vec![0.0; batch]; t_len];
        for b in 0..batch {
            for s in 0..t_len {
                let vs_next = if s + 1 == t_len {
                    case.bootstrap_value[b]
                } else {
                    vs[s + 1][b]
                };
                pg_advantages[s][b] = weight(s, b, clip.pg_rho)
                    * (case.rewards[s][b] + case.discounts[s][b] * vs_next - value_at(s, b));
            }
        }
        Reference {
            vs,
            pg_advantages,
            clipped_rhos,
        }
    }

    fn random_case(t_len: usize, batch: usize, seed: u64) -> Case {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut rows = |f: &mut dyn FnMut(&mut StdRng) -> f64| -> Vec<Vec<f64>> {
            (0..t_len)
                .map(|_| (0..batch).map(|_| f(&mut rng)).collect())
                .collect()
        };
        let behaviour_log_probs = rows(&mut |r| r.random_range(-3.0..0.0));
        let target_log_probs = rows(&mut |r| r.random_range(-3.0..0.0));
        // Terminations (γ = 0) on about 15% of transitions.
        let discounts = rows(&mut |r| {
            if r.random_bool(0.15) {
                0.0
            } else {
                r.random_range(0.8..1.0)
            }
        });
        let rewards = rows(&mut |r| r.random_range(-1.0..1.0));
        let values = rows(&mut |r| r.random_range(-2.0..2.0));
        // Truncations (dummy actions) on about 15% of transitions.
        let valid = rows(&mut |r| if r.random_bool(0.15) { 0.0 } else { 1.0 });
        let bootstrap_value = (0..batch).map(|_| rng.random_range(-2.0..2.0)).collect();
        Case {
            behaviour_log_probs,
            target_log_probs,
            discounts,
            rewards,
            values,
            bootstrap_value,
            valid,
        }
    }

    fn tensor2(rows: &[Vec<f64>]) -> Tensor {
        let t_len = rows.len();
        let batch = rows[0].len();
        let flat: Vec<f32> = rows.iter().flatten().map(|&x| x as f32).collect();
        Tensor::from_vec(flat, (t_len, batch), &Device::Cpu).unwrap()
    }

    fn run(case: &Case, clip: &VTraceClip, recursion: Recursion) -> VTraceReturns {
        let behaviour = tensor2(&case.behaviour_log_probs);
        let target = tensor2(&case.target_log_probs);
        let discounts = tensor2(&case.discounts);
        let rewards = tensor2(&case.rewards);
        let values = tensor2(&case.values);
        let valid = tensor2(&case.valid);
        let bootstrap: Vec<f32> = case.bootstrap_value.iter().map(|&x| x as f32).collect();
        let bootstrap = Tensor::new(bootstrap, &Device::Cpu).unwrap();
        vtrace_with(
            &VTraceInputs {
                behaviour_log_probs: &behaviour,
                target_log_probs: &target,
                discounts: &discounts,
                rewards: &rewards,
                values: &values,
                bootstrap_value: &bootstrap,
                valid: &valid,
            },
            clip,
            recursion,
        )
        .unwrap()
    }

    fn assert_close(name: &str, got: &Tensor, want: &[Vec<f64>]) {
        let got = got.to_vec2::<f32>().unwrap();
        for (t, (got_row, want_row)) in got.iter().zip(want).enumerate() {
            for (b, (&g, &w)) in got_row.iter().zip(want_row).enumerate() {
                let tolerance = 1e-4 * (1.0 + w.abs());
                assert!(
                    (f64::from(g) - w).abs() <= tolerance,
                    "{name}[{t}][{b}]: got {g}, want {w}"
                );
            }
        }
    }

    fn clip_strategy() -> impl Strategy<Value = f32> {
        prop_oneof![Just(0.5f32), Just(1.0), Just(2.0), Just(f32::INFINITY)]
    }

    proptest! {
        #[test]
        fn matches_sum_form_reference(
            t_len in 1usize..12,
            batch in 1usize..5,
            rho in clip_strategy(),
            c in clip_strategy(),
            pg_rho in clip_strategy(),
            seed in any::<u64>(),
        ) {
            let case = random_case(t_len, batch, seed);
            let clip = VTraceClip { rho, c, pg_rho };
            let want = reference(&case, &clip);
            for recursion in [Recursion::HostLoop, Recursion::DeviceOps] {
                let got = run(&case, &clip, recursion);
                assert_close("vs", &got.vs, &want.vs);
                assert_close("pg_advantages", &got.pg_advantages, &want.pg_advantages);
                assert_close("clipped_rhos", &got.clipped_rhos, &want.clipped_rhos);
            }
        }

        #[test]
        fn on_policy_unclipped_vs_is_n_step_return(
            t_len in 1usize..12,
            batch in 1usize..5,
            seed in any::<u64>(),
        ) {
            let mut case = random_case(t_len, batch, seed);
            case.behaviour_log_probs = case.target_log_probs.clone();
            case.valid = vec![vec![1.0; batch]; t_len];
            let got = run(&case, &VTraceClip::NONE, Recursion::Auto);
            // n-step return to the end of the unroll, bootstrapped with V(x_T):
            // Σ_{t=s}^{T-1} (Π_{i=s}^{t-1} γ_i) r_t + (Π_{i=s}^{T-1} γ_i) V(x_T).
            let n_step_return = |s: usize, b: usize| {
                let mut ret = 0.0;
                let mut discount = 1.0;
                for t in s..t_len {
                    ret += discount * case.rewards[t][b];
                    discount *= case.discounts[t][b];
                }
                ret + discount * case.bootstrap_value[b]
            };
            let want: Vec<Vec<f64>> = (0..t_len)
                .map(|s| (0..batch).map(|b| n_step_return(s, b)).collect())
                .collect();
            assert_close("vs", &got.vs, &want);
        }
    }

    /// One unroll (B = 1) on-policy, built from rows of length T.
    fn single(
        discounts: &[f64],
        rewards: &[f64],
        values: &[f64],
        bootstrap: f64,
        valid: &[f64],
    ) -> Vec<f64> {
        let col = |xs: &[f64]| xs.iter().map(|&x| vec![x]).collect::<Vec<_>>();
        let zeros = vec![vec![-0.5]; values.len()];
        let case = Case {
            behaviour_log_probs: zeros.clone(),
            target_log_probs: zeros,
            discounts: col(discounts),
            rewards: col(rewards),
            values: col(values),
            bootstrap_value: vec![bootstrap],
            valid: col(valid),
        };
        let vs = run(&case, &VTraceClip::default(), Recursion::Auto).vs;
        vs.flatten_all()
            .unwrap()
            .to_vec1::<f32>()
            .unwrap()
            .into_iter()
            .map(f64::from)
            .collect()
    }

    #[test]
    fn termination_stops_discounting() {
        // Transition 1 ends in a terminal state (γ_1 = 0): vs_1 is just r_1, and
        // nothing after it (values, rewards, bootstrap) reaches vs_0 or vs_1.
        let vs = single(
            &[0.9, 0.0, 0.9],
            &[1.0, 2.0, 3.0],
            &[0.5, 0.7, 10.0],
            100.0,
            &[1.0; 3],
        );
        assert!((vs[1] - 2.0).abs() < 1e-5, "vs_1 = {}", vs[1]);
        assert!((vs[0] - (1.0 + 0.9 * 2.0)).abs() < 1e-5, "vs_0 = {}", vs[0]);
        let changed = single(
            &[0.9, 0.0, 0.9],
            &[1.0, 2.0, -7.0],
            &[0.5, 0.7, -3.0],
            -50.0,
            &[1.0; 3],
        );
        assert_eq!(vs[..2], changed[..2]);
    }

    #[test]
    fn truncation_bootstraps_from_final_observation() {
        // x_1 is the final observation of a time-limited episode: transition 1
        // is a dummy (valid_1 = 0, γ_1 = 0). vs_1 = V(x_1) and transition 0
        // bootstraps through it: vs_0 = r_0 + γ V(x_1).
        let vs = single(
            &[0.9, 0.0, 0.9],
            &[1.0, 0.0, 3.0],
            &[0.5, 0.7, 10.0],
            100.0,
            &[1.0, 0.0, 1.0],
        );
        assert!((vs[1] - 0.7).abs() < 1e-5, "vs_1 = {}", vs[1]);
        assert!((vs[0] - (1.0 + 0.9 * 0.7)).abs() < 1e-5, "vs_0 = {}", vs[0]);
        let changed = single(
            &[0.9, 0.0, 0.9],
            &[1.0, 0.0, -3.0],
            &[0.5, 0.7, -8.0],
            -20.0,
            &[1.0, 0.0, 1.0],
        );
        assert_eq!(vs[..2], changed[..2]);
    }

    #[test]
    fn dummy_action_with_overflowing_ratio_is_not_nan() {
        let mut case = random_case(3, 2, 7);
        case.target_log_probs[1][0] = 200.0; // exp overflows to ∞
        case.valid[1][0] = 0.0;
        for recursion in [Recursion::HostLoop, Recursion::DeviceOps] {
            let got = run(&case, &VTraceClip::NONE, recursion);
            let want = reference(&case, &VTraceClip::NONE);
            assert_close("vs", &got.vs, &want.vs);
            assert_close("pg_advantages", &got.pg_advantages, &want.pg_advantages);
        }
    }

    #[test]
    fn rejects_mismatched_shapes() {
        let device = Device::Cpu;
        let tb = Tensor::zeros((4, 2), DType::F32, &device).unwrap();
        let wrong = Tensor::zeros((4, 3), DType::F32, &device).unwrap();
        let bootstrap = Tensor::zeros(2, DType::F32, &device).unwrap();
        let inputs = VTraceInputs {
            behaviour_log_probs: &tb,
            target_log_probs: &tb,
            discounts: &wrong,
            rewards: &tb,
            values: &tb,
            bootstrap_value: &bootstrap,
            valid: &tb,
        };
        let err = vtrace(&inputs, &VTraceClip::default()).unwrap_err();
        assert!(err.to_string().contains("discounts"), "{err}");
        let long_bootstrap = Tensor::zeros(3, DType::F32, &device).unwrap();
        let inputs = VTraceInputs {
            discounts: &tb,
            bootstrap_value: &long_bootstrap,
            ..inputs
        };
        let err = vtrace(&inputs, &VTraceClip::default()).unwrap_err();
        assert!(err.to_string().contains("bootstrap_value"), "{err}");
    }

    /// The accelerator's host loop (one staged transfer each way) is the
    /// same arithmetic as the CPU's: equal bits, not just close.
    #[test]
    fn staged_host_loop_equals_the_host_loop() {
        let case = random_case(9, 5, 17);
        let clip = VTraceClip::default();
        let t = |rows: &Vec<Vec<f64>>| tensor2(rows);
        let (behaviour, target) = (t(&case.behaviour_log_probs), t(&case.target_log_probs));
        let (discounts, rewards) = (t(&case.discounts), t(&case.rewards));
        let (values, valid) = (t(&case.values), t(&case.valid));
        let bootstrap: Vec<f32> = case.bootstrap_value.iter().map(|&x| x as f32).collect();
        let bootstrap = Tensor::new(bootstrap, &Device::Cpu).unwrap();
        let inputs = VTraceInputs {
            behaviour_log_probs: &behaviour,
            target_log_probs: &target,
            discounts: &discounts,
            rewards: &rewards,
            values: &values,
            bootstrap_value: &bootstrap,
            valid: &valid,
        };
        let a = vtrace_host_loop(&inputs, &clip, 9, 5, &Device::Cpu).unwrap();
        let b = vtrace_host_loop_staged(&inputs, &clip, 9, 5, &Device::Cpu).unwrap();
        for (x, y) in [(a.vs, b.vs), (a.pg_advantages, b.pg_advantages)] {
            assert_eq!(x.dims(), y.dims());
            assert_eq!(x.to_vec2::<f32>().unwrap(), y.to_vec2::<f32>().unwrap());
        }
        assert_eq!(
            a.clipped_rhos.to_vec2::<f32>().unwrap(),
            b.clipped_rhos.to_vec2::<f32>().unwrap()
        );
    }

    #[test]
    fn auto_keeps_small_batches_on_the_host_everywhere() {
        assert!(auto_uses_host(true, usize::MAX));
        assert!(auto_uses_host(false, 16 * 64));
        assert!(auto_uses_host(false, HOST_RECURSION_MAX_ELEMENTS));
        assert!(!auto_uses_host(false, HOST_RECURSION_MAX_ELEMENTS + 1));
    }
}
