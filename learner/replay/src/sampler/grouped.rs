//! [`Grouped`]: grouped release, after the trajectory-pool design. Items
//! inserted with a group id stay hidden until the group is completed; ready
//! groups come out FIFO by completion time, each item once. An item
//! inserted without a group is a group of one, ready at once.
//!
//! When a writer displaces an item whose group is not yet consumed (the
//! buffer is full under `OverwriteOldest`/`DropOldest`), the whole group is
//! dropped. A group that loses an item after it was taken (a writer
//! lapping the ring before the copy, or the lag cap) is taken back out of
//! the batch and dropped too: `sample_group` never serves a partial group.
//!
//! The group table sits under a short mutex (group completion is rare and
//! samples take whole index lists at once); copies happen after it is
//! released. Cost O(1) per item, O(groups) to drop a ready group.
use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::state::SamplerState;
use crate::batch::{LostRows, SampleBatch};
use crate::error::ReplayError;
use crate::group_id::NO_GROUP;
use crate::shared::Shared;
use crate::slot::ReadOutcome;

#[derive(Debug, Default)]
struct OpenGroup {
    keys: Vec<u64>,
    /// An item was displaced before completion: drop on completion.
    broken: bool,
}

#[derive(Debug, Default)]
struct Table {
    open: HashMap<u64, OpenGroup>,
    ready: VecDeque<(u64, VecDeque<u64>)>,
    ready_items: usize,
    /// Group of each pending (inserted, not consumed) key.
    pending: HashMap<u64, u64>,
}

#[derive(Debug)]
pub(crate) struct Grouped {
    table: Mutex<Table>,
}

impl Grouped {
    pub(crate) fn new() -> Self {
        Grouped {
            table: Mutex::new(Table::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Table> {
        // Each operation leaves the table consistent before any call that
        // could panic.
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn drop_group(t: &mut Table, shared: &Shared, group: u64, except: u64) {
        if let Some(g) = t.open.get_mut(&group) {
            g.broken = true;
            return;
        }
        if let Some(i) = t.ready.iter().position(|(id, _)| *id == group) {
            if let Some((_, keys)) = t.ready.remove(i) {
                t.ready_items -= keys.len();
                for k in keys {
                    t.pending.remove(&k);
                    if k != except {
                        shared.drop_item(shared.slot_of(k), k);
                    }
                }
            }
        }
    }

    pub(crate) fn on_publish(
        &self,
        shared: &Shared,
        first: u64,
        count: usize,
        groups: &dyn Fn(usize) -> u64,
    ) {
        let mut t = self.lock();
        for (i, key) in (first..first + count as u64).enumerate() {
            // The key this one displaced, if it was still pending.
            if let Some(old) = key.checked_sub(shared.capacity) {
                if let Some(g) = t.pending.remove(&old) {
                    Self::drop_group(&mut t, shared, g, old);
                }
            }
            let group = groups(i);
            if group == NO_GROUP {
                t.ready.push_back((NO_GROUP, VecDeque::from([key])));
                t.ready_items += 1;
            } else {
                t.open.entry(group).or_default().keys.push(key);
            }
            t.pending.insert(key, group);
        }
    }

    /// Releases `group`; returns the number of items made sampleable (0 if
    /// the group was unknown or broken, in which case its items are dropped).
    pub(crate) fn complete(&self, shared: &Shared, group: u64) -> usize {
        let mut t = self.lock();
        let Some(g) = t.open.remove(&group) else {
            return 0;
        };
        let live: VecDeque<u64> = g
            .keys
            .into_iter()
            .filter(|k| t.pending.contains_key(k))
            .collect();
        if g.broken {
            for k in live {
                t.pending.remove(&k);
                shared.drop_item(shared.slot_of(k), k);
            }
            return 0;
        }
        let n = live.len();
        t.ready_items += n;
        t.ready.push_back((group, live));
        n
    }

    pub(crate) fn available(&self) -> usize {
        self.lock().ready_items
    }

    /// Takes `n` keys (or exactly the first ready group when `n` is `None`).
    fn take(&self, n: Option<usize>, max_rows: usize) -> Result<Vec<(u64, u64)>, ReplayError> {
        let mut t = self.lock();
        let mut out = Vec::new();
        match n {
            Some(n) => {
                if t.ready_items < n {
                    return Err(ReplayError::NotEnoughItems {
                        requested: n,
                        available: t.ready_items,
                    });
                }
                while out.len() < n {
                    let Some((group, keys)) = t.ready.front_mut() else {
                        break;
                    };
                    let group = *group;
                    match keys.pop_front() {
                        Some(k) => out.push((k, group)),
                        None => {
                            t.ready.pop_front();
                        }
                    }
                }
                if t.ready.front().is_some_and(|(_, k)| k.is_empty()) {
                    t.ready.pop_front();
                }
            }
            None => {
                let Some((group, keys)) = t.ready.front() else {
                    return Err(ReplayError::NotEnoughItems {
                        requested: 1,
                        available: 0,
                    });
                };
                if keys.len() > max_rows {
                    return Err(ReplayError::TooLarge {
                        requested: keys.len(),
                        limit: max_rows,
                    });
                }
                let group = *group;
                if let Some((_, keys)) = t.ready.pop_front() {
                    out.extend(keys.into_iter().map(|k| (k, group)));
                }
            }
        }
        t.ready_items -= out.len();
        for (k, _) in &out {
            t.pending.remove(k);
        }
        Ok(out)
    }

    /// Copies the items of `keys` into the batch and retires them.
    ///
    /// With `whole` (one group handed out by `sample_group`), either every
    /// item lands in the batch or none does: an item can still go missing
    /// after `take`, because a writer lapping the ring overwrote it before
    /// the copy (the writer counts it in `evicted_unconsumed`) or the lag
    /// cap drops it. Then the group's rows are taken out of the batch
    /// again and its surviving items dropped (`dropped_with_group`), so a
    /// partial group is never served. Returns whether the batch got them
    /// all.
    fn copy(shared: &Shared, batch: &mut SampleBatch, keys: Vec<(u64, u64)>, whole: bool) -> bool {
        let slots = shared.storage.slots();
        let start = batch.len();
        let mut complete = true;
        // Keys read whole, and whether their row was kept (not lag-dropped).
        let mut copied = Vec::with_capacity(keys.len());
        for (key, _) in keys {
            let slot = shared.slot_of(key);
            match shared.copy_row(slots, slot, batch) {
                ReadOutcome::Item(meta) if meta.key == key => {
                    let kept = shared.offer(batch, meta, 1.0);
                    complete &= kept;
                    copied.push((key, kept));
                }
                // Overwritten since `take`: the writer counted it.
                _ => complete = false,
            }
        }
        if whole && complete {
            // A whole group's variable-length values, read now: a row lost
            // to an overwrite breaks the group like a missing item.
            if let Some(heap) = shared.storage.heap() {
                complete = batch.resolve_variable(heap, LostRows::Drop) == 0;
            }
        }
        let undo = whole && !complete;
        if undo {
            batch.truncate(start);
        }
        // Retired only now, so a `Block` writer cannot reuse a slot of a
        // group that may still be taken back out of the batch. A lag-dropped
        // item was counted by the cap; the rows taken back, with the group.
        for (key, kept) in copied {
            if undo && kept {
                shared.drop_item(shared.slot_of(key), key);
            } else {
                shared.retire(shared.slot_of(key), key);
            }
        }
        !undo
    }

    pub(crate) fn sample(
        &self,
        shared: &Shared,
        batch: &mut SampleBatch,
        n: usize,
    ) -> Result<(), ReplayError> {
        let keys = self.take(Some(n), batch.max_rows())?;
        Self::copy(shared, batch, keys, false);
        Ok(())
    }

    /// Hands out the oldest ready group whole; returns its id. A group that
    /// lost an item since it was ready is dropped and the next one tried.
    pub(crate) fn sample_group(
        &self,
        shared: &Shared,
        batch: &mut SampleBatch,
    ) -> Result<u64, ReplayError> {
        loop {
            let keys = self.take(None, batch.max_rows())?;
            let group = keys.first().map_or(NO_GROUP, |(_, g)| *g);
            if Self::copy(shared, batch, keys, true) {
                return Ok(group);
            }
        }
    }

    pub(crate) fn save(&self, st: &mut SamplerState) {
        let t = self.lock();
        let mut open: Vec<_> = t
            .open
            .iter()
            .map(|(id, g)| (*id, g.keys.clone(), g.broken))
            .collect();
        open.sort_by_key(|(id, _, _)| *id);
        st.open_groups = open;
        st.ready_groups = t
            .ready
            .iter()
            .map(|(id, keys)| (*id, keys.iter().copied().collect()))
            .collect();
    }

    pub(crate) fn restore(&self, st: &SamplerState) {
        let mut t = self.lock();
        *t = Table::default();
        for (id, keys, broken) in &st.open_groups {
            for k in keys {
                t.pending.insert(*k, *id);
            }
            t.open.insert(
                *id,
                OpenGroup {
                    keys: keys.clone(),
                    broken: *broken,
                },
            );
        }
        for (id, keys) in &st.ready_groups {
            for k in keys {
                t.pending.insert(*k, *id);
            }
            t.ready_items += keys.len();
            t.ready.push_back((*id, keys.iter().copied().collect()));
        }
    }
}
