//! [`Transport`]: TCP on loopback or a unix domain socket, and fresh
//! addresses for each server the harness starts.
//!
//! Both the learner (`--listen`) and the actor (`--learner`) accept the
//! strings made here: `127.0.0.1:PORT` or `unix:/path`.
use std::net::TcpListener;
use std::path::Path;

use serde::Serialize;

/// How actors reach the server under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// TCP over loopback (`TCP_NODELAY` on both ends).
    Tcp,
    /// A unix domain socket in the run directory.
    Unix,
}

impl Transport {
    pub fn name(self) -> &'static str {
        match self {
            Transport::Tcp => "tcp",
            Transport::Unix => "unix",
        }
    }

    /// A fresh address for a server called `name`.
    ///
    /// TCP: an ephemeral port the OS just handed out (bound and released
    /// here; another process could take it in between, which would show as
    /// a failed start, not a wrong figure). Unix: `dir/name.sock`, removed
    /// first if a previous run left it behind.
    pub fn allocate(self, dir: &Path, name: &str) -> std::io::Result<String> {
        match self {
            Transport::Tcp => {
                let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
                Ok(format!("127.0.0.1:{port}"))
            }
            Transport::Unix => {
                let path = dir.join(format!("{name}.sock"));
                match std::fs::remove_file(&path) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e),
                }
                Ok(format!("unix:{}", path.display()))
            }
        }
    }
}

impl std::fmt::Display for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_have_the_forms_both_binaries_accept() {
        let dir = tempfile::tempdir().unwrap();
        let tcp = Transport::Tcp.allocate(dir.path(), "x").unwrap();
        assert!(tcp.starts_with("127.0.0.1:"), "{tcp}");
        assert!(tcp[10..].parse::<u16>().unwrap() > 0);
        let unix = Transport::Unix.allocate(dir.path(), "learner").unwrap();
        assert_eq!(
            unix,
            format!("unix:{}", dir.path().join("learner.sock").display())
        );
        seed_actor::learner_address::LearnerAddress::parse(&tcp).unwrap();
        seed_actor::learner_address::LearnerAddress::parse(&unix).unwrap();
    }
}
