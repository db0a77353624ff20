//! LSTM core between torso and heads. At inference the state of each env
//! slot lives in the learner's state table; for training, the state at the
//! start of each unroll is stored with it and the core is re-run over the
//! unroll, zeroing the state wherever a new episode begins.
//!
//! The cell is PyTorch's and candle's (`candle_nn::rnn::LSTM`), with the same
//! weight names (`weight_ih_l0` `[4H, in]`, `weight_hh_l0` `[4H, H]`,
//! `bias_ih_l0`, `bias_hh_l0` `[4H]`, gates in the order input, forget,
//! cell, output), so checkpoints of either load into the other. It is
//! written out here rather than called because a step of candle's cell is
//! fourteen tensor ops, each its own kernel launch on a GPU, and an unroll
//! repeats all of them per time step. This one takes one sigmoid over all
//! four gates (the cell gate's slice is unused) instead of three, and on
//! an accelerator ([`InputProjection::Batched`]) projects the inputs of the
//! whole unroll with one matmul and one bias add (`[T·B, in] x [in, 4H]`),
//! leaving only the recurrent matmul inside the time loop.
//!
//! On the CPU (f32) the whole unroll is one op instead
//! ([`InputProjection::Fused`], [`crate::model::cpu::lstm_unroll`]): the
//! input projection of every step as one dense layer, then the recurrence
//! and its backward as plain loops, where candle's ops spent most of an
//! R2D2 training step in elementwise kernels and the allocator. Batched
//! candle ops on the CPU were slower still: each step's slice of the
//! projection is a `narrow`, whose gradient candle builds as a zero-padded
//! copy of the whole `[T+1, B, 4H]` projection (`O(T²·B·H)` traffic).
//!
//! The candle forms compute each element with the same operations in the
//! same order as candle's cell, so their results are the same (tested
//! against it, values and gradients). Forward ops per step: 12 instead of
//! 14 with the per-step projection; 10, plus 2 once per unroll, batched
//! (plus 2 for the episode-start mask in an unroll; counted in the tests
//! with `model::graph_ops`); the fused op a handful per unroll, whatever
//! its length. Its σ is `(1 + tanh(v/2)) / 2` through the vectorised tanh,
//! as the learner's host inference step computes it: within 1e-6 of
//! candle's cell (tested).
use candle_core::{DType, Device, Result, Tensor};
use candle_nn::VarBuilder;

use super::cpu::bias_add::bias_add;
use super::cpu::dense_act::{dense_act, Activation};
use super::cpu::lstm_unroll::{self, lstm_unroll};

/// How [`LstmCore::unroll`] projects its inputs (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputProjection {
    /// One matmul per step, on that step's inputs (the CPU's choice).
    PerStep,
    /// One matmul for all steps (an accelerator's choice).
    Batched,
    /// One dense layer for all steps and the recurrence as one op, f32 on
    /// the CPU ([`lstm_unroll`]); elsewhere [`InputProjection::PerStep`].
    Fused,
}

impl InputProjection {
    /// `Batched` on an accelerator, `Fused` on the CPU.
    pub fn for_device(device: &Device) -> Self {
        if device.is_cpu() {
            InputProjection::Fused
        } else {
            InputProjection::Batched
        }
    }
}

/// Recurrent state of a batch of envs: `h` and `c`, each `[B, H]`.
#[derive(Debug, Clone)]
pub struct RecurrentState {
    pub h: Tensor,
    pub c: Tensor,
}

#[derive(Debug, Clone)]
pub struct LstmCore {
    /// `[4H, in]`.
    w_ih: Tensor,
    /// `[4H, H]`.
    w_hh: Tensor,
    /// `[4H]`.
    b_ih: Tensor,
    /// `[4H]`.
    b_hh: Tensor,
    hidden: usize,
}

impl LstmCore {
    pub fn new(in_dim: usize, hidden: usize, vb: VarBuilder) -> Result<Self> {
        // The initialisers candle's `LSTMConfig::default()` uses, so a fresh
        // VarMap holds what it held before (TrainableModel redraws them
        // from its seed anyway).
        let w_init = candle_nn::init::DEFAULT_KAIMING_UNIFORM;
        let b_init = candle_nn::Init::Const(0.0);
        Ok(LstmCore {
            w_ih: vb.get_with_hints((4 * hidden, in_dim), "weight_ih_l0", w_init)?,
            w_hh: vb.get_with_hints((4 * hidden, hidden), "weight_hh_l0", w_init)?,
            b_ih: vb.get_with_hints(4 * hidden, "bias_ih_l0", b_init)?,
            b_hh: vb.get_with_hints(4 * hidden, "bias_hh_l0", b_init)?,
            hidden,
        })
    }

    /// `[w_ih [4H, in], w_hh [4H, H], b_ih [4H], b_hh [4H]]`.
    pub fn weights(&self) -> [&Tensor; 4] {
        [&self.w_ih, &self.w_hh, &self.b_ih, &self.b_hh]
    }

    /// `H`.
    pub fn hidden(&self) -> usize {
        self.hidden
    }

    pub fn zero_state(&self, batch: usize, device: &Device) -> Result<RecurrentState> {
        self.zero_state_as(batch, DType::F32, device)
    }

    /// Zeros of `dtype` (the weights' dtype for a reduced-precision copy).
    pub fn zero_state_as(
        &self,
        batch: usize,
        dtype: DType,
        device: &Device,
    ) -> Result<RecurrentState> {
        let z = Tensor::zeros((batch, self.hidden), dtype, device)?;
        Ok(RecurrentState { h: z.clone(), c: z })
    }

    /// `x W_ihᵀ + b_ih` for `x` `[N, in]`: the input half of the gates.
    fn input_gates(&self, x: &Tensor) -> Result<Tensor> {
        bias_add(&x.matmul(&self.w_ih.t()?)?, &self.b_ih)
    }

    /// The cell from the input half of the gates `gx` `[B, 4H]`.
    fn cell(&self, gx: &Tensor, state: &RecurrentState) -> Result<RecurrentState> {
        let gh = bias_add(&state.h.matmul(&self.w_hh.t()?)?, &self.b_hh)?;
        let gates = (gx + gh)?;
        let h = self.hidden;
        let sig = candle_nn::ops::sigmoid(&gates)?;
        let in_gate = sig.narrow(1, 0, h)?;
        let forget_gate = sig.narrow(1, h, h)?;
        let out_gate = sig.narrow(1, 3 * h, h)?;
        let cell_gate = gates.narrow(1, 2 * h, h)?.tanh()?;
        let c = ((forget_gate * &state.c)? + (in_gate * cell_gate)?)?;
        let h = (out_gate * c.tanh()?)?;
        Ok(RecurrentState { h, c })
    }

    /// One step: `x` `[B, in]`.
    pub fn step(&self, x: &Tensor, state: &RecurrentState) -> Result<RecurrentState> {
        self.cell(&self.input_gates(x)?, state)
    }

    /// Over an unroll: `xs` `[T+1, B, in]`, `episode_start` `[T+1, B]`
    /// (1.0 zeroes the state before that step). Returns `[T+1, B, H]`.
    /// Projects the inputs as suits their device
    /// ([`InputProjection::for_device`]).
    pub fn unroll(
        &self,
        xs: &Tensor,
        episode_start: &Tensor,
        initial: Option<&RecurrentState>,
    ) -> Result<Tensor> {
        let projection = InputProjection::for_device(xs.device());
        Ok(self
            .unroll_with_state(xs, episode_start, initial, projection)?
            .0)
    }

    /// The state after an unroll (what [`LstmCore::unroll`] would pass to
    /// a next step), for R2D2's burn-in.
    pub fn final_state(
        &self,
        xs: &Tensor,
        episode_start: &Tensor,
        initial: Option<&RecurrentState>,
    ) -> Result<RecurrentState> {
        let projection = InputProjection::for_device(xs.device());
        Ok(self
            .unroll_with_state(xs, episode_start, initial, projection)?
            .1)
    }

    /// [`LstmCore::unroll`] with the input projection chosen by the caller.
    pub fn unroll_with(
        &self,
        xs: &Tensor,
        episode_start: &Tensor,
        initial: Option<&RecurrentState>,
        projection: InputProjection,
    ) -> Result<Tensor> {
        Ok(self
            .unroll_with_state(xs, episode_start, initial, projection)?
            .0)
    }

    /// The outputs `[T+1, B, H]` and the state after the last step.
    fn unroll_with_state(
        &self,
        xs: &Tensor,
        episode_start: &Tensor,
        initial: Option<&RecurrentState>,
        projection: InputProjection,
    ) -> Result<(Tensor, RecurrentState)> {
        let (t1, b, _) = xs.dims3()?;
        if t1 == 0 {
            candle_core::bail!("an LSTM unroll of no steps");
        }
        let mut state = match initial {
            Some(s) => s.clone(),
            None => self.zero_state_as(b, xs.dtype(), xs.device())?,
        };
        let keep = episode_start.affine(-1.0, 1.0)?; // 1 - start
        let fused = projection == InputProjection::Fused
            && lstm_unroll::takes(&[
                xs, &self.w_ih, &self.w_hh, &self.b_ih, &self.b_hh, &state.h, &state.c,
            ]);
        if fused {
            let bias = (&self.b_ih + &self.b_hh)?;
            let gx = dense_act(&xs.flatten(0, 1)?, &self.w_ih, &bias, Activation::None)?
                .reshape((t1, b, 4 * self.hidden))?;
            let h0c0 = Tensor::stack(&[&state.h, &state.c], 0)?;
            let out = lstm_unroll(&gx, &self.w_hh, &h0c0, &keep)?;
            let (hs, cs) = (out.get(0)?, out.get(1)?);
            let last = RecurrentState {
                h: hs.get(t1 - 1)?,
                c: cs.get(t1 - 1)?,
            };
            return Ok((hs, last));
        }
        // Batched: one projection for every step, [T+1, B, 4H].
        let all_gates = match projection {
            InputProjection::Batched => Some(self.input_gates(&xs.flatten(0, 1)?)?.reshape((
                t1,
                b,
                4 * self.hidden,
            ))?),
            InputProjection::PerStep | InputProjection::Fused => None,
        };
        let mut outs = Vec::with_capacity(t1);
        for t in 0..t1 {
            let k = keep.get(t)?.unsqueeze(1)?;
            state = RecurrentState {
                h: state.h.broadcast_mul(&k)?,
                c: state.c.broadcast_mul(&k)?,
            };
            let gx = match &all_gates {
                Some(all) => all.get(t)?,
                None => self.input_gates(&xs.get(t)?)?,
            };
            state = self.cell(&gx, &state)?;
            outs.push(state.h.clone());
        }
        Ok((Tensor::stack(&outs, 0)?, state))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_nn::rnn::{LSTMConfig, LSTMState, RNN};
    use candle_nn::VarMap;

    /// The core and candle's LSTM over the same variables.
    fn both(in_dim: usize, hidden: usize) -> Result<(LstmCore, candle_nn::rnn::LSTM, VarMap)> {
        let map = VarMap::new();
        let vb = VarBuilder::from_varmap(&map, DType::F32, &Device::Cpu);
        let ours = LstmCore::new(in_dim, hidden, vb.clone())?;
        let theirs = candle_nn::rnn::lstm(in_dim, hidden, LSTMConfig::default(), vb)?;
        // Non-zero biases, so a bias mixed up would show.
        for var in map.all_vars() {
            var.set(&Tensor::randn(0f32, 0.5, var.shape(), &Device::Cpu)?)?;
        }
        Ok((ours, theirs, map))
    }

    /// candle's cell over an unroll, masked as `LstmCore::unroll` documents.
    fn reference_unroll(
        lstm: &candle_nn::rnn::LSTM,
        xs: &Tensor,
        starts: &Tensor,
        initial: &RecurrentState,
    ) -> Result<Tensor> {
        let keep = starts.affine(-1.0, 1.0)?;
        let mut state = LSTMState::new(initial.h.clone(), initial.c.clone());
        let mut outs = Vec::new();
        for t in 0..xs.dim(0)? {
            let k = keep.get(t)?.unsqueeze(1)?;
            let masked = LSTMState::new(state.h.broadcast_mul(&k)?, state.c.broadcast_mul(&k)?);
            state = lstm.step(&xs.get(t)?, &masked)?;
            outs.push(state.h.clone());
        }
        Tensor::stack(&outs, 0)
    }

    fn max_diff(a: &Tensor, b: &Tensor) -> Result<f32> {
        (a - b)?.abs()?.flatten_all()?.max(0)?.to_scalar::<f32>()
    }

    /// Forward ops (kernel launches on a GPU) of an unroll: per step 12
    /// (per-step projection) or 10 plus the 2 of the one projection
    /// (batched) instead of candle's 14.
    #[test]
    fn unroll_takes_fewer_ops_than_candles_cell() -> Result<()> {
        let (ours, theirs, _) = both(16, 8)?;
        let dev = Device::Cpu;
        let t1 = 9;
        let xs = Tensor::randn(0f32, 1.0, (t1, 4, 16), &dev)?;
        let starts = Tensor::zeros((t1, 4), DType::F32, &dev)?;
        let init = ours.zero_state(4, &dev)?;
        let count = |t: &Tensor| crate::model::graph_ops::ops_in_graph([t]);
        let candle = count(&reference_unroll(&theirs, &xs, &starts, &init)?.sum_all()?);
        let per_step = ours.unroll_with(&xs, &starts, Some(&init), InputProjection::PerStep)?;
        let batched = ours.unroll_with(&xs, &starts, Some(&init), InputProjection::Batched)?;
        let (per_step, batched) = (count(&per_step.sum_all()?), count(&batched.sum_all()?));
        assert_eq!(
            candle - per_step,
            2 * t1,
            "per step {per_step}, candle's {candle}"
        );
        assert_eq!(
            candle - batched,
            4 * t1 - 2,
            "batched {batched}, candle's {candle}"
        );
        assert_eq!(InputProjection::for_device(&dev), InputProjection::Fused);
        Ok(())
    }

    /// The fused unroll is a fixed number of ops whatever its length: the
    /// recurrence is one op, not a dozen per step.
    #[test]
    fn the_fused_unroll_takes_the_same_ops_at_any_length() -> Result<()> {
        let (ours, _, _) = both(16, 8)?;
        let dev = Device::Cpu;
        let count = |t1: usize| -> Result<usize> {
            let xs = Tensor::randn(0f32, 1.0, (t1, 4, 16), &dev)?;
            let starts = Tensor::zeros((t1, 4), DType::F32, &dev)?;
            let out = ours.unroll_with(&xs, &starts, None, InputProjection::Fused)?;
            Ok(crate::model::graph_ops::ops_in_graph([&out.sum_all()?]))
        };
        let (short, long) = (count(3)?, count(21)?);
        assert_eq!(short, long, "ops at 3 steps and at 21");
        assert!(long < 12, "{long} ops for the fused unroll");
        Ok(())
    }

    #[test]
    fn weight_names_are_candles() -> Result<()> {
        let (_, _, map) = both(5, 3)?;
        let mut names: Vec<(String, Vec<usize>)> = map
            .data()
            .lock()
            .unwrap()
            .iter()
            .map(|(n, v)| (n.clone(), v.dims().to_vec()))
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                ("bias_hh_l0".to_string(), vec![12]),
                ("bias_ih_l0".to_string(), vec![12]),
                ("weight_hh_l0".to_string(), vec![12, 3]),
                ("weight_ih_l0".to_string(), vec![12, 5]),
            ]
        );
        Ok(())
    }

    #[test]
    fn step_is_candles_cell() -> Result<()> {
        let (ours, theirs, _) = both(6, 4)?;
        let dev = Device::Cpu;
        let x = Tensor::randn(0f32, 1.0, (3, 6), &dev)?;
        let s = RecurrentState {
            h: Tensor::randn(0f32, 1.0, (3, 4), &dev)?,
            c: Tensor::randn(0f32, 1.0, (3, 4), &dev)?,
        };
        let a = ours.step(&x, &s)?;
        let b = theirs.step(&x, &LSTMState::new(s.h.clone(), s.c.clone()))?;
        assert_eq!(max_diff(&a.h, b.h())?, 0.0);
        assert_eq!(max_diff(&a.c, b.c())?, 0.0);
        Ok(())
    }

    /// Each form of the unroll gives candle's values and gradients, episode
    /// resets included.
    #[test]
    fn unroll_matches_candles_cell_values_and_gradients() -> Result<()> {
        let (ours, theirs, map) = both(5, 8)?;
        let dev = Device::Cpu;
        let xs = Tensor::randn(0f32, 1.0, (6, 3, 5), &dev)?;
        let mut starts = vec![0f32; 18];
        starts[2 * 3 + 1] = 1.0;
        starts[4 * 3] = 1.0;
        let starts = Tensor::from_vec(starts, (6, 3), &dev)?;
        let init = RecurrentState {
            h: Tensor::randn(0f32, 1.0, (3, 8), &dev)?,
            c: Tensor::randn(0f32, 1.0, (3, 8), &dev)?,
        };
        let b = reference_unroll(&theirs, &xs, &starts, &init)?;
        let gb = b.sqr()?.sum_all()?.backward()?;
        for projection in [
            InputProjection::PerStep,
            InputProjection::Batched,
            InputProjection::Fused,
        ] {
            let a = ours.unroll_with(&xs, &starts, Some(&init), projection)?;
            let diff = max_diff(&a, &b)?;
            assert!(diff <= 1e-6, "{projection:?}: values differ by {diff}");
            let ga = a.sqr()?.sum_all()?.backward()?;
            for var in map.all_vars() {
                let (x, y) = (ga.get(var.as_tensor()), gb.get(var.as_tensor()));
                let (Some(x), Some(y)) = (x, y) else {
                    panic!("a variable without a gradient");
                };
                let diff = max_diff(x, y)?;
                let scale = y.abs()?.flatten_all()?.max(0)?.to_scalar::<f32>()?;
                assert!(
                    diff <= 1e-5 * scale.max(1.0),
                    "{projection:?}: gradients differ by {diff}"
                );
            }
        }
        Ok(())
    }
}
