//! LSTM core between torso and heads. At inference the state of each env
//! slot lives in the learner's state table; for training, the state at the
//! start of each unroll is stored with it and the core is re-run over the
//! unroll, zeroing the state wherever a new episode begins.
use candle_core::{Device, Result, Tensor};
use candle_nn::rnn::{LSTMConfig, LSTMState, LSTM, RNN};
use candle_nn::VarBuilder;

/// Recurrent state of a batch of envs: `h` and `c`, each `[B, H]`.
#[derive(Debug, Clone)]
pub struct RecurrentState {
    pub h: Tensor,
    pub c: Tensor,
}

#[derive(Debug, Clone)]
pub struct LstmCore {
    lstm: LSTM,
    hidden: usize,
}

impl LstmCore {
    pub fn new(in_dim: usize, hidden: usize, vb: VarBuilder) -> Result<Self> {
        Ok(LstmCore {
            lstm: candle_nn::rnn::lstm(in_dim, hidden, LSTMConfig::default(), vb)?,
            hidden,
        })
    }

    pub fn zero_state(&self, batch: usize, device: &Device) -> Result<RecurrentState> {
        let z = Tensor::zeros((batch, self.hidden), candle_core::DType::F32, device)?;
        Ok(RecurrentState { h: z.clone(), c: z })
    }

    /// One step: `x` `[B, in]`.
    pub fn step(&self, x: &Tensor, state: &RecurrentState) -> Result<RecurrentState> {
        let s = self
            .lstm
            .step(x, &LSTMState::new(state.h.clone(), state.c.clone()))?;
        Ok(RecurrentState {
            h: s.h().clone(),
            c: s.c().clone(),
        })
    }

    /// Over an unroll: `xs` `[T+1, B, in]`, `episode_start` `[T+1, B]`
    /// (1.0 zeroes the state before that step). Returns `[T+1, B, H]`.
    pub fn unroll(
        &self,
        xs: &Tensor,
        episode_start: &Tensor,
        initial: Option<&RecurrentState>,
    ) -> Result<Tensor> {
        let (t1, b, _) = xs.dims3()?;
        let mut state = match initial {
            Some(s) => s.clone(),
            None => self.zero_state(b, xs.device())?,
        };
        let keep = episode_start.affine(-1.0, 1.0)?; // 1 - start
        let mut outs = Vec::with_capacity(t1);
        for t in 0..t1 {
            let k = keep.get(t)?.unsqueeze(1)?;
            state = RecurrentState {
                h: state.h.broadcast_mul(&k)?,
                c: state.c.broadcast_mul(&k)?,
            };
            state = self.step(&xs.get(t)?, &state)?;
            outs.push(state.h.clone());
        }
        Tensor::stack(&outs, 0)
    }
}
