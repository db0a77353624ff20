//! [`PoolId`]: a trajectory's or a group's id in a grouped table, a number
//! or a string as the table declares (`sampler.ids`).
//!
//! Why strings are kept whole: a user's `trajectory_uid` is a string
//! (a UUID, `"prompt-17/rollout-3"`), and hashing it into 64 bits would let
//! two trajectories collide, silently merging their steps. An `Arc<str>`
//! costs one allocation per trajectory per request (rows of one trajectory
//! share it) and a pointer copy wherever the id is held again.
use std::fmt;
use std::sync::Arc;

/// A trajectory or group id.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PoolId {
    /// Tables with `u64` ids.
    Num(u64),
    /// Tables with `str` ids.
    Uid(Arc<str>),
}

impl PoolId {
    /// The number (0 for a string id: the reply's `u64` fields are unset).
    pub fn num(&self) -> u64 {
        match self {
            PoolId::Num(n) => *n,
            PoolId::Uid(_) => 0,
        }
    }

    /// The string (empty for a number).
    pub fn uid(&self) -> &str {
        match self {
            PoolId::Num(_) => "",
            PoolId::Uid(s) => s,
        }
    }
}

/// As messages write it: `17`, or `"prompt-3"` quoted.
impl fmt::Display for PoolId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PoolId::Num(n) => write!(f, "{n}"),
            PoolId::Uid(s) => write!(f, "{s:?}"),
        }
    }
}
