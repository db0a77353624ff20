//! The replay service's Python client: `seed_rs.ReplayClient` over the
//! Rust [`seed_replay_service::ReplayClient`], numpy arrays in and out.
//!
//! # Files
//! - [`client`]: the `ReplayClient` class, [`client::Connection`] (the
//!   runtime and connection it owns, and `call`/`run`, which run one Rust
//!   call with the GIL released and Ctrl-C honoured) and `SampleStream`,
//!   the iterator over a pipelined sample stream;
//! - [`arrays`]: numpy arrays to field blocks and back, with the checks
//!   that name the field;
//! - [`layout`]: a table's layout from its `Info`, and `Info` as a dict;
//! - [`error`]: `seed_rs.ReplayError` (the gRPC status) and the mapping
//!   of the Rust client's errors.
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
pub mod layout;
