//! A table of a replay server as the learner's unroll store
//! (`--replay-addr HOST:PORT/TABLE`):
//! - [`config`]: the flags, checked; [`table_layout`]: the layout check and
//!   the table config a user gives the server;
//! - [`table`]: connection, start-up checks, priorities, the policy version;
//! - [`writer`]: batched, pipelined inserts off the inference threads;
//! - [`sampler`]: a sample stream per prefetch thread, on
//!   [`sample_connection`] (a small HTTP/2 window, so sampled batches do not
//!   pile up ahead of the trainer);
//! - [`stats`]: drops and backpressure, counted; [`client_runtime`]: the
//!   client's own tokio runtime; [`error`].
pub mod client_runtime;
pub mod config;
pub mod error;
pub mod sample_connection;
pub mod sampler;
pub mod stats;
pub mod table;
pub mod table_layout;
pub mod writer;

pub use config::RemoteReplayConfig;
pub use error::RemoteReplayError;
pub use table::RemoteTable;
