//! [`LearnerError`]: what starting or running the learner can fail with.
//!
//! A leaf: errors of the stages convert into it where they are defined
//! (`impl From<TrainError> for LearnerError` sits beside `TrainError`), so
//! this file imports no stage. What ends one actor stream only is
//! [`crate::serve::StreamError`].
use std::path::PathBuf;

/// Failures to start or run the learner.
#[derive(Debug, thiserror::Error)]
pub enum LearnerError {
    /// The `--listen` address could not be bound. One line: the address,
    /// the OS's reason and what to do (the reason is part of the message,
    /// not a `source`, so a report that prints the chain says it once).
    #[error("cannot listen on {addr} (--listen): {cause}{hint}", hint = bind_hint(cause))]
    Bind { addr: String, cause: std::io::Error },
    /// The `--metrics-addr` endpoint could not listen.
    #[error("cannot serve metrics on {addr} (--metrics-addr): {cause}{hint}", hint = bind_hint(cause))]
    MetricsBind {
        addr: std::net::SocketAddr,
        cause: std::io::Error,
    },
    #[error("`--listen {value}`: {reason}")]
    ListenAddr { value: String, reason: String },
    #[error("`--device {value}`: {reason}")]
    Device { value: String, reason: String },
    #[error("model: {0}")]
    Model(#[from] candle_core::Error),
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write summary to {path}: {source}")]
    Summary {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid configuration: {0}")]
    Config(String),
    /// Setting up the trainer, or a training step, failed.
    #[error("training failed: {0}")]
    Training(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error("local actor {index} (pid {pid}) died unexpectedly: {status}")]
    LocalActorDied {
        index: usize,
        pid: u32,
        status: String,
    },
    #[error("server: {0}")]
    Serve(String),
    /// Stopped (interrupted, or `--max-seconds`) while waiting for the
    /// first actor's hello to fix the env spec: nothing ran.
    #[error(
        "stopped before any actor connected ({0}): no env spec was fixed, nothing was trained"
    )]
    NoActor(&'static str),
    /// A TLS flag's file cannot be used (`--tls-cert`, `--tls-key`,
    /// `--tls-client-ca`): the message names the flag and the path.
    #[error(transparent)]
    Tls(#[from] seed_shared::TlsFileError),
}

/// What to do about a failed bind, by its cause ("" when there is no advice).
fn bind_hint(cause: &std::io::Error) -> &'static str {
    use std::io::ErrorKind::*;
    match cause.kind() {
        AddrInUse => {
            "; another process holds this port: stop it, or pass another port (port 0 picks a free one)"
        }
        AddrNotAvailable => "; no interface has this address: use 0.0.0.0 (all) or 127.0.0.1 (this host)",
        PermissionDenied => "; ports below 1024 need privileges: use a port above 1023",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bind_error_is_one_line_saying_the_cause_once_with_advice() {
        let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = busy.local_addr().unwrap();
        let cause = std::net::TcpListener::bind(addr).unwrap_err();
        let os = cause.to_string();
        let e = LearnerError::Bind {
            addr: addr.to_string(),
            cause,
        };
        // What the binary prints: `anyhow`'s `{:#}`, the message and every source.
        let chain = format!("{:#}", anyhow::Error::from(e));
        assert_eq!(chain.matches(os.as_str()).count(), 1, "{chain}");
        assert!(!chain.contains('\n'), "{chain}");
        assert!(
            chain.contains(&addr.to_string()) && chain.contains("another port"),
            "{chain}"
        );
    }
}
