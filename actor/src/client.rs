//! The actor's client loop: [`run_actor`] connects to the learner, says hello
//! and pipelines the pool's two halves over one bidirectional stream, and
//! reconnects when the learner goes away.
//!
//! # One session
//!
//! 1. Open a channel, start `Learner.Act`, send `Hello` (actor id, K, spec,
//!    token); the first reply must be a `Welcome` with K env slots.
//! 2. Restart the pool (fresh episodes, fresh run ids) and send both halves.
//! 3. Repeatedly: take the next `ActionBatch` (replies arrive in order), check
//!    it answers the oldest outstanding batch with one valid action per env,
//!    step that half, send it again. The other half's actions are in flight
//!    meanwhile, so the learner infers while the actor steps.
//!
//! # Failures
//!
//! - Unreachable learner, broken stream, `UNAVAILABLE` or any other transient
//!   status: reconnect after [`Backoff`](crate::backoff::Backoff) (a new
//!   session starts fresh episodes with fresh run ids). A learner that stops
//!   answering keepalive pings (`--keepalive-secs`) breaks the stream too.
//!   A failure before the welcome that looks like a TLS mismatch (plaintext
//!   against a TLS learner, or the reverse, or a refused certificate) says
//!   so in the logged reason.
//! - `INVALID_ARGUMENT`, `UNAUTHENTICATED`, `RESOURCE_EXHAUSTED`,
//!   `FAILED_PRECONDITION`, `PERMISSION_DENIED`, `UNIMPLEMENTED`,
//!   `OUT_OF_RANGE`: the same request would fail again, so
//!   [`ActorError::Rejected`] with the learner's code and message.
//! - A reply that breaks the contract: [`ActorError::Protocol`].
//!
//! # Stopping
//!
//! When `shutdown` resolves, `max_seconds` passes or `max_env_steps` is
//! reached, the actor half-closes its request stream (the learner sees a
//! clean end after every batch sent) and waits up to one second for the
//! learner to close its side; answers still arriving are discarded.
//!
//! # Cost
//!
//! Per batch: one protobuf encode of the observation bytes (a memcpy) and a
//! few small vectors; nothing per env beyond stepping it. The loop runs on
//! the caller's runtime (the CLI uses a current-thread one); stepping a half
//! is synchronous, which is what the pipelining overlaps with inference.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use seed_env::Env;
use seed_shared::pb::actor_message::Kind as ActorKind;
use seed_shared::pb::learner_client::LearnerClient;
use seed_shared::pb::learner_message::Kind as LearnerKind;
use seed_shared::{pb, ActionSpace, EnvSpec};
use serde::Serialize;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;
use tonic::{Code, Status, Streaming};
use tracing::{debug, info, warn};

use crate::backoff::Backoff;
use crate::config::ActorConfig;
use crate::error::{ActorError, ProtocolViolation};
use crate::learner_address::{error_chain, Dialer, LearnerAddress};
use crate::pool::{EnvPool, HalfActions};
use crate::round_trip::{RoundTripHistogram, RoundTripPercentiles};
use crate::shared_connection::SharedConnectError;

/// Messages queued for the request stream; two batches plus the hello fit.
const OUTBOUND_CAPACITY: usize = 4;
/// How long a stopping actor waits for the learner to close the stream.
const CLOSE_GRACE: Duration = Duration::from_secs(1);

/// What an actor did before it stopped (written by `--summary-json`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ActorReport {
    /// Env rows stepped in response to actions (all sessions).
    pub env_steps: u64,
    /// Step batches sent (all sessions).
    pub step_batches: u64,
    /// Action batches received and applied.
    pub action_batches: u64,
    /// Episodes finished (terminated or truncated).
    pub episodes: u64,
    /// Sessions established (hellos answered by a welcome).
    pub sessions: u64,
    /// Policy version of the last welcome or action batch.
    pub last_policy_version: u64,
    /// Seconds from the first welcome to the stop (0 if never connected):
    /// the span over which `env_steps` were taken.
    pub active_seconds: f64,
    /// Step round trip (batch queued on the stream to its actions received),
    /// over all sessions; see [`RoundTripHistogram`].
    pub round_trip: RoundTripPercentiles,
}

/// How a session that did not end the actor went wrong.
enum SessionError {
    /// Transient: reconnect.
    Retry(String),
    /// Ends the actor.
    Fatal(ActorError),
}

impl From<ProtocolViolation> for SessionError {
    fn from(v: ProtocolViolation) -> Self {
        SessionError::Fatal(ActorError::Protocol(v))
    }
}

/// Statuses a retry cannot fix: the learner judged this actor's input,
/// credentials or configuration (or it is not a learner at all).
fn is_fatal(code: Code) -> bool {
    matches!(
        code,
        Code::InvalidArgument
            | Code::Unauthenticated
            | Code::ResourceExhausted
            | Code::FailedPrecondition
            | Code::PermissionDenied
            | Code::Unimplemented
            | Code::OutOfRange
    )
}

fn classify(status: Status) -> SessionError {
    if is_fatal(status.code()) {
        SessionError::Fatal(ActorError::Rejected {
            code: status.code(),
            message: status.message().to_owned(),
        })
    } else {
        SessionError::Retry(format!("{:?}: {}", status.code(), status_text(&status)))
    }
}

/// The status's message and, for a transport failure, its sources (where
/// the reason is: "transport error" alone says nothing).
fn status_text(status: &Status) -> String {
    use std::error::Error;
    crate::learner_address::with_sources(status.message().to_owned(), status.source())
}

/// Runs an actor until `shutdown` resolves, `max_env_steps` or `max_seconds`
/// is reached (all `Ok`), or a fatal error.
///
/// The returned future is `Send`, so it can be spawned on a multi-threaded
/// runtime; the CLI runs it on a current-thread one.
pub async fn run_actor(
    cfg: ActorConfig,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<ActorReport, ActorError> {
    cfg.validate()?;
    let envs = (0..cfg.num_envs)
        .map(|i| cfg.env.build(cfg.seed.wrapping_add(i as u64)))
        .collect();
    let spec = cfg.env.spec();
    run_actor_with_envs(cfg, spec, envs, shutdown).await
}

/// [`run_actor`] over the caller's envs: any [`Env`] implementation, all
/// matching `spec` (announced in the hello). `cfg.env` is ignored and
/// `cfg.num_envs` must equal `envs.len()`. This is how a Rust user plugs in
/// an env of their own, and how the Python package drives Gymnasium envs.
///
/// The envs are stepped on the task that polls this future, between network
/// waits, so an env that blocks (or holds a lock such as Python's GIL) holds
/// only this actor.
pub async fn run_actor_with_envs(
    cfg: ActorConfig,
    spec: EnvSpec,
    envs: Vec<Box<dyn Env>>,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<ActorReport, ActorError> {
    cfg.validate_connection()?;
    if envs.len() != cfg.num_envs {
        return Err(ActorError::Config {
            field: "num_envs",
            reason: format!("is {} but {} envs were given", cfg.num_envs, envs.len()),
        });
    }
    if let Err(e) = EnvSpec::from_proto(&spec.to_proto()) {
        return Err(ActorError::Config {
            field: "spec",
            reason: e.to_string(),
        });
    }
    let dialer = Dialer::new(&cfg.learner, cfg.keepalive, cfg.tls.as_ref())?;
    let address = dialer.address().clone();
    let mut pool = EnvPool::new(envs, &spec, cfg.seed)?;
    let mut report = ActorReport::default();
    let mut tally = Tally::default();
    let mut backoff = Backoff::new(cfg.reconnect.clone());
    let deadline = cfg
        .max_seconds
        .map(|s| Instant::now() + Duration::from_secs_f64(s));
    let stop = async move {
        match deadline {
            Some(at) => tokio::select! {
                () = shutdown => {},
                () = tokio::time::sleep_until(at) => {},
            },
            None => shutdown.await,
        }
    };
    tokio::pin!(stop);

    loop {
        let sessions_before = report.sessions;
        let reason = match run_session(
            &cfg,
            &dialer,
            &spec,
            &mut pool,
            &mut report,
            &mut tally,
            stop.as_mut(),
        )
        .await
        {
            Ok(()) => return Ok(tally.finish(report)),
            Err(SessionError::Fatal(e)) => return Err(e),
            Err(SessionError::Retry(reason)) => reason,
        };
        let delay = if report.sessions > sessions_before {
            // The learner was there a moment ago: retry soon, count afresh.
            backoff.reset();
            backoff.delay(0)
        } else {
            match backoff.fail() {
                Some(delay) => delay,
                None => {
                    return Err(ActorError::Unreachable {
                        attempts: backoff.failures(),
                        last_error: reason,
                    })
                }
            }
        };
        warn!(learner = %address, %reason, ?delay, failures = backoff.failures(), "reconnecting");
        tokio::select! {
            biased;
            () = stop.as_mut() => {
                info!("actor stopping");
                return Ok(tally.finish(report));
            }
            () = tokio::time::sleep(delay) => {}
        }
    }
}

/// Measurements that span sessions and become part of the [`ActorReport`]
/// when the actor stops.
#[derive(Default)]
struct Tally {
    round_trips: RoundTripHistogram,
    first_welcome: Option<Instant>,
}

impl Tally {
    fn finish(self, mut report: ActorReport) -> ActorReport {
        report.active_seconds = self
            .first_welcome
            .map_or(0.0, |t| t.elapsed().as_secs_f64());
        report.round_trip = self.round_trips.percentiles();
        report
    }
}

/// One connection: hello, welcome, then the pipelined step loop. `Ok` means
/// the actor is done (`stop` resolved or `max_env_steps` reached).
async fn run_session<S: Future<Output = ()>>(
    cfg: &ActorConfig,
    dialer: &Dialer,
    spec: &EnvSpec,
    pool: &mut EnvPool,
    report: &mut ActorReport,
    tally: &mut Tally,
    mut stop: Pin<&mut S>,
) -> Result<(), SessionError> {
    let (outbound, requests) = mpsc::channel(OUTBOUND_CAPACITY);
    let hello = pb::Hello {
        actor_id: cfg.actor_id.clone(),
        num_envs: cfg.num_envs as u32,
        spec: Some(spec.to_proto()),
        token: cfg
            .token
            .as_ref()
            .map_or_else(String::new, |t| t.reveal().to_owned()),
    };
    // Queued before the call starts so it is the first message on the stream.
    outbound
        .try_send(pb::ActorMessage {
            kind: Some(ActorKind::Hello(hello)),
        })
        .map_err(|_| SessionError::Retry("request stream closed before hello".into()))?;
    let opening = open_stream(cfg, dialer, ReceiverStream::new(requests));
    let (_client, mut inbound, welcome) = tokio::select! {
        biased;
        // Nothing was streamed yet: dropping the half-open call is enough.
        () = stop.as_mut() => {
            info!("actor stopping");
            return Ok(());
        }
        opened = opening => opened?,
    };
    if welcome.env_slots.len() != cfg.num_envs {
        return Err(ProtocolViolation::SlotCount {
            expected: cfg.num_envs,
            got: welcome.env_slots.len(),
        }
        .into());
    }
    report.sessions += 1;
    report.last_policy_version = welcome.policy_version;
    tally.first_welcome.get_or_insert_with(Instant::now);
    info!(learner = %dialer.address(), tls = dialer.tls(), actor_id = %cfg.actor_id, envs = cfg.num_envs,
          policy_version = welcome.policy_version, session = report.sessions, "connected");

    pool.restart().map_err(|e| SessionError::Fatal(e.into()))?;
    // (seq, half, sent at) of each batch awaiting its actions, oldest first.
    let mut in_flight: VecDeque<(u64, usize, Instant)> = VecDeque::with_capacity(2);
    let mut next_seq = 0u64;
    for half in 0..pool.num_halves() {
        let batch = pool.take_batch(half, next_seq);
        let sent = Instant::now();
        send(&outbound, &mut inbound, batch).await?;
        in_flight.push_back((next_seq, half, sent));
        next_seq += 1;
        report.step_batches += 1;
    }

    loop {
        let next = tokio::select! {
            biased;
            () = stop.as_mut() => {
                info!("actor stopping");
                close(outbound, &mut inbound).await;
                return Ok(());
            }
            next = next_message(&mut inbound) => next?,
        };
        let received = Instant::now();
        let actions = match next {
            LearnerKind::Actions(a) => a,
            LearnerKind::Welcome(_) => return Err(ProtocolViolation::UnexpectedWelcome.into()),
        };
        let Some((seq, half, sent)) = in_flight.pop_front() else {
            return Err(ProtocolViolation::Unsolicited { got: actions.seq }.into());
        };
        tally.round_trips.record(received - sent);
        let rows = pool.half_envs(half).len();
        check_actions(&actions, seq, rows, spec)?;
        let half_actions = match spec.action {
            ActionSpace::Discrete(_) => HalfActions::Discrete(&actions.actions),
            ActionSpace::Box { .. } => HalfActions::Continuous(&actions.continuous_actions),
        };
        pool.step_half_with(half, half_actions)
            .map_err(|e| SessionError::Fatal(e.into()))?;
        report.action_batches += 1;
        report.env_steps += rows as u64;
        report.episodes = pool.episodes_finished();
        report.last_policy_version = actions.policy_version;
        if cfg.max_env_steps.is_some_and(|max| report.env_steps >= max) {
            info!(env_steps = report.env_steps, "reached --max-env-steps");
            close(outbound, &mut inbound).await;
            return Ok(());
        }
        let batch = pool.take_batch(half, next_seq);
        let sent = Instant::now();
        send(&outbound, &mut inbound, batch).await?;
        in_flight.push_back((next_seq, half, sent));
        next_seq += 1;
        report.step_batches += 1;
    }
}

/// Connects, starts `Learner.Act` with `requests` (the hello already queued)
/// and waits for the welcome. The client is returned because the call lives
/// on its channel.
async fn open_stream(
    cfg: &ActorConfig,
    dialer: &Dialer,
    requests: ReceiverStream<pb::ActorMessage>,
) -> Result<
    (
        LearnerClient<Channel>,
        Streaming<pb::LearnerMessage>,
        pb::Welcome,
    ),
    SessionError,
> {
    let with_hint = |e: SessionError| match e {
        SessionError::Retry(reason) => {
            let hint = tls_hint(dialer, &reason);
            SessionError::Retry(format!("{reason}{hint}"))
        }
        fatal => fatal,
    };
    let dial_failed = |e: tonic::transport::Error| {
        with_hint(SessionError::Retry(format!(
            "connect to {}: {}",
            dialer.address(),
            error_chain(&e)
        )))
    };
    let channel = match &cfg.connection {
        None => dialer.connect().await.map_err(dial_failed)?,
        Some(shared) => shared.channel(dialer).await.map_err(|e| match e {
            SharedConnectError::Mismatch(e) => SessionError::Fatal(e),
            SharedConnectError::Dial(e) => dial_failed(e),
        })?,
    };
    let mut client = LearnerClient::new(channel)
        .max_decoding_message_size(cfg.max_message_bytes)
        .max_encoding_message_size(cfg.max_message_bytes);
    let mut inbound = client
        .act(requests)
        .await
        .map_err(|s| with_hint(classify(s)))?
        .into_inner();
    match next_message(&mut inbound).await.map_err(with_hint)? {
        LearnerKind::Welcome(w) => Ok((client, inbound, w)),
        LearnerKind::Actions(_) => Err(ProtocolViolation::ExpectedWelcome.into()),
    }
}

/// What TLS may have to do with a connection that failed before the
/// welcome, appended to the reason the actor logs ("" when nothing).
///
/// With TLS, rustls names the cause: a plaintext learner's reply is not a
/// TLS record, a learner that requires a client certificate says so, an
/// untrusted or misnamed certificate is reported as invalid. Without TLS, a
/// TLS learner answers the HTTP/2 preface with a TLS alert, which the
/// HTTP/2 layer reports variously (a frame of invalid size, a closed
/// connection, a broken pipe): any failure after the TCP connection was
/// made gets the hint. (The texts matched are rustls's and hyper's.)
fn tls_hint(dialer: &Dialer, reason: &str) -> &'static str {
    if dialer.tls() {
        if reason.contains("InvalidContentType") || reason.contains("corrupt message") {
            " (the learner does not seem to serve TLS: start it with --tls-cert and \
             --tls-key, or drop --tls-ca)"
        } else if reason.contains("CertificateRequired") {
            " (the learner requires a client certificate (mutual TLS): pass --tls-cert and \
             --tls-key, signed by a CA in the learner's --tls-client-ca)"
        } else if reason.contains("invalid peer certificate") {
            " (the learner's certificate is not signed by a CA in --tls-ca, or does not \
             carry the name checked: see --tls-domain)"
        } else if after_tcp_connect(reason) {
            // A learner that refuses a client certificate may close the
            // connection before its alert is read.
            " (the learner closed the TLS connection: if it requires client certificates \
             (--tls-client-ca), pass --tls-cert and --tls-key signed by that CA)"
        } else {
            ""
        }
    } else if matches!(dialer.address(), LearnerAddress::Tcp(_)) && after_tcp_connect(reason) {
        " (if the learner serves TLS (--tls-cert), this actor needs --tls-ca)"
    } else {
        ""
    }
}

/// Whether a failure is past the TCP connect (not: nothing listening, no
/// route, no such host).
fn after_tcp_connect(reason: &str) -> bool {
    !(reason.contains("refused") || reason.contains("timed out") || reason.contains("dns error"))
}

/// Ends the stream politely: half-close the request side, so the learner
/// sees a clean end after every batch sent, and read until it closes its
/// side (its answers to outstanding batches are discarded). Bounded by
/// [`CLOSE_GRACE`] in case the learner never closes.
async fn close(
    outbound: mpsc::Sender<pb::ActorMessage>,
    inbound: &mut Streaming<pb::LearnerMessage>,
) {
    drop(outbound);
    let drain = async { while let Ok(Some(_)) = inbound.message().await {} };
    if tokio::time::timeout(CLOSE_GRACE, drain).await.is_err() {
        debug!("learner did not close the stream within {CLOSE_GRACE:?}; dropping it");
    }
}

/// Queues a step batch on the request stream.
async fn send(
    outbound: &mpsc::Sender<pb::ActorMessage>,
    inbound: &mut Streaming<pb::LearnerMessage>,
    batch: pb::StepBatch,
) -> Result<(), SessionError> {
    let msg = pb::ActorMessage {
        kind: Some(ActorKind::Steps(batch)),
    };
    if outbound.send(msg).await.is_ok() {
        return Ok(());
    }
    // tonic dropped the request stream: the call is over. Its status (which
    // may be fatal) is on the response side.
    debug!("request stream closed; reading the call's status");
    loop {
        match next_message(inbound).await {
            Ok(_) => continue,
            Err(e) => return Err(e),
        }
    }
}

/// The next message's payload; end of stream and statuses become session errors.
async fn next_message(
    inbound: &mut Streaming<pb::LearnerMessage>,
) -> Result<LearnerKind, SessionError> {
    match inbound.message().await {
        Ok(Some(pb::LearnerMessage { kind: Some(kind) })) => Ok(kind),
        Ok(Some(pb::LearnerMessage { kind: None })) => Err(ProtocolViolation::EmptyMessage.into()),
        Ok(None) => Err(SessionError::Retry("learner ended the stream".into())),
        Err(status) => Err(classify(status)),
    }
}

/// An action batch must answer the oldest outstanding step batch with one
/// valid action per env of that batch ([`EnvSpec::check_actions`]).
fn check_actions(
    batch: &pb::ActionBatch,
    expected_seq: u64,
    num_envs: usize,
    spec: &EnvSpec,
) -> Result<(), ProtocolViolation> {
    if batch.seq != expected_seq {
        return Err(ProtocolViolation::Seq {
            expected: expected_seq,
            got: batch.seq,
        });
    }
    spec.check_actions(batch, num_envs)
        .map_err(|(field, reason)| ProtocolViolation::Actions {
            seq: batch.seq,
            field,
            reason,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use seed_env::EnvConfig;

    fn batch(seq: u64, actions: &[u32]) -> pb::ActionBatch {
        pb::ActionBatch {
            seq,
            actions: actions.to_vec(),
            policy_version: 0,
            continuous_actions: vec![],
        }
    }

    #[test]
    fn action_batches_are_checked_field_by_field() {
        let spec = EnvSpec::cartpole();
        check_actions(&batch(4, &[0, 1, 1]), 4, 3, &spec).unwrap();
        assert_eq!(
            check_actions(&batch(5, &[0, 1, 1]), 4, 3, &spec),
            Err(ProtocolViolation::Seq {
                expected: 4,
                got: 5
            })
        );
        let field = |r: Result<(), ProtocolViolation>| match r {
            Err(ProtocolViolation::Actions { seq: 4, field, .. }) => field,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            field(check_actions(&batch(4, &[0, 1]), 4, 3, &spec)),
            "actions"
        );
        assert_eq!(
            field(check_actions(&batch(4, &[0, 2, 1]), 4, 3, &spec)),
            "actions"
        );
        let pendulum = seed_env::Pendulum::spec();
        let mut b = batch(4, &[]);
        b.continuous_actions = vec![0.5, -9.0, 1.0];
        check_actions(&b, 4, 3, &pendulum).unwrap();
        b.continuous_actions.pop();
        assert_eq!(
            field(check_actions(&b, 4, 3, &pendulum)),
            "continuous_actions"
        );
    }

    #[test]
    fn only_unfixable_statuses_are_fatal() {
        for code in [
            Code::InvalidArgument,
            Code::Unauthenticated,
            Code::ResourceExhausted,
            Code::FailedPrecondition,
        ] {
            assert!(matches!(
                classify(Status::new(code, "no")),
                SessionError::Fatal(ActorError::Rejected { code: c, .. }) if c == code
            ));
        }
        for code in [
            Code::Unavailable,
            Code::Internal,
            Code::Unknown,
            Code::Cancelled,
            Code::Aborted,
        ] {
            assert!(matches!(
                classify(Status::new(code, "later")),
                SessionError::Retry(_)
            ));
        }
    }

    #[test]
    fn run_actor_future_is_send() {
        fn assert_send<T: Send>(_: &T) {}
        let cfg = ActorConfig::new("127.0.0.1:1", EnvConfig::CartPole, 2);
        let fut = run_actor(cfg, std::future::pending());
        assert_send(&fut);
    }
}
