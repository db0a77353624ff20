//! [`error_chain`]: an error and its sources on one line, for logs and for
//! the messages a binary or the Python package shows.
//!
//! Why: `Display` of a wrapped error says only its top (tonic's transport
//! error says "transport error"); the cause is in `source()`. Every binary
//! and the Python package print errors through this one function. Cost: one
//! string built per error reported.

/// `err` and its sources, `: `-separated, each text once (hyper and tonic
/// often repeat their source's text in their own).
pub fn error_chain(err: &dyn std::error::Error) -> String {
    with_sources(err.to_string(), err.source())
}

/// `out`, then `: ` and the text of `source` and of each of its sources
/// that `out` does not already contain (a gRPC status's message followed by
/// its transport error's causes, say).
pub fn with_sources(mut out: String, source: Option<&dyn std::error::Error>) -> String {
    let mut source = source;
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fmt;

    #[derive(Debug)]
    struct Layer(&'static str, Option<Box<Layer>>);
    impl fmt::Display for Layer {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.0)
        }
    }
    impl std::error::Error for Layer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_deref().map(|l| l as _)
        }
    }

    #[test]
    fn a_text_already_said_is_not_repeated() {
        let e = Layer(
            "connect failed: connection refused",
            Some(Box::new(Layer("connection refused", None))),
        );
        assert_eq!(error_chain(&e), "connect failed: connection refused");
        assert_eq!(
            with_sources("status: unavailable".into(), Some(&e)),
            "status: unavailable: connect failed: connection refused"
        );
    }

    #[test]
    fn every_source_in_order() {
        let e = Layer(
            "transport error",
            Some(Box::new(Layer(
                "connection refused",
                Some(Box::new(Layer("os error 111", None))),
            ))),
        );
        assert_eq!(
            error_chain(&e),
            "transport error: connection refused: os error 111"
        );
    }
}
