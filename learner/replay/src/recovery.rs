//! The scan of a reopened mapped storage: slots a crash left mid-write are
//! emptied, and the next key and the stored and retired counts are read
//! back from the slots. Whether any item was stored in a group needs no
//! scan: the storage's flag word says so (`storage.rs`).
//!
//! Why its own file: `ReplayBuffer::open_mapped` runs it before the storage
//! is shared; it needs the storage's words and nothing of the buffer or of
//! checkpoints. A layout with variable-length fields also has each stored
//! item's heap references checked (a slot whose values' segment is gone is
//! emptied) and the segments no item refers to deleted (`heap.rs`).
//! Cost: one pass over the slots' sequence words (plus the retire stamps of
//! the stored ones if any stamp was ever stored, and their heap
//! references).
use crate::heap::HeapRef;
use crate::loom::atomic::Ordering;
use crate::storage::Storage;

/// Result of scanning a reopened mapped storage.
#[derive(Debug, Default)]
pub(crate) struct Recovered {
    pub claimed: u64,
    pub stored: u64,
    pub retired: u64,
}

/// Empties slots a crash left mid-write and finds the next key. Runs
/// before the storage is shared.
pub(crate) fn recover_slots(storage: &Storage) -> Recovered {
    let mut r = Recovered::default();
    let slots = storage.slots();
    // Without a stamp ever stored the retire column is all zeros (in a
    // sparse file, holes): neither read nor cleared, so not faulted in.
    let retires = slots.retires_recorded();
    let clear_retired = |slot: usize| {
        if retires {
            slots.retired(slot).store(0, Ordering::Relaxed);
        }
    };
    for slot in 0..storage.capacity() {
        let seq = slots.seq(slot);
        let s = seq.load(Ordering::Relaxed);
        if s & 1 == 1 {
            // Caught mid-write: the contents are not trustworthy.
            seq.store(0, Ordering::Relaxed);
            clear_retired(slot);
            tracing::warn!(slot, "replay: slot caught mid-write, emptied on reopen");
            continue;
        }
        let published = s >> 1;
        if published != 0 && !variable_rows_intact(storage, slot, published - 1) {
            // A reference into a segment that is gone or too short: the
            // item's values did not survive (or the slot is damaged).
            seq.store(0, Ordering::Relaxed);
            clear_retired(slot);
            tracing::warn!(
                slot,
                "replay: slot's variable-length values are missing, emptied on reopen"
            );
            continue;
        }
        if published != 0 {
            r.claimed = r.claimed.max(published);
            r.stored += 1;
            if retires && slots.retired(slot).load(Ordering::Relaxed) == published {
                r.retired += 1;
            }
        }
    }
    if let Some(heap) = storage.heap() {
        #[cfg(not(loom))]
        heap.finish_reopen();
        #[cfg(loom)]
        let _ = heap;
    }
    r
}

/// Whether every variable-length row of the item `key` in `slot` points
/// into a segment of the reopened heap (and notes the key there); true
/// without a heap.
fn variable_rows_intact(storage: &Storage, slot: usize, key: u64) -> bool {
    let Some(heap) = storage.heap() else {
        return true;
    };
    let slots = storage.slots();
    (0..slots.num_fields()).all(|f| {
        let g = slots.field(f);
        match storage.variable_unit(f) {
            None => true,
            Some(unit) => {
                let Some([a, b]) = slots.row_words::<2>(g, slot) else {
                    return false;
                };
                let r = HeapRef::from_words([a.load(Ordering::Relaxed), b.load(Ordering::Relaxed)]);
                heap.check_reopened(r, r.len as usize * unit, key)
            }
        }
    })
}
