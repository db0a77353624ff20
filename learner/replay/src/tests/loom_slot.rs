//! Loom: every interleaving (and every value a Relaxed load may return) of
//! a writer and a reader on one slot. The reader must see either no item,
//! the old item or the new item, never a mix; racing writers on one slot
//! must leave the newest key with its own data. The batched read's halves
//! (`begin_read`, `metadata`, `end_reads`, `validate`) give the same
//! guarantee, and a reader of an item stored with a group id sees that id
//! (the groups-recorded flag), whole or in halves; an item without a group
//! that replaces a grouped one has none.
use std::sync::Arc;

use loom::thread;

use crate::dtype::DType;
use crate::group_id::NO_GROUP;
use crate::layout::ItemLayout;
use crate::loom::atomic::Ordering;
use crate::slot::{self, ReadOutcome, WriteOutcome};
use crate::storage::{Storage, StorageOrder};

fn storage() -> Arc<Storage> {
    let layout = ItemLayout::builder()
        .field("x", DType::U64, &[2])
        .field("v", DType::U64, &[])
        .policy_version_field("v")
        .build()
        .expect("valid layout");
    Arc::new(Storage::memory(&layout, 1, StorageOrder::Records).expect("tiny storage"))
}

/// Writes `key` with every word (the policy version's too) `value`.
fn write(s: &Storage, key: u64, value: u64) -> WriteOutcome {
    write_in_group(s, key, value, NO_GROUP)
}

fn write_in_group(s: &Storage, key: u64, value: u64, group: u64) -> WriteOutcome {
    slot::write(s.slots(), 0, key, group, |_, _, words| {
        for w in words {
            w.store(value, Ordering::Relaxed);
        }
    })
}

/// Reads slot 0; returns the key, the two data words of `x` and the
/// policy version.
fn read(s: &Storage) -> Option<(u64, [u64; 2], u64)> {
    let mut data = [0u64; 2];
    match slot::read(s.slots(), 0, |field, words| {
        if field == 0 {
            for (d, w) in data.iter_mut().zip(words) {
                *d = w.load(Ordering::Relaxed);
            }
        }
    }) {
        ReadOutcome::Empty => None,
        ReadOutcome::Item(m) => Some((m.key, data, m.policy_version)),
    }
}

/// Writes key 0 (value 1) into slot 0, then overwrites it with key 1
/// (value 2) on another thread.
fn overwrite_in_background(s: &Arc<Storage>) -> thread::JoinHandle<WriteOutcome> {
    write(s, 0, 1);
    let s = Arc::clone(s);
    thread::spawn(move || write(&s, 1, 2))
}

#[test]
fn reader_never_sees_a_torn_first_write() {
    loom::model(|| {
        let s = storage();
        let w = {
            let s = Arc::clone(&s);
            thread::spawn(move || write(&s, 0, 7))
        };
        match read(&s) {
            None => {}
            Some(got) => assert_eq!(got, (0, [7, 7], 7)),
        }
        assert_eq!(
            w.join().expect("writer"),
            WriteOutcome::Written { previous: 0 }
        );
    });
}

#[test]
fn reader_sees_old_or_new_item_during_overwrite() {
    loom::model(|| {
        let s = storage();
        let w = overwrite_in_background(&s);
        let got = read(&s);
        assert!(
            got == Some((0, [1, 1], 1)) || got == Some((1, [2, 2], 2)),
            "torn read: {got:?}"
        );
        w.join().expect("writer");
        assert_eq!(s.published(0), 2);
    });
}

#[test]
fn racing_writers_leave_the_newest_key_with_its_data() {
    loom::model(|| {
        let s = storage();
        let older = {
            let s = Arc::clone(&s);
            thread::spawn(move || write(&s, 1, 1))
        };
        let newer = write(&s, 2, 2);
        let older = older.join().expect("writer");
        assert_eq!(
            newer,
            WriteOutcome::Written {
                previous: if older == WriteOutcome::Superseded {
                    0
                } else {
                    2
                }
            }
        );
        assert_eq!(read(&s), Some((2, [2, 2], 2)));
    });
}

/// The batched read (`Shared::gather`): `begin_read`, `metadata`, the copy,
/// `end_reads`, `validate`. When `validate` passes, the copy is the old or the new item,
/// never a mix; when it fails, the caller reads again (not modelled here).
#[test]
fn batched_read_halves_never_validate_a_torn_copy() {
    loom::model(|| {
        let s = storage();
        let w = overwrite_in_background(&s);
        let slots = s.slots();
        let v1 = slot::begin_read(slots, 0);
        let meta = slot::metadata(slots, 0, v1, slots.groups_recorded());
        let mut data = [0u64; 2];
        for (d, w) in data.iter_mut().zip(slots.row(0, 0)) {
            *d = w.load(Ordering::Relaxed);
        }
        slot::end_reads();
        if slot::validate(slots, 0, v1) {
            let got = (meta.key, data, meta.policy_version);
            assert!(
                got == (0, [1, 1], 1) || got == (1, [2, 2], 2),
                "torn copy validated: {got:?}"
            );
        }
        w.join().expect("writer");
    });
}

/// Item 0 (no group), then item 1 in group 5 written while `read` runs on
/// a spawned thread (with the reader on the main thread loom never had it
/// see the new item). Returns what `read` saw: `(key, group)` of a
/// consistent copy, `None` if it had none.
fn race_first_grouped_write(read: fn(&Storage) -> Option<(u64, u64)>) -> Option<(u64, u64)> {
    let s = storage();
    write(&s, 0, 1);
    let r = {
        let s = Arc::clone(&s);
        thread::spawn(move || read(&s))
    };
    write_in_group(&s, 1, 2, 5);
    r.join().expect("reader")
}

/// A group id lives in a cold column read only once the groups-recorded
/// flag is set; the flag is set before the publish, so a reader that sees
/// the grouped item sees its group, never `NO_GROUP`.
#[test]
fn reader_of_a_grouped_item_sees_its_group() {
    loom::model(|| {
        let got = race_first_grouped_write(|s| match slot::read(s.slots(), 0, |_, _| {}) {
            ReadOutcome::Item(m) => Some((m.key, m.group)),
            ReadOutcome::Empty => None,
        });
        assert!(got == Some((0, NO_GROUP)) || got == Some((1, 5)), "{got:?}");
    });
}

/// The same through the batched read's halves, where `Shared::gather`
/// loads the flag once after a whole chunk's `begin_read`s.
#[test]
fn batched_reader_of_a_grouped_item_sees_its_group() {
    loom::model(|| {
        let got = race_first_grouped_write(|s| {
            let slots = s.slots();
            let v1 = slot::begin_read(slots, 0);
            let meta = slot::metadata(slots, 0, v1, slots.groups_recorded());
            slot::end_reads();
            slot::validate(slots, 0, v1).then_some((meta.key, meta.group))
        });
        assert!(
            got.is_none() || got == Some((0, NO_GROUP)) || got == Some((1, 5)),
            "{got:?}"
        );
    });
}

/// An item without a group writes the group word only once the flag is
/// set, and it is set by any earlier grouped writer of the slot: racing a
/// grouped key 0 and an ungrouped key 1 on one slot, key 1 always ends up
/// with no group, whether it superseded key 0 (which then stored nothing)
/// or replaced it (and so had to clear its group word).
#[test]
fn an_ungrouped_writer_after_a_grouped_one_leaves_no_group() {
    loom::model(|| {
        let s = storage();
        let grouped = {
            let s = Arc::clone(&s);
            thread::spawn(move || write_in_group(&s, 0, 1, 5))
        };
        write(&s, 1, 2);
        grouped.join().expect("writer");
        let got = match slot::read(s.slots(), 0, |_, _| {}) {
            ReadOutcome::Item(m) => Some((m.key, m.group)),
            ReadOutcome::Empty => None,
        };
        assert_eq!(got, Some((1, NO_GROUP)));
    });
}
