//! [`NO_GROUP`]: the group id of an item inserted without a group.
//!
//! Why its own file: the slot protocol stores a group word with every item
//! and sets the groups-recorded flag for any other value (`slot.rs`), the
//! reopen scan reads it (`recovery.rs`), and the grouped sampler treats such
//! an item as a group of one; none of them should import another to name
//! it. Cost: none.

/// Group id used for items inserted without one (reserved: an insert into
/// this group is refused).
pub(crate) const NO_GROUP: u64 = u64::MAX;
