//! Test certificates made at run time: [`SelfSignedFiles`], a self-signed
//! certificate for `localhost` with its key, and a second key that belongs
//! to no certificate, written as PEM files into a temporary directory.
//!
//! Why a crate: the TLS flag tests of every binary (and the replay
//! service's TLS test) need the same files, and rcgen's API is easiest to
//! get wrong in the one place that builds them. A self-signed certificate
//! is its own CA: give it to a server as `--tls-cert` and to the client as
//! `--tls-ca` (or as the server's `--tls-client-ca`). Dev-only
//! (`publish = false`); it panics instead of returning errors, as a test
//! would. Cost: two key generations (ECDSA P-256, well under a
//! millisecond each) and three small file writes.
use std::path::{Path, PathBuf};

use rcgen::{CertificateParams, KeyPair};

/// The files, in a temporary directory removed on drop; tests may add
/// their own files to [`SelfSignedFiles::dir`].
#[derive(Debug)]
pub struct SelfSignedFiles {
    dir: tempfile::TempDir,
    /// `cert.pem`: the certificate, valid for the name `localhost`.
    pub cert: PathBuf,
    /// `key.pem`: its private key (PKCS#8).
    pub key: PathBuf,
    /// `other-key.pem`: a private key that does not belong to `cert`.
    pub other_key: PathBuf,
    /// The text of `cert.pem`.
    pub cert_pem: String,
}

impl SelfSignedFiles {
    /// Generates the certificate and keys and writes them.
    ///
    /// # Panics
    /// When rcgen fails or a file cannot be written.
    pub fn generate() -> SelfSignedFiles {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let key = KeyPair::generate().expect("a key");
        let cert = CertificateParams::new(vec!["localhost".to_owned()])
            .expect("certificate parameters")
            .self_signed(&key)
            .expect("a self-signed certificate");
        let other = KeyPair::generate().expect("a second key");
        let write = |name: &str, pem: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, pem).expect("writing a PEM file");
            path
        };
        let cert_pem = cert.pem();
        SelfSignedFiles {
            cert: write("cert.pem", &cert_pem),
            key: write("key.pem", &key.serialize_pem()),
            other_key: write("other-key.pem", &other.serialize_pem()),
            cert_pem,
            dir,
        }
    }

    /// The temporary directory holding the files.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}
