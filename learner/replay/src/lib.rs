//! Replay buffer: a concurrent, preallocated store of fixed-layout items
//! (unrolls) shared by inference threads (writers), prefetch threads
//! (samplers) and the trainer (priority updates), without a global lock.
//!
//! # Parts
//! - [`ItemLayout`]: named fields with dtype and fixed shape, or a variable
//!   last dimension (token lists: values plus offsets, stored without
//!   padding in the table's heap), declared once ([`LazyReplayBuffer`]
//!   takes it from the first item).
//! - Storage: preallocated columns, in memory or memory-mapped
//!   ([`ReplayBuffer::create_mapped`], [`ReplayBuffer::open_mapped`]).
//! - [`SamplerConfig`]: FIFO consume-once, max_times_sampled, uniform,
//!   uniform without replacement, most-recent window, prioritized (8-ary sum
//!   tree), grouped release.
//! - [`WriterPolicy`]: overwrite oldest, drop oldest, block with timeout.
//! - [`RateLimiterConfig`]: min size and samples-per-insert (Reverb's
//!   semantics); deadlocking configurations are rejected by `new`.
//! - [`PolicyLagCap`]: drop or down-weight items older than a bound.
//! - Stable [`ItemKey`]s: priority updates for overwritten items are ignored
//!   and counted.
//! - [`ReplayBuffer::checkpoint`] / [`ReplayBuffer::restore`].
//! - Incremental reads for replicas: [`ReplayBuffer::read_since`] (every
//!   item from a key on, in key order, or a [`FollowRead::Gap`] when the
//!   reader fell a lap behind) and [`ReplayBuffer::insert_batch_at`]
//!   (stores items under the keys another buffer gave them).
//!
//! # Concurrency
//! Each slot is a seqlock: writers never wait for readers, readers copy and
//! then verify the slot's version, retrying on a race, so a torn item is
//! never returned. FIFO and uniform sampling are lock-free; prioritized,
//! max_times_sampled, without-replacement and grouped samplers keep their
//! index under a short mutex that never covers a copy. Blocking waits use a
//! condvar touched only when someone waits. The protocol and its orderings
//! are in `src/README.md` (`learner/replay/src/README.md`), with the loom
//! command that model-checks the slot protocol.
//!
//! # Cost
//! Memory: `capacity * (item bytes, rows rounded to 8, + 64)`, allocated and
//! first-touched at construction. Insert and sample are a bounds check plus
//! a copy of the item's bytes; see `benches/` for figures.
//!
//! # Layering
//! A file imports only files of its own layer or lower ones, and no files
//! import each other in a loop (`tests/integration/layering.rs` checks both, and fails
//! for a file it has no layer for). Bottom first:
//! 1. Leaves, importing nothing of the crate: `loom` (the atomics shim),
//!    `dtype`, `item_key`, `group_id` (`NO_GROUP`), `counters`,
//!    `policy_lag`, `writer_policy`, `rng`.
//! 2. `error`.
//! 3. `layout`, `atomic_file`, `notifier`, `rate_limiter`.
//! 4. `item`, `heap` (variable-length values), `storage`.
//! 5. `slot` (the slot protocol), `recovery` (the reopen scan).
//! 6. `batch`.
//! 7. `shared` (what samplers see of the buffer).
//! 8. The samplers and their index structures, `sampler/*.rs`
//!    (`sampler/state.rs`: their checkpoint record).
//! 9. `sampler` (`sampler/mod.rs`: `SamplerConfig` and the dispatcher).
//! 10. `buffer`.
//! 11. `checkpoint`, `lazy`, `follow` (methods and wrappers on the buffer).
//! 12. `lib` (re-exports only).
//!
//! # Example
//! ```
//! use seed_replay::*;
//! # fn main() -> Result<(), ReplayError> {
//! let (t, obs, a) = (4, 3, 2);
//! let layout = ItemLayout::builder()
//!     .field("obs", DType::F32, &[t + 1, obs])
//!     .field("actions", DType::I64, &[t + 1])
//!     .field("behaviour_logits", DType::F32, &[t + 1, a])
//!     .field("policy_version", DType::U64, &[])
//!     .policy_version_field("policy_version")
//!     .build()?;
//! let buffer = ReplayBuffer::new(layout, ReplayConfig::new(1024, SamplerConfig::Fifo))?;
//!
//! // Inference thread: insert an unroll (fields in layout order).
//! let (o, act, logits) = (vec![0.5f32; 15], vec![1i64; 5], vec![0.0f32; 10]);
//! let key = buffer.insert_ref(&[
//!     FieldRef::new(&[5, 3], Values::F32(&o)),
//!     FieldRef::new(&[5], Values::I64(&act)),
//!     FieldRef::new(&[5, 2], Values::F32(&logits)),
//!     FieldRef::new(&[], Values::U64(&[7])),
//! ])?;
//!
//! // Prefetch thread: one preallocated batch, reused every step.
//! let mut batch = buffer.new_batch(32);
//! buffer.sample_into(&mut batch, 1)?;
//! assert_eq!(batch.keys(), &[key]);
//! assert_eq!(batch.policy_versions(), &[7]);
//! let obs_bytes: &[u8] = batch.field("obs").unwrap(); // [1, 5, 3] f32, one upload
//! assert_eq!(obs_bytes.len(), 15 * 4);
//! // FIFO hands each item out once.
//! assert!(matches!(buffer.sample_into(&mut batch, 1), Err(ReplayError::NotEnoughItems { .. })));
//! buffer.close(); // blocked threads wake with `Closed`
//! # Ok(()) }
//! ```
// Under loom the memory-mapped backing is compiled out, leaving its helpers
// unused.
#![cfg_attr(loom, allow(dead_code, unused_imports))]

mod atomic_file;
mod batch;
mod buffer;
mod checkpoint;
mod counters;
mod dtype;
mod error;
mod follow;
mod group_id;
mod heap;
mod item;
mod item_key;
mod layout;
mod lazy;
mod loom;
mod notifier;
mod policy_lag;
mod rate_limiter;
mod recovery;
mod rng;
mod sampler;
mod shared;
mod slot;
mod storage;
mod writer_policy;

#[cfg(all(test, loom))]
mod tests;

pub use batch::SampleBatch;
pub use buffer::{InsertedKeys, ReplayBuffer, ReplayConfig, ReplayStats};
pub use checkpoint::CheckpointInfo;
pub use dtype::DType;
pub use error::{InsertError, ReplayError};
pub use follow::{FollowRead, ReplicaWrites};
pub use item::{FieldRef, Item, ItemField, Values};
pub use item_key::ItemKey;
pub use layout::{FieldSpec, ItemLayout, ItemLayoutBuilder, VariableLength, MAX_VARIABLE_LEN};
pub use lazy::LazyReplayBuffer;
pub use policy_lag::{LagAction, PolicyLagCap};
pub use rate_limiter::{RateLimiterConfig, RateLimiterCounters};
pub use sampler::{PrioritizedConfig, PriorityMass, PriorityUpdate, SamplerConfig};
pub use storage::{StorageKind, StorageOrder};
pub use writer_policy::WriterPolicy;
