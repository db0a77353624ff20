//! [`Token`]: a shared secret that a client sends and a server checks
//! (`--token`, `--replay-token`, `SEED_TOKEN`, the Python `token=`).
//!
//! Why a type: three rules hold for every secret in the system, and a type
//! holds them once instead of at each use. An empty secret means none
//! ([`Token::new`] gives `None`, so `--token ""` and an empty
//! `SEED_TOKEN` turn the check off rather than require an empty string);
//! comparing takes the same time wherever the bytes differ
//! ([`Token::matches`], so the secret cannot be found byte by byte from
//! response times); and `Debug` never prints it (configs holding one can be
//! logged). Cost: one comparison of the secret's length per check.
use std::fmt;

/// A non-empty shared secret.
#[derive(Clone, Eq)]
pub struct Token(Box<str>);

impl Token {
    /// The token `secret` names; `None` when it is empty (no token).
    pub fn new(secret: &str) -> Option<Token> {
        (!secret.is_empty()).then(|| Token(secret.into()))
    }

    /// [`Token::new`] of an optional secret (a flag or keyword argument
    /// that may be absent): absent and empty both mean none.
    pub fn from_option(secret: Option<&str>) -> Option<Token> {
        secret.and_then(Token::new)
    }

    /// Whether `given` is this secret, in time independent of where they
    /// differ (a length mismatch answers at once; the length is not the
    /// secret).
    pub fn matches(&self, given: &str) -> bool {
        let (a, b) = (self.0.as_bytes(), given.as_bytes());
        a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }

    /// The secret itself, to put on the wire (a hello, a request header,
    /// a child process's environment).
    pub fn reveal(&self) -> &str {
        &self.0
    }
}

impl PartialEq for Token {
    /// In constant time, as [`Token::matches`].
    fn eq(&self, other: &Token) -> bool {
        self.matches(&other.0)
    }
}

impl fmt::Debug for Token {
    /// Never the secret.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_secret_is_no_token() {
        assert_eq!(Token::new(""), None);
        assert_eq!(Token::from_option(Some("")), None);
        assert_eq!(Token::from_option(None), None);
        assert_eq!(
            Token::new("s").map(|t| t.reveal().to_owned()),
            Some("s".into())
        );
    }

    #[test]
    fn matches_only_the_same_bytes() {
        let t = Token::new("abc").unwrap();
        assert!(t.matches("abc"));
        assert!(!t.matches("abd"));
        assert!(!t.matches("abcd"));
        assert!(!t.matches(""));
        assert_ne!(Token::new("abc"), Token::new("abd"));
    }

    #[test]
    fn debug_never_prints_the_secret() {
        let t = Token::new("s3cret").unwrap();
        assert!(!format!("{t:?}").contains("s3cret"));
        assert!(!format!("{:?}", Some(t)).contains("s3cret"));
    }
}
