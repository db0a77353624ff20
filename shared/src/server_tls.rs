//! [`ServerTls`]: a server's TLS identity (`--tls-cert`, `--tls-key`) and,
//! for mutual TLS, the CAs every client certificate must chain to
//! (`--tls-client-ca`). The learner and the replay server take the same
//! three flags and serve them the same way.
//!
//! The files are read and checked once, when the configuration is built
//! ([`ServerTls::from_files`]): a missing file, a file without the PEM block
//! its flag needs, or a key that does not belong to the certificate is an
//! error naming the flag and the path, before anything listens. tonic's
//! rustls (ring) does the rest; each connection costs one TLS handshake,
//! then symmetric encryption of every byte (AES-GCM or ChaCha20, a few
//! GB/s per core).
use std::path::Path;
use std::time::Duration;

use tonic::transport::server::ServerTlsConfig;
use tonic::transport::{Certificate, Identity};

use crate::error::TlsFileError;
use crate::error_chain::error_chain;
use crate::tls::{read_certificates, read_private_key, PemFile};

/// How long a client may take to complete the TLS handshake. A client that
/// connects and stalls holds only its own task, but not forever.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// A server's TLS settings, files read and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerTls {
    /// `--tls-cert`: the certificate chain, leaf first.
    pub cert: PemFile,
    /// `--tls-key`: the leaf's private key.
    pub key: PemFile,
    /// `--tls-client-ca`: require client certificates signed by one of
    /// these; `None`: any client may connect (the token still applies).
    pub client_ca: Option<PemFile>,
}

impl ServerTls {
    /// Reads the three flags' files and checks that they make a working
    /// server configuration.
    pub fn from_files(
        cert: &Path,
        key: &Path,
        client_ca: Option<&Path>,
    ) -> Result<Self, TlsFileError> {
        let tls = ServerTls {
            cert: read_certificates("--tls-cert", cert)?,
            key: read_private_key("--tls-key", key)?,
            client_ca: client_ca
                .map(|p| read_certificates("--tls-client-ca", p))
                .transpose()?,
        };
        tls.check()?;
        Ok(tls)
    }

    /// Builds the rustls server configuration once, as serving will: a key
    /// that does not match the certificate, or a client CA file whose
    /// certificates rustls cannot use, fails here.
    pub fn check(&self) -> Result<(), TlsFileError> {
        match tonic::transport::Server::builder().tls_config(self.tonic_config()) {
            Ok(_) => Ok(()),
            Err(e) => {
                let cause = error_chain(&e);
                if cause.contains("KeyMismatch") {
                    return Err(self.key.error(format!(
                        "this key does not belong to the certificate in --tls-cert {}",
                        self.cert.path.display()
                    )));
                }
                let file = match &self.client_ca {
                    Some(ca) if cause.contains("trust anchor") || cause.contains("root") => ca,
                    _ => &self.key,
                };
                Err(file.error(format!(
                    "cannot serve TLS with --tls-cert {} and --tls-key {}: {cause}",
                    self.cert.path.display(),
                    self.key.path.display()
                )))
            }
        }
    }

    /// tonic's configuration for these files.
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
