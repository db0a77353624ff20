//! [`Prioritized`]: proportional prioritized replay (Schaul et al., "
//! Prioritized Experience Replay", ICLR 2016).
//!
//! `P(i) = p_i^alpha / sum_k p_k^alpha` with `p_i = |priority_i| + eps`; new
//! items get the largest priority seen so far. Importance weights
//! `w_i = (N P(i))^-beta / max_j w_j = (min_j p_j^alpha / p_i^alpha)^beta`,
//! i.e. normalised by the largest weight in the buffer (the min tree gives
//! `min p^alpha` in O(1)). Sampling is stratified: `n` equal segments of the
//! total mass, one uniform draw in each.
//!
//! The [`SumTree`] sits under a mutex held for the index search or the
//! leaf updates of one batch (a few microseconds at 1M items), never for a
//! slot copy. Cost: O(n log8 N) per batch of `n`, in both directions.
use std::sync::{Mutex, MutexGuard, PoisonError};

use serde::{Deserialize, Serialize};

use super::power::pow_in_place;
use super::state::SamplerState;
use super::sum_tree::{Found, SumTree};
use crate::batch::SampleBatch;
use crate::error::ReplayError;
use crate::item_key::ItemKey;
use crate::rng::WyRand;
use crate::shared::Shared;

/// Parameters of prioritized sampling.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PrioritizedConfig {
    /// Priority exponent (0: uniform, 1: fully proportional).
    pub alpha: f64,
    /// Importance-weight exponent (0: no correction, 1: full).
    pub beta: f64,
    /// Added to every priority so no item becomes unsampleable.
    pub eps: f64,
}

impl Default for PrioritizedConfig {
    fn default() -> Self {
        PrioritizedConfig {
            alpha: 0.6,
            beta: 0.4,
            eps: 1e-6,
        }
    }
}

impl PrioritizedConfig {
    pub(crate) fn validate(&self) -> Result<(), ReplayError> {
        let ok = |x: f64| x.is_finite() && x >= 0.0;
        if !(ok(self.alpha) && ok(self.beta) && ok(self.eps)) {
            return Err(ReplayError::config(format!(
                "prioritized alpha, beta, eps must be finite and >= 0: {self:?}"
            )));
        }
        Ok(())
    }
}

/// Outcome of a priority update.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PriorityUpdate {
    /// Priorities written.
    pub applied: usize,
    /// Keys whose item was overwritten (or never existed): ignored.
    pub stale: usize,
    /// Priorities that were NaN, infinite or negative: ignored.
    pub invalid: usize,
}

#[derive(Debug)]
struct State {
    tree: SumTree,
    /// Largest `priority + eps` seen; new items get it.
    max_priority: f64,
    targets: Vec<f64>,
    nodes: Vec<usize>,
    found: Vec<Found>,
    /// `(slot, leaf value)` scratch of `update`, reused across calls.
    updates: Vec<(usize, f64)>,
    /// `p^alpha` of those updates, computed together (vectorised).
    values: Vec<f32>,
}

/// The sum tree's totals at one moment: what a caller sampling across
/// several prioritized buffers needs to pick between them in proportion to
/// their mass and to put their importance weights on one scale.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PriorityMass {
    /// `sum_k p_k^alpha` over the stored items (0 when empty).
    pub total: f64,
    /// `min_k p_k^alpha` over the stored items (`INFINITY` when empty): the
    /// weights a sample returns are `(min_positive / p_i^alpha)^beta`.
    pub min_positive: f64,
}

#[derive(Debug)]
pub(crate) struct Prioritized {
    config: PrioritizedConfig,
    state: Mutex<State>,
}

impl Prioritized {
    pub(crate) fn new(config: PrioritizedConfig, capacity: usize) -> Self {
        Prioritized {
            config,
            state: Mutex::new(State {
                tree: SumTree::new(capacity),
                max_priority: 1.0,
                targets: Vec::new(),
                nodes: Vec::new(),
                found: Vec::new(),
                updates: Vec::new(),
                values: Vec::new(),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The tree is consistent between `set_many` calls; a panic inside one
        // would be a bug we would rather surface as skewed sampling than as
        // a second panic in every thread.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn on_publish(&self, shared: &Shared, first: u64, count: usize) {
        let mut st = self.lock();
        let value = st.max_priority.powf(self.config.alpha);
        st.tree
            .set_many((first..first + count as u64).map(|k| (shared.slot_of(k), value)));
    }

    /// After a reopen: the stored items in `slots` all get the leaf a new
    /// item gets, in one O(capacity) pass (`SumTree::assign`).
    pub(crate) fn restore_stored(&self, slots: impl IntoIterator<Item = usize>) {
        let mut st = self.lock();
        let value = st.max_priority.powf(self.config.alpha);
        st.tree.assign(slots.into_iter().map(|slot| (slot, value)));
    }

    pub(crate) fn mass(&self) -> PriorityMass {
        let st = self.lock();
        PriorityMass {
            total: st.tree.total(),
            min_positive: st.tree.min_positive(),
        }
    }

    pub(crate) fn sample(
        &self,
        shared: &Shared,
        batch: &mut SampleBatch,
        n: usize,
        rng: &mut WyRand,
    ) -> Result<(), ReplayError> {
        let slots = shared.storage.slots();
        // The picked slots and their importance weights.
        let mut chunk = Vec::with_capacity(n);
        let mut weights = Vec::with_capacity(n);
        {
            let mut st = self.lock();
            let total = st.tree.total();
            if total <= 0.0 || n == 0 {
                return Err(ReplayError::NotEnoughItems {
                    requested: n,
                    available: 0,
                });
            }
            let min = st.tree.min_positive();
            let State {
                tree,
                targets,
                nodes,
                found,
                ..
            } = &mut *st;
            targets.clear();
            let segment = total / n as f64;
            targets.extend((0..n).map(|i| (i as f64 + rng.unit_f64()) * segment));
            tree.find_many(targets, nodes, found);
            chunk.extend(found.iter().map(|f| f.leaf));
            // `p_min / p_i` for now (in `f64`: an `f32` could underflow).
            weights.extend(found.iter().map(|f| (min / f.value) as f32));
        }
        // Outside the lock: prefetch the slots and raise the weights to
        // `beta` (in `f32`: the weight is an `f32` anyway), then copy.
        // Interleaved 8 at a time, the prefetches are spread over the
        // arithmetic; back to back, 128 of them filled the core's miss
        // buffers and stalled it.
        let beta = self.config.beta as f32;
        for (slots_8, weights_8) in chunk.chunks(8).zip(weights.chunks_mut(8)) {
            for &slot in slots_8 {
                slots.touch(slot);
            }
            pow_in_place(weights_8, beta);
        }
        shared.gather(slots, batch, &chunk, |j| weights[j]);
        Ok(())
    }

    /// Sets priorities of items still stored; others are counted stale.
    pub(crate) fn update(
        &self,
        shared: &Shared,
        keys: &[ItemKey],
        priorities: &[f32],
    ) -> PriorityUpdate {
        let mut report = PriorityUpdate::default();
        let mut guard = self.lock();
        let st = &mut *guard;
        let mut updates = std::mem::take(&mut st.updates);
        updates.clear();
        let mut values = std::mem::take(&mut st.values);
        values.clear();
        for (&key, &p) in keys.iter().zip(priorities) {
            let slot = shared.slot_of(key.0);
            // Checked under the tree lock: a writer replacing this item
            // publishes before it takes the lock to set its own priority, so
            // either we see the new key here (stale) or its value lands
            // after ours.
            if shared.storage.published(slot) != key.0 + 1 {
                report.stale += 1;
                continue;
            }
            let p = f64::from(p).abs() + self.config.eps;
            if !p.is_finite() {
                report.invalid += 1;
                continue;
            }
            st.max_priority = st.max_priority.max(p);
            updates.push((slot, 0.0));
            // In `f32`: the leaf is an `f32` anyway.
            values.push(p as f32);
            report.applied += 1;
        }
        pow_in_place(&mut values, self.config.alpha as f32);
        for (u, &v) in updates.iter_mut().zip(&values) {
            u.1 = f64::from(v);
        }
        st.tree.set_batch(&updates);
        // Kept for the next call: no allocation per update.
        st.updates = updates;
        st.values = values;
        report
    }

    pub(crate) fn save(&self, shared: &Shared, st: &mut SamplerState) {
        // Copied in chunks so writers waiting to set a leaf wait at most one
        // chunk.
        const CHUNK: usize = 4096;
        let cap = shared.capacity as usize;
        st.priorities = Vec::with_capacity(cap);
        let mut start = 0;
        while start < cap {
            let s = self.lock();
            let end = (start + CHUNK).min(cap);
            st.priorities.extend((start..end).map(|i| s.tree.get(i)));
            st.max_priority = s.max_priority;
            start = end;
        }
    }

    pub(crate) fn restore(&self, saved: &SamplerState, capacity: usize) -> Result<(), String> {
        if saved.priorities.len() != capacity {
            return Err(format!(
                "{} priorities saved, capacity is {capacity}",
                saved.priorities.len()
            ));
        }
        if saved
            .priorities
            .iter()
            .any(|p| !(p.is_finite() && *p >= 0.0))
        {
            return Err("a saved priority is negative or not finite".into());
        }
        // Every new item's leaf is `max_priority^alpha`: a negative value
        // would make it NaN and poison the tree's sums, zero would make new
        // items unsampleable. (It starts at 1 and only grows.)
        if !(saved.max_priority.is_finite() && saved.max_priority > 0.0) {
            return Err(format!(
                "saved max_priority {} is not a finite positive number",
                saved.max_priority
            ));
        }
        let mut st = self.lock();
        st.max_priority = saved.max_priority;
        st.tree
            .set_many(saved.priorities.iter().copied().enumerate());
        Ok(())
    }
}
