//! The slot protocol: a seqlock per slot so writers never wait for readers
//! and readers never return a torn item.
//!
//! Why: samplers copy items while writers overwrite old slots; a lock per
//! slot would make every sample contend with inserts. Instead each slot has
//! a sequence word, `(key + 1) << 1`, with its low bit set while a writer
//! is inside; a reader copies, then checks the word did not move, and
//! retries if it did (verify after copy). The key shares the seqlock's
//! word because a sampled slot's metadata then costs no cache line of its
//! own (`storage.rs`); a writer never stores a key at or below the one in
//! the slot, so the word only grows and a reader that finds it unchanged
//! knows no write began in between. All data words are accessed with
//! `Relaxed` atomics, so the racing copy is defined behaviour and the
//! fences below order it (Boehm, "Can seqlocks get along with programming
//! language memory models?", MSPC 2012, fig. 6).
//! Cost: a write is one CAS, one Release store and the copy; a read is two
//! loads, one Acquire fence and the copy (plus a retry if it raced a write).
//!
//! The full protocol and its proof sketch are in `README.md`.
use crate::group_id::NO_GROUP;
use crate::loom::atomic::{fence, AtomicU64, Ordering};
use crate::storage::Slots;

/// Metadata of an item that was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ItemMeta {
    pub key: u64,
    /// The layout's policy-version field (0 without one).
    pub policy_version: u64,
    /// `NO_GROUP` unless inserted into a group.
    pub group: u64,
}

/// What `write` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WriteOutcome {
    /// Written; `previous` is `key + 1` of the item it replaced (0: none).
    Written { previous: u64 },
    /// The slot already holds this key or a newer one (the ring lapped
    /// this writer); nothing was written.
    Superseded,
}

/// What `read` found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadOutcome {
    /// A consistent copy of this item was made.
    Item(ItemMeta),
    /// The slot holds no item.
    Empty,
}

/// The sequence word of a slot holding `key`, no writer inside.
#[inline(always)]
fn stamp(key: u64) -> u64 {
    (key + 1) << 1
}

/// The body of a writer's `fill` in [`write`]: stores row `$row` of
/// `$field` (a `FieldRef`) into `$words`, a variable-length field's heap
/// reference `$heap_ref` if it has one, else the row's `$bytes` of values
/// packed into native-endian words (the last zero padded). `Relaxed`
/// stores: the Release sequence store in `write` publishes them.
///
/// Used as a closure's whole body: after a heap reference it `return`s
/// from that closure. A macro, not a function: as an `#[inline(always)]` function the same
/// body cost an insert 25 instructions more (593 against 568 per single
/// insert), the closure's codegen changing around the call.
macro_rules! store_row {
    ($words:expr, $field:expr, $row:expr, $bytes:expr, $heap_ref:expr) => {{
        let (words, row, bytes) = ($words, $row, $bytes);
        if let Some(r) = $heap_ref {
            for (word, v) in words.iter().zip(r) {
                word.store(v, crate::loom::atomic::Ordering::Relaxed);
            }
            return;
        }
        let mut j = 0;
        $field.values.for_each_word(row * bytes, bytes, |w| {
            if let Some(word) = words.get(j) {
                word.store(w, crate::loom::atomic::Ordering::Relaxed);
            }
            j += 1;
        });
    }};
}
pub(crate) use store_row;

/// Writes item `key` of `group` into `slot`. `fill(field, bytes, words)`
/// stores the field's row with `Relaxed` stores (the policy version is one
/// of those rows); `bytes` is the field's value size from the storage's
/// geometry, read once per row here so the caller need not read it again.
///
/// Inlined: it runs once per inserted item, and as a call its closure's
/// state went through the stack.
#[inline(always)]
pub(crate) fn write(
    storage: Slots<'_>,
    slot: usize,
    key: u64,
    group: u64,
    mut fill: impl FnMut(usize, usize, &[AtomicU64]),
) -> WriteOutcome {
    let seq = storage.seq(slot);
    let stamp = stamp(key);
    let mut s = seq.load(Ordering::Relaxed);
    loop {
        if s & 1 == 1 {
            // Another writer (lapped ring) is inside; it is short.
            crate::loom::spin_loop();
            s = seq.load(Ordering::Relaxed);
            continue;
        }
        if s >= stamp {
            // This key or a newer one is here. Never storing a key at or
            // below the current one keeps the word growing, which is what
            // lets `read` trust an unchanged word (no ABA).
            return WriteOutcome::Superseded;
        }
        // Take the slot: even -> odd. Acquire, pairs with the Release
        // publish of the previous writer, so its data stores are ordered
        // before ours.
        match seq.compare_exchange_weak(s, s | 1, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => break,
            Err(now) => s = now,
        }
    }
    // Release fence: no data store below may be seen by a reader whose
    // Acquire fence (in `read`) then still sees the old even word. Pairs
    // with the Acquire fence in `read`.
    fence(Ordering::Release);
    // We own the slot (odd word); these words are only ours.
    if group != NO_GROUP {
        // The flag before the publish below, so a reader that sees this
        // item sees the flag too, and before the group word, so a crash
        // never leaves a group word without the flag
        // (`Slots::groups_recorded`).
        storage.record_groups();
        storage.store_group(slot, group);
    } else if storage.groups_recorded() {
        // Clear what an earlier item in this slot may have stored. While
        // the flag reads unset, no earlier writer of this slot stored a
        // group (our Acquire exchange above saw each of them publish, and
        // they set the flag before publishing), so this slot's word still
        // reads `NO_GROUP` and is left unwritten: a mapped table without
        // groups never faults the column's pages in.
        storage.store_group(slot, NO_GROUP);
    }
    for field in 0..storage.num_fields() {
        let g = storage.field(field);
        fill(field, g.bytes, storage.row_at(g, slot));
    }
    // Publish: Release, pairs with the Acquire sequence loads in `read`,
    // `begin_read` and `Storage::published` (FIFO claims, stale-key checks).
    seq.store(stamp, Ordering::Release);
    WriteOutcome::Written { previous: s >> 1 }
}

/// The metadata of the item whose sequence word `v1` was loaded
/// (`Acquire`) before `groups`, the groups-recorded flag
/// ([`Slots::groups_recorded`]: loading it after the sequence load is what
/// makes a `false` mean this item has no group). Relaxed loads inside the
/// read's window, validated with the copy. Meaningless unless `v1` is even
/// and not 0, which [`validate`] checks.
#[inline(always)]
pub(crate) fn metadata(storage: Slots<'_>, slot: usize, v1: u64, groups: bool) -> ItemMeta {
    ItemMeta {
        key: (v1 >> 1).wrapping_sub(1),
        policy_version: storage
            .policy(slot)
            .map_or(0, |w| w.load(Ordering::Relaxed)),
        group: if groups {
            storage.load_group(slot)
        } else {
            NO_GROUP
        },
    }
}

/// Copies the item in `slot` out; `copy(field, words)` reads the field's row
/// with `Relaxed` loads and may be called several times (retries), the last
/// call's result is the consistent one.
///
/// Inlined: it runs once per sampled row, and as a call it spilled the
/// caller's loop state to the stack (`perf annotate`).
#[inline(always)]
pub(crate) fn read(
    storage: Slots<'_>,
    slot: usize,
    mut copy: impl FnMut(usize, &[AtomicU64]),
) -> ReadOutcome {
    let seq = storage.seq(slot);
    loop {
        // Acquire, pairs with the Release publish in `write`: the words of
        // the write that produced `v1` are visible.
        let v1 = seq.load(Ordering::Acquire);
        if v1 & 1 == 1 {
            crate::loom::spin_loop();
            continue;
        }
        if v1 == 0 {
            // Never written: the word only grows, so 0 is its first value.
            return ReadOutcome::Empty;
        }
        let meta = metadata(storage, slot, v1, storage.groups_recorded());
        for field in 0..storage.num_fields() {
            copy(field, storage.row(field, slot));
        }
        // Acquire fence, pairs with the Release fence in `write`: if any
        // load above saw a newer writer's store, the load below sees that
        // writer's odd word (or a later one).
        fence(Ordering::Acquire);
        // Relaxed: ordered by the fence above.
        if seq.load(Ordering::Relaxed) == v1 {
            return ReadOutcome::Item(meta);
        }
        crate::loom::spin_loop();
    }
}

/// The first half of a read, for copying many slots at once (a sample's
/// chunk, see `Shared::gather`): the `Acquire` sequence load. Then, per
/// slot, [`metadata`] and the copy; then [`end_reads`] once and
/// [`validate`] per slot: the same steps as [`read`], in the same order per
/// slot (other slots' loads in between change nothing in the argument of
/// `README.md`). A slot that does not validate (a writer was inside, it is
/// empty, or its word moved) is read again alone with [`read`].
#[inline(always)]
pub(crate) fn begin_read(storage: Slots<'_>, slot: usize) -> u64 {
    // Acquire, pairs with the Release publish in `write`.
    storage.seq(slot).load(Ordering::Acquire)
}

/// Orders every copy made since the [`begin_read`]s before the
/// [`validate`] loads that follow (the `Acquire` fence of [`read`]; pairs
/// with the Release fence in `write`).
#[inline(always)]
pub(crate) fn end_reads() {
    fence(Ordering::Acquire);
}

/// Whether the copy of `slot` begun at sequence word `v1` is a consistent
/// copy of an item: `v1` is even (no writer was inside), not 0 (the slot
/// held an item) and the word has not moved. Relaxed: ordered by
/// [`end_reads`]. Branch-free (`&`, not `&&`): a sample validates a chunk
/// of rows at once and almost all pass.
#[inline(always)]
pub(crate) fn validate(storage: Slots<'_>, slot: usize, v1: u64) -> bool {
    (v1 & 1 == 0) & (v1 != 0) & (storage.seq(slot).load(Ordering::Relaxed) == v1)
}

/// Copies a row's words into `dst` (the row's bytes, unpadded). Always
/// inlined: it runs per sampled row and field (`SampleBatch::copy_rows`).
#[inline(always)]
pub(crate) fn copy_out(words: &[AtomicU64], dst: &mut [u8]) {
    let mut chunks = dst.chunks_exact_mut(8);
    for (c, w) in (&mut chunks).zip(words) {
        // Relaxed: validated by the version check in `read`.
        c.copy_from_slice(&w.load(Ordering::Relaxed).to_ne_bytes());
    }
    let rest = chunks.into_remainder();
    if !rest.is_empty() {
        if let Some(last) = words.last() {
            let b = last.load(Ordering::Relaxed).to_ne_bytes();
            rest.copy_from_slice(&b[..rest.len()]);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::layout::ItemLayout;
    use crate::storage::{Storage, StorageOrder};

    /// The sequence word must only grow (`read` trusts an unchanged word):
    /// a write of the key already in the slot, or an older one, is refused
    /// and leaves the word as it was.
    #[test]
    fn a_key_at_or_below_the_slots_is_superseded_and_the_word_only_grows() {
        let layout = ItemLayout::builder()
            .field("x", DType::U64, &[1])
            .build()
            .expect("layout");
        let s = Storage::memory(&layout, 1, StorageOrder::Records).expect("storage");
        let w = |key: u64| write(s.slots(), 0, key, NO_GROUP, |_, _, _| {});
        assert_eq!(w(3), WriteOutcome::Written { previous: 0 });
        let word = s.slots().seq(0).load(Ordering::Relaxed);
        assert_eq!(word, stamp(3));
        assert_eq!(w(3), WriteOutcome::Superseded);
        assert_eq!(w(2), WriteOutcome::Superseded);
        assert_eq!(s.slots().seq(0).load(Ordering::Relaxed), word);
        assert_eq!(w(4), WriteOutcome::Written { previous: 4 });
        assert_eq!(s.published(0), 5);
    }
}
