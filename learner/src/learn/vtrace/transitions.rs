//! From the wire's per-step flags to V-trace's per-transition rewards, discounts
//! and masks.
//!
//! An unroll holds steps `k = 0..=T` (`T + 1` of them; consecutive unrolls share
//! one). Step `k` carries `reward_k` (received on the transition *into* `obs_k`),
//! `terminated_k` (that transition hit a terminal state, which is never sent;
//! `obs_k` already starts the next episode) and `truncated_k` (`obs_k` is the final
//! observation of a time-limited episode; its action is a dummy, and step `k+1`
//! starts the next episode with reward 0). See `StepBatch` in
//! `proto/seed/v1/seed.proto`.
//!
//! Transition `t = 0..T-1` goes `x_t -> x_{t+1}` with
//!
//! ```text
//! r_t     = reward_{t+1}
//! γ_t     = γ · (1 − terminated_{t+1}) · (1 − truncated_t)
//! valid_t = 1 − truncated_t
//! ```
//!
//! So discounting stops at a termination, and a truncated final observation
//! `x_k` ends its episode's chain at `V(x_k)`: transition `k − 1` bootstraps
//! through it, transition `k` (dummy action, into the next episode) is masked.
//!
//! Cost: a handful of elementwise ops on `[T, B]`; stays on the tensors' device.
use candle_core::{DType, Error, Result, Tensor};

/// Per-transition inputs to V-trace, each `[T, B]`, `f32`, no gradient.
#[derive(Debug, Clone)]
pub struct Transitions {
    /// `r_t = reward_{t+1}`.
    pub rewards: Tensor,
    /// `γ_t = γ (1 − terminated_{t+1}) (1 − truncated_t)`.
    pub discounts: Tensor,
    /// `valid_t = 1 − truncated_t`: 0 where the action at `x_t` is a dummy.
    pub valid: Tensor,
}

impl Transitions {
    /// Builds transitions from step-aligned `[T+1, B]` columns.
    ///
    /// `rewards` is float; `terminated` and `truncated` hold 0 or 1 in any dtype
    /// (`u8` from the collator is fine). `discount` is γ. Errors unless all three
    /// have the same `[T+1, B]` shape with `T ≥ 1`.
    pub fn from_steps(
        rewards: &Tensor,
        terminated: &Tensor,
        truncated: &Tensor,
        discount: f32,
    ) -> Result<Self> {
        let (steps, _batch) = rewards.dims2()?;
        if steps < 2 {
            return Err(Error::UnexpectedShape {
                msg: "transitions: need T + 1 >= 2 steps".to_string(),
                expected: (2, rewards.dim(1)?).into(),
                got: rewards.shape().clone(),
            });
        }
        for (name, tensor) in [("terminated", terminated), ("truncated", truncated)] {
            if tensor.shape() != rewards.shape() {
                return Err(Error::UnexpectedShape {
                    msg: format!("transitions: {name} must match rewards"),
                    expected: rewards.shape().clone(),
                    got: tensor.shape().clone(),
                });
            }
        }
        let t_len = steps - 1;
        let f32_of = |t: &Tensor| t.detach().to_dtype(DType::F32);
        let rewards_next = f32_of(rewards)?.narrow(0, 1, t_len)?;
        let terminated_next = f32_of(terminated)?.narrow(0, 1, t_len)?;
        let truncated_here = f32_of(truncated)?.narrow(0, 0, t_len)?;
        let valid = truncated_here.affine(-1.0, 1.0)?;
        let discounts =
            (terminated_next.affine(-1.0, 1.0)? * &valid)?.affine(f64::from(discount), 0.0)?;
        Ok(Self {
            rewards: rewards_next,
            discounts,
            valid,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    fn column(xs: &[f32]) -> Tensor {
        Tensor::from_slice(xs, (xs.len(), 1), &Device::Cpu).unwrap()
    }

    fn flat(t: &Tensor) -> Vec<f32> {
        t.flatten_all().unwrap().to_vec1().unwrap()
    }

    #[test]
    fn shifts_rewards_and_splits_termination_from_truncation() {
        // Steps 0..=4: termination arrives at step 2, step 3 is a truncated
        // final observation, step 4 starts a new episode with reward 0.
        let rewards = column(&[9.0, 1.0, 2.0, 3.0, 0.0]);
        let terminated = Tensor::from_slice(&[0u8, 0, 1, 0, 0], (5, 1), &Device::Cpu).unwrap();
        let truncated = Tensor::from_slice(&[0u8, 0, 0, 1, 0], (5, 1), &Device::Cpu).unwrap();
        let transitions = Transitions::from_steps(&rewards, &terminated, &truncated, 0.9).unwrap();
        assert_eq!(flat(&transitions.rewards), [1.0, 2.0, 3.0, 0.0]);
        // t = 1 ends in the terminal state; t = 3 starts at the truncated obs.
        assert_eq!(flat(&transitions.discounts), [0.9, 0.0, 0.9, 0.0]);
        assert_eq!(flat(&transitions.valid), [1.0, 1.0, 1.0, 0.0]);
    }

    #[test]
    fn rejects_mismatched_flags() {
        let rewards = column(&[0.0, 1.0, 2.0]);
        let short = column(&[0.0, 0.0]);
        let err = Transitions::from_steps(&rewards, &short, &rewards, 0.9).unwrap_err();
        assert!(err.to_string().contains("terminated"), "{err}");
    }
}
