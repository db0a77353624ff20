//! The policy's action distributions and their math, in one place: a
//! categorical over `A` discrete actions, or a diagonal Gaussian over `D`
//! floats.
//!
//! The policy head outputs one row of distribution parameters per state,
//! `[.., P]`:
//!
//! | kind | parameters (`P`) | action | log π(a\|x) | entropy H(π(·\|x)) |
//! |---|---|---|---|---|
//! | categorical | `A` logits `l` | index `a` | `l_a − log Σ_b exp l_b` | `−Σ_b π_b log π_b` |
//! | Gaussian | `D` means μ, then `D` log-stds log σ | `D` floats | `Σ_i [−(a_i−μ_i)²/(2σ_i²) − log σ_i − ½ log 2π]` | `Σ_i [½ + ½ log 2π + log σ_i]` |
//!
//! V-trace (IMPALA eq. 1) needs `log π(a_t|x_t)` of the policy being trained
//! and `log μ(a_t|x_t)` of the behaviour policy for the importance weights
//! `ρ_t = π/μ`, plus the entropy for the bonus. Both policies are evaluated
//! by the same [`Distribution`] code from their stored parameters, so an
//! on-policy step has `ρ_t = 1` exactly.
//!
//! The Gaussian's actions are the policy's *unclipped* samples
//! `a = μ + σ ε`, `ε ~ N(0, I)`: actors clip them to the env's bounds before
//! stepping, and the learner trains on what it sampled (CleanRL's and
//! Stable-Baselines3's choice; a clipped action would have a point mass at
//! the bound that the density above does not describe). Its σ is a learned,
//! state-independent parameter (`log_std`, `[D]`) clamped to
//! [`LOG_STD_MIN`]`..=`[`LOG_STD_MAX`].
//!
//! Cost: the categorical one log-softmax over `[.., A]`; the Gaussian a few
//! element-wise ops over `[.., D]`. Both reduce over the last axis.
use candle_core::{DType, Error, Result, Tensor, D};
use seed_shared::ActionSpace;

/// ½ log 2π.
pub const HALF_LOG_TWO_PI: f64 = 0.918_938_533_204_672_8;

/// Smallest log σ the Gaussian head gives (σ ≈ 0.0067): keeps `1/σ²` and the
/// log-density finite once the policy has become nearly deterministic.
pub const LOG_STD_MIN: f32 = -5.0;
/// Largest log σ the Gaussian head gives (σ ≈ 7.4): an entropy bonus alone
/// cannot inflate σ without bound.
pub const LOG_STD_MAX: f32 = 2.0;
/// Initial log σ of the Gaussian head: σ = 1, which spans Pendulum's torque
/// range `[-2, 2]` within two standard deviations at the start.
pub const LOG_STD_INIT: f32 = 0.0;

/// Which distribution the policy head parameterises, and over how many
/// actions or floats. Recorded in [`ModelConfig`](super::ModelConfig), so in
/// every checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActionDistribution {
    /// π(a|x) = softmax(logits(x))_a over `num_actions` actions.
    Categorical { num_actions: usize },
    /// π(a|x) = Π_i N(a_i; μ_i(x), σ_i²) over `dim` floats; σ does not
    /// depend on the state.
    Gaussian { dim: usize },
}

impl ActionDistribution {
    /// The distribution for an env's action space: categorical for
    /// `Discrete(n)`, a Gaussian over the box's floats.
    pub fn for_space(space: &ActionSpace) -> Self {
        match space {
            ActionSpace::Discrete(n) => ActionDistribution::Categorical {
                num_actions: *n as usize,
            },
            ActionSpace::Box { .. } => ActionDistribution::Gaussian { dim: space.dim() },
        }
    }

    /// `P`: distribution parameters per state (the policy head's width):
    /// `A` logits, or `D` means then `D` log-stds.
    pub fn param_width(&self) -> usize {
        match *self {
            ActionDistribution::Categorical { num_actions } => num_actions,
            ActionDistribution::Gaussian { dim } => 2 * dim,
        }
    }

    /// Floats in one continuous action (`D`); 0 for a categorical, whose
    /// action is one index.
    pub fn continuous_dim(&self) -> usize {
        match *self {
            ActionDistribution::Categorical { .. } => 0,
            ActionDistribution::Gaussian { dim } => dim,
        }
    }

    pub fn is_gaussian(&self) -> bool {
        matches!(self, ActionDistribution::Gaussian { .. })
    }

    /// The distribution with parameters `params` (`[.., P]`, f32).
    pub fn over(&self, params: &Tensor) -> Result<Distribution> {
        let p = params.dim(D::Minus1)?;
        if p != self.param_width() {
            return Err(Error::Msg(format!(
                "{self}: distribution parameters have {p} columns, expected {}",
                self.param_width()
            )));
        }
        Ok(match *self {
            ActionDistribution::Categorical { .. } => Distribution::Categorical {
                log_policy: candle_nn::ops::log_softmax(params, D::Minus1)?,
            },
            ActionDistribution::Gaussian { dim } => Distribution::Gaussian {
                mean: params.narrow(D::Minus1, 0, dim)?,
                log_std: params.narrow(D::Minus1, dim, dim)?,
            },
        })
    }
}

impl std::fmt::Display for ActionDistribution {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ActionDistribution::Categorical { num_actions } => {
                write!(f, "categorical over {num_actions} actions")
            }
            ActionDistribution::Gaussian { dim } => write!(f, "Gaussian over {dim} floats"),
        }
    }
}

/// A batch of distributions `[..]`, one per state, ready to score actions.
#[derive(Debug, Clone)]
pub enum Distribution {
    /// `log_policy`: `[.., A]`, log π(·|x) (log-softmax of the logits).
    Categorical { log_policy: Tensor },
    /// `mean`, `log_std`: `[.., D]` each.
    Gaussian { mean: Tensor, log_std: Tensor },
}

impl Distribution {
    /// log π(a|x), `[..]`. `actions`: `[..]` integer indices (categorical)
    /// or `[.., D]` f32 (Gaussian). Differentiable in the parameters.
    pub fn log_prob(&self, actions: &Tensor) -> Result<Tensor> {
        match self {
            Distribution::Categorical { log_policy } => {
                if !matches!(actions.dtype(), DType::U32 | DType::I64 | DType::U8) {
                    return Err(Error::Msg(format!(
                        "categorical log_prob: actions must be an integer tensor, got {:?}",
                        actions.dtype()
                    )));
                }
                let index = actions.contiguous()?.unsqueeze(D::Minus1)?;
                log_policy.gather(&index, D::Minus1)?.squeeze(D::Minus1)
            }
            Distribution::Gaussian { mean, log_std } => {
                if actions.shape() != mean.shape() {
                    return Err(Error::UnexpectedShape {
                        msg: "Gaussian log_prob: actions".to_string(),
                        expected: mean.shape().clone(),
                        got: actions.shape().clone(),
                    });
                }
                // z = (a − μ) / σ; per float −½ z² − log σ − ½ log 2π.
                let z = ((actions - mean)? * log_std.neg()?.exp()?)?;
                let per_float = ((z.sqr()? * -0.5)? - log_std)?;
                let dim = mean.dim(D::Minus1)?;
                per_float.sum(D::Minus1)? - HALF_LOG_TWO_PI * dim as f64
            }
        }
    }

    /// H(π(·|x)) in nats, `[..]`. Differentiable in the parameters.
    pub fn entropy(&self) -> Result<Tensor> {
        match self {
            Distribution::Categorical { log_policy } => {
                (log_policy.exp()? * log_policy)?.sum(D::Minus1)?.neg()
            }
            Distribution::Gaussian { log_std, .. } => {
                let dim = log_std.dim(D::Minus1)?;
                log_std.sum(D::Minus1)? + (0.5 + HALF_LOG_TWO_PI) * dim as f64
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Var};
    use proptest::prelude::*;

    fn gaussian(dim: usize) -> ActionDistribution {
        ActionDistribution::Gaussian { dim }
    }

    /// `[B, 2D]` parameters from per-row means and log-stds.
    fn params(mean: &[&[f32]], log_std: &[&[f32]]) -> Tensor {
        let rows: Vec<f32> = mean
            .iter()
            .zip(log_std)
            .flat_map(|(m, s)| m.iter().chain(s.iter()).copied())
            .collect();
        let p = rows.len() / mean.len();
        Tensor::from_vec(rows, (mean.len(), p), &Device::Cpu).unwrap()
    }

    /// The paper's sum, in f64: Σ_i [−(a_i−μ_i)²/(2σ_i²) − log σ_i − ½ log 2π].
    fn reference_log_prob(a: &[f64], mean: &[f64], log_std: &[f64]) -> f64 {
        let two_pi = 2.0 * std::f64::consts::PI;
        a.iter()
            .zip(mean)
            .zip(log_std)
            .map(|((&a, &m), &s)| {
                let var = (2.0 * s).exp();
                -(a - m).powi(2) / (2.0 * var) - s - 0.5 * two_pi.ln()
            })
            .sum()
    }

    /// Σ_i [½ + ½ log 2π + log σ_i], in f64.
    fn reference_entropy(log_std: &[f64]) -> f64 {
        let two_pi = 2.0 * std::f64::consts::PI;
        log_std.iter().map(|s| 0.5 + 0.5 * two_pi.ln() + s).sum()
    }

    #[test]
    fn half_log_two_pi_is_right() {
        let want = 0.5 * (2.0 * std::f64::consts::PI).ln();
        assert!((HALF_LOG_TWO_PI - want).abs() < 1e-15);
    }

    #[test]
    fn gaussian_matches_hand_computed_values() -> Result<()> {
        // Standard normal at its mean: log N(0; 0, 1) = −½ log 2π = −0.9189385.
        // At a = 1: −0.5 − 0.9189385 = −1.4189385. σ = e (log σ = 1), a − μ = e:
        // −½ − 1 − 0.9189385 = −2.4189385. Two floats add up.
        let d = gaussian(1).over(&params(
            &[&[0.0], &[0.0], &[1.0]],
            &[&[0.0], &[0.0], &[1.0]],
        ))?;
        let a = Tensor::new(&[[0f32], [1.0], [1.0 + std::f32::consts::E]], &Device::Cpu)?;
        let lp = d.log_prob(&a)?.to_vec1::<f32>()?;
        for (got, want) in lp.iter().zip([-0.918_938_5, -1.418_938_5, -2.418_938_5]) {
            assert!((got - want).abs() < 1e-6, "{lp:?}");
        }
        // H(N(μ, 1)) = ½ + ½ log 2π = 1.4189385; H(N(μ, e²)) = 2.4189385.
        let h = d.entropy()?.to_vec1::<f32>()?;
        for (got, want) in h.iter().zip([1.418_938_5, 1.418_938_5, 2.418_938_5]) {
            assert!((got - want).abs() < 1e-6, "{h:?}");
        }

        let d2 = gaussian(2).over(&params(&[&[0.0, 1.0]], &[&[0.0, 1.0]]))?;
        let a2 = Tensor::new(&[[1f32, 1.0 + std::f32::consts::E]], &Device::Cpu)?;
        let lp2 = d2.log_prob(&a2)?.to_vec1::<f32>()?[0];
        assert!((lp2 - (-1.418_938_5 - 2.418_938_5)).abs() < 1e-5, "{lp2}");
        let h2 = d2.entropy()?.to_vec1::<f32>()?[0];
        assert!((h2 - (1.418_938_5 + 2.418_938_5)).abs() < 1e-5, "{h2}");
        Ok(())
    }

    #[test]
    fn categorical_matches_hand_computed_values() -> Result<()> {
        // Logits [0, ln 3]: π = [¼, ¾]; H = −(¼ ln ¼ + ¾ ln ¾) = 0.5623351.
        let logits = Tensor::new(&[[0f32, 3f32.ln()], [0.0, 3f32.ln()]], &Device::Cpu)?;
        let d = ActionDistribution::Categorical { num_actions: 2 }.over(&logits)?;
        let lp = d
            .log_prob(&Tensor::new(&[0u32, 1], &Device::Cpu)?)?
            .to_vec1::<f32>()?;
        assert!((lp[0] - 0.25f32.ln()).abs() < 1e-6, "{lp:?}");
        assert!((lp[1] - 0.75f32.ln()).abs() < 1e-6, "{lp:?}");
        let h = d.entropy()?.to_vec1::<f32>()?;
        assert!((h[0] - 0.562_335_1).abs() < 1e-6, "{h:?}");
        assert!(d
            .log_prob(&Tensor::new(&[0f32, 1.0], &Device::Cpu)?)
            .is_err());
        Ok(())
    }

    #[test]
    fn wrong_widths_and_shapes_are_errors() -> Result<()> {
        let p = params(&[&[0.0, 0.0]], &[&[0.0, 0.0]]);
        assert!(gaussian(1).over(&p).is_err(), "4 columns for D = 1");
        let d = gaussian(2).over(&p)?;
        let short = Tensor::zeros((1, 1), DType::F32, &Device::Cpu)?;
        let err = d.log_prob(&short).unwrap_err();
        assert!(err.to_string().contains("actions"), "{err}");
        Ok(())
    }

    #[test]
    fn gradient_flows_into_the_mean_and_the_log_std() -> Result<()> {
        // d/dμ log N(a; μ, σ²) = (a − μ)/σ²; d/dlog σ = (a − μ)²/σ² − 1.
        let mean = Var::new(&[[0.5f32, -1.0]], &Device::Cpu)?;
        let log_std = Var::new(&[[0.0f32, 0.5f32.ln()]], &Device::Cpu)?;
        let p = Tensor::cat(&[mean.as_tensor(), log_std.as_tensor()], 1)?;
        let a = Tensor::new(&[[1.5f32, -1.0]], &Device::Cpu)?;
        let grads = gaussian(2).over(&p)?.log_prob(&a)?.sum_all()?.backward()?;
        let gm = grads
            .get(mean.as_tensor())
            .ok_or_else(|| Error::Msg("no gradient for the mean".into()))?
            .to_vec2::<f32>()?;
        let gs = grads
            .get(log_std.as_tensor())
            .ok_or_else(|| Error::Msg("no gradient for the log-std".into()))?
            .to_vec2::<f32>()?;
        assert!(
            (gm[0][0] - 1.0).abs() < 1e-6 && gm[0][1].abs() < 1e-6,
            "{gm:?}"
        );
        assert!(
            gs[0][0].abs() < 1e-6 && (gs[0][1] + 1.0).abs() < 1e-6,
            "{gs:?}"
        );

        // The entropy's gradient is 1 per log σ and 0 for the mean.
        let grads = gaussian(2).over(&p)?.entropy()?.sum_all()?.backward()?;
        let gs = grads
            .get(log_std.as_tensor())
            .ok_or_else(|| Error::Msg("no entropy gradient for the log-std".into()))?
            .to_vec2::<f32>()?;
        assert_eq!(gs, [[1.0, 1.0]]);
        if let Some(g) = grads.get(mean.as_tensor()) {
            assert_eq!(g.to_vec2::<f32>()?, [[0.0, 0.0]]);
        }
        Ok(())
    }

    proptest! {
        /// log π and H of random diagonal Gaussians against the f64 sums.
        #[test]
        fn gaussian_matches_the_f64_reference(
            rows in (1usize..5).prop_flat_map(|dim| proptest::collection::vec(
                proptest::collection::vec((-5.0f32..5.0, -5.0f32..2.0, -4.0f32..4.0), dim),
                1..6,
            )),
        ) {
            let dim = rows[0].len();
            let mut p = Vec::new();
            let mut a = Vec::new();
            for r in &rows {
                p.extend(r.iter().map(|x| x.0));
                p.extend(r.iter().map(|x| x.1));
                // a = μ + σ z, z within ±4 standard deviations.
                a.extend(r.iter().map(|x| x.0 + x.1.exp() * x.2));
            }
            let b = rows.len();
            let pt = Tensor::from_vec(p, (b, 2 * dim), &Device::Cpu).unwrap();
            let at = Tensor::from_vec(a.clone(), (b, dim), &Device::Cpu).unwrap();
            let d = gaussian(dim).over(&pt).unwrap();
            let lp = d.log_prob(&at).unwrap().to_vec1::<f32>().unwrap();
            let h = d.entropy().unwrap().to_vec1::<f32>().unwrap();
            for (i, r) in rows.iter().enumerate() {
                let mean: Vec<f64> = r.iter().map(|x| f64::from(x.0)).collect();
                let log_std: Vec<f64> = r.iter().map(|x| f64::from(x.1)).collect();
                let ai: Vec<f64> = a[i * dim..(i + 1) * dim].iter().map(|&x| f64::from(x)).collect();
                let want = reference_log_prob(&ai, &mean, &log_std);
                // f32 rounding of a − μ when σ is tiny next to |μ|: relative slack.
                let tol = 1e-4 * (1.0 + want.abs()) + 1e-3 * dim as f64;
                prop_assert!((f64::from(lp[i]) - want).abs() <= tol, "row {i}: {} vs {want}", lp[i]);
                let want_h = reference_entropy(&log_std);
                prop_assert!((f64::from(h[i]) - want_h).abs() <= 1e-5 * (1.0 + want_h.abs()));
            }
        }
    }
}
