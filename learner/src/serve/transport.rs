//! Where the learner listens: TCP (`127.0.0.1:50051`, `0.0.0.0:PORT`) or a
//! unix domain socket (`unix:/path`, recommended by SEED RL for single-host
//! runs: no TCP stack, no Nagle).
//!
//! Binding is done here, before tonic starts, so the caller learns the real
//! address (port 0 gives an ephemeral port) and can fall back when the
//! default port is taken.
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use tokio::net::{TcpListener, UnixListener};
use tracing::{info, warn};

use crate::error::LearnerError;

/// A listen address as given to `--listen`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListenAddr {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

impl FromStr for ListenAddr {
    type Err = LearnerError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if let Some(path) = s.strip_prefix("unix:") {
            if path.is_empty() {
                return Err(LearnerError::ListenAddr {
                    value: s.into(),
                    reason: "empty socket path (expected unix:/path)".into(),
                });
            }
            return Ok(ListenAddr::Unix(PathBuf::from(path)));
        }
        if let Ok(a) = s.parse::<SocketAddr>() {
            return Ok(ListenAddr::Tcp(a));
        }
        resolve_host(s).map(ListenAddr::Tcp)
    }
}

/// `HOST:PORT` with a host name: resolved once, here at the edge. Binds the
/// first IPv4 address it resolves to (actors connect to 127.0.0.1 by
/// default, and `localhost` often resolves to `::1` first), else the first;
/// says which when there was a choice.
fn resolve_host(s: &str) -> Result<SocketAddr, LearnerError> {
    use std::net::ToSocketAddrs;
    let err = |reason: String| LearnerError::ListenAddr {
        value: s.into(),
        reason,
    };
    let Some((host, port)) = s.rsplit_once(':') else {
        return Err(err("expected IP:PORT, HOST:PORT or unix:/path".into()));
    };
    if host.is_empty() || port.parse::<u16>().is_err() {
        return Err(err("expected IP:PORT, HOST:PORT or unix:/path".into()));
    }
    let all: Vec<SocketAddr> = s
        .to_socket_addrs()
        .map_err(|e| err(format!("cannot resolve host `{host}`: {e}")))?
        .collect();
    let chosen = all
        .iter()
        .find(|a| a.is_ipv4())
        .or_else(|| all.first())
        .copied()
        .ok_or_else(|| err(format!("host `{host}` resolves to no address")))?;
    if all.len() > 1 {
        info!(host, addresses = ?all, listening = %chosen, "--listen host resolved; listening on one address");
    }
    Ok(chosen)
}

impl fmt::Display for ListenAddr {
    /// The form actors accept in `--learner`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ListenAddr::Tcp(a) => write!(f, "{a}"),
            ListenAddr::Unix(p) => write!(f, "unix:{}", p.display()),
        }
    }
}

/// A bound listener, ready to hand to tonic.
pub enum BoundListener {
    Tcp(TcpListener),
    Unix(UnixListener),
}

/// Binds `addr`. With `fallback_to_ephemeral`, a busy TCP port is replaced
/// by an ephemeral one on the same IP (the embedded default does this, so a
/// second learner on one host still starts) and a warning says so.
pub async fn bind(
    addr: &ListenAddr,
    fallback_to_ephemeral: bool,
) -> Result<(BoundListener, ListenAddr), LearnerError> {
    match addr {
        ListenAddr::Tcp(a) => {
            let listener = match TcpListener::bind(a).await {
                Ok(l) => l,
                Err(e) if fallback_to_ephemeral && e.kind() == std::io::ErrorKind::AddrInUse => {
                    let any = SocketAddr::new(a.ip(), 0);
                    let l = TcpListener::bind(any)
                        .await
                        .map_err(|cause| LearnerError::Bind {
                            addr: any.to_string(),
                            cause,
                        })?;
                    warn!(
                        busy = %a,
                        using = %l.local_addr().map(|x| x.to_string()).unwrap_or_default(),
                        "default port busy; listening on an ephemeral port instead"
                    );
                    l
                }
                Err(cause) => {
                    return Err(LearnerError::Bind {
                        addr: a.to_string(),
                        cause,
                    })
                }
            };
            let local = listener.local_addr().map_err(|cause| LearnerError::Bind {
                addr: a.to_string(),
                cause,
            })?;
            Ok((BoundListener::Tcp(listener), ListenAddr::Tcp(local)))
        }
        ListenAddr::Unix(path) => {
            remove_stale_socket(path)?;
            let listener = UnixListener::bind(path).map_err(|cause| LearnerError::Bind {
                addr: addr.to_string(),
                cause,
            })?;
            Ok((BoundListener::Unix(listener), addr.clone()))
        }
    }
}

/// A plaintext unix socket in a fresh directory only this user can enter
/// (mode 0700), removed with the directory when the server stops. Local
/// actors connect here when the public listener serves TLS: the socket
/// never leaves the host, and a process that can enter the directory runs
/// as the learner's user and could read its key anyway.
pub struct PrivateSocket {
    pub listener: UnixListener,
    /// `unix:<dir>/local-actors.sock`.
    pub addr: ListenAddr,
    /// Owns the directory: dropping it removes the directory and the socket.
    pub dir: tempfile::TempDir,
}

/// Binds a [`PrivateSocket`] under the system's temporary directory.
pub fn bind_private_socket() -> Result<PrivateSocket, LearnerError> {
    let io = |what: &str| {
        let what = what.to_owned();
        move |source| LearnerError::Io { what, source }
    };
    // Created with mode 0700 (not chmod-ed later: no moment when others
    // may enter).
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::Builder::new()
        .prefix("seed-learner-")
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir()
        .map_err(io(
            "creating a private directory for the local actors' socket",
        ))?;
    let path = dir.path().join("local-actors.sock");
    let listener = UnixListener::bind(&path).map_err(|cause| LearnerError::Bind {
        addr: format!("unix:{}", path.display()),
        cause,
    })?;
    Ok(PrivateSocket {
        listener,
        addr: ListenAddr::Unix(path),
        dir,
    })
}

/// Removes a socket file left by a learner that is gone; refuses to touch a
/// live socket or anything that is not a socket.
fn remove_stale_socket(path: &Path) -> Result<(), LearnerError> {
    use std::os::unix::fs::FileTypeExt;
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(LearnerError::Io {
                what: format!("checking {}", path.display()),
                source,
            })
        }
    };
    let busy = |reason: &str| LearnerError::ListenAddr {
        value: format!("unix:{}", path.display()),
        reason: reason.into(),
    };
    if !meta.file_type().is_socket() {
        return Err(busy("the path exists and is not a socket"));
    }
    if std::os::unix::net::UnixStream::connect(path).is_ok() {
        return Err(busy("another process is listening on this socket"));
    }
    info!(path = %path.display(), "removing stale socket file");
    std::fs::remove_file(path).map_err(|source| LearnerError::Io {
        what: format!("removing stale socket {}", path.display()),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_tcp_and_unix() {
        assert_eq!(
            "127.0.0.1:50051".parse::<ListenAddr>().unwrap(),
            ListenAddr::Tcp("127.0.0.1:50051".parse().unwrap())
        );
        assert_eq!(
            "unix:/tmp/x.sock".parse::<ListenAddr>().unwrap(),
            ListenAddr::Unix("/tmp/x.sock".into())
        );
        assert_eq!(
            "unix:/tmp/x.sock"
                .parse::<ListenAddr>()
                .unwrap()
                .to_string(),
            "unix:/tmp/x.sock"
        );
        let e = "nonsense".parse::<ListenAddr>().unwrap_err().to_string();
        assert!(e.contains("--listen nonsense"), "{e}");
        assert!("unix:".parse::<ListenAddr>().is_err());
    }

    #[tokio::test]
    async fn host_names_resolve_and_bind() {
        let addr = "localhost:0"
            .parse::<ListenAddr>()
            .expect("localhost resolves");
        match &addr {
            ListenAddr::Tcp(a) => assert!(a.ip().is_loopback(), "{a}"),
            other => panic!("{other:?}"),
        }
        let (_listener, local) = bind(&addr, false).await.expect("binds");
        assert!(matches!(local, ListenAddr::Tcp(a) if a.port() != 0));
        for bad in ["localhost", "localhost:", ":50051", "localhost:http"] {
            let e = bad.parse::<ListenAddr>().unwrap_err().to_string();
            assert!(e.contains("--listen"), "{bad}: {e}");
        }
    }

    #[tokio::test]
    async fn busy_port_falls_back_only_when_allowed() {
        let (_held, addr) = bind(&"127.0.0.1:0".parse().unwrap(), false).await.unwrap();
        assert!(bind(&addr, false).await.is_err());
        let (_l, other) = bind(&addr, true).await.unwrap();
        assert_ne!(other, addr);
    }

    #[tokio::test]
    async fn the_private_socket_sits_in_a_directory_only_this_user_enters() {
        use std::os::unix::fs::PermissionsExt;
        let socket = bind_private_socket().unwrap();
        let dir = socket.dir.path().to_path_buf();
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "{mode:o}");
        let ListenAddr::Unix(path) = &socket.addr else {
            panic!("{:?}", socket.addr)
        };
        assert!(path.starts_with(&dir));
        drop(socket);
        assert!(!dir.exists(), "removed with the socket");
    }

    #[tokio::test]
    async fn stale_socket_is_replaced_but_live_one_and_plain_files_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("l.sock");
        let addr = ListenAddr::Unix(path.clone());
        let (live, _) = bind(&addr, false).await.unwrap();
        assert!(bind(&addr, false).await.is_err(), "live socket kept");
        drop(live); // tokio leaves the file behind: now stale
        let (_again, _) = bind(&addr, false).await.unwrap();
        let file = dir.path().join("plain");
        std::fs::write(&file, b"x").unwrap();
        assert!(bind(&ListenAddr::Unix(file.clone()), false).await.is_err());
        assert!(file.exists());
    }
}
