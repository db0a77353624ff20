//! Replay tables from Python, numpy arrays in and out: in process
//! (`seed_rs.ReplayBuffer`, over the replay service's own table types) or
//! on a replay server (`seed_rs.ReplayClient` over the Rust
//! [`seed_replay_service::ReplayClient`], and `ReplayClient.table(name)`,
//! the handle with the buffer's methods).
//!
//! # One list of methods
//! A table's methods are written once, as the list of
//! [`table_api::table_methods!`] (name, docstring, Python signature,
//! parameters, return type). From it come the [`table_api::TableApi`]
//! trait, the `#[pymethods]` of `ReplayBuffer` and `ReplayTable` and the
//! client's table methods (the same signatures with `table` first), and
//! the names Python sees as `seed_rs._native.TABLE_METHODS` (which
//! `seed_rs.ray.ReplayHandle` forwards). The bodies are the trait's two
//! implementations: [`local_calls`] (in process) and [`remote_table`] (on
//! a server); `ReplayTable` and `ReplayClient` both delegate to the
//! remote one.
//!
//! # Files
//! - [`table_api`]: the list, the trait and the generators;
//! - [`local_table`]: `LocalTable`, a table in this process (opening it,
//!   its waits without the GIL);
//! - [`local_calls`]: the bodies `ReplayBuffer` runs, `TableApi` for the
//!   in-process table (above its streams, which it opens);
//! - [`local_buffer`]: the `ReplayBuffer` class (constructors, `restore`);
//! - [`local_streams`]: `LocalSampleStream` and `LocalFollowStream`, the
//!   in-process table's iterators (following with the buffer's own
//!   `read_since`, as the server's `Follow` does);
//! - [`connection`]: [`connection::Connection`], the runtime and
//!   connection a client owns (and `call`/`run`, which run one Rust call
//!   with the GIL released and Ctrl-C honoured), with the tables' layouts;
//! - [`remote_table`]: `RemoteTable`, a table of a server: the bodies of
//!   `ReplayTable` and of the client's table methods;
//! - [`remote_streams`]: `SampleStream` and `FollowStream`, the iterators
//!   over server streams;
//! - [`client`]: the `ReplayClient` class (connecting, `table(name)`,
//!   `info()` of every table);
//! - [`table_handle`]: the `ReplayTable` class, `ReplayClient.table(name)`;
//! - [`follow_event`]: a follow event as a dict, the same from either side;
//! - [`table_config`]: the `table` argument (a server config's table
//!   object) checked by the server's config code;
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
//! One entry in the list of [`table_api::table_methods!`] (its docstring,
//! Python signature, parameters and return type), then its body in both
//! implementations of `TableApi`, which the compiler asks for:
//! [`local_table`] (the server's table types directly, the arguments
//! converted by `arrays`) and [`remote_table`] (convert the arguments
//! with the GIL held, `connection.call(py, |mut c| async move {
//! c.the_call(..).await })`, convert the reply; `arrays::fields_dict`
//! turns any reply's field blocks into arrays). A server stream is a
//! `#[pyclass]` of its own shaped like `SampleStream` in
//! [`remote_streams`]. `ReplayBuffer`, `ReplayTable`, the client (for a
//! `call` entry) and `seed_rs.ray.ReplayHandle` then have it; add its
//! line to `_native.pyi`, which `python/tests/test_table_api.py` compares
//! with the classes.
//!
//! Cost: see `connection`, `local_table` and `arrays`; nothing beyond the
//! Rust client's calls except one memcpy per field each way and the GIL
//! hand-offs.

pub mod array_copy;
pub mod arrays;
pub mod client;
pub mod connection;
pub mod error;
pub mod follow_event;
pub mod grouped;
pub mod layout;
pub mod local_buffer;
pub mod local_calls;
pub mod local_streams;
pub mod local_table;
pub mod process_guard;
pub mod remote_streams;
pub mod remote_table;
pub mod shared_bytes;
pub mod table_api;
pub mod table_config;
pub mod table_handle;
