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
//! c_t  = λ min(c̄, π(a_t|x_t) / μ(a_t|x_t))    (cs)
//! ```
//!
//! where the paper's `γ^{t-s}` becomes the product of per-step discounts `γ_i`
//! (zero across a termination), and `λ ∈ [0, 1]` (1 in the paper's eq. 1;
//! its remark after it, seed_rl's `lambda_`) cuts the traces further. The
//! sum obeys the backward recursion
//!
//! ```text
//! vs_t − V(x_t) = ρ_t δ_t + γ_t c_t (vs_{t+1} − V(x_{t+1})),   vs_T = V(x_T)
//! ```
//!
//! which is what we compute. The policy-gradient advantage is
//! `pg_advantages_t = ρ^pg_t (r_t + γ_t vs_{t+1} − V(x_t))` with
//! `ρ^pg_t = min(ρ̄_pg, π/μ)`; the same advantage before `ρ^pg_t`'s weight
//! is an output too, for a surrogate that weights it itself.
//!
//! Masking: `valid_t = 0` marks a transition whose action is a dummy (the step
//! was the final observation of a truncated episode). Its `ρ_t = c_t = ρ^pg_t = 0`,
//! so `δ_t` contributes nothing, `vs_t = V(x_t)`, and the transition before it
//! bootstraps through `V(x_t)`.
//!
//! All tensors are time-major: `[T, B]`, with `T` transitions and `B` unrolls;
//! every input is `f32`. Outputs carry no gradient.
//!
//! # Cost
//!
//! O(T·B) work. The backward recursion is sequential in `T`, so [`vtrace`]
//! runs it on the host, in [`vtrace_slices`]: one fused pass over plain
//! slices, no allocation per step. On a CPU the inputs are copied out and
//! the outputs become tensors as they are (a memcpy each way per column;
//! an elementwise-tensor-op recursion was 1.4-4.4x slower there,
//! `benches/results/micro.md`). On an accelerator the seven inputs are
//! concatenated on the device (one op) and downloaded together, the three
//! outputs uploaded as one buffer and split into views: two transfers and
//! one op in place of the `~2T+20` small kernel launches a recursion in
//! tensor ops would take. The download waits for the forward pass, which
//! the trainer waits for anyway (it reads the loss back every step).
//! `benches/benches/vtrace.rs` measures the kernel alone and through
//! tensors.
use candle_core::{DType, Device, Error, Result, Shape, Tensor};

use super::config::VTraceClip;

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

/// V-trace outputs, all `[T, B]`, `f32`, detached from any graph.
#[derive(Debug, Clone)]
pub struct VTraceReturns {
    /// `vs_t`: the value targets.
    pub vs: Tensor,
    /// `ρ^pg_t (r_t + γ_t vs_{t+1} − V(x_t))`: advantages for the policy gradient.
    pub pg_advantages: Tensor,
    /// `r_t + γ_t vs_{t+1} − V(x_t)`, 0 where invalid: the same advantage
    /// before `ρ^pg`'s weight, for a surrogate that weights it itself (PPO's
    /// clipped ratio in `super::loss`).
    pub advantages: Tensor,
    /// `ρ_t = valid_t · min(ρ̄, π/μ)`, for logging how off-policy the data is.
    pub clipped_rhos: Tensor,
}

/// Computes V-trace targets: the inputs copied out in one transfer, the
/// recursion on the host ([`vtrace_slices`]), the outputs copied back to
/// the inputs' device in one transfer (module docs).
///
/// Errors if shapes disagree (`[T, B]` everywhere, `[B]` for the bootstrap)
/// or if an input is not `f32`.
pub fn vtrace(inputs: &VTraceInputs<'_>, clip: &VTraceClip) -> Result<VTraceReturns> {
    let (t_len, batch) = check_shapes(inputs)?;
    let n = t_len * batch;
    let device = inputs.values.device();
    let staged = !device.is_cpu();
    let [behaviour_log_probs, target_log_probs, discounts, rewards, values, valid, bootstrap_value] =
        download(
            [
                inputs.behaviour_log_probs,
                inputs.target_log_probs,
                inputs.discounts,
                inputs.rewards,
                inputs.values,
                inputs.valid,
                inputs.bootstrap_value,
            ],
            staged,
        )?;
    let (mut vs, mut pg_advantages, mut advantages, mut clipped_rhos) =
        (vec![0f32; n], vec![0f32; n], vec![0f32; n], vec![0f32; n]);
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
            advantages: &mut advantages,
            clipped_rhos: &mut clipped_rhos,
        },
    )?;
    let [vs, pg_advantages, advantages, clipped_rhos] = upload(
        [vs, pg_advantages, advantages, clipped_rhos],
        (t_len, batch),
        device,
        staged,
    )?;
    Ok(VTraceReturns {
        vs,
        pg_advantages,
        advantages,
        clipped_rhos,
    })
}

/// `columns` in host memory, flattened. `staged` (an accelerator's inputs):
/// concatenated on their device and downloaded in one transfer; else each
/// copied out as it is (on a CPU a memcpy each, nothing staged).
fn download(columns: [&Tensor; 7], staged: bool) -> Result<[Vec<f32>; 7]> {
    let mut host: [Vec<f32>; 7] = Default::default();
    if !staged {
        for (out, column) in host.iter_mut().zip(columns) {
            *out = column.flatten_all()?.to_vec1::<f32>()?;
        }
        return Ok(host);
    }
    // Detached: the concatenation is no part of any gradient.
    let flat = columns
        .iter()
        .map(|t| t.detach().flatten_all())
        .collect::<Result<Vec<Tensor>>>()?;
    let all = Tensor::cat(&flat, 0)?.to_vec1::<f32>()?;
    let mut rest = all.as_slice();
    for (out, column) in host.iter_mut().zip(&flat) {
        let (here, tail) = rest.split_at(column.elem_count());
        *out = here.to_vec();
        rest = tail;
    }
    Ok(host)
}

/// The outputs as `shape` tensors on `device`. `staged`: uploaded as one
/// buffer and split into views; else each buffer becomes its tensor (on a
/// CPU without a copy).
fn upload<const N: usize>(
    outputs: [Vec<f32>; N],
    shape: (usize, usize),
    device: &Device,
    staged: bool,
) -> Result<[Tensor; N]> {
    let tensors = if staged {
        let all = Tensor::from_vec(outputs.concat(), (N, shape.0, shape.1), device)?;
        (0..N)
            .map(|i| all.get(i))
            .collect::<Result<Vec<Tensor>>>()?
    } else {
        outputs
            .into_iter()
            .map(|column| Tensor::from_vec(column, shape, device))
            .collect::<Result<Vec<Tensor>>>()?
    };
    <[Tensor; N]>::try_from(tensors)
        .map_err(|_| Error::Msg("vtrace: upload split a wrong number of columns".to_string()))
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
    /// `advantages_t`: `pg_advantages_t` before `ρ^pg_t`'s weight.
    pub advantages: &'a mut [f32],
    /// `ρ_t`, clipped and masked.
    pub clipped_rhos: &'a mut [f32],
}

/// V-trace on plain `f32` slices: one backward pass, no allocation.
///
/// This is the kernel of [`vtrace`]; it is public so benchmarks and
/// host-side callers can skip tensors. Errors if a slice length disagrees.
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
        ("out.advantages", out.advantages.len()),
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
        let advantages = &mut out.advantages[row.clone()];
        let clipped_rhos = &mut out.clipped_rhos[row];
        for b in 0..batch {
            // `if` rather than a product: 0 · ∞ would be NaN when a dummy action
            // has an overflowing ratio and a clip is disabled.
            let (rho, c, pg_rho) = if valid[b] > 0.0 {
                let ratio = (target[b] - behaviour[b]).exp();
                (
                    ratio.min(clip.rho),
                    // λ 0 cuts the trace whatever the ratio (0 · ∞ is NaN).
                    if clip.lambda > 0.0 {
                        clip.lambda * ratio.min(clip.c)
                    } else {
                        0.0
                    },
                    ratio.min(clip.pg_rho),
                )
            } else {
                (0.0, 0.0, 0.0)
            };
            let gamma = discounts[b];
            let delta = rho * (rewards[b] + gamma * next_value[b] - values[b]);
            let correction = delta + gamma * c * (next_vs[b] - next_value[b]);
            let vs_t = values[b] + correction;
            // Masked like the weights: a dummy transition's advantage is 0.
            let advantage = if valid[b] > 0.0 {
                rewards[b] + gamma * next_vs[b] - values[b]
            } else {
                0.0
            };
            advantages[b] = advantage;
            pg_advantages[b] = pg_rho * advantage;
            clipped_rhos[b] = rho;
            vs[b] = vs_t;
            next_vs[b] = vs_t;
            next_value[b] = values[b];
        }
    }
    Ok(())
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
        advantages: Vec<Vec<f64>>,
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
                        trace *=
                            case.discounts[i][b] * f64::from(clip.lambda) * weight(i, b, clip.c);
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
        let mut advantages = vec![vec![0.0; batch]; t_len];
        for b in 0..batch {
            for s in 0..t_len {
                let vs_next = if s + 1 == t_len {
                    case.bootstrap_value[b]
                } else {
                    vs[s + 1][b]
                };
                let advantage =
                    case.rewards[s][b] + case.discounts[s][b] * vs_next - value_at(s, b);
                pg_advantages[s][b] = weight(s, b, clip.pg_rho) * advantage;
                if case.valid[s][b] > 0.0 {
                    advantages[s][b] = advantage;
                }
            }
        }
        Reference {
            vs,
            pg_advantages,
            advantages,
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

    fn run(case: &Case, clip: &VTraceClip) -> VTraceReturns {
        let behaviour = tensor2(&case.behaviour_log_probs);
        let target = tensor2(&case.target_log_probs);
        let discounts = tensor2(&case.discounts);
        let rewards = tensor2(&case.rewards);
        let values = tensor2(&case.values);
        let valid = tensor2(&case.valid);
        let bootstrap: Vec<f32> = case.bootstrap_value.iter().map(|&x| x as f32).collect();
        let bootstrap = Tensor::new(bootstrap, &Device::Cpu).unwrap();
        vtrace(
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
            lambda in prop_oneof![Just(1.0f32), Just(0.95), Just(0.5), Just(0.0)],
            seed in any::<u64>(),
        ) {
            let case = random_case(t_len, batch, seed);
            let clip = VTraceClip { rho, c, pg_rho, lambda };
            let want = reference(&case, &clip);
            let got = run(&case, &clip);
            assert_close("vs", &got.vs, &want.vs);
            assert_close("pg_advantages", &got.pg_advantages, &want.pg_advantages);
            assert_close("advantages", &got.advantages, &want.advantages);
            assert_close("clipped_rhos", &got.clipped_rhos, &want.clipped_rhos);
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
            let got = run(&case, &VTraceClip::NONE);
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

    /// λ 0 cuts every trace: on-policy, each target is the one-step
    /// bootstrap `r_t + γ_t V(x_{t+1})`, whatever comes after it.
    #[test]
    fn lambda_zero_gives_one_step_targets() {
        let mut case = random_case(7, 3, 11);
        case.behaviour_log_probs = case.target_log_probs.clone();
        case.valid = vec![vec![1.0; 3]; 7];
        let clip = VTraceClip {
            lambda: 0.0,
            ..VTraceClip::default()
        };
        let got = run(&case, &clip);
        let want: Vec<Vec<f64>> = (0..7)
            .map(|t| {
                (0..3)
                    .map(|b| {
                        let next = if t + 1 == 7 {
                            case.bootstrap_value[b]
                        } else {
                            case.values[t + 1][b]
                        };
                        case.rewards[t][b] + case.discounts[t][b] * next
                    })
                    .collect()
            })
            .collect();
        assert_close("vs", &got.vs, &want);
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
        let vs = run(&case, &VTraceClip::default()).vs;
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
        let got = run(&case, &VTraceClip::NONE);
        let want = reference(&case, &VTraceClip::NONE);
        assert_close("vs", &got.vs, &want.vs);
        assert_close("pg_advantages", &got.pg_advantages, &want.pg_advantages);
        assert_close("advantages", &got.advantages, &want.advantages);
    }

    /// Inputs whose every `[T, B]` column is `tb`.
    fn uniform<'a>(tb: &'a Tensor, bootstrap_value: &'a Tensor) -> VTraceInputs<'a> {
        VTraceInputs {
            behaviour_log_probs: tb,
            target_log_probs: tb,
            discounts: tb,
            rewards: tb,
            values: tb,
            bootstrap_value,
            valid: tb,
        }
    }

    #[test]
    fn rejects_mismatched_shapes() {
        let device = Device::Cpu;
        let tb = Tensor::zeros((4, 2), DType::F32, &device).unwrap();
        let wrong = Tensor::zeros((4, 3), DType::F32, &device).unwrap();
        let bootstrap = Tensor::zeros(2, DType::F32, &device).unwrap();
        let inputs = VTraceInputs {
            discounts: &wrong,
            ..uniform(&tb, &bootstrap)
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

    /// The tensor path stages the seven inputs in one buffer and splits
    /// the outputs from another: it must give the kernel's results on the
    /// same data, bit for bit, in `[T, B]` order.
    #[test]
    fn tensor_path_equals_the_slice_kernel() {
        let case = random_case(9, 5, 17);
        let clip = VTraceClip::default();
        let f32s = |rows: &Vec<Vec<f64>>| -> Vec<f32> {
            rows.iter().flatten().map(|&x| x as f32).collect()
        };
        let bootstrap: Vec<f32> = case.bootstrap_value.iter().map(|&x| x as f32).collect();
        let n = 9 * 5;
        let (mut vs, mut pg, mut adv, mut rhos) =
            (vec![0f32; n], vec![0f32; n], vec![0f32; n], vec![0f32; n]);
        vtrace_slices(
            &VTraceSlices {
                batch: 5,
                behaviour_log_probs: &f32s(&case.behaviour_log_probs),
                target_log_probs: &f32s(&case.target_log_probs),
                discounts: &f32s(&case.discounts),
                rewards: &f32s(&case.rewards),
                values: &f32s(&case.values),
                bootstrap_value: &bootstrap,
                valid: &f32s(&case.valid),
            },
            &clip,
            VTraceSlicesOut {
                vs: &mut vs,
                pg_advantages: &mut pg,
                advantages: &mut adv,
                clipped_rhos: &mut rhos,
            },
        )
        .unwrap();
        let got = run(&case, &clip);
        for (name, tensor, want) in [
            ("vs", &got.vs, &vs),
            ("pg_advantages", &got.pg_advantages, &pg),
            ("advantages", &got.advantages, &adv),
            ("clipped_rhos", &got.clipped_rhos, &rhos),
        ] {
            assert_eq!(tensor.dims(), &[9, 5], "{name}");
            assert_eq!(
                &tensor.flatten_all().unwrap().to_vec1::<f32>().unwrap(),
                want,
                "{name}"
            );
        }
    }

    /// An accelerator's staging (one concatenated download, one upload
    /// split into views) moves the same numbers as a CPU's column by
    /// column; here both run on the CPU.
    #[test]
    fn staged_transfers_move_the_same_columns() {
        let case = random_case(6, 3, 5);
        let t = |rows: &Vec<Vec<f64>>| tensor2(rows);
        let (a, b, c) = (t(&case.rewards), t(&case.values), t(&case.discounts));
        let bootstrap = Tensor::new(&[1f32, 2.0, 3.0], &Device::Cpu).unwrap();
        let columns = [&a, &b, &c, &a, &b, &c, &bootstrap];
        assert_eq!(
            download(columns, true).unwrap(),
            download(columns, false).unwrap()
        );
        let outputs = [
            vec![1f32; 18],
            vec![2f32; 18],
            (0..18).map(|i| i as f32).collect(),
            (0..18).map(|i| -(i as f32)).collect(),
        ];
        let staged = upload(outputs.clone(), (6, 3), &Device::Cpu, true).unwrap();
        let plain = upload(outputs, (6, 3), &Device::Cpu, false).unwrap();
        for (s, p) in staged.iter().zip(&plain) {
            assert_eq!(s.dims(), &[6, 3]);
            assert_eq!(s.to_vec2::<f32>().unwrap(), p.to_vec2::<f32>().unwrap());
        }
    }

    #[test]
    fn rejects_inputs_that_are_not_f32_naming_them() {
        let device = Device::Cpu;
        let tb = Tensor::zeros((4, 2), DType::F32, &device).unwrap();
        let valid_u8 = Tensor::zeros((4, 2), DType::U8, &device).unwrap();
        let bootstrap = Tensor::zeros(2, DType::F32, &device).unwrap();
        let inputs = VTraceInputs {
            valid: &valid_u8,
            ..uniform(&tb, &bootstrap)
        };
        let err = vtrace(&inputs, &VTraceClip::default()).unwrap_err();
        assert!(err.to_string().contains("valid must be f32"), "{err}");
    }
}
