//! [`GroupedTableSpec`]: a grouped table (sampler `grouped`) as checked from
//! the config file. Its items are steps of trajectories, released whole
//! groups at a time (`SubmitSteps`, `CompleteTrajectory`, `FetchGroup`).
//!
//! ```json
//! {"name": "pool", "capacity": 65536,
//!  "fields": [{"name": "prompt_ids", "dtype": "i32", "shape": [-1], "max_len": 4096},
//!             {"name": "response_ids", "dtype": "i32", "shape": [-1]},
//!             {"name": "reward", "dtype": "f32", "shape": []}],
//!  "sampler": {"kind": "grouped", "group_size": 8, "ids": "str", "max_queue_size": 64},
//!  "policy_lag": {"max_lag": 4, "action": "keep"}}
//! ```
//!
//! - `fields`: the layout of one *step*; a trajectory is any number of
//!   steps, so an item (a trajectory) has a variable first axis. A field
//!   whose last dimension is `-1` is variable-length (tokens of a prompt or
//!   a response): each step holds as many as it has, stored without
//!   padding, at most `max_len` when that is given ([`StepLayout`]).
//! - `sampler.group_size`: trajectories per group; a group is complete when
//!   it has that many trajectories and each is complete.
//! - `sampler.ids`: `u64` (default) or `str`, the kind of trajectory and
//!   group ids the writers give; `str` ids are kept as given, never hashed,
//!   so two never collide.
//! - `sampler.max_queue_size`: ready groups kept at most; one more drops
//!   the oldest (`groups_dropped_queue_full`). Absent: only `capacity`
//!   bounds them.
//! - `capacity`: in **steps** (what bounds the memory): steps of open and
//!   ready groups together. New steps make room by dropping the oldest
//!   ready groups; steps of open groups are never dropped, so a submit that
//!   would need them dropped is refused (`RESOURCE_EXHAUSTED`).
//! - `policy_lag`: `max_lag` with action `drop`: a complete group whose
//!   oldest step's policy version lags the table's (`SetPolicyVersion`) by
//!   more than `max_lag` is dropped; with action `keep` it is released
//!   all the same (counted in `groups_released_stale`), and the trainer
//!   weighs its steps by their lag (every fetched group carries the
//!   table's version beside each step's).
//!
//! - `storage_dir`: the table survives a restart or a SIGKILL: every
//!   acknowledged call is appended to a journal there and replayed at
//!   start-up (`server/group_journal.rs`). Absent: in memory only.
//!
//! Settings of fixed-shape tables that make no sense here (a
//! policy-version field: versions travel per step; writer policy, rate
//! limiter, seed, insert timeout) are refused by name.
//! Cost: checked once at start-up.
use crate::config::file_format::{SamplerFile, TableConfigFile, WriterPolicyFile};
use crate::config::step_layout::StepLayout;
use crate::error::ConfigError;

/// One grouped table, checked.
#[derive(Debug, Clone)]
pub struct GroupedTableSpec {
    pub name: String,
    /// The layout of one step.
    pub layout: StepLayout,
    /// Trajectories per group (at least 1).
    pub group_size: u32,
    /// The kind of trajectory and group ids.
    pub ids: IdKind,
    /// Steps held at most (open and ready groups).
    pub capacity_steps: usize,
    /// Ready groups kept at most.
    pub max_queue_size: Option<usize>,
    /// Complete groups lagging the table's policy version by more than this
    /// are stale: dropped, or kept with `keep_stale`.
    pub max_lag: Option<u64>,
    /// Stale groups are released (and counted), not dropped.
    pub keep_stale: bool,
    /// Where the table's journal lives (`server/group_journal.rs`): every
    /// acknowledged submit, completion, fetch and version change, replayed
    /// at start-up. `None`: in memory only.
    pub storage_dir: Option<std::path::PathBuf>,
}

/// The kind of ids a grouped table's writers give.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IdKind {
    /// `trajectory_ids` and `group_ids`.
    #[default]
    U64,
    /// `trajectory_uids` and `group_uids`.
    Str,
}

impl IdKind {
    /// Its name in the config file and in `Info`.
    pub fn name(self) -> &'static str {
        match self {
            IdKind::U64 => "u64",
            IdKind::Str => "str",
        }
    }
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
        let SamplerFile::Grouped {
            group_size,
            ids,
            max_queue_size,
        } = t.sampler.clone()
        else {
            return Err(err("sampler", "not `grouped`".into()));
        };
        let ids = match ids.as_deref() {
            None | Some("u64") => IdKind::U64,
            Some("str") => IdKind::Str,
            Some(other) => {
                return Err(err(
                    "sampler",
                    format!("`ids` must be `u64` or `str`, is `{other}`"),
                ))
            }
        };
        let max_queue_size = match max_queue_size {
            None => None,
            Some(0) => {
                return Err(err(
                    "sampler",
                    "`max_queue_size` must be at least 1 (leave it out for no limit)".into(),
                ))
            }
            Some(n) => Some(usize::try_from(n).unwrap_or(usize::MAX)),
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
        if t.insert_timeout_ms.is_some() {
            return refuse("insert_timeout_ms", "a submit never waits");
        }
        if t.storage_order.is_some() {
            return refuse(
                "storage_order",
                "a grouped table keeps its steps by trajectory",
            );
        }
        let (max_lag, keep_stale) = match &t.policy_lag {
            None => (None, false),
            Some(p) if p.weight.is_none() && p.action == "drop" => (Some(p.max_lag), false),
            Some(p) if p.weight.is_none() && p.action == "keep" => (Some(p.max_lag), true),
            Some(_) => {
                return Err(err(
                    "policy_lag",
                    "grouped tables drop stale groups (action `drop`) or keep them for the \
                     trainer to weigh (action `keep`); no `weight`"
                        .into(),
                ))
            }
        };
        let (builder, variable) = t.step_fields().map_err(|e| err("fields", e))?;
        let fixed = builder.build().map_err(|e| err("fields", e.to_string()))?;
        Ok(GroupedTableSpec {
            name: t.name,
            layout: StepLayout::new(fixed, variable),
            group_size,
            ids,
            capacity_steps: t.capacity,
            max_queue_size,
            max_lag,
            keep_stale,
            storage_dir: t.storage_dir,
        })
    }
}
