//! What the actor and the learner both need: the generated wire types
//! ([`pb`]), observation/action specs with their validation ([`spec`]), and
//! the observation byte codec ([`codec`]), the logging setup of both
//! binaries ([`logging`]), and what both ends of a stream configure alike:
//! HTTP/2 keepalive ([`keepalive`]), the PEM files of the TLS flags
//! ([`tls`]) and a client's TLS flags ([`client_tls_flags`]), the shared
//! secret ([`token`]); how every binary prints an error with its causes
//! ([`error_chain`]); and a server's open-files limit ([`open_files`]).
pub mod client_tls_flags;
pub mod codec;
pub mod error;
pub mod error_chain;
pub mod keepalive;
pub mod logging;
pub mod open_files;
pub mod pb;
pub mod server_tls;
pub mod spec;
pub mod tls;
pub mod token;
pub mod usage;

pub use client_tls_flags::{ClientTlsFlags, ClientTlsNames, TlsFlag};
pub use error::{ProtocolError, TlsFileError};
pub use error_chain::error_chain;
pub use keepalive::Keepalive;
pub use spec::{ActionSpace, EnvSpec, ObsDType};
pub use token::Token;

/// Default learner address (loopback, so nothing is exposed by accident).
pub const DEFAULT_LEARNER_ADDR: &str = "127.0.0.1:50051";
/// Default largest message accepted on the stream (64 MiB).
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 64 << 20;
