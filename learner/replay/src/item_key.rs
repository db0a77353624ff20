//! [`ItemKey`]: the stable identity of an inserted item.
//!
//! Why: slots are reused, keys are not; an update or a read naming a key
//! whose slot now holds a newer item is recognisably stale. Item `key`
//! lives in slot `key % capacity`. Cost: a `u64`.
use serde::{Deserialize, Serialize};

/// Stable identity of an inserted item: keys are consecutive in insertion
/// order and never reused, so an update naming an overwritten item is
/// recognisably stale.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ItemKey(pub u64);
