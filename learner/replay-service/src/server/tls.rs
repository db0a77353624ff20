//! [`ServerTls`]: the replay server's TLS identity and, for mutual TLS, the
//! CAs client certificates must chain to. The same three flags as the
//! learner (`--tls-cert`, `--tls-key`, `--tls-client-ca`), read and checked
//! by the same code (`seed_shared::server_tls`), so a wrong file is refused
//! at start-up in a message naming the flag and the path. Cost: one TLS
//! handshake per connection, then symmetric encryption of every byte.
pub use seed_shared::server_tls::ServerTls;
