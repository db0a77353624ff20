//! [`RemoteReplayConfig`]: where a remote replay table is and how to reach
//! it (`--replay-addr HOST:PORT/TABLE`, `--replay-token`, `--replay-tls-*`),
//! checked once at the edge.
//!
//! The address names the server and the table together, so one flag says
//! where the learner's unrolls go: `replay.example:50061/unrolls`,
//! `http://10.0.0.5:50061/unrolls`, or `https://replay.example:50061/unrolls`
//! (TLS; `HOST:PORT/TABLE` with `--replay-tls-ca` means TLS too, as for the
//! actor's `--learner`). Cost: string handling, once.
use std::time::Duration;

use seed_shared::tls::PemFile;
use serde::Serialize;

/// Unrolls the inference threads may queue for the remote table before
/// further unrolls are dropped (and counted), by default.
pub const DEFAULT_INSERT_QUEUE: usize = 8;

/// How long connecting, `Info` and a priority write-back may take.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// A remote replay table and how to reach it. Recorded in checkpoints
/// without its secrets (token, key files).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RemoteReplayConfig {
    /// `http://HOST:PORT` or `https://HOST:PORT`.
    pub endpoint: String,
    /// The table's name on that server.
    pub table: String,
    /// `--replay-token`: sent with every call.
    #[serde(skip)]
    pub token: Option<seed_shared::Token>,
    /// `--replay-tls-ca`: CA certificates to verify the server with.
    #[serde(skip)]
    pub tls_ca: Option<PemFile>,
    /// `--replay-tls-domain`: the name the server's certificate is for.
    #[serde(skip)]
    pub tls_domain: Option<String>,
    /// `--replay-tls-cert`, `--replay-tls-key`: a client identity for
    /// mutual TLS.
    #[serde(skip)]
    pub tls_identity: Option<(PemFile, PemFile)>,
    /// `--replay-insert-queue`: unrolls queued for sending before inference
    /// drops new ones.
    pub insert_queue: usize,
    /// Largest message sent or accepted (`--max-message-bytes`).
    pub max_message_bytes: usize,
    /// Connecting, `Info`, and each priority write-back.
    #[serde(skip)]
    pub call_timeout: Duration,
}

impl RemoteReplayConfig {
    /// Parses `--replay-addr` (`HOST:PORT/TABLE`, with an optional
    /// `http://` or `https://`); `tls` says whether a CA was given, which
    /// makes a bare `HOST:PORT` TLS. Everything else takes its default.
    pub fn parse(addr: &str, tls: bool) -> Result<Self, String> {
        let bad = |reason: &str| Err(format!("--replay-addr `{addr}`: {reason}"));
        let Some((server, table)) = addr.rsplit_once('/') else {
            return bad("expected HOST:PORT/TABLE (the table's name after a `/`)");
        };
        let valid_table = !table.is_empty()
            && table.len() <= 128
            && table
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !valid_table {
            return bad(
                "the table name after the last `/` must be 1 to 128 of A-Z, a-z, 0-9, `_`, `-`",
            );
        }
        let (scheme, host_port) = match server.split_once("://") {
            Some(("http", rest)) => ("http", rest),
            Some(("https", rest)) => ("https", rest),
            Some((other, _)) => {
                return bad(&format!("scheme `{other}://` is not http:// or https://"))
            }
            None => (if tls { "https" } else { "http" }, server),
        };
        if scheme == "http" && tls {
            return bad(
                "an http:// address with --replay-tls-ca: use https:// (or drop the scheme)",
            );
        }
        if scheme == "https" && !tls {
            return bad(
                "https:// needs --replay-tls-ca (the CA that signed the server's certificate)",
            );
        }
        let port_ok = host_port
            .rsplit_once(':')
            .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
        if !port_ok || host_port.contains('/') {
            return bad("expected HOST:PORT before the `/TABLE`");
        }
        Ok(RemoteReplayConfig {
            endpoint: format!("{scheme}://{host_port}"),
            table: table.to_owned(),
            token: None,
            tls_ca: None,
            tls_domain: None,
            tls_identity: None,
            insert_queue: DEFAULT_INSERT_QUEUE,
            max_message_bytes: seed_shared::DEFAULT_MAX_MESSAGE_BYTES,
            call_timeout: DEFAULT_CALL_TIMEOUT,
        })
    }

    /// `ENDPOINT/TABLE`, as in messages.
    pub fn display(&self) -> String {
        format!("{}/{}", self.endpoint, self.table)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_name_server_and_table() {
        let c = RemoteReplayConfig::parse("replay.example:50061/unrolls", false).unwrap();
        assert_eq!(
            (c.endpoint.as_str(), c.table.as_str()),
            ("http://replay.example:50061", "unrolls")
        );
        let c = RemoteReplayConfig::parse("10.0.0.5:1/t-1", true).unwrap();
        assert_eq!(c.endpoint, "https://10.0.0.5:1");
        let c = RemoteReplayConfig::parse("https://h:2/t", true).unwrap();
        assert_eq!(c.display(), "https://h:2/t");
        for (bad, says) in [
            ("h:1", "HOST:PORT/TABLE"),
            ("h:1/", "table name"),
            ("h:1/a.b", "table name"),
            ("h/t", "HOST:PORT"),
            ("h:x/t", "HOST:PORT"),
            ("grpc://h:1/t", "scheme"),
            ("https://h:1/t", "--replay-tls-ca"),
        ] {
            let e = RemoteReplayConfig::parse(bad, false).unwrap_err();
            assert!(
                e.contains(says) && e.contains("--replay-addr"),
                "{bad}: {e}"
            );
        }
        let e = RemoteReplayConfig::parse("http://h:1/t", true).unwrap_err();
        assert!(e.contains("https://"), "{e}");
    }
}
