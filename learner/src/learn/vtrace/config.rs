//! V-trace's settings: the IMPALA loss's weights and γ, and the clipping
//! levels of the importance weights. The learner's defaults are
//! `crate::app::settings`'s (`defaults.toml`); the paper's values
//! ([`ImpalaLossConfig::impala_paper`]) are a fixed reference for tests and
//! benches. Cost: none; plain values copied into the trainer.

/// Hyperparameters of the IMPALA loss ([`super::loss::impala_loss`]).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct ImpalaLossConfig {
    /// γ, the per-step discount.
    pub discount: f32,
    /// Weight of `value_loss` in `total`.
    pub baseline_cost: f32,
    /// Weight of the entropy bonus in `total`.
    pub entropy_cost: f32,
    /// Every reward is multiplied by this before V-trace, so values and
    /// advantages are in scaled units (Pendulum's rewards reach −16 per
    /// step; 0.1 keeps its values within tens).
    pub reward_scale: f32,
    /// V-trace's trace weights: the clipping thresholds ρ̄, c̄, ρ̄_pg and λ.
    pub clip: VTraceClip,
    /// ε of PPO's clipped surrogate in place of IMPALA's policy term: the
    /// term stops pushing an action once `π/μ` has moved ε past 1 in its
    /// advantage's direction (`super::loss`'s docs). 0 turns it off, giving
    /// IMPALA's `ρ̄_pg`-weighted policy gradient.
    pub ratio_clip: f32,
    /// Standardise the policy term's advantages over each batch's valid
    /// transitions (`(Â − mean) / (std + 1e-8)`, as PPO implementations
    /// do): the policy gradient's scale no longer follows each game's
    /// reward scale, so one `entropy_cost` weighs the same against it
    /// across a suite. The value targets are untouched.
    pub normalize_advantages: bool,
}

impl ImpalaLossConfig {
    /// IMPALA's published values (γ 0.99, baseline 0.5, entropy 0.01, no
    /// reward scaling, clips of 1, its own policy term): a fixed reference
    /// for tests and benches, not the learner's defaults.
    pub fn impala_paper() -> Self {
        Self {
            discount: 0.99,
            baseline_cost: 0.5,
            entropy_cost: 0.01,
            reward_scale: 1.0,
            clip: VTraceClip::default(),
            ratio_clip: 0.0,
            normalize_advantages: false,
        }
    }
}

/// Truncation levels of the importance weights, and the trace's λ.
/// `f32::INFINITY` disables a clip; λ 1 is IMPALA's plain V-trace.
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
    /// λ ∈ [0, 1]: scales every trace weight, `c_t = λ min(c̄, π/μ)`
    /// (IMPALA's remark after eq. 1, seed_rl's `lambda_`). Below 1 the
    /// targets lean on the value function sooner: less variance, more
    /// bias, as GAE's λ. Default 1.0.
    pub lambda: f32,
}

impl Default for VTraceClip {
    fn default() -> Self {
        Self {
            rho: 1.0,
            c: 1.0,
            pg_rho: 1.0,
            lambda: 1.0,
        }
    }
}

impl VTraceClip {
    /// No clipping at all: plain importance sampling (`ρ̄ = c̄ = ρ̄_pg = ∞`).
    pub const NONE: Self = Self {
        rho: f32::INFINITY,
        c: f32::INFINITY,
        pg_rho: f32::INFINITY,
        lambda: 1.0,
    };
}
