//! The unroll store: where unrolls wait between the unroll builder and the
//! trainer, the learner's seam to a replay buffer.
//!
//! The buffer itself is the `seed_replay` crate (in process, the default)
//! or a table of a replay server (`seed_replay_service`, `--replay-addr
//! HOST:PORT/TABLE`); this folder holds what the learning stages see of
//! either:
//! - [`store::UnrollStore`]: insert, priorities, policy version, close,
//!   size; [`sampler::UnrollSampler`]: one prefetch thread's batches, read
//!   through [`sampled_unrolls::SampledUnrolls`];
//! - [`remote`]: the remote table behind the same calls.
//!
//! Layering: this folder imports only the leaves (`log_throttle`) and the
//! replay crates; `learn` (unrolls, prefetch, training) imports it.
pub mod remote;
pub mod sampled_unrolls;
pub mod sampler;
pub mod store;

pub use remote::{RemoteReplayConfig, RemoteReplayError, RemoteTable};
pub use sampled_unrolls::SampledUnrolls;
pub use sampler::{SampleFailure, UnrollSampler};
pub use store::{InsertOutcome, UnrollStore};
