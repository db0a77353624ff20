//! A `follow` event as the dict Python sees, the same whether a server's
//! `Follow` stream sent it (`FollowStream`) or the in-process table read
//! it (`LocalFollowStream`): `{"keys", "fields", "policy_versions",
//! "next_key", "head_key", "replaced"}` for items, `{"gap": (requested,
//! oldest)}` for keys overwritten before they were read.
//!
//! Cost: one new array for the keys and one for the policy versions; the
//! fields' arrays are the caller's.
use std::ops::Range;

use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::replay::arrays;

/// Items `keys` of one table, their arrays already made.
pub struct FollowedItems<'a, 'py> {
    /// The rows' keys, consecutive; `keys.end` is where to resume.
    pub keys: Range<u64>,
    /// `{field: array [rows, *shape]}`.
    pub fields: Bound<'py, PyDict>,
    pub policy_versions: &'a [u64],
    /// The table's next key when the items were read.
    pub head_key: u64,
    /// The keys whose slots these items took (overwrites).
    pub replaced: Range<u64>,
}

/// The dict of an items event.
pub fn items_dict<'py>(
    py: Python<'py>,
    items: FollowedItems<'_, 'py>,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let rows = (items.keys.end - items.keys.start) as usize;
    d.set_item("keys", arrays::key_range_array(py, items.keys.start, rows))?;
    d.set_item("fields", items.fields)?;
    d.set_item(
        "policy_versions",
        arrays::u64_array(py, items.policy_versions),
    )?;
    d.set_item("next_key", items.keys.end)?;
    d.set_item("head_key", items.head_key)?;
    d.set_item("replaced", (items.replaced.start, items.replaced.end))?;
    Ok(d)
}

/// The dict of a gap: keys `requested .. oldest` will never come.
pub fn gap_dict(py: Python<'_>, requested: u64, oldest: u64) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("gap", (requested, oldest))?;
    Ok(d)
}
