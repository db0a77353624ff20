//! [`GroupedTableSpec`]: a grouped table (sampler `grouped`) as checked from
//! the config file. Its items are steps of trajectories, released whole
//! groups at a time (`SubmitSteps`, `CompleteTrajectory`, `FetchGroup`).
//!
//! ```json
//! {"name": "pool", "capacity": 65536,
//!  "fields": [{"name": "obs", "dtype": "f32", "shape": [3, 4]},
//!             {"name": "reward", "dtype": "f32", "shape": []}],
//!  "sampler": {"kind": "grouped", "group_size": 8},
//!  "policy_lag": {"max_lag": 4, "action": "drop"}}
//! ```
//!
//! - `fields`: the layout of one *step*; a trajectory is any number of
//!   steps, so an item (a trajectory) has a variable first axis.
//! - `sampler.group_size`: trajectories per group; a group is complete when
//!   it has that many trajectories and each is complete.
//! - `capacity`: in **steps** (what bounds the memory): steps of open and
//!   ready groups together. New steps make room by dropping the oldest
//!   ready groups; steps of open groups are never dropped, so a submit that
//!   would need them dropped is refused (`RESOURCE_EXHAUSTED`).
//! - `policy_lag`: `max_lag` with action `drop` (the only one): a complete
//!   group whose oldest step's policy version lags the table's
//!   (`SetPolicyVersion`) by more than `max_lag` is dropped.
//!
//! Settings of fixed-shape tables that make no sense here (a
//! policy-version field: versions travel per step; writer policy, rate
//! limiter, seed, storage directory, insert timeout) are refused by name.
//! Cost: checked once at start-up.
use seed_replay::ItemLayout;

use crate::config::file_format::{SamplerFile, TableConfigFile, WriterPolicyFile};
use crate::error::ConfigError;

/// One grouped table, checked.
#[derive(Debug, Clone)]
pub struct GroupedTableSpec {
    pub name: String,
    /// The layout of one step.
    pub layout: ItemLayout,
    /// Trajectories per group (at least 1).
    pub group_size: u32,
    /// Steps held at most (open and ready groups).
    pub capacity_steps: usize,
    /// Complete groups lagging the table's policy version by more than this
    /// are dropped.
    pub max_lag: Option<u64>,
}

impl GroupedTableSpec {
    /// Checks a table of the file whose sampler is `grouped`.
    pub(crate) fn check(t: TableConfigFile) -> Result<Self, ConfigError> {
        let err = |setting: &'static str, reason: String| ConfigError::Table {
            table: t.name.clone(),
            setting,
            reason,
        };
        if !t.has_valid_name() {
            return Err(err(
                "name",
                "must be 1 to 128 of A-Z, a-z, 0-9, `_`, `-`".into(),
            ));
        }
        let SamplerFile::Grouped { group_size } = t.sampler else {
            return Err(err("sampler", "not `grouped`".into()));
        };
        if group_size == 0 {
            return Err(err("sampler", "`group_size` must be at least 1".into()));
        }
        if t.capacity == 0 {
            return Err(err(
                "capacity",
                "must be at least 1 (steps of open and ready groups)".into(),
            ));
        }
        let refuse = |setting: &'static str, why: &str| {
            Err(err(setting, format!("not used by grouped tables: {why}")))
        };
        if t.policy_version_field.is_some() {
            return refuse(
                "policy_version_field",
                "each step's version travels in `policy_versions`",
            );
        }
        if !matches!(t.writer_policy, WriterPolicyFile::OverwriteOldest) {
            return refuse(
                "writer_policy",
                "over capacity, the oldest ready groups are dropped",
            );
        }
        if t.rate_limiter.is_some() {
            return refuse("rate_limiter", "groups are released as they complete");
        }
        if t.seed != 0 {
            return refuse("seed", "groups are released in order, not at random");
        }
        if t.storage_dir.is_some() {
            return refuse("storage_dir", "grouped tables live in memory");
        }
        if t.insert_timeout_ms.is_some() {
            return refuse("insert_timeout_ms", "a submit never waits");
        }
        let max_lag = match &t.policy_lag {
            None => None,
            Some(p) if p.action == "drop" && p.weight.is_none() => Some(p.max_lag),
            Some(_) => {
                return Err(err(
                    "policy_lag",
                    "grouped tables only drop stale groups: action `drop`, no `weight`".into(),
                ))
            }
        };
        let layout = t
            .layout_builder()
            .map_err(|e| err("fields", e))?
            .build()
            .map_err(|e| err("fields", e.to_string()))?;
        Ok(GroupedTableSpec {
            name: t.name,
            layout,
            group_size,
            capacity_steps: t.capacity,
            max_lag,
        })
    }
}
