//! [`LearnerAddress`]: where the learner listens, over TCP or a unix socket,
//! and [`Dialer`]: how to open a gRPC channel to it.
//!
//! Accepted forms: `host:port`, `http://host:port`, `https://host:port`,
//! `unix:/path/to/socket` (also `unix:///path`). A unix socket skips the
//! TCP stack, which SEED RL recommends for actors on the learner's host.
//!
//! TLS is on when `--tls-ca` is given; then `host:port` and `https://` mean
//! the same thing. `https://` without `--tls-ca` is refused (the actor
//! trusts only the CAs it is given, never the system's), and so are
//! `http://` and `unix:` with `--tls-ca` (a unix socket is not served with
//! TLS by the learner).
//!
//! Channel settings and why: `TCP_NODELAY` (a step batch is latency-bound;
//! Nagle would hold small ones back), HTTP/2 keepalive pings after
//! `--keepalive-secs` without traffic, closing the connection when one is
//! unanswered for `--keepalive-timeout-secs` (a frozen learner, or a host
//! that vanished without a FIN, is noticed and the actor reconnects instead
//! of waiting forever; TCP keepalive at the same interval), 5 s connect
//! timeout.

use std::path::PathBuf;
use std::time::Duration;

use hyper_util::rt::TokioIo;
pub(crate) use seed_shared::error_chain::{error_chain, with_sources};
use seed_shared::Keepalive;
use tonic::transport::{Channel, Endpoint, Uri};

use crate::error::ActorError;
use crate::tls::ClientTls;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// A unix-socket channel still needs a syntactically valid URI; it is never resolved.
const UNIX_PLACEHOLDER_URI: &str = "http://localhost";

/// A parsed `--learner` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LearnerAddress {
    /// `http://host:port` or `https://host:port`.
    Tcp(Uri),
    /// Path of a unix domain socket.
    Unix(PathBuf),
}

impl LearnerAddress {
    /// Parses `host:port`, `http://host:port`, `https://host:port` or `unix:/path`.
    pub fn parse(addr: &str) -> Result<Self, ActorError> {
        let bad = |reason: &str| ActorError::Address {
            addr: addr.to_owned(),
            reason: reason.to_owned(),
        };
        if let Some(rest) = addr.strip_prefix("unix:") {
            let path = rest.strip_prefix("//").unwrap_or(rest);
            if path.is_empty() {
                return Err(bad("empty unix socket path"));
            }
            return Ok(LearnerAddress::Unix(PathBuf::from(path)));
        }
        let with_scheme = if addr.starts_with("http://") || addr.starts_with("https://") {
            addr.to_owned()
        } else if addr.contains("://") {
            return Err(bad(
                "unknown scheme; use host:port, http://, https:// or unix:/path",
            ));
        } else {
            format!("http://{addr}")
        };
        let uri: Uri = with_scheme
            .parse()
            .map_err(|e: tonic::codegen::http::uri::InvalidUri| bad(&e.to_string()))?;
        if uri.host().is_none_or(str::is_empty) {
            return Err(bad("missing host"));
        }
        if uri.port_u16().is_none() {
            return Err(bad("missing port"));
        }
        Ok(LearnerAddress::Tcp(uri))
    }

    /// Whether the address itself asks for TLS (`https://`).
    pub fn is_https(&self) -> bool {
        matches!(self, LearnerAddress::Tcp(uri) if uri.scheme_str() == Some("https"))
    }

    /// Opens a plaintext channel with the default keepalive (what the
    /// benchmark harnesses use; the actor itself goes through a [`Dialer`]).
    pub async fn connect(&self) -> Result<Channel, tonic::transport::Error> {
        Dialer {
            address: self.clone(),
            endpoint: settings(self.plaintext_endpoint(), Keepalive::default()),
            tls: false,
        }
        .connect()
        .await
    }

    fn plaintext_endpoint(&self) -> Endpoint {
        match self {
            LearnerAddress::Tcp(uri) => Endpoint::from(uri.clone()),
            LearnerAddress::Unix(_) => Endpoint::from_static(UNIX_PLACEHOLDER_URI),
        }
    }
}

impl std::fmt::Display for LearnerAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LearnerAddress::Tcp(uri) => write!(f, "{uri}"),
            LearnerAddress::Unix(path) => write!(f, "unix:{}", path.display()),
        }
    }
}

/// Opens channels to one learner with the actor's settings, built once
/// (TLS configuration included) and used for every reconnect.
#[derive(Debug, Clone)]
pub struct Dialer {
    address: LearnerAddress,
    endpoint: Endpoint,
    tls: bool,
}

impl Dialer {
    /// Parses `learner` (a `--learner` value), checks that it goes with
    /// `tls` and builds the endpoint.
    pub fn new(
        learner: &str,
        keepalive: Keepalive,
        tls: Option<&ClientTls>,
    ) -> Result<Self, ActorError> {
        let mut address = LearnerAddress::parse(learner)?;
        let bad = |reason: &str| ActorError::Address {
            addr: learner.to_owned(),
            reason: reason.to_owned(),
        };
        let endpoint = match (&address, tls) {
            (LearnerAddress::Unix(_), Some(_)) => {
                return Err(bad(
                    "--tls-ca given for a unix socket: the learner serves TLS on TCP only; \
                     drop the TLS flags or connect over TCP",
                ))
            }
            (LearnerAddress::Tcp(_), None) if address.is_https() => {
                return Err(bad(
                    "https:// needs --tls-ca (the CA certificates to trust for the learner)",
                ))
            }
            (LearnerAddress::Tcp(_), Some(_)) if learner.starts_with("http://") => {
                return Err(bad(
                    "http:// asks for plaintext but --tls-ca asks for TLS; \
                     use https:// or host:port",
                ))
            }
            (_, None) => address.plaintext_endpoint(),
            (LearnerAddress::Tcp(uri), Some(tls)) => {
                let https = with_scheme(uri, "https")
                    .map_err(|e| bad(&format!("cannot use it with TLS: {e}")))?;
                address = LearnerAddress::Tcp(https.clone());
                Endpoint::from(https)
                    .tls_config(tls.tonic_config())
                    .map_err(|e| {
                        tls.blame()
                            .error(format!("cannot set up TLS: {}", error_chain(&e)))
                    })?
            }
        };
        Ok(Dialer {
            address,
            endpoint: settings(endpoint, keepalive),
            tls: tls.is_some(),
        })
    }

    /// The learner's address.
    pub fn address(&self) -> &LearnerAddress {
        &self.address
    }

    /// Whether channels speak TLS.
    pub fn tls(&self) -> bool {
        self.tls
    }

    /// Opens a channel (one HTTP/2 connection) to the learner.
    pub async fn connect(&self) -> Result<Channel, tonic::transport::Error> {
        match &self.address {
            LearnerAddress::Tcp(_) => self.endpoint.connect().await,
            LearnerAddress::Unix(path) => {
                let path = path.clone();
                let connector = tower::service_fn(move |_: Uri| {
                    let path = path.clone();
                    async move {
                        let stream = tokio::net::UnixStream::connect(path).await?;
                        Ok::<_, std::io::Error>(TokioIo::new(stream))
                    }
                });
                self.endpoint.connect_with_connector(connector).await
            }
        }
    }
}

/// `uri` with its scheme replaced.
fn with_scheme(uri: &Uri, scheme: &str) -> Result<Uri, tonic::codegen::http::Error> {
    let mut parts = uri.clone().into_parts();
    parts.scheme = Some(scheme.parse()?);
    Ok(Uri::from_parts(parts)?)
}

fn settings(e: Endpoint, keepalive: Keepalive) -> Endpoint {
    let e = e.tcp_nodelay(true).connect_timeout(CONNECT_TIMEOUT);
    match keepalive.interval {
        Some(interval) => e
            .tcp_keepalive(Some(interval))
            .http2_keep_alive_interval(interval)
            .keep_alive_timeout(keepalive.timeout)
            .keep_alive_while_idle(true),
        None => e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_accepted_form() {
        let tcp = |s: &str| match LearnerAddress::parse(s).unwrap() {
            LearnerAddress::Tcp(uri) => uri.to_string(),
            other => panic!("{other:?}"),
        };
        assert_eq!(tcp("127.0.0.1:50051"), "http://127.0.0.1:50051/");
        assert_eq!(tcp("http://learner.local:9"), "http://learner.local:9/");
        assert_eq!(tcp("https://learner.local:9"), "https://learner.local:9/");
        assert_eq!(tcp("[::1]:7"), "http://[::1]:7/");
        assert_eq!(
            LearnerAddress::parse("unix:/tmp/seed.sock").unwrap(),
            LearnerAddress::Unix("/tmp/seed.sock".into())
        );
        assert_eq!(
            LearnerAddress::parse("unix:///tmp/seed.sock").unwrap(),
            LearnerAddress::Unix("/tmp/seed.sock".into())
        );
    }

    #[test]
    fn rejects_what_cannot_be_dialled() {
        for bad in [
            "unix:",
            "grpc://h:1",
            "localhost",
            "http://:80",
            "h:notaport",
            "",
        ] {
            assert!(
                matches!(LearnerAddress::parse(bad), Err(ActorError::Address { .. })),
                "{bad:?} should be rejected"
            );
        }
    }

    #[test]
    fn https_needs_tls_and_tls_needs_tcp() {
        let dial = |addr: &str| Dialer::new(addr, Keepalive::default(), None);
        let e = dial("https://h:1").unwrap_err().to_string();
        assert!(e.contains("--tls-ca"), "{e}");
        assert!(!dial("h:1").unwrap().tls());
        assert!(!dial("unix:/tmp/x.sock").unwrap().tls());
    }
}
