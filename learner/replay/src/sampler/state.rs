//! [`SamplerState`]: every sampler's state in one serializable record, for
//! checkpoints.
//!
//! Why its own file: each sampler saves into and restores from it, and the
//! dispatcher (`sampler/mod.rs`) hands it to them; kept apart, no sampler
//! imports the dispatcher. Cost: a copy of the sampler's index when a
//! checkpoint is taken or restored.
use serde::{Deserialize, Serialize};

/// Serializable sampler state for checkpoints.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct SamplerState {
    /// FIFO: next key to hand out.
    pub cursor: u64,
    /// max_times_sampled: times each slot's item was sampled (0 when not live).
    pub times_sampled: Vec<u32>,
    /// Live slots (max_times_sampled) in set order.
    pub live: Vec<u32>,
    /// Without replacement: current permutation and position.
    pub permutation: Vec<u32>,
    pub position: usize,
    /// Prioritized: leaf values (`priority^alpha`) per slot and max priority.
    pub priorities: Vec<f64>,
    pub max_priority: f64,
    /// Grouped: open groups (id, keys) and ready groups in order.
    pub open_groups: Vec<(u64, Vec<u64>, bool)>,
    pub ready_groups: Vec<(u64, Vec<u64>)>,
}
