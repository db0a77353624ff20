//! Serving: the tonic `Learner` service (one task per actor stream, `Status`,
//! gRPC health), its transports (TCP, unix socket), TLS, and the errors
//! that end one stream.
//!
//! - [`server`]: start and stop serving (listeners, TLS, keepalive, the
//!   stages handed over by the composition root), and the rules a stream
//!   lives by;
//! - [`service`]: the `Learner` service (`Act`, `Status`) and the state its
//!   streams share; `registry`: the live streams, for shutdown;
//! - `stream_task`: one actor stream from hello to its end;
//! - [`spec_gate`], [`stream_error`], [`tls`], [`transport`].
//!
//! The service validates and forwards: each step batch becomes a
//! [`crate::infer::step_request::StepRequest`] pushed into the batcher. It
//! builds nothing; [`crate::app::Learner::start`] hands it the stages.
mod context;
mod registry;
pub mod server;
pub mod service;
pub mod spec_gate;
pub mod stream_error;
mod stream_task;
pub mod tls;
pub mod transport;

pub use spec_gate::SpecGate;
pub use stream_error::StreamError;
