//! [`lstm_unroll`]: the LSTM core over a whole unroll as one op, f32 on the
//! CPU, with its backward (backpropagation through time) as plain loops.
//!
//! # Why
//! Built from candle ops, a step of the cell is a dozen tensor ops (a
//! matmul, bias adds, a sigmoid over the gates, narrows, tanh, products,
//! the episode-start mask), and the backward as many again, each a
//! separate pass over `[B, 4H]` or `[B, H]` values with its own allocation,
//! and the sigmoid and tanh one libm call per element. R2D2 runs the core
//! four times a training step (a burn-in and the sequence, for the online
//! and the target network): on CartPole (B 16, T 16 + 4, H 64) `perf` put
//! about 40% of the trainer's time in candle's elementwise kernels, libm's
//! `expm1f` and `tanhf`, and the allocator. Here the recurrence is one loop: per step one small product
//! for the recurrent half of the gates and one vectorised pass for the
//! cell; the input half of every step's gates is one product outside
//! (`x W_ihᵀ + b`, by the caller), and so is the recurrent weight's
//! gradient.
//!
//! # What it computes
//! Inputs: `gx` `[T, B, 4H]`, the input half of the gates with both
//! biases; `w_hh` `[4H, H]`; `h0c0` `[2, B, H]`, the state before step 0;
//! and, a constant of the op, `keep` `[T, B]` (0 where an episode starts,
//! which zeroes the state before that step). Per step `t`, with `h̃ = k_t
//! h_{t−1}`, `c̃ = k_t c_{t−1}`: `a = gx_t + h̃ W_hhᵀ`; `i, f, o = σ(a_i),
//! σ(a_f), σ(a_o)`, `g = tanh(a_g)` (PyTorch's gate order); `c_t = f c̃ + i
//! g`, `h_t = o tanh(c_t)`. Out: `[2, T, B, H]`, every `h_t`, then every
//! `c_t`. σ is `(1 + tanh(v/2)) / 2` through the vectorised tanh, as the
//! learner's host inference step computes it (`model::host_forward`).
//!
//! The backward recomputes the gates from the saved states (one product
//! over all steps), then walks the steps backwards: `dc = dc_t + dh o (1 −
//! tanh²c_t)`, the gates' gradients, and `dh̃ = da W_hh` (the one product
//! that must stay inside the loop); `dW_hh = Σ_t daᵀ h̃` is one product
//! after it. Gradients for all three inputs.
//!
//! # Cost
//! Forward: `T` products of `[B, H] x [H, 4H]` and `T·B·4H` gate values.
//! Backward: two products over all `T·B` rows, `T` products of `[B, 4H] x
//! [4H, H]`, and one pass over the gates. Products stay on the calling
//! thread: with the all-steps products on candle's pool where
//! [`Threads::for_product`] would put them (17 MFLOP each for B 16 x T 32,
//! H 64), the LSTM model's training step on two threads ran 0.95x (7
//! alternating rounds, `benches/results/cpu_math.md`).
use candle_core::{CpuStorage, CustomOp3, DType, Layout, Result, Shape, Storage, Tensor};

use super::contiguous_f32;
use super::gemm::{matmul, MatMut, MatRef, Threads};
use super::simd::{wide, Kernel};
use super::tanh::tanh_f32;

/// Whether [`lstm_unroll`] takes these tensors (f32 on the CPU).
pub fn takes(tensors: &[&Tensor]) -> bool {
    tensors
        .iter()
        .all(|t| t.device().is_cpu() && t.dtype() == DType::F32)
}

/// The core over an unroll (module docs): `gx` `[T, B, 4H]`, `w_hh`
/// `[4H, H]`, `h0c0` `[2, B, H]`, `keep` `[T, B]` (no gradient); returns
/// `[2, T, B, H]`: the hidden states, then the cell states.
pub fn lstm_unroll(gx: &Tensor, w_hh: &Tensor, h0c0: &Tensor, keep: &Tensor) -> Result<Tensor> {
    let (t, b, w4) = gx.dims3()?;
    let (rows, h) = w_hh.dims2()?;
    if w4 != 4 * h || rows != w4 || h0c0.dims() != [2, b, h] || keep.dims() != [t, b] {
        candle_core::bail!(
            "lstm-unroll: gates {:?}, recurrent weight {:?}, state {:?} and mask {:?} do not fit",
            gx.dims(),
            w_hh.dims(),
            h0c0.dims(),
            keep.dims()
        );
    }
    let keep = keep.flatten_all()?.to_vec1::<f32>()?;
    gx.contiguous()?.apply_op3(
        &w_hh.contiguous()?,
        &h0c0.contiguous()?,
        LstmUnroll { keep, t, b, h },
    )
}

/// The op behind [`lstm_unroll`].
#[derive(Debug, Clone)]
struct LstmUnroll {
    /// `[T, B]`: 1 − episode start.
    keep: Vec<f32>,
    t: usize,
    b: usize,
    h: usize,
}

/// `σ(v)` through the vectorised tanh.
#[inline(always)]
fn sigmoid(v: f32) -> f32 {
    0.5 + 0.5 * tanh_f32(0.5 * v)
}

impl LstmUnroll {
    /// `dst = k · src` per row (`k` the row's keep value).
    fn masked(&self, step: usize, src: &[f32], dst: &mut [f32]) {
        let keep = &self.keep[step * self.b..(step + 1) * self.b];
        for ((d, s), &k) in dst
            .chunks_exact_mut(self.h)
            .zip(src.chunks_exact(self.h))
            .zip(keep)
        {
            for (d, &s) in d.iter_mut().zip(s) {
                *d = s * k;
            }
        }
    }

    /// The state before `step`, masked, into `hp`, `cp` (`[B, H]` each):
    /// the initial state before step 0, else the previous step's outputs
    /// (`hs`, `cs`: `[T, B, H]` each).
    fn mask_previous(
        &self,
        step: usize,
        h0c0: &[f32],
        (hs, cs): (&[f32], &[f32]),
        (hp, cp): (&mut [f32], &mut [f32]),
    ) {
        let bh = self.b * self.h;
        let (h_src, c_src) = if step == 0 {
            (&h0c0[..bh], &h0c0[bh..])
        } else {
            let r = (step - 1) * bh..step * bh;
            (&hs[r.clone()], &cs[r])
        };
        self.masked(step, h_src, hp);
        self.masked(step, c_src, cp);
    }

    /// The masked state before each step, `[T, B, H]` each, from the
    /// initial state and the outputs.
    fn previous(&self, h0c0: &[f32], out: &[f32]) -> (Vec<f32>, Vec<f32>) {
        let (t, bh) = (self.t, self.b * self.h);
        let (mut hp, mut cp) = (vec![0f32; t * bh], vec![0f32; t * bh]);
        let outputs = out.split_at(t * bh);
        for step in 0..t {
            let r = step * bh..(step + 1) * bh;
            self.mask_previous(step, h0c0, outputs, (&mut hp[r.clone()], &mut cp[r]));
        }
        (hp, cp)
    }

    fn forward(&self, gx: &[f32], w_hh: &[f32], h0c0: &[f32]) -> Result<Vec<f32>> {
        let (t, b, h) = (self.t, self.b, self.h);
        let (bh, w4) = (b * h, 4 * h);
        let mut out = vec![0f32; 2 * t * bh];
        let (hs, cs) = out.split_at_mut(t * bh);
        let mut gates = vec![0f32; b * w4];
        let (mut hp, mut cp) = (vec![0f32; bh], vec![0f32; bh]);
        let w_t = MatRef::row_major(w_hh, w4, h)?.t();
        for step in 0..t {
            self.mask_previous(step, h0c0, (hs, cs), (&mut hp, &mut cp));
            gates.copy_from_slice(&gx[step * b * w4..(step + 1) * b * w4]);
            matmul(
                MatMut::row_major(&mut gates, b, w4)?,
                MatRef::row_major(&hp, b, h)?,
                w_t,
                true,
                Threads::Serial,
            )?;
            let r = step * bh..(step + 1) * bh;
            wide(CellForward {
                gates: &gates,
                c_prev: &cp,
                h_out: &mut hs[r.clone()],
                c_out: &mut cs[r],
                h,
            });
        }
        Ok(out)
    }

    /// `[dgx (T·B·4H), dw_hh (4H·H), dh0c0 (2·B·H)]`.
    fn backward(
        &self,
        gx: &[f32],
        w_hh: &[f32],
        h0c0: &[f32],
        out: &[f32],
        grad: &[f32],
    ) -> Result<(Vec<f32>, Vec<f32>, Vec<f32>)> {
        let (t, b, h) = (self.t, self.b, self.h);
        let (bh, w4, n) = (b * h, 4 * h, t * b);
        let (hp, cp) = self.previous(h0c0, out);
        // Every step's pre-activations at once: gx + h̃ W_hhᵀ.
        let mut pre = gx.to_vec();
        matmul(
            MatMut::row_major(&mut pre, n, w4)?,
            MatRef::row_major(&hp, n, h)?,
            MatRef::row_major(w_hh, w4, h)?.t(),
            true,
            Threads::Serial,
        )?;
        let cs = &out[t * bh..];
        let (grad_h, grad_c) = grad.split_at(t * bh);
        let mut d_pre = vec![0f32; n * w4];
        let (mut dh_next, mut dc_next) = (vec![0f32; bh], vec![0f32; bh]);
        let mut dh_masked = vec![0f32; bh];
        let mut dc_masked = vec![0f32; bh];
        for step in (0..t).rev() {
            let r = step * bh..(step + 1) * bh;
            let g = step * b * w4..(step + 1) * b * w4;
            wide(CellBackward {
                pre: &pre[g.clone()],
                c: &cs[r.clone()],
                c_prev: &cp[r.clone()],
                dh_out: &grad_h[r.clone()],
                dc_out: &grad_c[r],
                dh_next: &dh_next,
                dc_next: &dc_next,
                d_pre: &mut d_pre[g.clone()],
                dc_prev: &mut dc_masked,
                h,
            });
            matmul(
                MatMut::row_major(&mut dh_masked, b, h)?,
                MatRef::row_major(&d_pre[g], b, w4)?,
                MatRef::row_major(w_hh, w4, h)?,
                false,
                Threads::Serial,
            )?;
            // Through the mask to the previous step's outputs.
            self.masked(step, &dh_masked, &mut dh_next);
            self.masked(step, &dc_masked, &mut dc_next);
        }
        let mut dw = vec![0f32; w4 * h];
        matmul(
            MatMut::row_major(&mut dw, w4, h)?,
            MatRef::row_major(&d_pre, n, w4)?.t(),
            MatRef::row_major(&hp, n, h)?,
            false,
            Threads::Serial,
        )?;
        let mut d_state = dh_next;
        d_state.extend_from_slice(&dc_next);
        Ok((d_pre, dw, d_state))
    }
}

impl CustomOp3 for LstmUnroll {
    fn name(&self) -> &'static str {
        "lstm-unroll"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let gx = contiguous_f32(self.name(), "the gates", s1, l1)?;
        let w_hh = contiguous_f32(self.name(), "the recurrent weight", s2, l2)?;
        let h0c0 = contiguous_f32(self.name(), "the initial state", s3, l3)?;
        let out = self.forward(gx, w_hh, h0c0)?;
        Ok((
            CpuStorage::F32(out),
            Shape::from((2, self.t, self.b, self.h)),
        ))
    }

    fn bwd(
        &self,
        gx: &Tensor,
        w_hh: &Tensor,
        h0c0: &Tensor,
        res: &Tensor,
        grad_res: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let grad_res = grad_res.contiguous()?;
        let (dgx, dw, d_state) = with_slices(
            [gx, w_hh, h0c0, res, &grad_res],
            |[gx, w_hh, h0c0, out, grad]| self.backward(gx, w_hh, h0c0, out, grad),
        )??;
        let device = gx.device();
        Ok((
            Some(Tensor::from_vec(dgx, gx.shape(), device)?),
            Some(Tensor::from_vec(dw, w_hh.shape(), device)?),
            Some(Tensor::from_vec(d_state, h0c0.shape(), device)?),
        ))
    }
}

/// Runs `f` on the values of five contiguous f32 CPU tensors, read in
/// place (the backward's inputs: read locks on their storages, held for
/// the call).
fn with_slices<R>(tensors: [&Tensor; 5], f: impl FnOnce([&[f32]; 5]) -> R) -> Result<R> {
    let guards = tensors.map(|t| t.storage_and_layout());
    let mut slices: [&[f32]; 5] = [&[]; 5];
    for (slot, (storage, layout)) in slices.iter_mut().zip(&guards) {
        let Storage::Cpu(cpu) = &**storage else {
            candle_core::bail!("lstm-unroll-backward: a tensor off the CPU");
        };
        *slot = contiguous_f32("lstm-unroll-backward", "an input", cpu, layout)?;
    }
    Ok(f(slices))
}

/// One step of the cell over `B` rows (module docs), through [`wide`].
struct CellForward<'a> {
    /// `[B, 4H]` pre-activations.
    gates: &'a [f32],
    /// `[B, H]`, masked.
    c_prev: &'a [f32],
    h_out: &'a mut [f32],
    c_out: &'a mut [f32],
    h: usize,
}

impl Kernel for CellForward<'_> {
    type Output = ();

    #[inline(always)]
    fn run(self) {
        let h = self.h;
        let rows = self
            .gates
            .chunks_exact(4 * h)
            .zip(self.c_prev.chunks_exact(h))
            .zip(
                self.h_out
                    .chunks_exact_mut(h)
                    .zip(self.c_out.chunks_exact_mut(h)),
            );
        for ((a, c_prev), (h_out, c_out)) in rows {
            let (ai, af) = (&a[..h], &a[h..2 * h]);
            let (ag, ao) = (&a[2 * h..3 * h], &a[3 * h..]);
            for j in 0..h {
                let c = sigmoid(af[j]) * c_prev[j] + sigmoid(ai[j]) * tanh_f32(ag[j]);
                c_out[j] = c;
                h_out[j] = sigmoid(ao[j]) * tanh_f32(c);
            }
        }
    }
}

/// One step of the backward over `B` rows, through [`wide`]: the gates'
/// gradients and the masked previous cell state's.
struct CellBackward<'a> {
    /// `[B, 4H]` pre-activations.
    pre: &'a [f32],
    /// `[B, H]`: this step's cell state, the masked one before it.
    c: &'a [f32],
    c_prev: &'a [f32],
    /// `[B, H]`: the gradients of this step's outputs, and what flows back
    /// from the next step.
    dh_out: &'a [f32],
    dc_out: &'a [f32],
    dh_next: &'a [f32],
    dc_next: &'a [f32],
    /// `[B, 4H]` out.
    d_pre: &'a mut [f32],
    /// `[B, H]` out: the masked previous cell state's gradient.
    dc_prev: &'a mut [f32],
    h: usize,
}

impl Kernel for CellBackward<'_> {
    type Output = ();

    #[inline(always)]
    fn run(self) {
        let h = self.h;
        let state = self
            .c
            .chunks_exact(h)
            .zip(self.c_prev.chunks_exact(h))
            .zip(self.dh_out.chunks_exact(h).zip(self.dc_out.chunks_exact(h)))
            .zip(
                self.dh_next
                    .chunks_exact(h)
                    .zip(self.dc_next.chunks_exact(h)),
            );
        let grads = self
            .pre
            .chunks_exact(4 * h)
            .zip(self.d_pre.chunks_exact_mut(4 * h))
            .zip(self.dc_prev.chunks_exact_mut(h));
        for ((((c, c_prev), (dh_out, dc_out)), (dh_next, dc_next)), ((a, da), dc_prev)) in
            state.zip(grads)
        {
            let (ai, af) = (&a[..h], &a[h..2 * h]);
            let (ag, ao) = (&a[2 * h..3 * h], &a[3 * h..]);
            let (dai, rest) = da.split_at_mut(h);
            let (daf, rest) = rest.split_at_mut(h);
            let (dag, dao) = rest.split_at_mut(h);
            for j in 0..h {
                let (i, f) = (sigmoid(ai[j]), sigmoid(af[j]));
                let (g, o) = (tanh_f32(ag[j]), sigmoid(ao[j]));
                let tc = tanh_f32(c[j]);
                let dh = dh_out[j] + dh_next[j];
                let dc = dc_out[j] + dc_next[j] + dh * o * (1.0 - tc * tc);
                dai[j] = dc * g * i * (1.0 - i);
                daf[j] = dc * c_prev[j] * f * (1.0 - f);
                dag[j] = dc * i * (1.0 - g * g);
                dao[j] = dh * tc * o * (1.0 - o);
                dc_prev[j] = dc * f;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Var};

    fn values(n: usize, seed: usize, scale: f32) -> Vec<f32> {
        (0..n)
            .map(|i| ((((i + seed) * 7919) % 2003) as f32 / 1001.0 - 1.0) * scale)
            .collect()
    }

    /// The recurrence from candle ops (sigmoid as the op computes it), as
    /// the module docs define it.
    fn candle_unroll(gx: &Tensor, w_hh: &Tensor, h0c0: &Tensor, keep: &Tensor) -> Result<Tensor> {
        let (t, _, w4) = gx.dims3()?;
        let h = w4 / 4;
        let sig = |v: &Tensor| -> Result<Tensor> { (v * 0.5)?.tanh()?.affine(0.5, 0.5) };
        let (mut hs, mut cs) = (h0c0.get(0)?, h0c0.get(1)?);
        let (mut h_out, mut c_out) = (Vec::new(), Vec::new());
        for step in 0..t {
            let k = keep.get(step)?.unsqueeze(1)?;
            let (hm, cm) = (hs.broadcast_mul(&k)?, cs.broadcast_mul(&k)?);
            let a = (gx.get(step)? + hm.matmul(&w_hh.t()?)?)?;
            let i = sig(&a.narrow(1, 0, h)?)?;
            let f = sig(&a.narrow(1, h, h)?)?;
            let g = a.narrow(1, 2 * h, h)?.tanh()?;
            let o = sig(&a.narrow(1, 3 * h, h)?)?;
            cs = ((f * cm)? + (i * g)?)?;
            hs = (o * cs.tanh()?)?;
            h_out.push(hs.clone());
            c_out.push(cs.clone());
        }
        Tensor::stack(&[Tensor::stack(&h_out, 0)?, Tensor::stack(&c_out, 0)?], 0)
    }

    fn max_diff(a: &Tensor, b: &Tensor) -> Result<f32> {
        (a - b)?.abs()?.flatten_all()?.max(0)?.to_scalar::<f32>()
    }

    /// Values and every input's gradient against the same recurrence from
    /// candle ops, with episode starts mid-unroll and a loss that weighs
    /// hidden and cell states differently.
    #[test]
    fn values_and_gradients_match_candle_ops() -> Result<()> {
        let dev = Device::Cpu;
        let (t, b, h) = (7, 3, 5);
        let gx = Var::from_vec(values(t * b * 4 * h, 1, 2.0), (t, b, 4 * h), &dev)?;
        let w_hh = Var::from_vec(values(4 * h * h, 2, 0.7), (4 * h, h), &dev)?;
        let h0c0 = Var::from_vec(values(2 * b * h, 3, 1.5), (2, b, h), &dev)?;
        let mut keep = vec![1f32; t * b];
        keep[2 * b + 1] = 0.0;
        keep[5 * b] = 0.0;
        keep[1] = 0.0;
        let keep = Tensor::from_vec(keep, (t, b), &dev)?;
        let weights = Tensor::from_vec(values(2 * t * b * h, 4, 1.0), (2, t, b, h), &dev)?;
        let ours = lstm_unroll(&gx, &w_hh, &h0c0, &keep)?;
        let theirs = candle_unroll(&gx, &w_hh, &h0c0, &keep)?;
        let diff = max_diff(&ours, &theirs)?;
        assert!(diff <= 1e-6, "values differ by {diff}");
        let ga = (&ours * &weights)?.sum_all()?.backward()?;
        let gb = (&theirs * &weights)?.sum_all()?.backward()?;
        for (name, var) in [("gates", &gx), ("w_hh", &w_hh), ("state", &h0c0)] {
            let (Some(x), Some(y)) = (ga.get(var.as_tensor()), gb.get(var.as_tensor())) else {
                panic!("{name}: no gradient");
            };
            let scale = y.abs()?.flatten_all()?.max(0)?.to_scalar::<f32>()?;
            assert!(scale > 0.1, "{name}: the test's gradient is all but zero");
            let diff = max_diff(x, y)?;
            assert!(
                diff <= 2e-6 * scale.max(1.0),
                "{name}: gradients differ by {diff}"
            );
        }
        Ok(())
    }

    /// A state zeroed by the mask gets no gradient from the steps after it,
    /// and an unroll of one step is the cell once.
    #[test]
    fn a_start_at_step_zero_cuts_the_initial_state_off() -> Result<()> {
        let dev = Device::Cpu;
        let (t, b, h) = (3, 2, 4);
        let gx = Tensor::from_vec(values(t * b * 4 * h, 5, 1.0), (t, b, 4 * h), &dev)?;
        let w_hh = Tensor::from_vec(values(4 * h * h, 6, 0.5), (4 * h, h), &dev)?;
        let h0c0 = Var::from_vec(values(2 * b * h, 7, 1.0), (2, b, h), &dev)?;
        // Row 0 starts an episode at step 0, row 1 goes on from the state.
        let keep = Tensor::new(&[[0f32, 1.], [1., 1.], [1., 1.]], &dev)?;
        let out = lstm_unroll(&gx, &w_hh, &h0c0, &keep)?;
        let g = out.sum_all()?.backward()?;
        let g = g.get(h0c0.as_tensor()).expect("the state reaches the loss");
        let per_row = g.abs()?.sum(2)?.to_vec2::<f32>()?;
        for part in &per_row {
            assert_eq!(part[0], 0.0, "row 0's state was zeroed before step 0");
            assert!(part[1] > 0.0, "row 1's state carries into step 0");
        }
        Ok(())
    }

    #[test]
    fn shapes_that_do_not_fit_are_refused() -> Result<()> {
        let dev = Device::Cpu;
        let gx = Tensor::zeros((2, 3, 8), DType::F32, &dev)?;
        let w_hh = Tensor::zeros((8, 2), DType::F32, &dev)?;
        let keep = Tensor::ones((2, 3), DType::F32, &dev)?;
        let wrong_state = Tensor::zeros((2, 3, 3), DType::F32, &dev)?;
        let e = lstm_unroll(&gx, &w_hh, &wrong_state, &keep).unwrap_err();
        assert!(e.to_string().contains("do not fit"), "{e}");
        let state = Tensor::zeros((2, 3, 2), DType::F32, &dev)?;
        assert_eq!(
            lstm_unroll(&gx, &w_hh, &state, &keep)?.dims(),
            &[2, 2, 3, 2]
        );
        Ok(())
    }
}
