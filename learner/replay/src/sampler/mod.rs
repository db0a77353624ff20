//! Samplers: which items a sample call hands out, and in what order.
//!
//! Each sampler is a small index structure beside the storage; the copy of
//! the chosen slots into the caller's batch happens outside any lock, through
//! the slot protocol. What each costs and whether it takes a lock:
//!
//! | sampler | consumes | lock | cost per item |
//! |---|---|---|---|
//! | [`SamplerConfig::Fifo`] | once | none (CAS on a cursor per batch) | O(1) |
//! | [`SamplerConfig::MaxTimesSampled`] | after `m` samples | short mutex (index pick) | O(1) |
//! | [`SamplerConfig::Uniform`] | no | none | O(1) |
//! | [`SamplerConfig::UniformWithoutReplacement`] | no | short mutex (permutation) | O(1), a shuffle per pass |
//! | [`SamplerConfig::Recent`] | no | none | O(1) |
//! | [`SamplerConfig::Prioritized`] | no | short mutex (sum tree) | O(log8 N) |
//! | [`SamplerConfig::Grouped`] | once | short mutex (group table) | O(1) |
//!
//! The mutexes guard only index bookkeeping (microseconds per batch), never
//! a slot copy; a lock-free sum tree would need a CAS per level per update
//! and is slower than an uncontended lock for batched updates.
mod fifo;
mod grouped;
mod max_times;
mod min_tree;
mod power;
mod prioritized;
mod recent;
mod state;
mod sum_tree;
mod uniform;
mod without_replacement;

use serde::{Deserialize, Serialize};

pub(crate) use fifo::Fifo;
pub(crate) use grouped::Grouped;
pub(crate) use max_times::MaxTimesSampled;
pub(crate) use prioritized::Prioritized;
pub use prioritized::{PrioritizedConfig, PriorityMass, PriorityUpdate};
pub(crate) use recent::Recent;
pub(crate) use state::SamplerState;
pub(crate) use uniform::Uniform;
pub(crate) use without_replacement::UniformWithoutReplacement;

use crate::batch::SampleBatch;
use crate::error::ReplayError;
use crate::rng::WyRand;
use crate::shared::Shared;

/// Which sampler a buffer uses.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum SamplerConfig {
    /// Each item handed out exactly once, oldest first (the V-trace queue).
    Fifo,
    /// Uniform with replacement among live items; an item is removed after
    /// it has been sampled `max_times` times (limited reuse).
    MaxTimesSampled { max_times: u32 },
    /// Uniform with replacement over all stored items.
    Uniform,
    /// Uniform without replacement within a pass over the items stored when
    /// the pass began; a new pass starts when one is exhausted.
    UniformWithoutReplacement,
    /// Uniform over the `window` most recently inserted items.
    Recent { window: usize },
    /// Proportional prioritized replay (Schaul et al. 2016).
    Prioritized(PrioritizedConfig),
    /// Items sharing a group id become sampleable together once the group is
    /// completed; groups come out FIFO by completion, each item once.
    Grouped,
}

impl SamplerConfig {
    /// Most times one item can be sampled (`None`: unbounded).
    pub(crate) fn max_samples_per_item(&self) -> Option<u64> {
        match self {
            SamplerConfig::Fifo | SamplerConfig::Grouped => Some(1),
            SamplerConfig::MaxTimesSampled { max_times } => Some(u64::from(*max_times)),
            _ => None,
        }
    }

    /// Whether sampling removes items (and so frees slots for blocked
    /// writers).
    pub(crate) fn consumes(&self) -> bool {
        self.max_samples_per_item().is_some()
    }

    pub(crate) fn validate(&self, capacity: usize) -> Result<(), ReplayError> {
        match self {
            SamplerConfig::MaxTimesSampled { max_times: 0 } => {
                Err(ReplayError::config("max_times_sampled must be at least 1"))
            }
            SamplerConfig::Recent { window: 0 } => {
                Err(ReplayError::config("recent window must be at least 1"))
            }
            SamplerConfig::Recent { window } if *window > capacity => Err(ReplayError::config(
                format!("recent window {window} exceeds capacity {capacity}"),
            )),
            SamplerConfig::Prioritized(p) => p.validate(),
            _ => Ok(()),
        }
    }

    /// What differs between a checkpoint's sampler (`saved`) and this
    /// one, naming the parameter and both values; `None` if nothing does.
    /// Every parameter counts: the saved state was built under them (leaf
    /// values are `p^alpha`, the maximum priority includes `eps`, times
    /// sampled are bounded by `max_times`), and sampling would not continue
    /// as it would have (`beta`, the recent window).
    pub(crate) fn mismatch_with(&self, saved: &SamplerConfig) -> Option<String> {
        use SamplerConfig as S;
        if saved.kind() != self.kind() {
            return Some(format!(
                "sampler {} in file, {} in config",
                saved.kind(),
                self.kind()
            ));
        }
        match (saved, self) {
            (S::MaxTimesSampled { max_times: file }, S::MaxTimesSampled { max_times: ours })
                if file != ours =>
            {
                Some(format!(
                    "max_times_sampled max_times {file} in file, {ours} in config"
                ))
            }
            (S::Recent { window: file }, S::Recent { window: ours }) if file != ours => {
                Some(format!("recent window {file} in file, {ours} in config"))
            }
            (S::Prioritized(file), S::Prioritized(ours)) => [
                ("alpha", file.alpha, ours.alpha),
                ("beta", file.beta, ours.beta),
                ("eps", file.eps, ours.eps),
            ]
            .into_iter()
            .find(|(_, f, o)| f != o)
            .map(|(name, f, o)| format!("prioritized {name} {f} in file, {o} in config")),
            _ => None,
        }
    }

    /// The sampler's `kind` as a replay server's config file spells it
    /// (and its `Info` reports it).
    pub fn kind(&self) -> &'static str {
        match self {
            SamplerConfig::Fifo => "fifo",
            SamplerConfig::MaxTimesSampled { .. } => "max_times_sampled",
            SamplerConfig::Uniform => "uniform",
            SamplerConfig::UniformWithoutReplacement => "uniform_without_replacement",
            SamplerConfig::Recent { .. } => "recent",
            SamplerConfig::Prioritized(_) => "prioritized",
            SamplerConfig::Grouped => "grouped",
        }
    }
}

/// A sampler instance.
#[derive(Debug)]
pub(crate) enum Sampler {
    Fifo(Fifo),
    MaxTimes(MaxTimesSampled),
    Uniform(Uniform),
    WithoutReplacement(UniformWithoutReplacement),
    Recent(Recent),
    Prioritized(Prioritized),
    Grouped(Grouped),
}

impl Sampler {
    pub(crate) fn new(config: &SamplerConfig, capacity: usize) -> Self {
        match config {
            SamplerConfig::Fifo => Sampler::Fifo(Fifo::new()),
            SamplerConfig::MaxTimesSampled { max_times } => {
                Sampler::MaxTimes(MaxTimesSampled::new(*max_times, capacity))
            }
            SamplerConfig::Uniform => Sampler::Uniform(Uniform),
            SamplerConfig::UniformWithoutReplacement => {
                Sampler::WithoutReplacement(UniformWithoutReplacement::new())
            }
            SamplerConfig::Recent { window } => Sampler::Recent(Recent::new(*window)),
            SamplerConfig::Prioritized(p) => Sampler::Prioritized(Prioritized::new(*p, capacity)),
            SamplerConfig::Grouped => Sampler::Grouped(Grouped::new()),
        }
    }

    /// Fills `batch` with up to `n` rows (see `ReplayBuffer::sample_into`).
    pub(crate) fn sample(
        &self,
        shared: &Shared,
        batch: &mut SampleBatch,
        n: usize,
        rng: &mut WyRand,
    ) -> Result<(), ReplayError> {
        match self {
            Sampler::Fifo(s) => s.sample(shared, batch, n),
            Sampler::MaxTimes(s) => s.sample(shared, batch, n, rng),
            Sampler::Uniform(s) => s.sample(shared, batch, n, rng),
            Sampler::WithoutReplacement(s) => s.sample(shared, batch, n, rng),
            Sampler::Recent(s) => s.sample(shared, batch, n, rng),
            Sampler::Prioritized(s) => s.sample(shared, batch, n, rng),
            Sampler::Grouped(s) => s.sample(shared, batch, n),
        }
    }

    /// Called after items `first..first + count` were published; `evicted`
    /// lists `(slot, previous key)` of items they displaced unconsumed.
    ///
    /// Inlined as a check of the sampler's kind: the samplers that keep no
    /// state per item (uniform, FIFO, recent, without replacement) cost an
    /// insert one branch, where the call alone cost 26 instructions.
    #[inline(always)]
    pub(crate) fn on_publish(
        &self,
        shared: &Shared,
        first: u64,
        count: usize,
        groups: &dyn Fn(usize) -> u64,
    ) {
        if matches!(
            self,
            Sampler::MaxTimes(_) | Sampler::Prioritized(_) | Sampler::Grouped(_)
        ) {
            self.track_published(shared, first, count, groups);
        }
    }

    /// `on_publish` for the samplers that track items.
    #[inline(never)]
    fn track_published(
        &self,
        shared: &Shared,
        first: u64,
        count: usize,
        groups: &dyn Fn(usize) -> u64,
    ) {
        match self {
            Sampler::MaxTimes(s) => s.on_publish(shared, first, count),
            Sampler::Prioritized(s) => s.on_publish(shared, first, count),
            Sampler::Grouped(s) => s.on_publish(shared, first, count, groups),
            _ => {}
        }
    }

    /// Items available to a consume-once sample right now (upper bound for
    /// others: the number stored).
    pub(crate) fn available(&self, shared: &Shared) -> usize {
        match self {
            Sampler::Fifo(s) => s.available(shared),
            Sampler::MaxTimes(s) => s.available(),
            Sampler::Grouped(s) => s.available(),
            _ => shared.stored(),
        }
    }

    pub(crate) fn state(&self, shared: &Shared) -> SamplerState {
        let mut st = SamplerState::default();
        match self {
            Sampler::Fifo(s) => st.cursor = s.cursor(),
            Sampler::MaxTimes(s) => s.save(&mut st),
            Sampler::WithoutReplacement(s) => s.save(&mut st),
            Sampler::Prioritized(s) => s.save(shared, &mut st),
            Sampler::Grouped(s) => s.save(&mut st),
            Sampler::Uniform(_) | Sampler::Recent(_) => {}
        }
        st
    }

    pub(crate) fn restore(&self, st: &SamplerState, shared: &Shared) -> Result<(), String> {
        let capacity = shared.capacity as usize;
        match self {
            Sampler::Fifo(s) => s.restore(st.cursor),
            Sampler::MaxTimes(s) => s.restore(st, shared)?,
            Sampler::WithoutReplacement(s) => s.restore(st, capacity)?,
            Sampler::Prioritized(s) => s.restore(st, capacity)?,
            Sampler::Grouped(s) => s.restore(st),
            Sampler::Uniform(_) | Sampler::Recent(_) => {}
        }
        Ok(())
    }
}
