//! [`ClientTlsFlags`]: the flags of a client that reaches a TLS server:
//! the CA file the server's certificate must chain to, the name that
//! certificate must carry, and for mutual TLS a client certificate and its
//! key, read into checked [`PemFile`]s naming the flag at fault.
//!
//! Why generic: each binary reaches a different server, so the same four
//! flags differ in name (`actor --tls-ca`, `replay-server
//! --mirror-tls-ca`), in help text and in what they require (the mirror's
//! need `--mirror-of`). A [`ClientTlsNames`] type says those per binary
//! (`docs/cli.md` pins every word of them); the fields, their clap wiring
//! and the reading of the files are written here once. The learner's
//! `--replay-tls-*` flags are keys of its settings files and stay in its
//! own flags. Cost: none at parse time; [`ClientTlsFlags::read_ca`] and
//! [`ClientTlsFlags::read_identity`] read each given file once.
use std::marker::PhantomData;
use std::path::PathBuf;

use crate::error::TlsFileError;
use crate::tls::{read_certificates, read_private_key, PemFile};

/// How one of the four flags is spelled and documented in one binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TlsFlag {
    /// clap's id of the argument (what `requires` lists name): `tls_ca`.
    pub id: &'static str,
    /// The flag as typed and as errors name it: `--tls-ca`.
    pub flag: &'static str,
    /// The value's placeholder in help: `PATH`.
    pub value_name: &'static str,
    /// The help text, as `--help` prints it.
    pub help: &'static str,
    /// The ids of the arguments it needs.
    pub requires: &'static [&'static str],
}

impl TlsFlag {
    /// The flag without its dashes, for clap's `long`.
    pub fn long(&self) -> &'static str {
        self.flag.trim_start_matches('-')
    }
}

/// One binary's spelling of the client TLS flags: a marker type, used as
/// the parameter of [`ClientTlsFlags`].
pub trait ClientTlsNames {
    /// The help heading the four flags are listed under (`None`: the
    /// command's default).
    const HEADING: Option<&'static str>;
    /// The CA certificates (PEM) the server's certificate must chain to.
    const CA: TlsFlag;
    /// The name the server's certificate must carry.
    const DOMAIN: TlsFlag;
    /// The client certificate chain (PEM) for mutual TLS.
    const CERT: TlsFlag;
    /// The private key (PEM) of the client certificate.
    const KEY: TlsFlag;
}

/// The client TLS flags, as the binary `N` spells them; flatten it into a
/// command with `#[command(flatten)]`.
#[derive(clap::Args, Debug, Clone, PartialEq, Eq)]
#[group(skip)]
pub struct ClientTlsFlags<N: ClientTlsNames> {
    /// The CA file (`N::CA`).
    #[arg(
        id = N::CA.id,
        long = N::CA.long(),
        value_name = N::CA.value_name,
        help = N::CA.help,
        requires_all = N::CA.requires,
        help_heading = N::HEADING
    )]
    pub ca: Option<PathBuf>,
    /// The server's name (`N::DOMAIN`).
    #[arg(
        id = N::DOMAIN.id,
        long = N::DOMAIN.long(),
        value_name = N::DOMAIN.value_name,
        help = N::DOMAIN.help,
        requires_all = N::DOMAIN.requires,
        help_heading = N::HEADING
    )]
    pub domain: Option<String>,
    /// The client certificate (`N::CERT`).
    #[arg(
        id = N::CERT.id,
        long = N::CERT.long(),
        value_name = N::CERT.value_name,
        help = N::CERT.help,
        requires_all = N::CERT.requires,
        help_heading = N::HEADING
    )]
    pub cert: Option<PathBuf>,
    /// The client certificate's key (`N::KEY`).
    #[arg(
        id = N::KEY.id,
        long = N::KEY.long(),
        value_name = N::KEY.value_name,
        help = N::KEY.help,
        requires_all = N::KEY.requires,
        help_heading = N::HEADING
    )]
    pub key: Option<PathBuf>,
    #[arg(skip)]
    names: PhantomData<N>,
}

impl<N: ClientTlsNames> ClientTlsFlags<N> {
    /// Reads the CA file, when given; errors name `N::CA`'s flag.
    pub fn read_ca(&self) -> Result<Option<PemFile>, TlsFileError> {
        self.ca
            .as_deref()
            .map(|p| read_certificates(N::CA.flag, p))
            .transpose()
    }

    /// Reads the client certificate and its key, when both are given;
    /// errors name the flag of the file at fault.
    pub fn read_identity(&self) -> Result<Option<(PemFile, PemFile)>, TlsFileError> {
        match (&self.cert, &self.key) {
            (Some(cert), Some(key)) => Ok(Some((
                read_certificates(N::CERT.flag, cert)?,
                read_private_key(N::KEY.flag, key)?,
            ))),
            _ => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Clone, PartialEq, Eq)]
    struct Upstream;

    impl ClientTlsNames for Upstream {
        const HEADING: Option<&'static str> = Some("TLS");
        const CA: TlsFlag = TlsFlag {
            id: "up_tls_ca",
            flag: "--up-tls-ca",
            value_name: "PATH",
            help: "CA of the upstream",
            requires: &[],
        };
        const DOMAIN: TlsFlag = TlsFlag {
            id: "up_tls_domain",
            flag: "--up-tls-domain",
            value_name: "NAME",
            help: "Name of the upstream",
            requires: &["up_tls_ca"],
        };
        const CERT: TlsFlag = TlsFlag {
            id: "up_tls_cert",
            flag: "--up-tls-cert",
            value_name: "PATH",
            help: "Client certificate",
            requires: &["up_tls_key", "up_tls_ca"],
        };
        const KEY: TlsFlag = TlsFlag {
            id: "up_tls_key",
            flag: "--up-tls-key",
            value_name: "PATH",
            help: "Client key",
            requires: &["up_tls_cert"],
        };
    }

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        tls: ClientTlsFlags<Upstream>,
    }

    fn parse(args: &[&str]) -> Result<ClientTlsFlags<Upstream>, clap::Error> {
        Cli::try_parse_from(std::iter::once("cli").chain(args.iter().copied())).map(|c| c.tls)
    }

    #[test]
    fn flags_take_their_names_help_and_requirements_from_the_names_type() {
        use clap::CommandFactory;
        let cmd = Cli::command();
        let ca = cmd
            .get_arguments()
            .find(|a| a.get_id() == "up_tls_ca")
            .expect("the CA flag, by its id");
        assert_eq!(ca.get_long(), Some("up-tls-ca"));
        assert_eq!(
            ca.get_help().map(ToString::to_string).as_deref(),
            Some("CA of the upstream")
        );
        assert_eq!(ca.get_help_heading(), Some("TLS"));
        assert_eq!(ca.get_value_names().map(|v| v[0].as_str()), Some("PATH"));

        let t = parse(&["--up-tls-ca", "ca.pem", "--up-tls-domain", "h"]).unwrap();
        assert_eq!(t.ca, Some(PathBuf::from("ca.pem")));
        assert_eq!(t.domain.as_deref(), Some("h"));
        assert!(parse(&["--up-tls-domain", "h"]).is_err());
        assert!(parse(&["--up-tls-ca", "c", "--up-tls-cert", "c"]).is_err());
        assert!(parse(&["--up-tls-key", "k"]).is_err());
        assert_eq!(parse(&[]).unwrap().read_ca().unwrap(), None);
    }

    #[test]
    fn reading_names_the_flag_of_the_file_at_fault() {
        let files = seed_test_pki::SelfSignedFiles::generate();
        let (cert, key) = (files.cert.to_str().unwrap(), files.key.to_str().unwrap());
        let t = parse(&[
            "--up-tls-ca",
            cert,
            "--up-tls-cert",
            cert,
            "--up-tls-key",
            key,
        ])
        .unwrap();
        assert_eq!(t.read_ca().unwrap().unwrap().flag, "--up-tls-ca");
        let (c, k) = t.read_identity().unwrap().expect("an identity");
        assert_eq!((c.flag, k.flag), ("--up-tls-cert", "--up-tls-key"));

        let swapped = parse(&[
            "--up-tls-ca",
            cert,
            "--up-tls-cert",
            key,
            "--up-tls-key",
            cert,
        ]);
        let e = swapped.unwrap().read_identity().unwrap_err();
        assert_eq!(e.flag, "--up-tls-cert");
        let e = parse(&["--up-tls-ca", key]).unwrap().read_ca().unwrap_err();
        assert_eq!(e.flag, "--up-tls-ca");
    }
}
