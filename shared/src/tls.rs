//! The PEM files behind both binaries' TLS flags, read once at start-up and
//! checked, so a wrong path or a key given for a certificate is refused
//! before anything listens or connects, in a message that names the flag.
//!
//! What is kept is the file's bytes ([`PemFile`]); the learner and the actor
//! hand them to tonic's rustls configuration. Reading costs one file read
//! and one PEM parse per flag, once.
use std::fmt;
use std::path::{Path, PathBuf};

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::error::TlsFileError;

/// One PEM file given to a TLS flag, with the flag and path it came from.
#[derive(Clone, PartialEq, Eq)]
pub struct PemFile {
    /// The flag that named it, for error messages.
    pub flag: &'static str,
    pub path: PathBuf,
    /// The file's contents, checked to hold what the flag needs.
    pub pem: Vec<u8>,
}

impl PemFile {
    /// An error about this file.
    pub fn error(&self, reason: impl Into<String>) -> TlsFileError {
        TlsFileError {
            flag: self.flag,
            path: self.path.clone(),
            reason: reason.into(),
        }
    }
}

impl fmt::Debug for PemFile {
    /// The flag and path only: a private key's bytes never reach a log.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PemFile")
            .field("flag", &self.flag)
            .field("path", &self.path)
            .field("bytes", &self.pem.len())
            .finish()
    }
}

fn read(flag: &'static str, path: &Path) -> Result<PemFile, TlsFileError> {
    let pem = std::fs::read(path).map_err(|e| TlsFileError {
        flag,
        path: path.to_path_buf(),
        reason: format!("cannot read the file: {e}"),
    })?;
    Ok(PemFile {
        flag,
        path: path.to_path_buf(),
        pem,
    })
}

/// Reads one or more PEM `CERTIFICATE` blocks (a chain, leaf first, or a CA
/// bundle) from `path`, given to `flag`.
pub fn read_certificates(flag: &'static str, path: &Path) -> Result<PemFile, TlsFileError> {
    let file = read(flag, path)?;
    let mut count = 0usize;
    for cert in CertificateDer::pem_slice_iter(&file.pem) {
        cert.map_err(|e| file.error(format!("not a valid PEM certificate file: {e}")))?;
        count += 1;
    }
    if count == 0 {
        return Err(file.error("no PEM `CERTIFICATE` block in the file"));
    }
    Ok(file)
}

/// Reads one PEM private key (PKCS#8, PKCS#1 RSA or SEC1 EC) from `path`,
/// given to `flag`.
pub fn read_private_key(flag: &'static str, path: &Path) -> Result<PemFile, TlsFileError> {
    let file = read(flag, path)?;
    match PrivateKeyDer::from_pem_slice(&file.pem) {
        Ok(_) => Ok(file),
        Err(rustls_pki_types::pem::Error::NoItemsFound) => Err(file.error(
            "no PEM private key block (`PRIVATE KEY`, `RSA PRIVATE KEY` or `EC PRIVATE KEY`) in the file",
        )),
        Err(e) => Err(file.error(format!("not a valid PEM private key file: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn certificates_and_keys_are_checked_and_errors_name_flag_and_path() {
        let files = seed_test_pki::SelfSignedFiles::generate();
        let (cert_path, key_path) = (&files.cert, &files.key);

        let c = read_certificates("--tls-cert", cert_path).unwrap();
        assert_eq!(c.pem, files.cert_pem.as_bytes());
        let k = read_private_key("--tls-key", key_path).unwrap();
        assert!(!format!("{k:?}").contains("PRIVATE"), "{k:?}");

        // Swapped files, a missing one, garbage.
        let e = read_certificates("--tls-cert", key_path).unwrap_err();
        assert_eq!(e.flag, "--tls-cert");
        assert!(e.to_string().contains("key.pem"), "{e}");
        let e = read_private_key("--tls-key", cert_path).unwrap_err();
        assert!(e.to_string().contains("--tls-key"), "{e}");
        let missing = files.dir().join("nope.pem");
        let e = read_certificates("--tls-ca", &missing).unwrap_err();
        assert!(
            e.to_string().contains("--tls-ca") && e.to_string().contains("nope.pem"),
            "{e}"
        );
        let junk = files.dir().join("junk.pem");
        std::fs::write(&junk, "-----BEGIN CERTIFICATE-----\nnot base64!\n").unwrap();
        assert!(read_certificates("--tls-cert", &junk).is_err());
    }
}
