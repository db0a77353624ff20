//! The math of R2D2 (Kapturowski et al., 2019), free of tensors: n-step
//! double Q-learning targets with the invertible value rescaling, the
//! η-mixed sequence priority, and the per-actor ε schedule of Ape-X.
//!
//! Host code on `[T+1, B]` time-major slices: an unroll's targets are a few
//! hundred numbers, cheaper to compute on the CPU than to launch as kernels.
//!
//! Steps follow the wire's step-aligned convention (see `transitions.rs`):
//! step `k` carries `reward_k` (received on the transition into `x_k`),
//! `terminated_k` (that transition ended the episode at a terminal state)
//! and `truncated_k` (`x_k` is the final observation of a time-limited
//! episode; the transition out of it is a dummy). Transition `t` goes
//! `x_t -> x_{t+1}`. Its n-step target walks `j = 1, 2, ...` and stops at the
//! first of: a termination at `t + j` (bootstrap 0), a truncation at `t + j`
//! or the unroll's end `t + j = T` or `j = n` (bootstrap from `x_{t+j}`):
//!
//! ```text
//! G_t = Σ_{k<m} γ^k reward_{t+k+1} + γ^m · (0 if terminated_{t+m} else h⁻¹(Q̄(x_{t+m}, argmax_a Q(x_{t+m}, a))))
//! y_t = h(G_t)
//! ```
//!
//! where `Q` is the online network, `Q̄` the target network (double Q), both
//! in rescaled space, and `h` the value rescaling below. Transitions out of a
//! truncated step are masked (`valid_t = 0`).

/// ε of the value rescaling `h` (R2D2's 10⁻³).
pub const RESCALE_EPSILON: f64 = 1e-3;

/// `h(x) = sign(x) (√(|x| + 1) − 1) + ε x`: squashes returns so one network
/// fits values of very different scales (Pohlen et al., 2018).
pub fn rescale(x: f64) -> f64 {
    x.signum() * ((x.abs() + 1.0).sqrt() - 1.0) + RESCALE_EPSILON * x
}

/// The inverse of [`rescale`]: `h⁻¹(x) = sign(x) (((√(1 + 4ε(|x| + 1 + ε)) − 1) / 2ε)² − 1)`.
pub fn rescale_inverse(x: f64) -> f64 {
    let e = RESCALE_EPSILON;
    let root = ((1.0 + 4.0 * e * (x.abs() + 1.0 + e)).sqrt() - 1.0) / (2.0 * e);
    x.signum() * (root * root - 1.0)
}

/// The double-Q bootstrap value of each step: the target network's value of
/// the online network's greedy action. `online` and `target` are
/// `[steps, A]` row-major; returns `[steps]`.
pub fn double_q_values(online: &[f32], target: &[f32], num_actions: usize) -> Vec<f32> {
    online
        .chunks_exact(num_actions)
        .zip(target.chunks_exact(num_actions))
        .map(|(q, q_bar)| {
            let best = q
                .iter()
                .enumerate()
                .fold((0, f32::NEG_INFINITY), |(bi, bv), (i, &v)| {
                    if v > bv {
                        (i, v)
                    } else {
                        (bi, bv)
                    }
                })
                .0;
            q_bar[best]
        })
        .collect()
}

/// One batch of unrolls, step-aligned `[T+1, B]` time-major slices.
#[derive(Debug, Clone, Copy)]
pub struct NStepInputs<'a> {
    pub rewards: &'a [f32],
    pub terminated: &'a [bool],
    pub truncated: &'a [bool],
    /// Double-Q bootstrap values in rescaled space ([`double_q_values`]).
    pub bootstrap: &'a [f32],
    /// `B`: unrolls in the batch.
    pub batch: usize,
    pub discount: f64,
    /// `n` of the n-step return (at least 1).
    pub n: usize,
}

/// n-step targets (rescaled) and validity masks, each `[T, B]`.
#[derive(Debug, Clone, PartialEq)]
pub struct NStepTargets {
    pub targets: Vec<f32>,
    pub valid: Vec<f32>,
}

/// The n-step double-Q targets of every transition (module docs).
///
/// # Panics
/// If the slices are not all `(T + 1) · B` long with `T ≥ 1` (a bug in
/// the collator, not outside data).
pub fn n_step_targets(x: &NStepInputs<'_>) -> NStepTargets {
    let b = x.batch.max(1);
    let steps = x.rewards.len() / b;
    assert!(
        steps >= 2 && steps * b == x.rewards.len(),
        "rewards must be [T+1, B]"
    );
    for len in [x.terminated.len(), x.truncated.len(), x.bootstrap.len()] {
        assert_eq!(len, x.rewards.len(), "every input must be [T+1, B]");
    }
    let t_len = steps - 1;
    let n = x.n.max(1);
    let at = |k: usize, i: usize| k * b + i;
    let mut targets = vec![0f32; t_len * b];
    let mut valid = vec![0f32; t_len * b];
    for t in 0..t_len {
        for i in 0..b {
            if x.truncated[at(t, i)] {
                continue; // a dummy action: masked, target unused
            }
            valid[at(t, i)] = 1.0;
            let (mut g, mut scale) = (0.0f64, 1.0f64);
            for j in 1..=n {
                let s = t + j;
                g += scale * f64::from(x.rewards[at(s, i)]);
                if x.terminated[at(s, i)] {
                    break;
                }
                scale *= x.discount;
                if j == n || s == t_len || x.truncated[at(s, i)] {
                    g += scale * rescale_inverse(f64::from(x.bootstrap[at(s, i)]));
                    break;
                }
            }
            targets[at(t, i)] = rescale(g) as f32;
        }
    }
    NStepTargets { targets, valid }
}

/// R2D2's sequence priority from its absolute TD errors:
/// `η · max|δ| + (1 − η) · mean|δ|` (η = 0.9 in the paper). 0 for none.
pub fn mixed_priority(abs_td: &[f32], eta: f64) -> f64 {
    if abs_td.is_empty() {
        return 0.0;
    }
    let max = abs_td.iter().fold(0f32, |m, &d| m.max(d.abs()));
    let mean = abs_td.iter().map(|d| f64::from(d.abs())).sum::<f64>() / abs_td.len() as f64;
    eta * f64::from(max) + (1.0 - eta) * mean
}

/// Ape-X's per-slot ε (applied by inference, which picks the actions).
pub use crate::infer::exploration::epsilon_for_slot;

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The closed form of the module docs, in f64, written as a sum.
    fn reference(x: &NStepInputs<'_>, t: usize, i: usize) -> Option<f64> {
        let b = x.batch;
        let t_len = x.rewards.len() / b - 1;
        if x.truncated[t * b + i] {
            return None;
        }
        // m: steps until the window stops.
        let mut m = 1;
        while m < x.n
            && t + m < t_len
            && !x.terminated[(t + m) * b + i]
            && !x.truncated[(t + m) * b + i]
        {
            m += 1;
        }
        let g: f64 = (0..m)
            .map(|k| x.discount.powi(k as i32) * f64::from(x.rewards[(t + k + 1) * b + i]))
            .sum();
        let s = (t + m) * b + i;
        let boot = if x.terminated[s] {
            0.0
        } else {
            rescale_inverse(f64::from(x.bootstrap[s]))
        };
        Some(rescale(g + x.discount.powi(m as i32) * boot))
    }

    #[test]
    fn rescaling_is_inverted_to_1e_5_over_a_wide_range() {
        let mut x = -1e6f64;
        while x <= 1e6 {
            for v in [x, x / 1e3, x / 1e6] {
                let back = rescale_inverse(rescale(v));
                assert!((back - v).abs() <= 1e-5 * v.abs().max(1.0), "{v}: {back}");
                let fwd = rescale(rescale_inverse(v / 1e3));
                assert!((fwd - v / 1e3).abs() <= 1e-5 * (v / 1e3).abs().max(1.0));
            }
            x += 997.3;
        }
        assert_eq!(rescale(0.0), 0.0);
        assert!((rescale(3.0) - (1.0 + 3e-3)).abs() < 1e-12);
    }

    #[test]
    fn double_q_takes_the_target_value_of_the_online_argmax() {
        let online = [0.1, 0.9, 0.3, 5.0, 1.0, 2.0];
        let target = [7.0, 8.0, 9.0, -1.0, -2.0, -3.0];
        assert_eq!(double_q_values(&online, &target, 3), vec![8.0, -1.0]);
    }

    #[test]
    fn terminal_and_truncated_steps_end_the_window_differently() {
        // One unroll, T = 4, n = 3, γ = 0.5; rewards into steps 1..4.
        let rewards = [9.0, 1.0, 2.0, 4.0, 8.0];
        let boot = [rescale(10.0) as f32; 5];
        let run = |terminated: [bool; 5], truncated: [bool; 5]| {
            n_step_targets(&NStepInputs {
                rewards: &rewards,
                terminated: &terminated,
                truncated: &truncated,
                bootstrap: &boot,
                batch: 1,
                discount: 0.5,
                n: 3,
            })
        };
        let close =
            |y: f32, g: f64| assert!((f64::from(y) - rescale(g)).abs() < 1e-5, "{y} vs {g}");
        // Termination at step 2: t = 0 gets 1 + 0.5·2, no bootstrap.
        let r = run([false, false, true, false, false], [false; 5]);
        close(r.targets[0], 1.0 + 0.5 * 2.0);
        // Truncation at step 2: t = 0 bootstraps from x_2; t = 2 is masked.
        let r = run([false; 5], [false, false, true, false, false]);
        close(r.targets[0], 1.0 + 0.5 * 2.0 + 0.25 * 10.0);
        assert_eq!(r.valid, vec![1.0, 1.0, 0.0, 1.0]);
        // Neither: t = 0 is a full 3-step window; t = 3 ends at the unroll's end.
        let r = run([false; 5], [false; 5]);
        close(r.targets[0], 1.0 + 0.5 * 2.0 + 0.25 * 4.0 + 0.125 * 10.0);
        close(r.targets[3], 8.0 + 0.5 * 10.0);
    }

    #[test]
    fn mixed_priority() {
        assert!(
            (super::mixed_priority(&[1.0, -3.0, 2.0], 0.9) - (0.9 * 3.0 + 0.1 * 2.0)).abs() < 1e-12
        );
        assert_eq!(super::mixed_priority(&[], 0.9), 0.0);
    }

    proptest! {
        #[test]
        fn n_step_targets_match_the_closed_form(
            t_len in 1usize..7,
            batch in 1usize..4,
            n in 1usize..6,
            discount in 0.0f64..1.0,
            seed in proptest::collection::vec((-5.0f32..5.0, 0u8..10, -20.0f32..20.0), 32),
        ) {
            let len = (t_len + 1) * batch;
            let pick = |k: usize| seed[k % seed.len()];
            let rewards: Vec<f32> = (0..len).map(|k| pick(k).0).collect();
            let terminated: Vec<bool> = (0..len).map(|k| pick(k + 3).1 == 0).collect();
            let truncated: Vec<bool> = (0..len).map(|k| pick(k + 7).1 == 1).collect();
            let bootstrap: Vec<f32> = (0..len).map(|k| pick(k + 11).2).collect();
            let x = NStepInputs {
                rewards: &rewards,
                terminated: &terminated,
                truncated: &truncated,
                bootstrap: &bootstrap,
                batch,
                discount,
                n,
            };
            let got = n_step_targets(&x);
            for t in 0..t_len {
                for i in 0..batch {
                    let k = t * batch + i;
                    match reference(&x, t, i) {
                        None => prop_assert_eq!(got.valid[k], 0.0),
                        Some(want) => {
                            prop_assert_eq!(got.valid[k], 1.0);
                            let y = f64::from(got.targets[k]);
                            prop_assert!((y - want).abs() <= 1e-4 * want.abs().max(1.0), "t={} i={} {} vs {}", t, i, y, want);
                        }
                    }
                }
            }
        }
    }
}
