//! The R2D2 loss over a batch of sequences, and their new priorities.
//!
//! Given the online network's dueling Q-values `[S, B, A]` over the trained
//! part of each sequence (the steps after burn-in, `S = T + 1 − burn_in`),
//! the target network's over the same steps, the actions and step flags, the
//! prioritized sampler's importance weights `w_b` and the validity masks:
//!
//! ```text
//! y_t   = n-step double-Q target, rescaled (host math in `targets.rs`)
//! δ_t   = Q(x_t, a_t) − y_t                        (no gradient through y)
//! loss  = Σ_{t,b} w_b · valid_t · ½ δ_t² / max(1, Σ valid)
//! p_b   = η · max_t |δ_t| + (1 − η) · mean_t |δ_t|  (valid t only)
//! ```
//!
//! The targets need the online network's argmax and the target network's
//! value at every step: both come to the host once (a few hundred floats),
//! and the target and its priorities are computed there. Rewards are
//! multiplied by `reward_scale` first. Cost: one gather over `[S−1, B, A]`,
//! two `[S, B, A]` device-to-host copies, `O(S·B·n)` host work.
use candle_core::{DType, Result, Tensor, D};

use crate::learn::r2d2::targets::{double_q_values, mixed_priority, n_step_targets, NStepInputs};

/// What [`r2d2_loss`] reads, time-major over the `S` trained steps.
pub struct R2d2LossInputs<'a> {
    /// `[S, B, A]` online Q-values (with gradient).
    pub online_q: &'a Tensor,
    /// `[S, B, A]` target-network Q-values.
    pub target_q: &'a Tensor,
    /// `[S, B]` u32: the action taken at each step.
    pub actions: &'a Tensor,
    /// `[S, B]` f32, u8, u8.
    pub rewards: &'a Tensor,
    pub terminated: &'a Tensor,
    pub truncated: &'a Tensor,
    /// `[B]` importance weights of the sequences (1 without priorities).
    pub weights: &'a [f32],
    pub discount: f64,
    pub reward_scale: f32,
    pub n_step: usize,
    pub priority_eta: f64,
}

/// The loss, its logged value and each sequence's new priority.
pub struct R2d2Loss {
    /// Scalar, with gradient into the online network.
    pub total: Tensor,
    /// `total` on the host.
    pub td_loss: f32,
    /// `[B]` η-mixed priorities from the new |δ|.
    pub priorities: Vec<f32>,
    /// Mean |δ| over the valid transitions.
    pub mean_abs_td: f32,
}

/// The R2D2 loss (module docs).
pub fn r2d2_loss(x: &R2d2LossInputs<'_>) -> Result<R2d2Loss> {
    let (s, b, a) = x.online_q.dims3()?;
    if s < 2 {
        candle_core::bail!("r2d2 loss needs at least 2 steps after burn-in, got {s}");
    }
    let t = s - 1;
    let device = x.online_q.device();
    let online_host = x.online_q.detach().flatten_all()?.to_vec1::<f32>()?;
    let target_host = x.target_q.flatten_all()?.to_vec1::<f32>()?;
    let bootstrap = double_q_values(&online_host, &target_host, a);
    let rewards: Vec<f32> = x
        .rewards
        .flatten_all()?
        .to_vec1::<f32>()?
        .into_iter()
        .map(|r| r * x.reward_scale)
        .collect();
    let flags = |m: &Tensor| -> Result<Vec<bool>> {
        Ok(m.flatten_all()?
            .to_vec1::<u8>()?
            .into_iter()
            .map(|v| v != 0)
            .collect())
    };
    let (terminated, truncated) = (flags(x.terminated)?, flags(x.truncated)?);
    let targets = n_step_targets(&NStepInputs {
        rewards: &rewards,
        terminated: &terminated,
        truncated: &truncated,
        bootstrap: &bootstrap,
        batch: b,
        discount: x.discount,
        n: x.n_step,
    });

    // Q(x_t, a_t) for t < T, with gradient.
    let taken = x
        .online_q
        .narrow(0, 0, t)?
        .gather(&x.actions.narrow(0, 0, t)?.unsqueeze(D::Minus1)?, D::Minus1)?
        .squeeze(D::Minus1)?;
    let y = Tensor::from_vec(targets.targets.clone(), (t, b), device)?;
    let valid = Tensor::from_vec(targets.valid.clone(), (t, b), device)?;
    let mut w = x.weights.to_vec();
    w.resize(b, 1.0);
    let w = Tensor::from_vec(w, (1, b), device)?;
    let delta = (&taken - &y)?;
    let count = targets.valid.iter().sum::<f32>().max(1.0);
    let total = (delta.sqr()? * 0.5)?
        .mul(&valid)?
        .broadcast_mul(&w)?
        .sum_all()?
        .affine(1.0 / f64::from(count), 0.0)?;
    let td_loss = total.to_dtype(DType::F32)?.to_scalar::<f32>()?;

    let delta = delta.detach().flatten_all()?.to_vec1::<f32>()?;
    let mut priorities = Vec::with_capacity(b);
    let (mut abs_sum, mut per_seq) = (0f64, Vec::with_capacity(t));
    for i in 0..b {
        per_seq.clear();
        for k in 0..t {
            if targets.valid[k * b + i] > 0.0 {
                per_seq.push(delta[k * b + i].abs());
            }
        }
        abs_sum += per_seq.iter().map(|&d| f64::from(d)).sum::<f64>();
        priorities.push(mixed_priority(&per_seq, x.priority_eta) as f32);
    }
    Ok(R2d2Loss {
        total,
        td_loss,
        priorities,
        mean_abs_td: (abs_sum / f64::from(count)) as f32,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::learn::r2d2::targets::rescale;
    use candle_core::{Device, Var};

    /// Two sequences, three steps, two actions: the loss, its gradient and
    /// the priorities match a hand computation with `n = 1`, γ = 0.5.
    #[test]
    fn loss_gradient_and_priorities_match_a_hand_computation() {
        let d = Device::Cpu;
        // online [S=3, B=2, A=2]
        let online = Var::from_vec(
            vec![
                1.0f32, 2.0, 0.5, 0.0, 3.0, 1.0, 0.0, 4.0, 2.0, 2.0, 1.0, 0.0,
            ],
            (3, 2, 2),
            &d,
        )
        .unwrap();
        let target = Tensor::from_vec(
            vec![
                0.0f32, 0.0, 0.0, 0.0, 10.0, 20.0, 30.0, 40.0, 0.0, 0.0, 0.0, 0.0,
            ],
            (3, 2, 2),
            &d,
        )
        .unwrap();
        let actions = Tensor::from_vec(vec![1u32, 0, 0, 1, 0, 0], (3, 2), &d).unwrap();
        let rewards = Tensor::from_vec(vec![0f32, 0.0, 1.0, 2.0, 0.0, 0.0], (3, 2), &d).unwrap();
        let zeros = Tensor::zeros((3, 2), DType::U8, &d).unwrap();
        // Sequence 1 terminates at step 1: its t = 0 target is the reward only.
        let terminated = Tensor::from_vec(vec![0u8, 0, 0, 1, 0, 0], (3, 2), &d).unwrap();
        let out = r2d2_loss(&R2d2LossInputs {
            online_q: online.as_tensor(),
            target_q: &target,
            actions: &actions,
            rewards: &rewards,
            terminated: &terminated,
            truncated: &zeros,
            weights: &[1.0, 0.5],
            discount: 0.5,
            reward_scale: 1.0,
            n_step: 1,
            priority_eta: 0.9,
        })
        .unwrap();
        // t = 0, b = 0: Q = 2 (action 1); online argmax at step 1 is action 0
        // (3 > 1), target value 10 → y = h(1 + 0.5·h⁻¹(10)).
        let inv = crate::learn::r2d2::targets::rescale_inverse;
        let y00 = rescale(1.0 + 0.5 * inv(10.0)) as f32;
        // t = 0, b = 1: Q = 0.5 (action 0), terminal → y = h(2).
        let y01 = rescale(2.0) as f32;
        // t = 1, b = 0: Q = 3 (action 0); step 2 argmax action 0 (2 ≥ 2,
        // first wins), target 0 → y = h(0) = 0.
        // t = 1, b = 1: Q = 4 (action 1); step 2 argmax action 0, target 0,
        // reward 0 → y = 0.
        let d00 = 2.0 - y00;
        let d01 = 0.5 - y01;
        let (d10, d11) = (3.0f32, 4.0f32);
        let want =
            (0.5 * d00 * d00 + 0.5 * 0.5 * d01 * d01 + 0.5 * d10 * d10 + 0.5 * 0.5 * d11 * d11)
                / 4.0;
        assert!(
            (out.td_loss - want).abs() < 1e-5,
            "{} vs {want}",
            out.td_loss
        );
        let p0 = 0.9 * d00.abs().max(d10.abs()) + 0.1 * (d00.abs() + d10.abs()) / 2.0;
        let p1 = 0.9 * d01.abs().max(d11.abs()) + 0.1 * (d01.abs() + d11.abs()) / 2.0;
        assert!((out.priorities[0] - p0).abs() < 1e-5);
        assert!((out.priorities[1] - p1).abs() < 1e-5);
        // The gradient reaches only the taken actions of t < T, scaled by w.
        let grads = out.total.backward().unwrap();
        let g = grads
            .get(&online)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1::<f32>()
            .unwrap();
        let want_g = [
            0.0,
            d00 / 4.0,
            0.5 * d01 / 4.0,
            0.0,
            d10 / 4.0,
            0.0,
            0.0,
            0.5 * d11 / 4.0,
        ];
        for (k, (&got, &w)) in g.iter().zip(want_g.iter()).enumerate() {
            assert!((got - w).abs() < 1e-5, "grad {k}: {got} vs {w}");
        }
        assert!(g[8..].iter().all(|&v| v == 0.0), "the last step gets none");
    }
}
