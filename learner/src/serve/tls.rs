//! [`ServerTls`]: the learner's TLS identity (`--tls-cert`, `--tls-key`)
//! and, for mutual TLS, the CAs every actor's client certificate must chain
//! to (`--tls-client-ca`): `seed_shared::server_tls`, which the replay
//! server shares, read and checked once when the configuration is built.
//!
//! TLS is served on TCP listen addresses only: a unix socket never leaves
//! the host and is guarded by file permissions, so the configuration refuses
//! `--tls-cert` with `--listen unix:...` ([`crate::app::LearnerConfig::validate`]).
pub use seed_shared::server_tls::ServerTls;
