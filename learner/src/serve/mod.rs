//! Serving: the tonic service and its transports.
pub mod server;
pub mod transport;
