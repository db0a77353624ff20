//! [`Fifo`]: consume-once, oldest first; the V-trace queue.
//!
//! Keys are handed out in order by a cursor. A sample claims `n` consecutive
//! published keys with one CAS, all or nothing, copies them, and retires each
//! slot so a blocked writer may reuse it. Lock-free; cost O(n) per batch plus
//! one CAS (retried only when another sampler won the same keys).
use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_utils::CachePadded;

use crate::batch::SampleBatch;
use crate::error::ReplayError;
use crate::shared::Shared;
use crate::slot::ReadOutcome;

#[derive(Debug)]
pub(crate) struct Fifo {
    /// Next key to hand out; only moves forward. Writers: samplers (CAS);
    /// readers: samplers. AcqRel CAS / Acquire load: a sampler that sees the
    /// cursor past `k` also sees the claimer's earlier reads of the published
    /// stamps as done; item data itself is ordered by the slot protocol.
    cursor: CachePadded<AtomicU64>,
}

/// Keys ready at the cursor.
enum Head {
    /// `count` consecutive published keys from `start`.
    Ready { start: u64, count: usize },
    /// The cursor's key was overwritten; move the cursor to `to`.
    Skip { from: u64, to: u64 },
}

impl Fifo {
    pub(crate) fn new() -> Self {
        Fifo {
            cursor: CachePadded::new(AtomicU64::new(0)),
        }
    }

    pub(crate) fn cursor(&self) -> u64 {
        self.cursor.load(Ordering::Acquire)
    }

    pub(crate) fn restore(&self, cursor: u64) {
        self.cursor.store(cursor, Ordering::Release);
    }

    fn head(&self, shared: &Shared, want: usize) -> Head {
        let start = self.cursor.load(Ordering::Acquire);
        let mut count = 0;
        while count < want {
            let key = start + count as u64;
            let published = shared.storage.published(shared.slot_of(key));
            if published == key + 1 {
                count += 1;
            } else if published > key + 1 && count == 0 {
                // Lapped by writers (overwrite policies): the oldest key that
                // can still be stored is `next_key - capacity`.
                let oldest = shared.claimed().saturating_sub(shared.capacity);
                return Head::Skip {
                    from: start,
                    to: oldest.max(start + 1),
                };
            } else {
                break;
            }
        }
        Head::Ready { start, count }
    }

    /// Items published and not consumed: O(1) from the counters (a scan
    /// from the cursor, as a sample makes, would cost the whole table on
    /// a large one). It can count a few items a sample would not take yet:
    /// those published past a key a writer has claimed and not published.
    pub(crate) fn available(&self, shared: &Shared) -> usize {
        shared.stored()
    }

    pub(crate) fn sample(
        &self,
        shared: &Shared,
        batch: &mut SampleBatch,
        n: usize,
    ) -> Result<(), ReplayError> {
        let slots = shared.storage.slots();
        let mut first_claim = true;
        while batch.len() < n {
            let want = n - batch.len();
            let (start, count) = match self.head(shared, want) {
                Head::Skip { from, to } => {
                    let _ =
                        self.cursor
                            .compare_exchange(from, to, Ordering::AcqRel, Ordering::Acquire);
                    continue;
                }
                Head::Ready { start, count } => (start, count),
            };
            if count < want {
                if first_claim {
                    return Err(ReplayError::NotEnoughItems {
                        requested: n,
                        available: count,
                    });
                }
                // Some claimed items were lost to lag drops or overwrites and
                // no replacements exist yet: hand out what we have.
                return Ok(());
            }
            if self
                .cursor
                .compare_exchange(
                    start,
                    start + want as u64,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                )
                .is_err()
            {
                continue;
            }
            first_claim = false;
            for key in start..start + want as u64 {
                slots.touch(shared.slot_of(key));
            }
            for key in start..start + want as u64 {
                let slot = shared.slot_of(key);
                match shared.copy_row(slots, slot, batch) {
                    ReadOutcome::Item(meta) if meta.key == key => {
                        shared.offer(batch, meta, 1.0);
                        shared.retire(slot, key);
                    }
                    // Overwritten after the claim; the writer counted it.
                    _ => {}
                }
            }
        }
        Ok(())
    }
}
