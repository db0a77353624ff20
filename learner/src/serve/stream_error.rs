//! [`StreamError`]: why one actor stream was ended, and the single mapping
//! from it to a gRPC status.
//!
//! Every message names the offending field so an operator can fix the actor;
//! the code says whose fault it is (`INVALID_ARGUMENT` for bad input,
//! `UNAUTHENTICATED` for the token, `RESOURCE_EXHAUSTED` for limits,
//! `FAILED_PRECONDITION` for a spec other than the run's or one no network
//! fits, `UNAVAILABLE` on shutdown). Never fatal to the learner.
use seed_shared::ProtocolError;
use tonic::Status;

/// Why one actor stream was ended. Never fatal to the learner.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    #[error("field `kind`: the first message must be a hello, got {got}")]
    FirstNotHello { got: &'static str },
    #[error("field `hello`: a second hello on one stream (the stream was already welcomed)")]
    SecondHello,
    #[error("field `kind` is empty: neither hello nor steps")]
    EmptyMessage,
    #[error(
        "field `token` is missing: this learner requires a shared token (--token / SEED_TOKEN)"
    )]
    MissingToken,
    #[error("field `token` does not match the learner's token")]
    WrongToken,
    #[error("field `{field}`: {reason}")]
    InvalidHello { field: &'static str, reason: String },
    #[error("field `{field}`: the learner serves {learner}, the actor sent {actor}")]
    SpecMismatch {
        field: &'static str,
        learner: String,
        actor: String,
    },
    /// The first hello's spec (adopted as the run's) fits no network.
    #[error("field `spec`: unsupported: {reason}")]
    UnsupportedSpec { reason: String },
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
    #[error("field `env_indices[{position}]` = {index}: that env already has a step awaiting its action")]
    EnvBusy { position: usize, index: u32 },
    #[error(
        "field `seq` = {seq}: more than {limit} step batches awaiting actions on this stream; \
         wait for actions before sending more"
    )]
    TooManyInFlight { limit: usize, seq: u64 },
    #[error("field `hello.num_envs` = {asked}: only {free} of {capacity} env slots are free (--max-env-slots)")]
    SlotsExhausted {
        asked: usize,
        free: usize,
        capacity: usize,
    },
    #[error("message exceeds --max-message-bytes = {limit} bytes ({detail})")]
    MessageTooLarge { limit: usize, detail: String },
    #[error("message: undecodable bytes ({detail})")]
    Undecodable { detail: String },
    #[error("the learner is shutting down")]
    ShuttingDown,
    /// A transport-level failure reported by tonic (passed through as is).
    #[error("{0}")]
    Transport(tonic::Status),
}

/// The only mapping from stream errors to gRPC codes.
impl From<StreamError> for Status {
    fn from(e: StreamError) -> Status {
        use StreamError::*;
        match e {
            Transport(status) => status,
            MissingToken | WrongToken => Status::unauthenticated(e.to_string()),
            TooManyInFlight { .. } | SlotsExhausted { .. } | MessageTooLarge { .. } => {
                Status::resource_exhausted(e.to_string())
            }
            ShuttingDown => Status::unavailable(e.to_string()),
            SpecMismatch { .. } | UnsupportedSpec { .. } => {
                Status::failed_precondition(e.to_string())
            }
            FirstNotHello { .. }
            | SecondHello
            | EmptyMessage
            | InvalidHello { .. }
            | Protocol(_)
            | Undecodable { .. }
            | EnvBusy { .. } => Status::invalid_argument(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_error_maps_to_its_code() {
        let cases: Vec<(StreamError, tonic::Code)> = vec![
            (StreamError::MissingToken, tonic::Code::Unauthenticated),
            (StreamError::WrongToken, tonic::Code::Unauthenticated),
            (StreamError::SecondHello, tonic::Code::InvalidArgument),
            (
                StreamError::FirstNotHello { got: "steps" },
                tonic::Code::InvalidArgument,
            ),
            (
                StreamError::TooManyInFlight { limit: 8, seq: 3 },
                tonic::Code::ResourceExhausted,
            ),
            (
                StreamError::MessageTooLarge {
                    limit: 10,
                    detail: String::new(),
                },
                tonic::Code::ResourceExhausted,
            ),
            (
                StreamError::Undecodable {
                    detail: String::new(),
                },
                tonic::Code::InvalidArgument,
            ),
            (
                StreamError::Protocol(ProtocolError::Sequence {
                    expected: 3,
                    got: 5,
                }),
                tonic::Code::InvalidArgument,
            ),
            (StreamError::ShuttingDown, tonic::Code::Unavailable),
            (
                StreamError::SpecMismatch {
                    field: "spec.obs_shape",
                    learner: "[4]".into(),
                    actor: "[5]".into(),
                },
                tonic::Code::FailedPrecondition,
            ),
            (
                StreamError::UnsupportedSpec {
                    reason: "rank 4".into(),
                },
                tonic::Code::FailedPrecondition,
            ),
        ];
        for (err, code) in cases {
            let msg = err.to_string();
            let status = Status::from(err);
            assert_eq!(status.code(), code, "{msg}");
            assert_eq!(status.message(), msg);
        }
    }
}
