//! Learning: from inferred steps to new weights.
//!
//! - [`unroll`]: the unroll builder, inference's sink: `T+1` steps per env
//!   slot into the replay buffer (`crate::unroll_store`'s store: the
//!   in-process `seed_replay` buffer or a remote table);
//! - [`prefetch`]: samples `B` unrolls and collates them into `[T+1, B, ...]`
//!   tensors ahead of the trainer;
//! - the algorithms, each one folder read top to bottom: [`vtrace`]
//!   (IMPALA's V-trace, the default) and [`r2d2`]; [`agent`] is `--algo`'s
//!   choice between them, [`agent_step`] the interface the trainer calls
//!   them through;
//! - [`trainer`]: one training step, the same for every algorithm
//!   (backward, clipping, the [`optimizer`], the weights publish, of
//!   their [`acting_average`] when asked);
//!   [`trainer_stats`], its figures; [`training_thread`], its thread;
//! - [`checkpoint`]: atomic checkpoints of model, optimizer and counters;
//! - [`config`]: the learning side's settings. Building, starting and
//!   stopping it (periodic checkpoints included) is the composition root's
//!   work: `crate::app::training`.
pub mod acting_average;
pub mod agent;
pub mod agent_step;
pub mod checkpoint;
pub mod config;
pub mod optimizer;
pub mod prefetch;
pub mod r2d2;
pub mod trainer;
pub mod trainer_stats;
pub mod training_thread;
pub mod unroll;
pub mod vtrace;
