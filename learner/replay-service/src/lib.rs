//! The replay buffer as a network service: `seed.v1.Replay`
//! (`proto/seed/v1/replay.proto`) serving [`seed_replay`] tables to many
//! processes, and [`client::ReplayClient`], its Rust client.
//!
//! # Why a separate `replay-server` binary
//! The service is its own crate and binary rather than a `learner
//! replay-server` subcommand: it depends on the buffer, tonic and the
//! shared TLS helpers only, so it builds and runs on a CPU host without the
//! learner's model stack (candle), its flags and its start-up; and the
//! learner may later use a remote table as a client of this crate without
//! the service importing anything of the learner (data flows replay ->
//! learner, never back).
//!
//! # Running it
//! ```text
//! replay-server --config tables.json [--listen 127.0.0.1:50061] [--token T]
//!               [--tls-cert C --tls-key K [--tls-client-ca CA]]
//!               [--max-message-bytes N] [--restore] [--load [TABLE=]DIR ...]
//! ```
//! The config file ([`config`]) declares each table: fields (name, dtype,
//! shape), capacity, sampler, writer policy, rate limiter, lag cap, storage.
//!
//! # Disk-backed tables and loaded shards
//! A table with `storage_dir` lives in a memory-mapped directory. An insert
//! is a store into the page cache (no write call, no sync on its path;
//! [`RunningServer::stop`] flushes), and it never makes a sampler wait: the
//! buffer's slots are seqlocks, so a reader retries only while a writer is
//! inside that very slot, and the uniform and recent samplers share no lock
//! with writers (`learner/replay/src/README.md`). A restart reopens the
//! directory with every acknowledged item under its key, the counters read
//! back from the slots and the FIFO position (`tests/persistence.rs`);
//! priorities restart at the maximum (checkpoints keep them).
//!
//! `load` (or `--load`) serves mapped directories written by other servers
//! as one read-only table:
//! [`ShardedTable`](server::sharded_table::ShardedTable) says how samples
//! are split between shards, how keys carry their shard and why inserts
//! are refused.
//!
//! # The protocol in short
//! - `Insert`: a bidirectional stream; each request is one batch of `rows`
//!   items (one little-endian block per field) and gets one reply with its
//!   keys, in order, so a writer can keep batches in flight.
//! - `Sample`: a server stream of batches of `batch_size`; at most
//!   `max_in_flight` are prepared ahead of what HTTP/2 flow control lets
//!   the server send (see `server/sample_stream.rs`), so a slow reader
//!   never makes the server buffer without bound.
//! - `UpdatePriorities`, `SetPolicyVersion`, `Info`, `Checkpoint`: unary.
//! - Grouped tables (sampler `grouped`, the trajectory-pool pattern):
//!   `SubmitSteps` appends steps (one row each: trajectory id, group id,
//!   policy version, is-last) to their trajectories, `CompleteTrajectory`
//!   ends one without a last step, and `FetchGroup` hands out the oldest
//!   *complete* group whole: `group_size` trajectories, each complete.
//!   Trajectories have any length; they are stored as per-trajectory
//!   arrays apart from the fixed-shape tables (why, and the capacity and
//!   lag-cap rules: `server/grouped_table.rs`; the config keys:
//!   [`config::grouped_table_spec`]).
//!
//! A bad request (unknown table or field, wrong dtype, shape or byte
//! length, an oversize message) ends only its own call with
//! `INVALID_ARGUMENT` (`NOT_FOUND` for a table, `RESOURCE_EXHAUSTED` or
//! `OUT_OF_RANGE` for tonic's message limit) and a message naming the
//! field; batches acknowledged before it stay stored, other clients go on.
//!
//! # Modules, bottom first
//! `pb` (generated), `wire_dtype`, `error`, `token` (leaves); `config`
//! (with `config/grouped_table_spec.rs`);
//! `server` (tables, the service, TLS, start-up); `client` (imports only
//! the leaves, never `server`). `tests/layering.rs` checks both rules and
//! fails for a top-level file it has no layer for; a folder's entry covers
//! every file in it, so new files under `server/` or `client/` need none.
//!
//! Bytes travel little-endian and the buffer stores native-endian words:
//! the crate builds for little-endian targets only.
#[cfg(target_endian = "big")]
compile_error!(
    "seed-replay-service sends native bytes as little-endian: little-endian targets only"
);

pub mod client;
pub mod config;
pub mod error;
pub mod pb;
pub mod server;
pub mod token;
pub mod wire_dtype;

pub use client::{FetchedGroup, InsertBatch, ReplayClient, SampledBatch, StepBatch};
pub use config::{ServiceConfig, TableSpec};
pub use error::{ClientError, ConfigError, RequestError, ServeError};
pub use server::{start, RunningServer, ServerOptions};
