//! The buffer's statistic counters ([`Counters`]) and their saved values
//! ([`CounterValues`], carried by checkpoints and reopens).
//!
//! Why its own file: writers, samplers (through `Shared`) and the buffer
//! bump them, checkpoints save and restore them; none of them owns them.
//! Cost: one Relaxed `fetch_add` per event; the hot three (inserted,
//! sampled, removed) on their own cache lines.
use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_utils::CachePadded;
use serde::{Deserialize, Serialize};

/// Statistic counters. All Relaxed: they order nothing, each is a
/// monotonic count read for reporting and the approximate `stored`.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub inserted: CachePadded<AtomicU64>,
    pub sampled: CachePadded<AtomicU64>,
    pub removed: CachePadded<AtomicU64>,
    pub evicted: AtomicU64,
    pub dropped_group: AtomicU64,
    pub dropped_lag: AtomicU64,
    pub stale_updates: AtomicU64,
    pub invalid_updates: AtomicU64,
    pub superseded: AtomicU64,
}

/// Saved counter values (checkpoints).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct CounterValues {
    pub inserted: u64,
    pub sampled: u64,
    pub removed: u64,
    pub evicted: u64,
    pub dropped_group: u64,
    pub dropped_lag: u64,
    pub stale_updates: u64,
    pub invalid_updates: u64,
    pub superseded: u64,
}

impl Counters {
    pub(crate) fn values(&self) -> CounterValues {
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        CounterValues {
            inserted: r(&self.inserted),
            sampled: r(&self.sampled),
            removed: r(&self.removed),
            evicted: r(&self.evicted),
            dropped_group: r(&self.dropped_group),
            dropped_lag: r(&self.dropped_lag),
            stale_updates: r(&self.stale_updates),
            invalid_updates: r(&self.invalid_updates),
            superseded: r(&self.superseded),
        }
    }
    pub(crate) fn set(&self, v: &CounterValues) {
        let w = |a: &AtomicU64, x: u64| a.store(x, Ordering::Relaxed);
        w(&self.inserted, v.inserted);
        w(&self.sampled, v.sampled);
        w(&self.removed, v.removed);
        w(&self.evicted, v.evicted);
        w(&self.dropped_group, v.dropped_group);
        w(&self.dropped_lag, v.dropped_lag);
        w(&self.stale_updates, v.stale_updates);
        w(&self.invalid_updates, v.invalid_updates);
        w(&self.superseded, v.superseded);
    }
}
