//! The scan of a reopened mapped storage: slots a crash left mid-write are
//! emptied, and the next key, the stored and retired counts and whether any
//! item was stored in a group are read back from the slots.
//!
//! Why its own file: `ReplayBuffer::open_mapped` runs it before the storage
//! is shared; it needs the storage's words and nothing of the buffer or of
//! checkpoints. Cost: one pass over the slots' sequence words (plus the
//! cold columns of the stored ones).
use crate::group_id::NO_GROUP;
use crate::loom::atomic::Ordering;
use crate::storage::Storage;

/// Result of scanning a reopened mapped storage.
#[derive(Debug, Default)]
pub(crate) struct Recovered {
    pub claimed: u64,
    pub stored: u64,
    pub retired: u64,
}

/// Empties slots a crash left mid-write, finds the next key and notes
/// whether any item was stored in a group. Runs before the storage is
/// shared.
pub(crate) fn recover_slots(storage: &Storage) -> Recovered {
    let mut r = Recovered::default();
    let slots = storage.slots();
    for slot in 0..storage.capacity() {
        let seq = slots.seq(slot);
        let s = seq.load(Ordering::Relaxed);
        if s & 1 == 1 {
            // Caught mid-write: the contents are not trustworthy.
            seq.store(0, Ordering::Relaxed);
            slots.retired(slot).store(0, Ordering::Relaxed);
            tracing::warn!(slot, "replay: slot caught mid-write, emptied on reopen");
            continue;
        }
        let published = s >> 1;
        if published != 0 {
            r.claimed = r.claimed.max(published);
            r.stored += 1;
            if slots.retired(slot).load(Ordering::Relaxed) == published {
                r.retired += 1;
            }
            if slots.group(slot).load(Ordering::Relaxed) != NO_GROUP {
                slots.record_groups();
            }
        }
    }
    r
}
