//! The optimizer's settings: the update rule ([`Algorithm`]: Adam or
//! RMSProp, with [`AdamConfig`] / [`RmsPropConfig`]), the schedule and the
//! clipping norm in one [`OptimizerConfig`]. Values come from
//! `crate::app::settings`; the named constructors are the papers' values,
//! for tests and benches.
use crate::learn::optimizer::schedule::LrSchedule;

/// Adam's hyperparameters.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct AdamConfig {
    /// β1, first-moment decay.
    pub beta1: f64,
    /// β2, second-moment decay.
    pub beta2: f64,
    /// ε, added to `√v̂` (`--optimizer-epsilon`).
    pub eps: f64,
}

impl AdamConfig {
    /// Kingma and Ba's β1 0.9 and β2 0.999 with this ε (the learner's ε
    /// default is in `crate::app::settings`).
    pub fn with_eps(eps: f64) -> Self {
        Self {
            beta1: 0.9,
            beta2: 0.999,
            eps,
        }
    }

    /// Kingma and Ba's values, ε 1e-8 included: a fixed reference for tests.
    pub fn kingma_ba() -> Self {
        Self::with_eps(1e-8)
    }
}

/// RMSProp's hyperparameters (TensorFlow's form: ε inside the square root).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct RmsPropConfig {
    /// ρ, decay of the running mean of g².
    pub decay: f64,
    /// ε, added to the mean square (`--optimizer-epsilon`).
    pub eps: f64,
}

impl RmsPropConfig {
    /// IMPALA's decay 0.99 with this ε (the learner's ε default is in
    /// `crate::app::settings`).
    pub fn with_eps(eps: f64) -> Self {
        Self { decay: 0.99, eps }
    }
}

/// Which update rule to apply.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub enum Algorithm {
    /// Adam with bias correction.
    Adam(AdamConfig),
    /// RMSProp without momentum.
    RmsProp(RmsPropConfig),
}

impl Algorithm {
    /// The rule's ε (Adam: added to `√v̂`; RMSProp: to the mean square).
    pub fn epsilon(&self) -> f64 {
        match *self {
            Self::Adam(a) => a.eps,
            Self::RmsProp(r) => r.eps,
        }
    }
}

/// Everything an [`Optimizer`] needs besides the variables.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct OptimizerConfig {
    /// The update rule.
    pub algorithm: Algorithm,
    /// The learning rate per step.
    pub schedule: LrSchedule,
}

impl OptimizerConfig {
    /// Kingma and Ba's Adam at a constant `lr`: a fixed reference for tests
    /// and benches (the learner's defaults are in `crate::app::settings`).
    pub fn constant_adam(lr: f64) -> Self {
        Self {
            algorithm: Algorithm::Adam(AdamConfig::kingma_ba()),
            schedule: LrSchedule::Constant { lr },
        }
    }
}
