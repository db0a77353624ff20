//! Learning: from inferred steps to new weights.
//!
//! - [`unroll`]: the unroll builder, inference's sink: `T+1` steps per env
//!   slot (overlap 1) into the replay buffer (`crate::unroll_store`'s store: the
//!   in-process `seed_replay` buffer or a remote table);
//! - [`prefetch`]: samples `B` unrolls and collates them into `[T+1, B, ...]`
//!   tensors ahead of the trainer;
//! - [`train`]: the trainer (one V-trace actor-critic update per batch) and
//!   its thread; [`algo`]: V-trace and the IMPALA loss; [`r2d2`]: R2D2,
//!   read top to bottom from one folder; [`optimizer`];
//! - [`checkpoint`]: atomic checkpoints of model, optimizer and counters;
//! - [`config`]: the learning side's settings. Building, starting and
//!   stopping it (periodic checkpoints included) is the composition root's
//!   work: `crate::app::training`.
pub mod algo;
pub mod checkpoint;
pub mod config;
pub mod optimizer;
pub mod prefetch;
pub mod r2d2;
pub mod train;
pub mod unroll;
