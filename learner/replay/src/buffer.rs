//! [`ReplayBuffer`]: storage + sampler + writer policy + rate limiter +
//! policy-lag cap, shared by writers, samplers and a priority updater.
//!
//! Hot paths and what they touch:
//! - insert: shape check, limiter CAS (if any), one `fetch_add` (or CAS for
//!   `Block`) to claim keys, the slot protocol per row, sampler bookkeeping
//!   (a short lock only for prioritized, max_times and grouped), one notify.
//! - sample: limiter CAS (if any), sampler index choice, the slot protocol
//!   into the caller's batch (uniform and prioritized: 32 rows at a time,
//!   see `Shared::gather`), one notify.
//!
//! No lock is held across a slot copy. Keys are consecutive: item `key`
//! lives in slot `key % capacity`.
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crossbeam_utils::CachePadded;
use serde::{Deserialize, Serialize};

use crate::batch::{LostRows, SampleBatch};
use crate::counters::{CounterValues, Counters};
use crate::error::{InsertError, ReplayError};
use crate::group_id::NO_GROUP;
use crate::heap::StagedValues;
use crate::item::{check_fields, FieldRef, Item};
use crate::item_key::ItemKey;
use crate::layout::{ItemLayout, VARIABLE_ROW_WORDS};
use crate::notifier::Notifier;
use crate::policy_lag::{LagAction, PolicyLagCap};
use crate::rate_limiter::{RateLimiter, RateLimiterConfig, RateLimiterCounters};
use crate::rng::SampleRng;
use crate::sampler::{PriorityMass, PriorityUpdate, Sampler, SamplerConfig, SamplerState};
use crate::shared::Shared;
use crate::slot::{self, WriteOutcome};
use crate::storage::{Storage, StorageKind, StorageOrder};
use crate::writer_policy::WriterPolicy;

/// Everything about a buffer except its layout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplayConfig {
    /// Slots (items) preallocated.
    pub capacity: usize,
    pub sampler: SamplerConfig,
    pub writer_policy: WriterPolicy,
    pub rate_limiter: Option<RateLimiterConfig>,
    pub policy_lag: Option<PolicyLagCap>,
    /// Seed of the sampling randomness.
    pub seed: u64,
    /// Memory order of the slots (records by default; see
    /// [`StorageOrder`]). A reopened mapped directory keeps its own.
    #[serde(default)]
    pub storage_order: StorageOrder,
}

impl ReplayConfig {
    /// `capacity` slots, the given sampler, `OverwriteOldest`, no limiter,
    /// no lag cap, seed 0.
    pub fn new(capacity: usize, sampler: SamplerConfig) -> Self {
        ReplayConfig {
            capacity,
            sampler,
            writer_policy: WriterPolicy::OverwriteOldest,
            rate_limiter: None,
            policy_lag: None,
            seed: 0,
            storage_order: StorageOrder::default(),
        }
    }
    pub fn with_writer_policy(mut self, policy: WriterPolicy) -> Self {
        self.writer_policy = policy;
        self
    }
    pub fn with_rate_limiter(mut self, limiter: RateLimiterConfig) -> Self {
        self.rate_limiter = Some(limiter);
        self
    }
    pub fn with_policy_lag(mut self, cap: PolicyLagCap) -> Self {
        self.policy_lag = Some(cap);
        self
    }
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }
    pub fn with_storage_order(mut self, order: StorageOrder) -> Self {
        self.storage_order = order;
        self
    }

    /// Rejects invalid and deadlock-prone configurations.
    pub fn validate(&self) -> Result<(), ReplayError> {
        if self.capacity == 0 || self.capacity > u32::MAX as usize {
            return Err(ReplayError::config(format!(
                "capacity must be in 1..=2^32-1, is {}",
                self.capacity
            )));
        }
        self.sampler.validate(self.capacity)?;
        if self.writer_policy.blocks() && !self.sampler.consumes() {
            return Err(ReplayError::config(format!(
                "writer policy Block with the {} sampler would block forever once full: \
                 it never consumes items (use Fifo or Grouped, or OverwriteOldest)",
                self.sampler.kind()
            )));
        }
        if self.writer_policy.blocks()
            && matches!(self.sampler, SamplerConfig::MaxTimesSampled { .. })
        {
            // The ring frees slots in key order (a blocked writer waits for
            // the one item in its slot) but this sampler consumes items in
            // random order: the buffer can hold fewer samples than a
            // `sample(n)` asks while the writer waits on an item that still
            // has some left, and then both wait forever.
            return Err(ReplayError::config(
                "writer policy Block with the max_times_sampled sampler can wedge: slots are \
                 reused in insertion order but items are consumed in random order, so a writer \
                 can wait on its slot's item while too few samples are left for a sampler's \
                 batch (use OverwriteOldest with a rate limiter for backpressure, as Reverb does)",
            ));
        }
        if let Some(l) = &self.rate_limiter {
            l.validate(self.capacity, self.sampler.max_samples_per_item())?;
            if self.writer_policy.blocks() {
                if let Some(m) = self.sampler.max_samples_per_item() {
                    l.validate_with_blocking_writers(self.capacity, m)?;
                }
            }
        }
        if let Some(PolicyLagCap {
            action: LagAction::DownWeight(w),
            ..
        }) = self.policy_lag
        {
            if !(w.is_finite() && w >= 0.0) {
                return Err(ReplayError::config(format!(
                    "lag down-weight must be >= 0, is {w}"
                )));
            }
        }
        Ok(())
    }

    /// [`validate`](Self::validate), plus what needs the layout: a policy-lag
    /// cap needs a policy-version field to read (without one every item
    /// reads version 0, and once the learner's version passes the cap it
    /// would drop or down-weight everything).
    pub fn validate_for(&self, layout: &ItemLayout) -> Result<(), ReplayError> {
        self.validate()?;
        if self.policy_lag.is_some() && layout.policy_version_field().is_none() {
            return Err(ReplayError::config(
                "a policy-lag cap needs a policy-version field in the layout \
                 (ItemLayoutBuilder::policy_version_field, or \
                 LazyReplayBuffer::with_policy_version_field)",
            ));
        }
        Ok(())
    }
}

/// Consecutive keys given to one batch insert.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InsertedKeys {
    pub first: ItemKey,
    pub count: usize,
}

impl InsertedKeys {
    pub fn iter(&self) -> impl Iterator<Item = ItemKey> {
        (self.first.0..self.first.0 + self.count as u64).map(ItemKey)
    }
}

/// A snapshot of the buffer's counters (metric keys `replay/<field>`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplayStats {
    pub capacity: usize,
    /// Items currently sampleable or waiting to be (approximate while
    /// writers run).
    pub stored: usize,
    /// Items published.
    pub inserted: u64,
    /// Rows handed out by samples.
    pub sampled: u64,
    /// Items removed by consumption, eviction or drops.
    pub removed: u64,
    /// Unconsumed items displaced by writers (consume-once samplers). May
    /// count an item whose final copy was still finishing.
    pub evicted_unconsumed: u64,
    /// Items dropped with their group (grouped sampler).
    pub dropped_with_group: u64,
    /// Items not handed out because of the policy-lag cap.
    pub dropped_policy_lag: u64,
    /// Priority updates ignored because the item was gone.
    pub stale_priority_updates: u64,
    /// Priority updates ignored because the value was NaN or infinite.
    pub invalid_priority_updates: u64,
    /// Inserts lost because writers lapped the ring during the write.
    pub superseded_inserts: u64,
    /// Rate limiter counters, if a limiter is configured.
    pub rate_limiter: Option<RateLimiterCounters>,
    /// Bytes of heap segments held for variable-length values (0 without
    /// such fields): the values of the last `capacity` items plus the
    /// newest segment's spare room and sealed segments not yet retired.
    #[serde(default)]
    pub heap_bytes: u64,
}

/// The replay buffer. `Sync`: share it with `Arc`.
#[derive(Debug)]
pub struct ReplayBuffer {
    layout: ItemLayout,
    config: ReplayConfig,
    pub(crate) shared: Shared,
    pub(crate) sampler: Sampler,
    pub(crate) limiter: Option<RateLimiter>,
    /// Wakes blocked samplers and writers; `follow.rs`'s replica writes
    /// notify it too.
    pub(crate) notifier: Notifier,
    /// Set once by `close`. Release store, Acquire loads.
    closed: AtomicBool,
    pub(crate) rng: SampleRng,
    /// Keys below `floor + capacity` may find their slot holding an item
    /// from any earlier lap (after reopen/restore), see `slot_free`.
    floor: u64,
}

/// State carried into a buffer being rebuilt (reopen, checkpoint restore).
#[derive(Debug, Default)]
pub(crate) struct Resume {
    pub claimed: u64,
    pub counters: CounterValues,
    pub rng_draws: Option<(u64, u64)>,
    pub limiter: Option<RateLimiterCounters>,
    pub current_policy: u64,
}

impl ReplayBuffer {
    /// An in-memory buffer (allocated and first-touched now).
    pub fn new(layout: ItemLayout, config: ReplayConfig) -> Result<Self, ReplayError> {
        config.validate_for(&layout)?;
        let storage = Storage::memory(&layout, config.capacity, config.storage_order)?;
        Ok(Self::assemble(layout, config, storage, Resume::default()))
    }

    /// A buffer whose storage is a fresh memory-mapped directory.
    #[cfg(not(loom))]
    pub fn create_mapped(
        dir: &Path,
        layout: ItemLayout,
        config: ReplayConfig,
    ) -> Result<Self, ReplayError> {
        config.validate_for(&layout)?;
        let storage = Storage::create_mapped(dir, &layout, config.capacity, config.storage_order)?;
        Ok(Self::assemble(layout, config, storage, Resume::default()))
    }

    /// Reopens a mapped directory. Items and keys survive; slots caught
    /// mid-write by a crash are emptied; sampler state is rebuilt (FIFO
    /// resumes at the oldest unconsumed item, priorities restart at the
    /// maximum, group membership is lost: stored items become groups of
    /// one). Use checkpoints for exact state. `config.capacity` must match;
    /// the directory's storage order replaces `config.storage_order`.
    #[cfg(not(loom))]
    pub fn open_mapped(dir: &Path, mut config: ReplayConfig) -> Result<Self, ReplayError> {
        let (storage, layout) = Storage::open_mapped(dir)?;
        config.storage_order = storage.order();
        if storage.capacity() != config.capacity {
            return Err(ReplayError::Mismatch {
                path: dir.to_owned(),
                reason: format!(
                    "directory holds {} slots, config asks for {}",
                    storage.capacity(),
                    config.capacity
                ),
            });
        }
        config.validate_for(&layout)?;
        let scan = crate::recovery::recover_slots(&storage);
        let resume = Resume {
            claimed: scan.claimed,
            counters: CounterValues {
                inserted: scan.stored,
                removed: scan.retired,
                ..CounterValues::default()
            },
            ..Resume::default()
        };
        let buffer = Self::assemble(layout, config, storage, resume);
        buffer.rebuild_sampler_from_storage();
        Ok(buffer)
    }

    /// The item layout and capacity of a mapped directory, from its header
    /// alone (nothing is mapped or scanned): to check that directories
    /// written by different processes agree before opening them.
    #[cfg(not(loom))]
    pub fn mapped_layout(dir: &Path) -> Result<(ItemLayout, usize), ReplayError> {
        Storage::mapped_layout(dir)
    }

    pub(crate) fn assemble(
        layout: ItemLayout,
        config: ReplayConfig,
        storage: Storage,
        resume: Resume,
    ) -> Self {
        let shared = Shared {
            capacity: config.capacity as u64,
            storage,
            claimed: CachePadded::new(AtomicU64::new(resume.claimed)),
            counters: Counters::default(),
            lag: config.policy_lag,
            current_policy: AtomicU64::new(resume.current_policy),
            consumes: config.sampler.consumes(),
        };
        shared.counters.set(&resume.counters);
        let (seed, draws) = resume.rng_draws.unwrap_or((config.seed, 0));
        ReplayBuffer {
            sampler: Sampler::new(&config.sampler, config.capacity),
            limiter: config.rate_limiter.map(|l| {
                RateLimiter::new(
                    l,
                    resume.limiter.unwrap_or(RateLimiterCounters {
                        inserts: 0,
                        samples: 0,
                    }),
                )
            }),
            notifier: Notifier::default(),
            closed: AtomicBool::new(false),
            rng: SampleRng::new(seed, draws),
            floor: resume.claimed,
            layout,
            config,
            shared,
        }
    }

    /// After reopening: feed unconsumed stored items to the sampler.
    fn rebuild_sampler_from_storage(&self) {
        let s = &self.shared;
        if let Sampler::Prioritized(p) = &self.sampler {
            // One pass that writes the leaves, then one rebuild: O(capacity)
            // where an insert's path per item would be O(n log capacity).
            p.restore_stored((0..self.config.capacity).filter(|&slot| {
                let key = s.storage.published(slot);
                key != 0 && s.storage.retired(slot) != key
            }));
            return;
        }
        let mut oldest_unconsumed = s.claimed();
        for slot in 0..self.config.capacity {
            let p = s.storage.published(slot);
            if p != 0 && s.storage.retired(slot) != p {
                let key = p - 1;
                oldest_unconsumed = oldest_unconsumed.min(key);
                self.sampler.on_publish(s, key, 1, &|_| NO_GROUP);
            }
        }
        if let Sampler::Fifo(f) = &self.sampler {
            f.restore(oldest_unconsumed);
        }
    }

    pub fn layout(&self) -> &ItemLayout {
        &self.layout
    }
    pub fn config(&self) -> &ReplayConfig {
        &self.config
    }
    pub fn capacity(&self) -> usize {
        self.config.capacity
    }
    /// Where the slots live.
    pub fn storage_kind(&self) -> StorageKind {
        match self.shared.storage.dir() {
            None => StorageKind::Memory,
            Some(d) => StorageKind::Mapped(d.to_owned()),
        }
    }
    /// Items stored (approximate while writers run).
    pub fn len(&self) -> usize {
        self.shared.stored()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Items a sample could take now: for consume-once samplers the ready
    /// count (FIFO: published and not consumed, which while writers run
    /// may count items past a key claimed and not yet published; grouped:
    /// items of completed groups; max_times: remaining samples), else
    /// `len()`. O(1).
    pub fn available(&self) -> usize {
        self.sampler.available(&self.shared)
    }

    /// A batch buffer sized for `max_rows` items of this layout.
    pub fn new_batch(&self, max_rows: usize) -> SampleBatch {
        SampleBatch::new(&self.layout, max_rows)
    }

    /// Inserts an owned item (fields by name, any order). Waits per the
    /// writer policy; a refused item comes back in the error.
    pub fn insert(&self, item: Item) -> Result<ItemKey, InsertError<Item>> {
        let result = match item.to_refs(&self.layout) {
            Ok(refs) => self.insert_inner(&refs, None, None, self.default_timeout()),
            Err(e) => Err(e),
        };
        match result {
            Ok(keys) => Ok(keys.first),
            Err(error) => Err(InsertError { error, item }),
        }
    }

    /// Inserts one item given as fields in layout order (the fast path).
    pub fn insert_ref(&self, fields: &[FieldRef<'_>]) -> Result<ItemKey, ReplayError> {
        self.insert_inner(fields, None, None, self.default_timeout())
            .map(|k| k.first)
    }

    /// Inserts one item into `group` (grouped sampler: hidden until
    /// `complete_group(group)`; other samplers just record the id).
    pub fn insert_ref_in_group(
        &self,
        fields: &[FieldRef<'_>],
        group: u64,
    ) -> Result<ItemKey, ReplayError> {
        if group == NO_GROUP {
            return Err(ReplayError::config("group id u64::MAX is reserved"));
        }
        self.insert_inner(fields, None, Some(group), self.default_timeout())
            .map(|k| k.first)
    }

    /// Inserts `rows` items at once; each field's shape is `[rows, ...]`.
    pub fn insert_batch(
        &self,
        fields: &[FieldRef<'_>],
        rows: usize,
    ) -> Result<InsertedKeys, ReplayError> {
        self.insert_inner(fields, Some(rows), None, self.default_timeout())
    }

    /// `insert_batch`, waiting up to `timeout` for room (writer policy
    /// `Block` or the rate limiter).
    pub fn insert_batch_timeout(
        &self,
        fields: &[FieldRef<'_>],
        rows: usize,
        timeout: Duration,
    ) -> Result<InsertedKeys, ReplayError> {
        self.insert_inner(fields, Some(rows), None, Some(timeout))
    }

    /// `insert_ref`, waiting up to `timeout`.
    pub fn insert_ref_timeout(
        &self,
        fields: &[FieldRef<'_>],
        timeout: Duration,
    ) -> Result<ItemKey, ReplayError> {
        self.insert_inner(fields, None, None, Some(timeout))
            .map(|k| k.first)
    }

    fn default_timeout(&self) -> Option<Duration> {
        match self.config.writer_policy {
            WriterPolicy::Block { timeout } => Some(timeout),
            _ => None,
        }
    }

    fn insert_inner(
        &self,
        fields: &[FieldRef<'_>],
        rows: Option<usize>,
        group: Option<u64>,
        timeout: Option<Duration>,
    ) -> Result<InsertedKeys, ReplayError> {
        // Acquire, pairs with the Release in `Notifier::close`.
        if self.closed.load(Ordering::Acquire) {
            return Err(ReplayError::Closed);
        }
        check_fields(&self.layout, fields, rows)?;
        let n = rows.unwrap_or(1);
        if n > self.config.capacity {
            return Err(ReplayError::TooLarge {
                requested: n,
                limit: self.config.capacity,
            });
        }
        if n == 0 {
            return Ok(InsertedKeys {
                first: ItemKey(self.shared.claimed()),
                count: 0,
            });
        }
        if let Some(l) = &self.limiter {
            l.check_request(n, 0)?;
        }
        if let Some(heap) = self.shared.storage.heap() {
            return self.insert_variable(heap, fields, n, group, timeout);
        }
        let first = self
            .notifier
            .run_blocking(timeout, &self.closed, || self.claim(n))?;
        let group_id = group.unwrap_or(NO_GROUP);
        self.write_rows(fields, first, n, group_id, NoHeapRefs);
        Ok(self.publish(first, n, group_id))
    }

    /// `insert_inner` for a layout with variable-length fields, out of
    /// line so that a fixed-shape layout's insert compiles to what it was
    /// (the A/B with this inline measured 0.85x inserts of one item).
    #[inline(never)]
    fn insert_variable(
        &self,
        heap: &crate::heap::Heap,
        fields: &[FieldRef<'_>],
        n: usize,
        group: Option<u64>,
        timeout: Option<Duration>,
    ) -> Result<InsertedKeys, ReplayError> {
        // The values go into the heap before the keys are claimed, so a
        // heap error leaves no claimed key unpublished (`heap.rs`).
        let staged = heap.stage(&self.layout, fields, 0, n, self.shared.claimed())?;
        let first = self
            .notifier
            .run_blocking(timeout, &self.closed, || self.claim(n))?;
        staged.keys(first + n as u64 - 1);
        let group_id = group.unwrap_or(NO_GROUP);
        self.write_rows(fields, first, n, group_id, &staged);
        // The rows are written: the heap region's hold ends (`heap.rs`).
        drop(staged);
        Ok(self.publish(first, n, group_id))
    }

    /// Counts and publishes claimed keys `first..first + n`, written.
    #[inline(always)]
    fn publish(&self, first: u64, n: usize, group_id: u64) -> InsertedKeys {
        let s = &self.shared;
        s.counters.inserted.fetch_add(n as u64, Ordering::Relaxed);
        self.sampler.on_publish(s, first, n, &|_| group_id);
        self.notifier.notify();
        InsertedKeys {
            first: ItemKey(first),
            count: n,
        }
    }

    /// Writes and publishes rows `0..n` of `fields` as keys `first..`
    /// (claimed); a variable-length field's row is its heap reference
    /// from `heap_refs`.
    #[inline(always)]
    fn write_rows<R: HeapRefs>(
        &self,
        fields: &[FieldRef<'_>],
        first: u64,
        n: usize,
        group_id: u64,
        heap_refs: R,
    ) {
        let s = &self.shared;
        let slots = s.storage.slots();
        // Slot of key `first + i`, advanced without a division per item.
        let mut slot = s.slot_of(first);
        for i in 0..n {
            // The slot's retire stamp, for the eviction count below, loaded
            // before the write: once the new item is published a sampler
            // may consume it and stamp its `key + 1` here, which read after
            // the write looked like the replaced item evicted unconsumed
            // (loom test `a_block_writer_never_counts_a_consumed_item_evicted`).
            // Acquire (`Storage::retired`); what matters is that this load
            // is sequenced before the Release publish in `slot::write`, and
            // a sampler retires the new item only after its Acquire load of
            // `published` saw that publish, so the load cannot see that
            // retire: it sees the replaced item's stamp or an older one.
            // Under `Block` it sees the replaced item's (`slot_free` saw it
            // before the claim), so nothing is counted; under the overwrite
            // policies a sampler that retires the replaced item after this
            // load still has it counted (an over-count, never an under-count:
            // a stamp equal to `previous` means that item was retired).
            let retired = if s.consumes {
                s.storage.retired(slot)
            } else {
                0
            };
            // The policy version is stored with the rows (its field's).
            let outcome = slot::write(
                slots,
                slot,
                first + i as u64,
                group_id,
                |f, bytes, words| {
                    slot::store_row!(words, fields[f], i, bytes, heap_refs.row_ref(i, f))
                },
            );
            match outcome {
                WriteOutcome::Superseded => {
                    s.counters.superseded.fetch_add(1, Ordering::Relaxed);
                }
                WriteOutcome::Written { previous } => {
                    if s.consumes && previous != 0 && retired != previous {
                        s.counters.evicted.fetch_add(1, Ordering::Relaxed);
                        s.counters.removed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            slot = if slot + 1 == s.capacity as usize {
                0
            } else {
                slot + 1
            };
        }
    }

    /// Admits and claims `n` consecutive keys, or says why not now.
    fn claim(&self, n: usize) -> Result<u64, ReplayError> {
        if let Some(l) = &self.limiter {
            l.try_insert(n, self.shared.stored())?;
        }
        let claimed = &self.shared.claimed;
        let result = if self.config.writer_policy.blocks() {
            let mut k = claimed.load(Ordering::Acquire);
            loop {
                if !(k..k + n as u64).all(|key| self.slot_free(key)) {
                    break Err(ReplayError::WouldBlock {
                        reason: "buffer full (writer policy Block)",
                    });
                }
                // AcqRel: the slot checks above are done before the claim
                // is visible; pairs with the Acquire loads of `claimed`.
                match claimed.compare_exchange_weak(
                    k,
                    k + n as u64,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    Ok(_) => break Ok(k),
                    Err(now) => k = now,
                }
            }
        } else {
            // AcqRel RMW: keys are unique; pairs with the Acquire loads.
            Ok(claimed.fetch_add(n as u64, Ordering::AcqRel))
        };
        if result.is_err() {
            if let Some(l) = &self.limiter {
                l.cancel_insert(n);
            }
        }
        result
    }

    /// Whether `key` may be written under `Block`: the slot's previous item
    /// (the key one lap earlier) has been published and consumed.
    fn slot_free(&self, key: u64) -> bool {
        let s = &self.shared;
        let slot = s.slot_of(key);
        let published = s.storage.published(slot);
        let retired = s.storage.retired(slot);
        if key >= self.floor + s.capacity {
            published == key - s.capacity + 1 && retired == published
        } else {
            retired == published
        }
    }

    /// Fills `batch` with `n` items without waiting. Errors (nothing
    /// consumed): `NotEnoughItems` (consume-once samplers: fewer than `n`
    /// ready; others: empty), `RateLimited`, `TooLarge`, `Closed`. The batch
    /// can come back with fewer than `n` rows only when items were dropped
    /// by the lag cap or lost to an overwrite during the copy.
    pub fn sample_into(&self, batch: &mut SampleBatch, n: usize) -> Result<(), ReplayError> {
        self.sample_inner(batch, n, None)
    }

    /// `sample_into`, waiting up to `timeout` for items or the limiter.
    pub fn sample_into_timeout(
        &self,
        batch: &mut SampleBatch,
        n: usize,
        timeout: Duration,
    ) -> Result<(), ReplayError> {
        self.sample_inner(batch, n, Some(timeout))
    }

    fn sample_inner(
        &self,
        batch: &mut SampleBatch,
        n: usize,
        timeout: Option<Duration>,
    ) -> Result<(), ReplayError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(ReplayError::Closed);
        }
        if batch.layout() != &self.layout {
            return Err(ReplayError::config("batch was made for a different layout"));
        }
        if n > batch.max_rows() {
            return Err(ReplayError::TooLarge {
                requested: n,
                limit: batch.max_rows(),
            });
        }
        if self.shared.consumes && n > self.config.capacity {
            return Err(ReplayError::TooLarge {
                requested: n,
                limit: self.config.capacity,
            });
        }
        if let Some(l) = &self.limiter {
            l.check_request(0, n)?;
        }
        batch.clear();
        if n == 0 {
            return Ok(());
        }
        self.notifier.run_blocking(timeout, &self.closed, || {
            batch.clear();
            if let Some(l) = &self.limiter {
                l.try_sample(n, self.shared.stored())?;
            }
            let mut rng = self.rng.next_stream();
            let result = self.sampler.sample(&self.shared, batch, n, &mut rng);
            let result = result.map(|()| {
                self.resolve_variable(batch, LostRows::Drop);
            });
            let result = result.and_then(|()| {
                if batch.is_empty() {
                    Err(ReplayError::NotEnoughItems {
                        requested: n,
                        available: 0,
                    })
                } else {
                    Ok(())
                }
            });
            if let Some(l) = &self.limiter {
                let unused = if result.is_err() { n } else { n - batch.len() };
                if unused > 0 {
                    l.cancel_sample(unused);
                }
            }
            result
        })?;
        self.shared
            .counters
            .sampled
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
        self.notifier.notify();
        Ok(())
    }

    /// Copies the variable-length values of a sampled batch's rows in
    /// (`SampleBatch::resolve_variable`); returns how many rows were lost
    /// to an overwrite racing the sample. A consume-once sampler retired
    /// those items, so they are counted evicted (possibly twice, when the
    /// overwriting writer counted one too: `evicted_unconsumed` may
    /// over-count, as its docs say).
    pub(crate) fn resolve_variable(&self, batch: &mut SampleBatch, lost: LostRows) -> usize {
        let Some(heap) = self.shared.storage.heap() else {
            return 0;
        };
        let n = batch.resolve_variable(heap, lost);
        if n > 0 && self.shared.consumes {
            // Relaxed: statistics (`Counters`).
            self.shared
                .counters
                .evicted
                .fetch_add(n as u64, Ordering::Relaxed);
        }
        n
    }

    /// Grouped sampler: hands out the oldest ready group whole and returns
    /// its id, waiting up to `timeout` if given.
    pub fn sample_group_into(
        &self,
        batch: &mut SampleBatch,
        timeout: Option<Duration>,
    ) -> Result<u64, ReplayError> {
        let Sampler::Grouped(g) = &self.sampler else {
            return Err(ReplayError::config(
                "sample_group_into needs the Grouped sampler",
            ));
        };
        if batch.layout() != &self.layout {
            return Err(ReplayError::config("batch was made for a different layout"));
        }
        let group = self.notifier.run_blocking(timeout, &self.closed, || {
            batch.clear();
            g.sample_group(&self.shared, batch)
        })?;
        self.shared
            .counters
            .sampled
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
        self.notifier.notify();
        Ok(group)
    }

    /// Grouped sampler: releases `group`; returns how many items became
    /// sampleable (0 for an unknown group, or one that lost an item to the
    /// writer policy and was dropped). Other samplers: 0.
    pub fn complete_group(&self, group: u64) -> usize {
        let released = match &self.sampler {
            Sampler::Grouped(g) => g.complete(&self.shared, group),
            _ => 0,
        };
        self.notifier.notify();
        released
    }

    /// Prioritized sampler: sets priorities of `keys`. Keys whose item was
    /// overwritten are ignored and counted (`stale_priority_updates`).
    pub fn update_priorities(
        &self,
        keys: &[ItemKey],
        priorities: &[f32],
    ) -> Result<PriorityUpdate, ReplayError> {
        if keys.len() != priorities.len() {
            return Err(ReplayError::config(format!(
                "{} keys but {} priorities",
                keys.len(),
                priorities.len()
            )));
        }
        let Sampler::Prioritized(p) = &self.sampler else {
            return Err(ReplayError::config(
                "update_priorities needs the Prioritized sampler",
            ));
        };
        let report = p.update(&self.shared, keys, priorities);
        let c = &self.shared.counters;
        c.stale_updates
            .fetch_add(report.stale as u64, Ordering::Relaxed);
        c.invalid_updates
            .fetch_add(report.invalid as u64, Ordering::Relaxed);
        Ok(report)
    }

    /// Prioritized sampler: the sum tree's total and smallest mass, taken
    /// under its lock (one read of each); `None` for other samplers. For a
    /// caller that samples several buffers as one (the replay service's
    /// loaded shards): pick buffer `b` with probability
    /// `total_b / sum(total)` and rescale its weights by
    /// `(min(min_positive) / min_positive_b)^beta`.
    pub fn priority_mass(&self) -> Option<PriorityMass> {
        match &self.sampler {
            Sampler::Prioritized(p) => Some(p.mass()),
            _ => None,
        }
    }

    /// Tells the buffer the learner's current policy version (lag cap).
    pub fn set_policy_version(&self, version: u64) {
        self.shared.current_policy.store(version, Ordering::Relaxed);
    }

    /// Counter snapshot.
    pub fn stats(&self) -> ReplayStats {
        let v = self.shared.counters.values();
        ReplayStats {
            capacity: self.config.capacity,
            stored: self.shared.stored(),
            inserted: v.inserted,
            sampled: v.sampled,
            removed: v.removed,
            evicted_unconsumed: v.evicted,
            dropped_with_group: v.dropped_group,
            dropped_policy_lag: v.dropped_lag,
            stale_priority_updates: v.stale_updates,
            invalid_priority_updates: v.invalid_updates,
            superseded_inserts: v.superseded,
            rate_limiter: self.limiter.as_ref().map(RateLimiter::counters),
            heap_bytes: self
                .shared
                .storage
                .heap()
                .map_or(0, |h| h.segments().1 as u64 * 8),
        }
    }

    /// Closes the buffer: blocked and later inserts and samples return
    /// `Closed`. Stored items stay readable by checkpoint.
    pub fn close(&self) {
        self.notifier.close(&self.closed);
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Flushes mapped storage to disk (no-op in memory).
    pub fn flush(&self) -> Result<(), ReplayError> {
        self.shared.storage.flush()
    }

    pub(crate) fn sampler_state(&self) -> SamplerState {
        self.sampler.state(&self.shared)
    }
}

/// Where the row loop of an insert finds a variable-length field's heap
/// reference: nowhere for a fixed-shape layout (the check compiles away).
trait HeapRefs {
    fn row_ref(&self, row: usize, field: usize) -> Option<[u64; VARIABLE_ROW_WORDS]>;
}

struct NoHeapRefs;

impl HeapRefs for NoHeapRefs {
    #[inline(always)]
    fn row_ref(&self, _row: usize, _field: usize) -> Option<[u64; VARIABLE_ROW_WORDS]> {
        None
    }
}

impl HeapRefs for &StagedValues {
    #[inline(always)]
    fn row_ref(&self, row: usize, field: usize) -> Option<[u64; VARIABLE_ROW_WORDS]> {
        StagedValues::row_ref(self, row, field)
    }
}
