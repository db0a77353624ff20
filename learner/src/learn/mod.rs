//! Learning: from inferred steps to new weights.
//!
//! - [`unroll`]: the unroll builder, inference's sink: `T+1` steps per env
//!   slot (overlap 1) into the replay buffer (`crate::replay`'s store: the
//!   in-process `seed_replay` buffer or a remote table);
//! - [`prefetch`]: samples `B` unrolls and collates them into `[T+1, B, ...]`
//!   tensors ahead of the trainer;
//! - [`train`]: the trainer (one V-trace actor-critic update per batch) and
//!   its thread; [`algo`]: V-trace and the IMPALA loss; [`optimizer`];
//! - [`checkpoint`]: atomic checkpoints of model, optimizer and counters;
//! - [`config`]: the learning side's settings; [`training`]: its
//!   lifecycle (build, start, stop, periodic checkpoints).
pub mod algo;
pub mod checkpoint;
pub mod config;
pub mod optimizer;
pub mod prefetch;
pub mod train;
pub mod training;
pub mod unroll;
