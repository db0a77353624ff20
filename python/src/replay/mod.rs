//! Replay tables from Python, numpy arrays in and out: in process
//! (`seed_rs.ReplayBuffer`, over the replay service's own table types) or
//! on a replay server (`seed_rs.ReplayClient` over the Rust
//! [`seed_replay_service::ReplayClient`], and `ReplayClient.table(name)`,
//! the handle with the buffer's methods).
//!
//! # Files
//! - [`local_buffer`]: `ReplayBuffer`, a table in this process, and its
//!   sample stream;
//! - [`table_config`]: the `table` argument (a server config's table
//!   object) checked by the server's config code;
//! - [`client`]: the `ReplayClient` class, [`client::Connection`] (the
//!   runtime and connection it owns, and `call`/`run`, which run one Rust
//!   call with the GIL released and Ctrl-C honoured), `SampleStream` and
//!   `FollowStream`, the iterators over server streams;
//! - [`table_handle`]: `ReplayTable`, `ReplayClient.table(name)`;
//! - [`arrays`]: arrays in (numpy, `__dlpack__`, buffer protocol) and out,
//!   with the checks that name the field, shared by both sides;
//! - [`grouped`]: grouped tables' step batches and fetched groups;
//! - [`layout`]: a table's layout from its `Info`, and `Info` as a dict;
//! - [`process_guard`]: the error after `fork` or on pickling;
//! - [`error`]: `seed_rs.ReplayError` (the gRPC status), its
//!   `ReplayArgumentError` subclass, and the mapping of errors and
//!   statuses.
//!
//! # Adding a call
//! A unary call (a grouped table's `FetchGroup`, say) is one method of
//! `PyReplayClient`: convert the arguments with the GIL held (`arrays`),
//! `self.connection.call(py, |mut c| async move { c.the_call(..).await })`,
//! convert the reply (`arrays::fields_dict` turns any reply's field
//! blocks into arrays). A server stream (`Follow`) is a `#[pyclass]` of
//! its own shaped like `SampleStream`: `__iter__`/`__next__`, an
//! `Arc<Connection>` and the Rust stream behind a mutex, each message read
//! with `Connection::run`; the client's method opens it.
//!
//! Cost: see `client` and `arrays`; nothing beyond the Rust client's calls
//! except one memcpy per field each way and the GIL hand-offs.

pub mod arrays;
pub mod client;
pub mod error;
pub mod grouped;
pub mod layout;
pub mod local_buffer;
pub mod process_guard;
pub mod table_config;
pub mod table_handle;
