//! The shared secret on every call (`--token`, as the learner's), carried
//! in the `authorization: Bearer <token>` metadata: [`TokenCheck`] on the
//! server, [`AddToken`] on every client (`ReplayClient`, the learner's
//! remote table).
//!
//! Why metadata and not a request field: the service has unary calls and
//! streams of several kinds; one interceptor covers them all before any
//! request body is read. The comparison is [`Token::matches`] (constant
//! time). Cost: one header lookup and a comparison per call on the server,
//! one header copy per call on the client.
use seed_shared::Token;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::{Request, Status};

/// The metadata key the token travels in.
pub const AUTHORIZATION: &str = "authorization";

/// Checks each call's token; `None` lets every call through.
#[derive(Debug, Clone, Default)]
pub struct TokenCheck {
    token: Option<Token>,
}

impl TokenCheck {
    pub fn new(token: Option<Token>) -> Self {
        TokenCheck { token }
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
        if !token.matches(given) {
            return Err(Status::unauthenticated(
                "metadata `authorization` does not carry this replay server's token",
            ));
        }
        Ok(request)
    }
}

/// Adds the token to every call of a client.
#[derive(Clone)]
pub struct AddToken(Option<MetadataValue<Ascii>>);

impl AddToken {
    /// The interceptor for `token` (`None`: adds nothing). Errors when the
    /// token cannot travel in a header (a control character, say).
    pub fn new(token: Option<&Token>) -> Result<Self, NotAHeader> {
        token
            .map(|t| format!("Bearer {}", t.reveal()).parse::<MetadataValue<Ascii>>())
            .transpose()
            .map(AddToken)
            .map_err(|_| NotAHeader)
    }
}

impl std::fmt::Debug for AddToken {
    /// Never the token.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AddToken")
    }
}

impl tonic::service::Interceptor for AddToken {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        if let Some(v) = &self.0 {
            request.metadata_mut().insert(AUTHORIZATION, v.clone());
        }
        Ok(request)
    }
}

/// A token that cannot travel in a header (a control character, say).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("must be printable ASCII (it travels in a header)")]
pub struct NotAHeader;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_checked_and_absent_tokens_let_calls_through() {
        let open = TokenCheck::new(None);
        assert!(open.check(Request::new(())).is_ok());
        let check = TokenCheck::new(Token::new("s3cret"));
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

    #[test]
    fn add_token_sends_what_the_check_accepts_and_refuses_what_no_header_holds() {
        use tonic::service::Interceptor;
        let token = Token::new("s3cret");
        let mut add = AddToken::new(token.as_ref()).unwrap();
        let request = add.call(Request::new(())).unwrap();
        assert!(TokenCheck::new(token).check(request).is_ok());
        assert!(!format!("{add:?}").contains("s3cret"));
        assert_eq!(
            AddToken::new(Token::new("line\nbreak").as_ref()).unwrap_err(),
            NotAHeader
        );
        let mut none = AddToken::new(None).unwrap();
        assert!(none.call(Request::new(())).unwrap().metadata().is_empty());
    }
}
