//! Policy-lag cap: items carry the policy version that produced them; the
//! learner tells the buffer its current version, and a sampled item whose
//! lag exceeds the bound is dropped or down-weighted.
//!
//! Why: V-trace corrects off-policy data only up to a point; very stale
//! unrolls hurt learning. Cost: one load and a compare per sampled item.
use serde::{Deserialize, Serialize};

/// What happens to an item whose lag exceeds `max_lag`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum LagAction {
    /// Not handed out; consume-once samplers count it consumed and
    /// `dropped_policy_lag`. The batch may come back short.
    Drop,
    /// Handed out with its weight multiplied by this factor (0 masks it).
    DownWeight(f32),
}

/// Bound on `current_version - item_version`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PolicyLagCap {
    pub max_lag: u64,
    pub action: LagAction,
}

/// Verdict for one item.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum LagVerdict {
    Keep(f32),
    Drop,
}

impl PolicyLagCap {
    pub(crate) fn judge(&self, current: u64, item: u64) -> LagVerdict {
        if current.saturating_sub(item) <= self.max_lag {
            return LagVerdict::Keep(1.0);
        }
        match self.action {
            LagAction::Drop => LagVerdict::Drop,
            LagAction::DownWeight(w) => LagVerdict::Keep(w),
        }
    }
}
