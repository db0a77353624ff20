//! [`NO_GROUP`]: the group id of an item inserted without a group.
//!
//! Why its own file: the slot protocol sets the groups-recorded flag for
//! any other value and stores this one only once that flag is set
//! (`slot.rs`), the storage complements group words so that an unwritten
//! zero reads as this value (`storage.rs`), and the grouped sampler treats
//! such an item as a group of one; none of them should import another to
//! name it. Cost: none.

/// Group id used for items inserted without one (reserved: an insert into
/// this group is refused).
pub(crate) const NO_GROUP: u64 = u64::MAX;
