//! The replay buffer as a network service: `seed.v1.Replay`
//! (`proto/seed/v1/replay.proto`) serving [`seed_replay`] tables to many
//! processes, and [`client::ReplayClient`], its Rust client.
//!
//! # Why a separate `replay-server` binary
//! The service is its own crate and binary rather than a `learner
//! replay-server` subcommand: it depends on the buffer, tonic and the
//! shared TLS helpers only, so it builds and runs on a CPU host without the
//! learner's model stack (candle), its flags and its start-up; and the
//! learner uses a remote table (`learner --replay-addr`) as a client of this crate without
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
//! back from the slots and the FIFO position (`tests/integration/persistence.rs`);
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
//! - `Follow`: a server stream of every item inserted from a cursor on
//!   (below, "Mirrors").
//!
//! A bad request (unknown table or field, wrong dtype, shape or byte
//! length, an oversize message) ends only its own call with
//! `INVALID_ARGUMENT` (`NOT_FOUND` for a table, `RESOURCE_EXHAUSTED` or
//! `OUT_OF_RANGE` for tonic's message limit) and a message naming the
//! field; batches acknowledged before it stay stored, other clients go on.
//!
//! # Mirrors and the `Follow` protocol
//! ```text
//! replay-server --mirror-of HOST:PORT [--mirror-token T]
//!               [--mirror-tls-ca CA [--mirror-tls-domain D]
//!                [--mirror-tls-cert C --mirror-tls-key K]] [--listen ...]
//! ```
//! A mirror serves copies of another server's (the primary's) tables,
//! kept in step through `Follow`, and answers `Sample` and `Info` itself:
//! N mirrors are N parallel samplers over one logical buffer.
//! - **Layouts** come from the primary's `Info` at start-up (fields,
//!   dtypes, shapes, policy-version field, capacity); a mirror reads no
//!   config file. Grouped tables are skipped.
//! - **Sampling on a mirror is uniform**, whatever the primary's sampler:
//!   a mirror copies items, not sampler state, so priorities are not
//!   followed (weights are 1) and nothing is consumed on the primary.
//!   `Insert`, `UpdatePriorities` and `Follow` on a mirror table are
//!   refused with `FAILED_PRECONDITION` naming the table and the primary.
//! - **Cursor.** Keys are consecutive in insertion order. `Follow(table,
//!   cursor)` sends `FollowItems` of consecutive keys `first_key ..
//!   next_key` (one little-endian block per field, as `Sample`), in key
//!   order, stopping at the first key whose insert has not been published
//!   yet so no item is skipped; a follower resumes from the last
//!   `next_key` with no gap and no duplicate. A cursor above the table's
//!   next key is refused (`INVALID_ARGUMENT`, field `cursor`).
//! - **Overwrites.** Item `k` lives in slot `k % capacity`; each
//!   `FollowItems` names the keys its items replaced (`replaced_first`,
//!   `replaced_count`: `k - capacity` for each `k >= capacity`). A mirror
//!   stores each item under its own key in the same slot
//!   ([`seed_replay::ReplayBuffer::insert_batch_at`]), so it holds exactly
//!   the primary's keys and bytes once it has caught up.
//! - **Gaps.** If the item at the cursor was overwritten before it was
//!   read (the follower fell a ring behind, or started at 0 on a wrapped
//!   table), the stream sends `FollowGap { requested, oldest }` and goes on
//!   at `oldest`: the follower knows exactly which keys it will never see.
//!   A mirror logs the count and goes on; the slots of the missed keys
//!   keep older items until the ring comes round.
//! - **Flow control** as `Sample`: at most `max_in_flight` messages are
//!   prepared ahead of what HTTP/2 lets the server send, so a slow
//!   follower costs the server bounded memory; it falls behind and gets a
//!   gap instead (waits count in `sample_flow_control_waits`).
//! - Each message also carries `head_key`, the table's next key when it
//!   was read: `head_key - next_key` is how many items the follower is
//!   behind. A broken stream is reopened by the mirror from its cursor
//!   with a backoff (50 ms to 5 s).
//!
//! # Modules, bottom first
//! `pb` (generated), `wire_dtype`, `error`, `token` (leaves); `config`
//! (with `config/file_format.rs` and `config/grouped_table_spec.rs`);
//! `client` (imports only the leaves, never `server`); `server` (tables,
//! the service, TLS, start-up; its mirror follows the primary through the
//! client); `cli` (the `replay-server` flags, here so the generated
//! command-line reference renders them). `tests/integration/layering.rs` checks both rules and fails for a
//! top-level file it has no layer for; a folder's entry covers every file
//! in it, so new files under `server/` or `client/` need none.
//!
//! Bytes travel little-endian and the buffer stores native-endian words:
//! the crate builds for little-endian targets only.
#[cfg(target_endian = "big")]
compile_error!(
    "seed-replay-service sends native bytes as little-endian: little-endian targets only"
);

pub mod cli;
pub mod client;
pub mod command;
pub mod config;
pub mod error;
pub mod pb;
pub mod server;
pub mod token;
pub mod wire_dtype;

pub use client::{FetchedGroup, FieldBlocks, InsertBatch, ReplayClient, SampledBatch, StepBatch};
pub use config::{ServiceConfig, TableSpec};
pub use error::{ClientError, ConfigError, RequestError, ServeError};
pub use server::{start, RunningServer, ServerOptions};
