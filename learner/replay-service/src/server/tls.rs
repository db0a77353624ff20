//! [`ServerTls`]: the replay server's TLS identity and, for mutual TLS, the
//! CAs client certificates must chain to. The same three flags as the
//! learner (`--tls-cert`, `--tls-key`, `--tls-client-ca`), read and checked
//! by the same helpers (`seed_shared::tls`), so a wrong file is refused at
//! start-up in a message naming the flag and the path. Cost: one TLS
//! handshake per connection, then symmetric encryption of every byte.
use std::path::Path;
use std::time::Duration;

use seed_shared::tls::{read_certificates, read_private_key, PemFile};
use tonic::transport::server::ServerTlsConfig;
use tonic::transport::{Certificate, Identity};

use crate::error::ServeError;

/// How long a client may take to complete the handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerTls {
    pub cert: PemFile,
    pub key: PemFile,
    pub client_ca: Option<PemFile>,
}

impl ServerTls {
    /// Reads the flags' files and checks that rustls accepts them together.
    pub fn from_files(
        cert: &Path,
        key: &Path,
        client_ca: Option<&Path>,
    ) -> Result<Self, ServeError> {
        let tls = ServerTls {
            cert: read_certificates("--tls-cert", cert)?,
            key: read_private_key("--tls-key", key)?,
            client_ca: client_ca
                .map(|p| read_certificates("--tls-client-ca", p))
                .transpose()?,
        };
        tonic::transport::Server::builder()
            .tls_config(tls.tonic_config())
            .map_err(|e| {
                ServeError::Tls(tls.key.error(format!(
                    "cannot serve TLS with --tls-cert {} and --tls-key {}: {e}",
                    tls.cert.path.display(),
                    tls.key.path.display()
                )))
            })?;
        Ok(tls)
    }

    pub fn tonic_config(&self) -> ServerTlsConfig {
        let config = ServerTlsConfig::new()
            .identity(Identity::from_pem(&self.cert.pem, &self.key.pem))
            .timeout(HANDSHAKE_TIMEOUT);
        match &self.client_ca {
            Some(ca) => config.client_ca_root(Certificate::from_pem(&ca.pem)),
            None => config,
        }
    }
}
