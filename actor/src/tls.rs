//! [`ClientTls`]: how the actor connects to a learner that serves TLS
//! (`--tls-ca`, `--tls-domain`, and for mutual TLS `--tls-cert`/`--tls-key`).
//!
//! The files are read and checked once, when the configuration is built;
//! the channel is then configured once per actor and every reconnect
//! reuses it (one TLS handshake per connection, then symmetric encryption
//! of each byte, small next to a step's round trip).
use std::path::Path;

use seed_shared::tls::{read_certificates, read_private_key, PemFile};
use tonic::transport::{Certificate, ClientTlsConfig, Identity};

use crate::error::ActorError;

/// TLS settings of the actor's channel, files read and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientTls {
    /// `--tls-ca`: the CA certificates the learner's certificate must
    /// chain to (the system's roots are not used).
    pub ca: PemFile,
    /// `--tls-domain`: the name the learner's certificate must carry;
    /// `None`: the host of `--learner` (a name or an IP address).
    pub domain: Option<String>,
    /// `--tls-cert` and `--tls-key`: presented to a learner that requires
    /// client certificates (`--tls-client-ca`).
    pub identity: Option<ClientIdentity>,
}

/// The actor's client certificate and its key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientIdentity {
    pub cert: PemFile,
    pub key: PemFile,
}

impl ClientTls {
    /// Reads `--tls-ca` and, when given, `--tls-cert` and `--tls-key`.
    pub fn from_files(
        ca: &Path,
        domain: Option<String>,
        identity: Option<(&Path, &Path)>,
    ) -> Result<Self, ActorError> {
        Ok(ClientTls {
            ca: read_certificates("--tls-ca", ca)?,
            domain: domain.filter(|d| !d.is_empty()),
            identity: identity
                .map(|(cert, key)| -> Result<_, ActorError> {
                    Ok(ClientIdentity {
                        cert: read_certificates("--tls-cert", cert)?,
                        key: read_private_key("--tls-key", key)?,
                    })
                })
                .transpose()?,
        })
    }

    /// tonic's configuration for these files.
    pub fn tonic_config(&self) -> ClientTlsConfig {
        let mut config = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(&self.ca.pem));
        if let Some(domain) = &self.domain {
            config = config.domain_name(domain.clone());
        }
        if let Some(id) = &self.identity {
            config = config.identity(Identity::from_pem(&id.cert.pem, &id.key.pem));
        }
        config
    }

    /// The file to blame when tonic refuses this configuration: the key of
    /// a client identity (most likely not matching its certificate), else
    /// the CA file.
    pub(crate) fn blame(&self) -> &PemFile {
        self.identity.as_ref().map_or(&self.ca, |id| &id.key)
    }
}
