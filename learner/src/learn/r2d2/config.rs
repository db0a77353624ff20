//! [`R2d2Config`]: R2D2's settings, the values `--algo r2d2` resolves to
//! (`crate::app::settings`).
use serde::Serialize;

use crate::infer::exploration::EpsilonSchedule;

/// R2D2's settings (defaults: `crate::app::settings`, the paper's values
/// where they fit a 2-core learner).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct R2d2Config {
    /// `--burn-in`: leading steps of each sequence that only refresh the
    /// stored recurrent state (no loss, no gradient); below `T`.
    pub burn_in: usize,
    /// `--n-step`: steps of reward before the double-Q bootstrap.
    pub n_step: usize,
    /// `--target-update-period`: learner steps between target-network copies.
    pub target_update_period: u64,
    /// `--priority-eta`: η of the sequence priority
    /// `η·max|δ| + (1 − η)·mean|δ|`.
    pub priority_eta: f64,
    /// Ape-X ε-greedy over env slots (`--epsilon`, `--epsilon-alpha`).
    pub exploration: EpsilonSchedule,
    /// `--discount`: γ of the n-step targets.
    pub discount: f32,
    /// `--reward-scale`: every reward is multiplied by this first.
    pub reward_scale: f32,
}
