//! Serving: the tonic `Learner` service (one task per actor stream, `Status`,
//! gRPC health), its transports (TCP, unix socket), TLS, and the errors
//! that end one stream.
//!
//! The service validates and forwards: each step batch becomes a
//! [`crate::infer::step_request::StepRequest`] pushed into the batcher. It
//! builds nothing; [`crate::app::Learner::start`] hands it the stages.
pub mod server;
pub mod spec_gate;
pub mod stream_error;
pub mod tls;
pub mod transport;

pub use spec_gate::SpecGate;
pub use stream_error::StreamError;
