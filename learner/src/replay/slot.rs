//! The slot protocol: a seqlock per slot so writers never wait for readers
//! and readers never return a torn item.
//!
//! Why: samplers copy items while writers overwrite old slots; a lock per
//! slot would make every sample contend with inserts. Instead each slot has a
//! version word (odd while written); a reader copies, then checks the version
//! did not move, and retries if it did (verify after copy). All data words
//! are accessed with `Relaxed` atomics, so the racing copy is defined
//! behaviour and the fences below order it (Boehm, "Can seqlocks get along
//! with programming language memory models?", MSPC 2012, fig. 6).
//! Cost: a write is one CAS, two Release stores and the copy; a read is two
//! loads, one Acquire fence and the copy (plus a retry if it raced a write).
//!
//! The full protocol and its proof sketch are in `README.md`.
use super::storage::{Slots, META_GROUP, META_KEY, META_POLICY, META_PUBLISHED, META_VERSION};
use crate::loom::atomic::{fence, AtomicU64, Ordering};

/// Metadata stored with each item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ItemMeta {
    pub key: u64,
    pub policy_version: u64,
    pub group: u64,
}

/// What `write` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WriteOutcome {
    /// Written; `previous` is `key + 1` of the item it replaced (0: none).
    Written { previous: u64 },
    /// A newer key already occupies the slot (the ring lapped this writer);
    /// nothing was written.
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

/// Writes an item into `slot`. `fill(field, words)` stores the field's row
/// with `Relaxed` stores.
///
/// Inlined: it runs once per inserted item, and as a call its closure's
/// state went through the stack.
#[inline(always)]
pub(crate) fn write(
    storage: Slots<'_>,
    slot: usize,
    meta: ItemMeta,
    mut fill: impl FnMut(usize, &[AtomicU64]),
) -> WriteOutcome {
    let m = storage.meta(slot);
    let version = &m[META_VERSION];
    // Take the slot: even -> odd. Acquire, pairs with the Release version
    // store of the previous writer, so its key is visible to the check below.
    let mut v = version.load(Ordering::Relaxed);
    loop {
        if v & 1 == 1 {
            // Another writer (lapped ring) is inside; it is short.
            crate::loom::spin_loop();
            v = version.load(Ordering::Relaxed);
            continue;
        }
        match version.compare_exchange_weak(v, v + 1, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => break,
            Err(now) => v = now,
        }
    }
    // Release fence: no data store below may be seen by a reader whose
    // Acquire fence (in `read`) then still sees the old even version. Pairs
    // with the Acquire fence in `read`.
    fence(Ordering::Release);
    // Relaxed: we own the slot (odd version); these words are only ours.
    let previous = m[META_KEY].load(Ordering::Relaxed);
    if previous > meta.key + 1 {
        // Back to the version we found: the contents did not change.
        // Release, pairs with the Acquire version load in `read`.
        version.store(v, Ordering::Release);
        return WriteOutcome::Superseded;
    }
    m[META_KEY].store(meta.key + 1, Ordering::Relaxed);
    m[META_POLICY].store(meta.policy_version, Ordering::Relaxed);
    m[META_GROUP].store(meta.group, Ordering::Relaxed);
    for field in 0..storage.num_fields() {
        fill(field, storage.row(field, slot));
    }
    // Publish: Release, pairs with the Acquire version load in `read`.
    version.store(v + 2, Ordering::Release);
    // Release, pairs with the Acquire in `Storage::published` (FIFO claims,
    // stale-key checks); stored after the version so a claimer that sees it
    // also sees the even version.
    m[META_PUBLISHED].store(meta.key + 1, Ordering::Release);
    WriteOutcome::Written { previous }
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
    let m = storage.meta(slot);
    let version = &m[META_VERSION];
    loop {
        // Acquire, pairs with the Release version stores in `write`: the
        // words of the write that produced `v1` are visible.
        let v1 = version.load(Ordering::Acquire);
        if v1 & 1 == 1 {
            crate::loom::spin_loop();
            continue;
        }
        let key = m[META_KEY].load(Ordering::Relaxed);
        if key == 0 {
            if version.load(Ordering::Acquire) == v1 {
                return ReadOutcome::Empty;
            }
            continue;
        }
        let policy_version = m[META_POLICY].load(Ordering::Relaxed);
        let group = m[META_GROUP].load(Ordering::Relaxed);
        for field in 0..storage.num_fields() {
            copy(field, storage.row(field, slot));
        }
        // Acquire fence, pairs with the Release fence in `write`: if any
        // load above saw a newer writer's store, the version load below sees
        // that writer's odd (or a later) version.
        fence(Ordering::Acquire);
        // Relaxed: ordered by the fence above.
        let v2 = version.load(Ordering::Relaxed);
        if v1 == v2 {
            return ReadOutcome::Item(ItemMeta {
                key: key - 1,
                policy_version,
                group,
            });
        }
        crate::loom::spin_loop();
    }
}

/// The first half of a read, for copying many slots at once (a sample's
/// chunk, see `Shared::gather`): the `Acquire` version load and the
/// metadata. `None` if a writer is inside or the slot is empty; the caller
/// then reads that slot alone with [`read`]. After copying the rows, call
/// [`end_reads`] once and [`validate`] for each slot: the same steps as
/// [`read`], in the same order per slot (other slots' loads in between
/// change nothing in the argument of `README.md`).
#[inline(always)]
pub(crate) fn begin_read(storage: Slots<'_>, slot: usize) -> Option<(u64, ItemMeta)> {
    let m = storage.meta(slot);
    // Acquire, pairs with the Release version stores in `write`.
    let v1 = m[META_VERSION].load(Ordering::Acquire);
    let key = m[META_KEY].load(Ordering::Relaxed);
    if v1 & 1 == 1 || key == 0 {
        return None;
    }
    Some((
        v1,
        ItemMeta {
            key: key - 1,
            policy_version: m[META_POLICY].load(Ordering::Relaxed),
            group: m[META_GROUP].load(Ordering::Relaxed),
        },
    ))
}

/// Orders every copy made since the [`begin_read`]s before the
/// [`validate`] loads that follow (the `Acquire` fence of [`read`]; pairs
/// with the Release fence in `write`).
#[inline(always)]
pub(crate) fn end_reads() {
    fence(Ordering::Acquire);
}

/// Whether the copy of `slot` begun at version `v1` is consistent: the
/// version has not moved. Relaxed: ordered by [`end_reads`].
#[inline(always)]
pub(crate) fn validate(storage: Slots<'_>, slot: usize, v1: u64) -> bool {
    storage.meta(slot)[META_VERSION].load(Ordering::Relaxed) == v1
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
