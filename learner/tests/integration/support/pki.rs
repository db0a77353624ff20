//! Certificates made at run time with rcgen, written as PEM files into a
//! temporary directory: a server CA and a learner certificate it signs (for
//! `localhost` and 127.0.0.1), a client CA and an actor certificate it
//! signs, and an unrelated CA that trusts nothing here.
use std::path::PathBuf;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

pub struct TestPki {
    _dir: tempfile::TempDir,
    /// The CA that signed the learner's certificate.
    pub server_ca: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    /// The CA that signed the actor's client certificate.
    pub client_ca: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
    /// A CA that signed neither.
    pub other_ca: PathBuf,
    /// A client certificate signed by `other_ca`.
    pub other_client_cert: PathBuf,
    pub other_client_key: PathBuf,
}

fn ca(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    CertifiedIssuer::self_signed(params, KeyPair::generate().expect("CA key")).expect("CA cert")
}

/// (certificate PEM, key PEM) for `names`, signed by `issuer`.
fn leaf(
    issuer: &CertifiedIssuer<'static, KeyPair>,
    names: &[&str],
    usage: ExtendedKeyUsagePurpose,
) -> (String, String) {
    let mut params =
        CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
            .expect("leaf params");
    params.distinguished_name.push(
        DnType::CommonName,
        names.first().copied().unwrap_or("actor"),
    );
    params.extended_key_usages = vec![usage];
    let key = KeyPair::generate().expect("leaf key");
    let cert = params.signed_by(&key, issuer).expect("leaf cert");
    (cert.pem(), key.serialize_pem())
}

impl TestPki {
    pub fn generate() -> TestPki {
        let dir = tempfile::tempdir().expect("tempdir");
        let write = |name: &str, pem: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, pem).expect("write pem");
            path
        };
        let server_ca = ca("seed test server CA");
        let (server_cert, server_key) = leaf(
            &server_ca,
            &["localhost", "127.0.0.1"],
            ExtendedKeyUsagePurpose::ServerAuth,
        );
        let client_ca = ca("seed test client CA");
        let (client_cert, client_key) = leaf(
            &client_ca,
            &["actor-1"],
            ExtendedKeyUsagePurpose::ClientAuth,
        );
        let other_ca = ca("seed test unrelated CA");
        let (other_client_cert, other_client_key) = leaf(
            &other_ca,
            &["intruder"],
            ExtendedKeyUsagePurpose::ClientAuth,
        );
        TestPki {
            server_ca: write("server-ca.pem", &server_ca.pem()),
            server_cert: write("server.pem", &server_cert),
            server_key: write("server-key.pem", &server_key),
            client_ca: write("client-ca.pem", &client_ca.pem()),
            client_cert: write("client.pem", &client_cert),
            client_key: write("client-key.pem", &client_key),
            other_ca: write("other-ca.pem", &other_ca.pem()),
            other_client_cert: write("other-client.pem", &other_client_cert),
            other_client_key: write("other-client-key.pem", &other_client_key),
            _dir: dir,
        }
    }
}
