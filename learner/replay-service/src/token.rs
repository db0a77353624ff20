//! [`TokenCheck`]: the shared-secret check on every call (`--token`, as the
//! learner's), read from the `authorization: Bearer <token>` metadata.
//!
//! Why metadata and not a request field: the service has unary calls and
//! streams of several kinds; one interceptor covers them all before any
//! request body is read. The comparison takes the same time wherever the
//! tokens differ, so the secret cannot be found byte by byte from response
//! times. Cost: one header lookup and a comparison per call.
use tonic::{Request, Status};

/// The metadata key the token travels in.
pub const AUTHORIZATION: &str = "authorization";

/// Checks each call's token; `None` lets every call through.
#[derive(Clone, Default)]
pub struct TokenCheck {
    token: Option<String>,
}

impl std::fmt::Debug for TokenCheck {
    /// Whether a token is set, never the token.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenCheck")
            .field("enabled", &self.token.is_some())
            .finish()
    }
}

impl TokenCheck {
    pub fn new(token: Option<String>) -> Self {
        TokenCheck {
            token: token.filter(|t| !t.is_empty()),
        }
    }

    /// The interceptor: passes the request on, or refuses it with
    /// `UNAUTHENTICATED` saying what was wrong.
    #[allow(clippy::result_large_err)] // tonic's interceptor signature
    pub fn check<T>(&self, request: Request<T>) -> Result<Request<T>, Status> {
        let Some(token) = &self.token else {
            return Ok(request);
        };
        let Some(value) = request.metadata().get(AUTHORIZATION) else {
            return Err(Status::unauthenticated(
                "metadata `authorization` is missing: this replay server requires a token \
                 (`authorization: Bearer <token>`; ReplayClient's `token` option)",
            ));
        };
        let given = value
            .to_str()
            .ok()
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("");
        if !constant_time_eq(given.as_bytes(), token.as_bytes()) {
            return Err(Status::unauthenticated(
                "metadata `authorization` does not carry this replay server's token",
            ));
        }
        Ok(request)
    }
}

/// Compares without stopping at the first difference.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_checked_and_absent_tokens_let_calls_through() {
        let open = TokenCheck::new(None);
        assert!(open.check(Request::new(())).is_ok());
        let check = TokenCheck::new(Some("s3cret".into()));
        let e = check.check(Request::new(())).unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unauthenticated);
        assert!(e.message().contains("missing"), "{}", e.message());
        let mut wrong = Request::new(());
        wrong
            .metadata_mut()
            .insert(AUTHORIZATION, "Bearer s3cres".parse().unwrap());
        assert!(check.check(wrong).is_err());
        let mut right = Request::new(());
        right
            .metadata_mut()
            .insert(AUTHORIZATION, "Bearer s3cret".parse().unwrap());
        assert!(check.check(right).is_ok());
        assert!(!format!("{check:?}").contains("s3cret"));
    }
}
