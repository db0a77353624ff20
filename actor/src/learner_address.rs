//! [`LearnerAddress`]: where the learner listens, over TCP or a unix socket,
//! and how to open a gRPC channel to it.
//!
//! Accepted forms: `host:port`, `http://host:port`, `unix:/path/to/socket`
//! (also `unix:///path`). A unix socket skips the TCP stack, which SEED RL
//! recommends for actors on the learner's host.
//!
//! Channel settings and why: `TCP_NODELAY` (a step batch is latency-bound;
//! Nagle would hold small ones back), HTTP/2 keep-alive pings every 10 s
//! with a 20 s timeout (a learner host that vanished without a FIN is noticed
//! and the actor reconnects instead of waiting forever), 5 s connect timeout.

use std::path::PathBuf;
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tonic::transport::{Channel, Endpoint, Uri};

use crate::error::ActorError;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const KEEP_ALIVE_INTERVAL: Duration = Duration::from_secs(10);
const KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(20);
/// A unix-socket channel still needs a syntactically valid URI; it is never resolved.
const UNIX_PLACEHOLDER_URI: &str = "http://localhost";

/// A parsed `--learner` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LearnerAddress {
    /// `http://host:port`.
    Tcp(Uri),
    /// Path of a unix domain socket.
    Unix(PathBuf),
}

impl LearnerAddress {
    /// Parses `host:port`, `http://host:port` or `unix:/path`.
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
        if addr.starts_with("https://") {
            return Err(bad(
                "TLS is not supported; use http://, host:port or unix:/path",
            ));
        }
        let with_scheme = if addr.starts_with("http://") {
            addr.to_owned()
        } else if addr.contains("://") {
            return Err(bad("unknown scheme; use http://, host:port or unix:/path"));
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

    /// Opens a channel (one HTTP/2 connection) to the learner.
    pub async fn connect(&self) -> Result<Channel, tonic::transport::Error> {
        match self {
            LearnerAddress::Tcp(uri) => endpoint(Endpoint::from(uri.clone())).connect().await,
            LearnerAddress::Unix(path) => {
                let path = path.clone();
                let connector = tower::service_fn(move |_: Uri| {
                    let path = path.clone();
                    async move {
                        let stream = tokio::net::UnixStream::connect(path).await?;
                        Ok::<_, std::io::Error>(TokioIo::new(stream))
                    }
                });
                endpoint(Endpoint::from_static(UNIX_PLACEHOLDER_URI))
                    .connect_with_connector(connector)
                    .await
            }
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

fn endpoint(e: Endpoint) -> Endpoint {
    e.tcp_nodelay(true)
        .connect_timeout(CONNECT_TIMEOUT)
        .http2_keep_alive_interval(KEEP_ALIVE_INTERVAL)
        .keep_alive_timeout(KEEP_ALIVE_TIMEOUT)
        .keep_alive_while_idle(true)
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
            "https://h:1",
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
}
