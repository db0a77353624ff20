//! The IMPALA actor-critic loss over a batch of unrolls.
//!
//! Given the model run over all `T + 1` steps of `B` unrolls (the target
//! policy's distribution parameters `[T+1, B, P]`, values `[T+1, B]`,
//! `values[T]` being the bootstrap), the parameters of the behaviour policy
//! the actions were sampled from, the actions and the step flags, the loss
//! is (Espeholt et al. 2018, section 4.2):
//!
//! ```text
//! pg_loss    = − mean_valid( pg_advantages_t · log π(a_t|x_t) )
//! value_loss =   mean_valid( ½ (vs_t − V(x_t))² )
//! entropy    =   mean_valid( H(π(·|x_t)) )
//! total      = pg_loss + baseline_cost · value_loss − entropy_cost · entropy
//! ```
//!
//! `log π(a_t|x_t)`, `log μ(a_t|x_t)` and `H` come from
//! [`crate::model::distribution`]: for a categorical policy the log-softmax
//! of the logits and `−Σ_a π log π`; for a diagonal Gaussian the log-density
//! of the (unclipped) sampled action and `Σ_i (½ + ½ log 2π + log σ_i)`.
//!
//! with `vs` and `pg_advantages` from [`vtrace`] (no gradient
//! through them; rewards are multiplied by `reward_scale` first) and
//! `mean_valid(f) = Σ_{t,b} valid_t f_t / max(1, Σ_{t,b} valid_t)`:
//! a mean over the transitions actually trained on. A mean rather than IMPALA's
//! sum keeps the learning rate independent of `T` and `B`; dividing by the valid
//! count rather than `T·B` makes every logged number a true per-transition mean.
//! Masked transitions (a dummy action after a truncated final observation)
//! contribute nothing to any term or gradient; see [`Transitions`].
//!
//! With `ratio_clip` ε > 0 the policy term is PPO's clipped surrogate
//! (Schulman et al. 2017, eq. 7) on V-trace's targets, as IMPACT does
//! (Luo et al. 2020) with a target network, here with μ as the reference:
//!
//! ```text
//! r_t     = π(a_t|x_t) / μ(a_t|x_t)                        (gradient through π)
//! Â_t     = r_t' + γ_t vs_{t+1} − V(x_t)                   (r_t' the reward; no ρ̄_pg weight:
//!                                                            V-trace's `advantages`)
//! pg_loss = − mean_valid( min(r_t Â_t, clip(r_t, 1 − ε, 1 + ε) Â_t) )
//! ```
//!
//! Its gradient is `r_t Â_t ∇ log π` (IMPALA's, with `ρ̄_pg = ∞`) until the
//! ratio has moved ε past 1 in the advantage's direction, then 0: an
//! unroll sampled several times from the replay cannot push one action
//! further at every look, one way a policy's entropy collapses. The value
//! targets keep V-trace's ρ̄ and c̄.
//!
//! With `normalize_advantages` the policy term (either form) takes `Â`
//! standardised over the batch's valid transitions, `(Â − mean) / (std +
//! 1e-8)`, in place of `Â` (IMPALA's form keeps its `ρ^pg` weight on it),
//! as PPO implementations do per minibatch: the policy gradient's scale
//! then no longer follows the game's reward scale, so the same
//! `entropy_cost` balances it on a game scoring 1 per episode and on one
//! scoring 60. The value loss keeps V-trace's unnormalised targets.
//!
//! Cost: two log-probabilities over `[T, B, P]` (log-softmaxes for a
//! categorical), V-trace (`O(T·B)`), a few reductions (the clipped
//! surrogate and the standardisation add a few elementwise ops and two
//! reductions over `[T, B]`), and one
//! device-to-host copy of five scalars for the logged values.
use candle_core::{DType, Error, Result, Tensor};

use super::config::ImpalaLossConfig;
use super::targets::{vtrace, VTraceInputs};
use super::transitions::Transitions;
use crate::model::ActionDistribution;

/// One batch of unrolls, step-aligned (`T + 1` steps, time-major), all on one device.
#[derive(Debug, Clone, Copy)]
pub struct ImpalaLossInputs<'a> {
    /// The kind of both policies: categorical (`P = A` logits) or Gaussian
    /// (`P = 2D`: `D` means, then `D` log-stds).
    pub distribution: ActionDistribution,
    /// Distribution parameters of the policy being trained, π,
    /// `[T+1, B, P]`, with gradient.
    pub target_params: &'a Tensor,
    /// `V(x_k)`, `[T+1, B]`, with gradient; `values[T]` is the bootstrap.
    pub values: &'a Tensor,
    /// Distribution parameters of the behaviour policy μ the actions were
    /// sampled from, `[T+1, B, P]`; row `T` unused.
    pub behaviour_params: &'a Tensor,
    /// Action taken at each step; row `T` unused. Categorical: `[T+1, B]`,
    /// `u32` or `i64`. Gaussian: `[T+1, B, D]` `f32`, the unclipped samples.
    pub actions: &'a Tensor,
    /// `reward_k`, received on the transition into `obs_k`, `[T+1, B]`, `f32`.
    pub rewards: &'a Tensor,
    /// `terminated_k ∈ {0, 1}`, `[T+1, B]`, any dtype.
    pub terminated: &'a Tensor,
    /// `truncated_k ∈ {0, 1}`, `[T+1, B]`, any dtype.
    pub truncated: &'a Tensor,
}

/// The loss to differentiate, and its parts as plain numbers for logging.
#[derive(Debug, Clone)]
pub struct ImpalaLoss {
    /// Scalar to call `backward()` on.
    pub total: Tensor,
    /// `train/pg_loss`: policy-gradient term.
    pub pg_loss: f32,
    /// `train/value_loss`: `½ mean_valid (vs − V)²`, before `baseline_cost`.
    pub value_loss: f32,
    /// `train/entropy`: mean policy entropy in nats, before `entropy_cost`.
    pub entropy: f32,
    /// `train/mean_clipped_rho`: mean of `min(ρ̄, π/μ)` over valid transitions.
    pub mean_clipped_rho: f32,
    /// `train/mean_pg_advantage`: mean V-trace advantage over valid transitions.
    pub mean_pg_advantage: f32,
}

/// Computes the IMPALA loss for one batch of unrolls; see the module docs.
///
/// Errors if the shapes disagree (`[T+1, B, P]` parameters, `[T+1, B]` for
/// the rest but Gaussian actions, `[T+1, B, D]`; `T ≥ 1`), if categorical
/// `actions` are not an integer tensor, or if such an action is out of range.
pub fn impala_loss(inputs: &ImpalaLossInputs<'_>, config: &ImpalaLossConfig) -> Result<ImpalaLoss> {
    check_inputs(inputs)?;

    // 1. Per-transition rewards, discounts and masks, `[T, B]`.
    let scaled_rewards;
    let rewards = if config.reward_scale == 1.0 {
        inputs.rewards
    } else {
        scaled_rewards = inputs.rewards.affine(f64::from(config.reward_scale), 0.0)?;
        &scaled_rewards
    };
    let transitions = Transitions::from_steps(
        rewards,
        inputs.terminated,
        inputs.truncated,
        config.discount,
    )?;
    let t_len = transitions.rewards.dim(0)?;

    // 2. π(·|x_t) and μ(·|x_t) for t = 0..T-1; log π(a_t|x_t), log μ(a_t|x_t): [T, B].
    let target_policy = inputs
        .distribution
        .over(&inputs.target_params.narrow(0, 0, t_len)?)?;
    let behaviour_policy = inputs
        .distribution
        .over(&inputs.behaviour_params.detach().narrow(0, 0, t_len)?)?;
    let actions = inputs.actions.narrow(0, 0, t_len)?;
    let target_log_probs = target_policy.log_prob(&actions)?;
    let behaviour_log_probs = behaviour_policy.log_prob(&actions)?;

    // 3. V-trace targets and advantages, no gradient through them.
    let values = inputs.values.narrow(0, 0, t_len)?;
    let returns = vtrace(
        &VTraceInputs {
            behaviour_log_probs: &behaviour_log_probs,
            target_log_probs: &target_log_probs.detach(),
            discounts: &transitions.discounts,
            rewards: &transitions.rewards,
            values: &values.detach(),
            bootstrap_value: &inputs.values.get(t_len)?.detach(),
            valid: &transitions.valid,
        },
        &config.clip,
    )?;

    // 4. The three terms, each a mean over the valid transitions.
    let valid = &transitions.valid;
    // 1 / max(1, Σ valid) as a [1] tensor: stays on device, no host sync.
    let inverse_count = valid.sum_all()?.maximum(1.0)?.recip()?.reshape(1)?;
    let mean_valid = |per_transition: &Tensor| -> Result<Tensor> {
        (per_transition * valid)?
            .sum_all()?
            .reshape(1)?
            .mul(&inverse_count)
    };
    // Â for the policy term, standardised over the valid transitions when
    // asked (a `Tensor` clone shares its storage: no copy).
    let advantages = if config.normalize_advantages {
        standardise(&returns.advantages, valid, &mean_valid)?
    } else {
        returns.advantages.clone()
    };
    let pg_loss = if config.ratio_clip > 0.0 {
        let surrogate = clipped_surrogate(
            &target_log_probs,
            &behaviour_log_probs,
            &advantages,
            valid,
            config.ratio_clip,
        )?;
        mean_valid(&surrogate)?.neg()?
    } else if config.normalize_advantages {
        // IMPALA's term on the standardised Â, weighted by ρ^pg as
        // V-trace weighs its own: min(ρ̄_pg, π/μ), 1 where masked.
        let pg_rhos = masked_ratio(&target_log_probs.detach(), &behaviour_log_probs, valid)?
            .clamp(0.0, f64::from(config.clip.pg_rho))?;
        mean_valid(&((advantages * pg_rhos)? * &target_log_probs)?)?.neg()?
    } else {
        mean_valid(&(&returns.pg_advantages * &target_log_probs)?)?.neg()?
    };
    let value_errors = (&returns.vs - &values)?;
    let value_loss = mean_valid(&value_errors.sqr()?)?.affine(0.5, 0.0)?;
    let entropy = mean_valid(&target_policy.entropy()?)?;
    let total = ((&pg_loss + value_loss.affine(f64::from(config.baseline_cost), 0.0)?)?
        - entropy.affine(f64::from(config.entropy_cost), 0.0)?)?
    .squeeze(0)?;

    // 5. The logged figures, in one device-to-host transfer.
    let logged = Tensor::cat(
        &[
            &pg_loss,
            &value_loss,
            &entropy,
            &mean_valid(&returns.clipped_rhos)?,
            &mean_valid(&returns.pg_advantages)?,
        ],
        0,
    )?
    .detach()
    .to_vec1::<f32>()?;
    let [pg_loss, value_loss, entropy, mean_clipped_rho, mean_pg_advantage] = logged[..] else {
        return Err(Error::Msg(
            "impala_loss: expected five logged scalars".to_string(),
        ));
    };
    Ok(ImpalaLoss {
        total,
        pg_loss,
        value_loss,
        entropy,
        mean_clipped_rho,
        mean_pg_advantage,
    })
}

/// `(Â − mean_valid Â) / (std_valid Â + 1e-8)` per transition, `[T, B]`,
/// 0 where masked: the module docs' `normalize_advantages`. The std is the
/// population one over the valid transitions; a batch whose advantages are
/// all equal comes out 0, not NaN.
fn standardise(
    advantages: &Tensor,
    valid: &Tensor,
    mean_valid: &dyn Fn(&Tensor) -> Result<Tensor>,
) -> Result<Tensor> {
    let centred = advantages.broadcast_sub(&mean_valid(advantages)?)?;
    let std = mean_valid(&centred.sqr()?)?.sqrt()?;
    centred.broadcast_div(&(std + 1e-8)?)? * valid
}

/// PPO's `min(r Â, clip(r, 1 − ε, 1 + ε) Â)` per transition, `[T, B]`, with
/// gradient through `target_log_probs` only (the module docs); `advantages`
/// is V-trace's `Â`. A masked transition's ratio is taken as 1, so a dummy
/// action whose log-probability underflowed cannot make `∞ · 0` in
/// [`impala_loss`]'s mean.
fn clipped_surrogate(
    target_log_probs: &Tensor,
    behaviour_log_probs: &Tensor,
    advantages: &Tensor,
    valid: &Tensor,
    epsilon: f32,
) -> Result<Tensor> {
    let ratio = masked_ratio(target_log_probs, behaviour_log_probs, valid)?;
    let eps = f64::from(epsilon);
    let unclipped = (&ratio * advantages)?;
    let clipped = (ratio.clamp(1.0 - eps, 1.0 + eps)? * advantages)?;
    unclipped.minimum(&clipped)
}

/// `π/μ` per transition, `[T, B]`, taken as 1 where masked: a dummy
/// action whose log-probability underflowed cannot make `∞ · 0` in a mean.
/// Gradient through `target_log_probs` unless it is detached.
fn masked_ratio(
    target_log_probs: &Tensor,
    behaviour_log_probs: &Tensor,
    valid: &Tensor,
) -> Result<Tensor> {
    valid
        .ne(0.0)?
        .where_cond(
            &(target_log_probs - behaviour_log_probs)?,
            &target_log_probs.zeros_like()?,
        )?
        .exp()
}

/// The shapes and dtypes [`impala_loss`] needs (its doc's errors), each
/// mismatch named by its field.
fn check_inputs(inputs: &ImpalaLossInputs<'_>) -> Result<()> {
    let (steps, batch, _params) = inputs.target_params.dims3()?;
    if inputs.behaviour_params.shape() != inputs.target_params.shape() {
        return Err(Error::UnexpectedShape {
            msg: "impala_loss: behaviour_params".to_string(),
            expected: inputs.target_params.shape().clone(),
            got: inputs.behaviour_params.shape().clone(),
        });
    }
    let step_shape = candle_core::Shape::from((steps, batch));
    let action_shape = match inputs.distribution {
        ActionDistribution::Categorical { .. } => step_shape.clone(),
        ActionDistribution::Gaussian { dim } => candle_core::Shape::from((steps, batch, dim)),
    };
    if inputs.actions.shape() != &action_shape {
        return Err(Error::UnexpectedShape {
            msg: "impala_loss: actions".to_string(),
            expected: action_shape,
            got: inputs.actions.shape().clone(),
        });
    }
    for (name, tensor) in [
        ("values", inputs.values),
        ("rewards", inputs.rewards),
        ("terminated", inputs.terminated),
        ("truncated", inputs.truncated),
    ] {
        if tensor.shape() != &step_shape {
            return Err(Error::UnexpectedShape {
                msg: format!("impala_loss: {name}"),
                expected: step_shape.clone(),
                got: tensor.shape().clone(),
            });
        }
    }
    let integer = matches!(inputs.actions.dtype(), DType::U32 | DType::I64 | DType::U8);
    if integer == inputs.distribution.is_gaussian() {
        return Err(Error::Msg(format!(
            "impala_loss: actions of a {} must be {}, got {:?}",
            inputs.distribution,
            if integer { "f32" } else { "an integer tensor" },
            inputs.actions.dtype()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::distribution::HALF_LOG_TWO_PI;
    use candle_core::{Device, Var};

    struct Unroll {
        logits: Var,
        values: Var,
        actions: Tensor,
        rewards: Tensor,
        terminated: Tensor,
        truncated: Tensor,
    }

    impl Unroll {
        /// `[T+1, B, A]` logits and `[T+1, B]` columns from flat row-major data.
        fn new(
            logits: &[f32],
            values: &[f32],
            actions: &[u32],
            rewards: &[f32],
            truncated: &[u8],
            shape: (usize, usize, usize),
        ) -> Self {
            let (steps, batch, _) = shape;
            let device = Device::Cpu;
            Self {
                logits: Var::from_tensor(&Tensor::from_slice(logits, shape, &device).unwrap())
                    .unwrap(),
                values: Var::from_tensor(
                    &Tensor::from_slice(values, (steps, batch), &device).unwrap(),
                )
                .unwrap(),
                actions: Tensor::from_slice(actions, (steps, batch), &device).unwrap(),
                rewards: Tensor::from_slice(rewards, (steps, batch), &device).unwrap(),
                terminated: Tensor::zeros((steps, batch), DType::U8, &device).unwrap(),
                truncated: Tensor::from_slice(truncated, (steps, batch), &device).unwrap(),
            }
        }

        /// A categorical over the logits' last axis.
        fn distribution(&self) -> ActionDistribution {
            ActionDistribution::Categorical {
                num_actions: self.logits.as_tensor().dim(2).unwrap(),
            }
        }

        /// On-policy loss: the behaviour logits are the target logits.
        fn loss(&self, config: &ImpalaLossConfig) -> ImpalaLoss {
            let behaviour = self.logits.as_tensor().detach();
            self.loss_with_behaviour(&behaviour, config)
        }

        fn loss_with_behaviour(
            &self,
            behaviour_logits: &Tensor,
            config: &ImpalaLossConfig,
        ) -> ImpalaLoss {
            impala_loss(
                &ImpalaLossInputs {
                    distribution: self.distribution(),
                    target_params: self.logits.as_tensor(),
                    values: self.values.as_tensor(),
                    behaviour_params: behaviour_logits,
                    actions: &self.actions,
                    rewards: &self.rewards,
                    terminated: &self.terminated,
                    truncated: &self.truncated,
                },
                config,
            )
            .unwrap()
        }

        /// One plain gradient-descent step on the logits.
        fn descend_logits(&self, loss: &ImpalaLoss, lr: f64) {
            let grads = loss.total.backward().unwrap();
            let grad = grads.get(self.logits.as_tensor()).unwrap();
            let stepped = (self.logits.as_tensor() - grad.affine(lr, 0.0).unwrap()).unwrap();
            self.logits.set(&stepped).unwrap();
        }

        /// `[T+1, B, A]` log π.
        fn log_policy(&self) -> Vec<Vec<Vec<f32>>> {
            candle_nn::ops::log_softmax(self.logits.as_tensor(), candle_core::D::Minus1)
                .unwrap()
                .to_vec3()
                .unwrap()
        }
    }

    #[test]
    fn policy_gradient_raises_log_prob_of_advantaged_action() {
        // T = 1, B = 1, A = 2. Action 0 then a reward of 1, all values 0:
        // the advantage is 1 > 0, so descending the loss must make action 0 likelier.
        let unroll = Unroll::new(
            &[0.3, 0.1, 0.0, 0.0],
            &[0.0, 0.0],
            &[0, 0],
            &[0.0, 1.0],
            &[0, 0],
            (2, 1, 2),
        );
        let config = ImpalaLossConfig {
            entropy_cost: 0.0,
            ..ImpalaLossConfig::impala_paper()
        };
        let loss = unroll.loss(&config);
        assert!((loss.mean_pg_advantage - 1.0).abs() < 1e-6, "{loss:?}");
        assert!(
            (loss.mean_clipped_rho - 1.0).abs() < 1e-6,
            "on-policy ρ = 1: {loss:?}"
        );
        let before = unroll.log_policy()[0][0][0];
        unroll.descend_logits(&loss, 0.1);
        let after = unroll.log_policy()[0][0][0];
        assert!(after > before, "log π(a0) went {before} -> {after}");
    }

    #[test]
    fn policy_gradient_lowers_log_prob_of_disadvantaged_action() {
        let unroll = Unroll::new(
            &[0.3, 0.1, 0.0, 0.0],
            &[0.0, 0.0],
            &[0, 0],
            &[0.0, -1.0],
            &[0, 0],
            (2, 1, 2),
        );
        let config = ImpalaLossConfig {
            entropy_cost: 0.0,
            ..ImpalaLossConfig::impala_paper()
        };
        let loss = unroll.loss(&config);
        let before = unroll.log_policy()[0][0][0];
        unroll.descend_logits(&loss, 0.1);
        assert!(unroll.log_policy()[0][0][0] < before);
    }

    #[test]
    fn entropy_bonus_raises_entropy() {
        // Zero rewards and values give zero advantages: only the entropy term moves the logits.
        let unroll = Unroll::new(
            &[2.0, -1.0, 0.0, 0.0],
            &[0.0, 0.0],
            &[1, 0],
            &[0.0, 0.0],
            &[0, 0],
            (2, 1, 2),
        );
        let config = ImpalaLossConfig {
            entropy_cost: 0.1,
            ..ImpalaLossConfig::impala_paper()
        };
        let loss = unroll.loss(&config);
        assert_eq!(loss.mean_pg_advantage, 0.0);
        let before = loss.entropy;
        unroll.descend_logits(&loss, 1.0);
        let after = unroll.loss(&config).entropy;
        assert!(after > before, "entropy went {before} -> {after}");
    }

    #[test]
    fn value_loss_pulls_values_towards_vs() {
        let unroll = Unroll::new(
            &[0.0; 4],
            &[0.0, 0.0],
            &[0, 0],
            &[0.0, 1.0],
            &[0, 0],
            (2, 1, 2),
        );
        let loss = unroll.loss(&ImpalaLossConfig::impala_paper());
        // vs_0 = r_0 + γ V(x_1) = 1; value_loss = ½ (1 − 0)².
        assert!((loss.value_loss - 0.5).abs() < 1e-6, "{loss:?}");
        let grads = loss.total.backward().unwrap();
        let grad = grads
            .get(unroll.values.as_tensor())
            .unwrap()
            .to_vec2::<f32>()
            .unwrap();
        assert!(
            grad[0][0] < 0.0,
            "descending must raise V(x_0) towards 1: {grad:?}"
        );
        assert_eq!(grad[1][0], 0.0, "the bootstrap value gets no gradient");
    }

    #[test]
    fn masked_steps_contribute_nothing() {
        masked_steps_contribute_nothing_under(&ImpalaLossConfig::impala_paper());
    }

    #[test]
    fn masked_steps_contribute_nothing_to_the_clipped_surrogate() {
        masked_steps_contribute_nothing_under(&ImpalaLossConfig {
            ratio_clip: 0.2,
            ..ImpalaLossConfig::impala_paper()
        });
    }

    #[test]
    fn masked_steps_contribute_nothing_to_standardised_advantages() {
        for ratio_clip in [0.0, 0.2] {
            masked_steps_contribute_nothing_under(&ImpalaLossConfig {
                ratio_clip,
                normalize_advantages: true,
                ..ImpalaLossConfig::impala_paper()
            });
        }
    }

    /// The policy term's gradient on the logits of a `T = 3`, `B = 2`,
    /// `A = 3` off-policy batch whose rewards and values are all
    /// multiplied by `scale` (so every advantage is too).
    fn scaled_pg_gradient(scale: f32, config: &ImpalaLossConfig) -> Vec<f32> {
        let logits: Vec<f32> = (0..4 * 2 * 3)
            .map(|i| ((i * 7) % 5) as f32 * 0.3 - 0.5)
            .collect();
        let values = [0.1, 0.2, 0.3, -0.4, 0.5, 0.6, 0.7, 0.8].map(|v| v * scale);
        let rewards = [0.0, 0.0, 1.0, 0.5, 2.0, -1.0, 0.0, 1.0].map(|r| r * scale);
        let unroll = Unroll::new(
            &logits,
            &values,
            &[0, 1, 2, 0, 1, 2, 0, 1],
            &rewards,
            &[0; 8],
            (4, 2, 3),
        );
        let behaviour: Vec<f32> = logits.iter().map(|x| x * 0.5).collect();
        let behaviour = Tensor::from_slice(&behaviour, (4, 2, 3), &Device::Cpu).unwrap();
        let config = ImpalaLossConfig {
            entropy_cost: 0.0,
            baseline_cost: 0.0,
            ..*config
        };
        let loss = unroll.loss_with_behaviour(&behaviour, &config);
        let grads = loss.total.backward().unwrap();
        let grad = grads.get(unroll.logits.as_tensor()).unwrap();
        grad.flatten_all().unwrap().to_vec1::<f32>().unwrap()
    }

    #[test]
    fn standardised_advantages_make_the_policy_gradient_scale_free() {
        for ratio_clip in [0.0, 0.2] {
            let plain = ImpalaLossConfig {
                ratio_clip,
                ..ImpalaLossConfig::impala_paper()
            };
            let standardised = ImpalaLossConfig {
                normalize_advantages: true,
                ..plain
            };
            let small = scaled_pg_gradient(1.0, &standardised);
            assert!(small.iter().any(|&g| g.abs() > 1e-3), "{small:?}");
            assert_close(&scaled_pg_gradient(10.0, &standardised), &small);
            // Without it the gradient follows the rewards' scale.
            let plain_small = scaled_pg_gradient(1.0, &plain);
            let plain_large: Vec<f32> = scaled_pg_gradient(10.0, &plain)
                .iter()
                .map(|g| g / 10.0)
                .collect();
            assert_close(&plain_large, &plain_small);
            assert!(
                small
                    .iter()
                    .zip(&plain_small)
                    .any(|(a, b)| (a - b).abs() > 1e-3),
                "ratio_clip {ratio_clip}: standardising changed nothing"
            );
        }
    }

    #[test]
    fn impalas_term_weighs_standardised_advantages_by_clipped_rho() {
        // T = 1, B = 2, A = 2, values 0, so Â = the rewards 2 and 0.5:
        // standardised over two transitions they are +1 and −1. μ is
        // uniform; π(a) is σ(1) for env 0 (ρ = 1.46, clipped to 1) and
        // σ(−0.5) for env 1 (ρ = 0.76, kept).
        let unroll = Unroll::new(
            &[1.0, 0.0, 0.0, -0.5, 0.0, 0.0, 0.0, 0.0],
            &[0.0; 4],
            &[0, 1, 0, 0],
            &[0.0, 0.0, 2.0, 0.5],
            &[0; 4],
            (2, 2, 2),
        );
        let behaviour = Tensor::zeros((2, 2, 2), DType::F32, &Device::Cpu).unwrap();
        let loss = unroll.loss_with_behaviour(
            &behaviour,
            &ImpalaLossConfig {
                normalize_advantages: true,
                ..ImpalaLossConfig::impala_paper()
            },
        );
        let sigmoid = |x: f32| 1.0 / (1.0 + (-x).exp());
        let (pi0, pi1) = (sigmoid(1.0), sigmoid(-0.5));
        let rho1 = pi1 / 0.5;
        let want = -0.5 * (pi0.ln() - rho1 * pi1.ln());
        assert!(
            (loss.pg_loss - want).abs() < 1e-6,
            "{} vs {want}",
            loss.pg_loss
        );
    }

    #[test]
    fn standardised_advantages_have_mean_zero_on_policy() {
        // π = μ: the surrogate is r·Â with r = 1, so pg_loss is −mean(Â):
        // 0 once Â is standardised, not before.
        let unroll = Unroll::new(
            &[0.5, -0.2, 0.1, 0.9, 0.3, 0.0, 0.0, 0.0],
            &[0.3, -0.1, 0.2, 0.0],
            &[1, 0, 1, 0],
            &[0.0, 1.0, -0.5, 2.0],
            &[0; 4],
            (4, 1, 2),
        );
        let plain = ImpalaLossConfig {
            ratio_clip: 0.2,
            ..ImpalaLossConfig::impala_paper()
        };
        assert!(unroll.loss(&plain).pg_loss.abs() > 0.1);
        let standardised = unroll.loss(&ImpalaLossConfig {
            normalize_advantages: true,
            ..plain
        });
        assert!(standardised.pg_loss.abs() < 1e-6, "{standardised:?}");
        // Equal advantages standardise to 0, not to NaN.
        let flat = Unroll::new(
            &[0.4, -0.3, 0.0, 0.0],
            &[0.0; 2],
            &[0, 0],
            &[0.0; 2],
            &[0; 2],
            (2, 1, 2),
        );
        for ratio_clip in [0.0, 0.2] {
            let loss = flat.loss(&ImpalaLossConfig {
                ratio_clip,
                normalize_advantages: true,
                ..ImpalaLossConfig::impala_paper()
            });
            assert_eq!(loss.pg_loss, 0.0, "{loss:?}");
        }
    }

    fn masked_steps_contribute_nothing_under(config: &ImpalaLossConfig) {
        // T = 3, B = 2, A = 3. Env 0's step 1 is a truncated final observation:
        // its action is a dummy. Its logits and value get no gradient, and
        // changing the dummy action or its behaviour logits changes nothing.
        let logits: Vec<f32> = (0..4 * 2 * 3)
            .map(|i| ((i * 7) % 5) as f32 * 0.3 - 0.5)
            .collect();
        let values = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8];
        let rewards = [0.0, 0.0, 1.0, 0.5, 2.0, -1.0, 0.0, 1.0];
        let truncated = [0, 0, 1, 0, 0, 0, 0, 0];
        let unroll = Unroll::new(
            &logits,
            &values,
            &[0, 1, 2, 0, 1, 2, 0, 1],
            &rewards,
            &truncated,
            (4, 2, 3),
        );
        let behaviour_data: Vec<f32> = logits.iter().map(|x| x * 0.5).collect();
        let behaviour = Tensor::from_slice(&behaviour_data, (4, 2, 3), &Device::Cpu).unwrap();
        let loss = unroll.loss_with_behaviour(&behaviour, config);

        let grads = loss.total.backward().unwrap();
        let logit_grads = grads
            .get(unroll.logits.as_tensor())
            .unwrap()
            .to_vec3::<f32>()
            .unwrap();
        assert_eq!(logit_grads[1][0], [0.0; 3], "dummy action's logits");
        assert_eq!(logit_grads[3][0], [0.0; 3], "bootstrap row's logits");
        assert!(
            logit_grads[1][1].iter().any(|&g| g != 0.0),
            "valid neighbour still trains"
        );
        let value_grads = grads
            .get(unroll.values.as_tensor())
            .unwrap()
            .to_vec2::<f32>()
            .unwrap();
        assert_eq!(
            value_grads[1][0], 0.0,
            "truncated final observation's value"
        );

        let mut other_actions = unroll.actions.to_vec2::<u32>().unwrap();
        other_actions[1][0] = 2;
        let other_actions = Tensor::new(other_actions, &Device::Cpu).unwrap();
        let mut other_behaviour = behaviour_data.clone();
        other_behaviour[6..9].copy_from_slice(&[5.0, -5.0, 0.0]);
        let other_behaviour =
            Tensor::from_slice(&other_behaviour, (4, 2, 3), &Device::Cpu).unwrap();
        let changed = impala_loss(
            &ImpalaLossInputs {
                distribution: unroll.distribution(),
                target_params: unroll.logits.as_tensor(),
                values: unroll.values.as_tensor(),
                behaviour_params: &other_behaviour,
                actions: &other_actions,
                rewards: &unroll.rewards,
                terminated: &unroll.terminated,
                truncated: &unroll.truncated,
            },
            config,
        )
        .unwrap();
        assert_eq!(
            loss.total.to_scalar::<f32>().unwrap(),
            changed.total.to_scalar::<f32>().unwrap()
        );
        assert_eq!(loss.mean_clipped_rho, changed.mean_clipped_rho);
    }

    #[test]
    fn total_combines_the_logged_terms() {
        let unroll = Unroll::new(
            &[0.5, -0.2, 0.1, 0.9, 0.0, 0.0],
            &[0.3, -0.1, 0.2],
            &[1, 0, 0],
            &[0.0, 1.0, -0.5],
            &[0, 0, 0],
            (3, 1, 2),
        );
        let config = ImpalaLossConfig {
            baseline_cost: 0.7,
            entropy_cost: 0.2,
            ..ImpalaLossConfig::impala_paper()
        };
        let loss = unroll.loss(&config);
        let want = loss.pg_loss + 0.7 * loss.value_loss - 0.2 * loss.entropy;
        assert!(
            (loss.total.to_scalar::<f32>().unwrap() - want).abs() < 1e-5,
            "{loss:?}"
        );
    }

    /// T = 1, B = 1, D = 1: a Gaussian with mean 0 and log σ `log_std`
    /// took action 1 and got reward `reward`; values 0.
    fn gaussian_loss(log_std: f32, reward: f32, config: &ImpalaLossConfig) -> (Var, ImpalaLoss) {
        let d = Device::Cpu;
        let params = Var::new(&[[[0f32, log_std]], [[0.0, log_std]]], &d).unwrap();
        let values = Tensor::zeros((2, 1), DType::F32, &d).unwrap();
        let actions = Tensor::new(&[[[1f32]], [[0.0]]], &d).unwrap();
        let rewards = Tensor::new(&[[0f32], [reward]], &d).unwrap();
        let flags = Tensor::zeros((2, 1), DType::U8, &d).unwrap();
        let loss = impala_loss(
            &ImpalaLossInputs {
                distribution: ActionDistribution::Gaussian { dim: 1 },
                target_params: params.as_tensor(),
                values: &values,
                behaviour_params: &params.as_tensor().detach(),
                actions: &actions,
                rewards: &rewards,
                terminated: &flags,
                truncated: &flags,
            },
            config,
        )
        .unwrap();
        (params, loss)
    }

    #[test]
    fn gaussian_loss_uses_the_gaussian_log_prob_and_entropy() {
        let no_entropy = ImpalaLossConfig {
            entropy_cost: 0.0,
            ..ImpalaLossConfig::impala_paper()
        };
        let (params, loss) = gaussian_loss(0.5, 1.0, &no_entropy);
        assert!(
            (loss.mean_clipped_rho - 1.0).abs() < 1e-6,
            "on-policy: {loss:?}"
        );
        assert!((loss.mean_pg_advantage - 1.0).abs() < 1e-6, "{loss:?}");
        // H(N(0, e^1)) = ½ + ½ log 2π + 0.5.
        let want = 0.5 + HALF_LOG_TWO_PI as f32 + 0.5;
        assert!((loss.entropy - want).abs() < 1e-6, "{loss:?}");
        // pg_loss = −A · log π(1) with log π(1) = −½ (1/σ)² − log σ − ½ log 2π.
        let log_prob = -0.5 * (-1.0f32).exp() - 0.5 - HALF_LOG_TWO_PI as f32;
        assert!((loss.pg_loss + log_prob).abs() < 1e-6, "{loss:?}");
        // Descending moves the mean towards the advantaged action 1.
        let grads = loss.total.backward().unwrap();
        let g = grads
            .get(params.as_tensor())
            .unwrap()
            .to_vec3::<f32>()
            .unwrap();
        assert!(g[0][0][0] < 0.0, "mean gradient {g:?}");
        assert_eq!(g[1][0], [0.0, 0.0], "bootstrap row");

        // A negative advantage pushes the other way; the entropy bonus
        // alone widens σ.
        let (params, loss) = gaussian_loss(0.5, -1.0, &no_entropy);
        let g = loss.total.backward().unwrap();
        let g = g.get(params.as_tensor()).unwrap().to_vec3::<f32>().unwrap();
        assert!(g[0][0][0] > 0.0, "mean gradient {g:?}");
        let only_entropy = ImpalaLossConfig {
            entropy_cost: 0.1,
            ..ImpalaLossConfig::impala_paper()
        };
        let (params, loss) = gaussian_loss(0.0, 0.0, &only_entropy);
        assert_eq!(loss.mean_pg_advantage, 0.0);
        let g = loss.total.backward().unwrap();
        let g = g.get(params.as_tensor()).unwrap().to_vec3::<f32>().unwrap();
        assert!((g[0][0][1] + 0.1).abs() < 1e-6, "log σ gradient {g:?}");
        assert_eq!(g[0][0][0], 0.0, "mean gradient {g:?}");
    }

    #[test]
    fn gaussian_actions_must_be_f32_of_width_d() {
        let d = Device::Cpu;
        let params = Tensor::zeros((2, 1, 4), DType::F32, &d).unwrap();
        let values = Tensor::zeros((2, 1), DType::F32, &d).unwrap();
        let flags = Tensor::zeros((2, 1), DType::U8, &d).unwrap();
        let inputs = |actions| ImpalaLossInputs {
            distribution: ActionDistribution::Gaussian { dim: 2 },
            target_params: &params,
            values: &values,
            behaviour_params: &params,
            actions,
            rewards: &values,
            terminated: &flags,
            truncated: &flags,
        };
        let config = ImpalaLossConfig::impala_paper();
        let ok = Tensor::zeros((2, 1, 2), DType::F32, &d).unwrap();
        assert!(impala_loss(&inputs(&ok), &config).is_ok());
        let narrow = Tensor::zeros((2, 1, 1), DType::F32, &d).unwrap();
        let err = impala_loss(&inputs(&narrow), &config).unwrap_err();
        assert!(err.to_string().contains("actions"), "{err}");
        let integer = Tensor::zeros((2, 1, 2), DType::U32, &d).unwrap();
        let err = impala_loss(&inputs(&integer), &config).unwrap_err();
        assert!(err.to_string().contains("must be f32"), "{err}");
    }

    #[test]
    fn rejects_float_actions_and_bad_shapes() {
        let unroll = Unroll::new(
            &[0.0; 4],
            &[0.0, 0.0],
            &[0, 0],
            &[0.0, 1.0],
            &[0, 0],
            (2, 1, 2),
        );
        let float_actions = unroll.actions.to_dtype(DType::F32).unwrap();
        let short_rewards = Tensor::zeros((1, 1), DType::F32, &Device::Cpu).unwrap();
        let inputs = ImpalaLossInputs {
            distribution: unroll.distribution(),
            target_params: unroll.logits.as_tensor(),
            values: unroll.values.as_tensor(),
            behaviour_params: unroll.logits.as_tensor(),
            actions: &float_actions,
            rewards: &unroll.rewards,
            terminated: &unroll.terminated,
            truncated: &unroll.truncated,
        };
        let config = ImpalaLossConfig::impala_paper();
        assert!(impala_loss(&inputs, &config).is_err());
        let inputs = ImpalaLossInputs {
            actions: &unroll.actions,
            rewards: &short_rewards,
            ..inputs
        };
        let err = impala_loss(&inputs, &config).unwrap_err();
        assert!(err.to_string().contains("rewards"), "{err}");
    }

    /// The gradient of the policy term on step 0's logits: T = 1, B = 1,
    /// A = 2, action 0 taken under `behaviour` logits, scored by `target`,
    /// reward `reward`, values 0 (so the advantage is the reward).
    fn pg_gradient(
        target: [f32; 2],
        behaviour: [f32; 2],
        reward: f32,
        ratio_clip: f32,
    ) -> Vec<f32> {
        let unroll = Unroll::new(
            &[target[0], target[1], 0.0, 0.0],
            &[0.0, 0.0],
            &[0, 0],
            &[0.0, reward],
            &[0, 0],
            (2, 1, 2),
        );
        let behaviour = Tensor::new(
            &[[[behaviour[0], behaviour[1]]], [[0f32, 0.0]]],
            &Device::Cpu,
        )
        .unwrap();
        let config = ImpalaLossConfig {
            entropy_cost: 0.0,
            baseline_cost: 0.0,
            ratio_clip,
            ..ImpalaLossConfig::impala_paper()
        };
        let loss = unroll.loss_with_behaviour(&behaviour, &config);
        let grads = loss.total.backward().unwrap();
        let logits = grads.get(unroll.logits.as_tensor()).unwrap();
        logits.to_vec3::<f32>().unwrap()[0][0].clone()
    }

    fn assert_close(got: &[f32], want: &[f32]) {
        assert!(
            got.iter().zip(want).all(|(g, w)| (g - w).abs() < 1e-5),
            "got {got:?}, want {want:?}"
        );
    }

    #[test]
    fn ratio_clip_on_policy_is_impalas_gradient() {
        // π = μ: the ratio is 1, inside any bound, so both terms give
        // −A (onehot(a) − π) on the logits.
        let clipped = pg_gradient([0.4, -0.3], [0.4, -0.3], 1.0, 0.2);
        let impala = pg_gradient([0.4, -0.3], [0.4, -0.3], 1.0, 0.0);
        assert_close(&clipped, &impala);
        assert!(clipped[0] < 0.0, "descending raises action 0: {clipped:?}");
    }

    #[test]
    fn ratio_clip_stops_pushing_an_action_past_its_bound() {
        // π(a0) = σ(1) = 0.731 against μ(a0) = 0.5: the ratio is 1.46, past
        // 1 + 0.2. A positive advantage would push it further: no gradient.
        assert_eq!(pg_gradient([1.0, 0.0], [0.0, 0.0], 1.0, 0.2), [0.0, 0.0]);
        // IMPALA's term still pushes (its weight clipped to ρ̄_pg = 1).
        let impala = pg_gradient([1.0, 0.0], [0.0, 0.0], 1.0, 0.0);
        assert!(impala[0] < 0.0, "{impala:?}");
        // π(a0) = σ(−1) = 0.269, a ratio of 0.54, below 1 − 0.2: a negative
        // advantage would push it lower still: no gradient.
        assert_eq!(pg_gradient([-1.0, 0.0], [0.0, 0.0], -1.0, 0.2), [0.0, 0.0]);
    }

    #[test]
    fn ratio_clip_lets_an_advantage_pull_an_action_back() {
        // The ratio is 1.46 and the advantage −1: the surrogate's minimum is
        // the unclipped r·A, whose gradient is −A·r·(onehot(a) − π).
        let pi = 1.0 / (1.0 + (-1.0f32).exp());
        let ratio = pi / 0.5;
        let want = [ratio * (1.0 - pi), -ratio * (1.0 - pi)];
        assert_close(&pg_gradient([1.0, 0.0], [0.0, 0.0], -1.0, 0.2), &want);
    }
}
