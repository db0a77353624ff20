//! Replay: where unrolls wait between the unroll builder and the trainer.
//!
//! The buffer itself is the `seed_replay` crate (in process) or a table of a
//! replay server (`seed_replay_service`, `--replay-addr HOST:PORT/TABLE`);
//! this room holds the seam the learning stages use for both:
//! - [`unroll_store::UnrollStore`]: insert, priorities, policy version,
//!   close, size; [`unroll_sampler::UnrollSampler`]: one prefetch thread's
//!   batches, read through [`sampled_unrolls::SampledUnrolls`];
//! - the remote table: [`remote_config`] (the flags, checked),
//!   [`remote_table`] (connection, start-up checks, priorities, the policy
//!   version), [`remote_writer`] (batched, pipelined inserts off the
//!   inference threads), [`remote_sampler`] (a sample stream per prefetch
//!   thread) on [`sample_connection`] (a small HTTP/2 window, so sampled
//!   batches do not pile up ahead of the trainer), [`remote_stats`] (drops and backpressure, counted),
//!   [`client_runtime`] (the client's own tokio runtime), [`table_layout`]
//!   (the layout check and the table config a user gives the server),
//!   [`error`].
//!
//! Layering: this room imports only the leaves (`log_throttle`) and the
//! replay crates; `learn` (unrolls, prefetch, training) imports it.
pub mod client_runtime;
pub mod error;
pub mod remote_config;
pub mod remote_sampler;
pub mod remote_stats;
pub mod remote_table;
pub mod remote_writer;
pub mod sample_connection;
pub mod sampled_unrolls;
pub mod table_layout;
pub mod unroll_sampler;
pub mod unroll_store;

pub use error::RemoteReplayError;
pub use remote_config::RemoteReplayConfig;
pub use remote_table::RemoteTable;
pub use sampled_unrolls::SampledUnrolls;
pub use unroll_sampler::{SampleFailure, UnrollSampler};
pub use unroll_store::{InsertOutcome, UnrollStore};
