//! The tonic `Learner` service: one task per actor stream, plus `Status` and
//! standard gRPC health checking.
//!
//! # A stream's life
//! The stream task reads the hello, checks the token and the env spec
//! ([`SpecGate`]: fixed, or adopted from the first hello), waits for the
//! stages if the composition root is still building them (an adopted spec
//! is needed to build the model), leases env slots and sends the welcome. Then, per step batch: validate,
//! claim the envs, push a [`StepRequest`] (with the stream's reply channel)
//! onto the [`DynamicBatcher`]; an inference thread answers it directly.
//! A small request that holds every live env slot, which the batcher would
//! flush alone at once, is instead answered on the stream task itself
//! ([`InlineInference`]), saving two cross-thread wake-ups per step.
//! Responses leave through a channel drained by the RPC's response stream (the
//! tonic bidi pattern: the task owns the inbound stream, so both decode errors
//! and disconnects reach it and it can end the call with a precise status).
//!
//! # Errors end one stream only
//! Every [`StreamError`] becomes a gRPC status (the single mapping below)
//! sent on that stream; other streams never notice. The env slots are freed
//! once the stream task and every request still in flight are gone (the
//! lease is reference counted), and the inference thread tells its sink.
//!
//! # Liveness
//! HTTP/2 keepalive ([`Keepalive`], `--keepalive-secs`): after an interval
//! without traffic on a connection the server pings the actor, and closes
//! the connection when the ping stays unanswered. The stream task then sees
//! its inbound stream fail, exactly as when the actor disconnects: its env
//! slots are freed and the sink drops their partial unrolls. A live actor
//! answers pings in its HTTP/2 layer, so an idle one keeps its stream.
//!
//! # TLS
//! With [`ServerTls`] the public listener serves TLS (mutual TLS with a
//! client CA). Local actors the learner spawns then connect over a private
//! plaintext unix socket instead ([`PrivateSocket`]; see
//! [`crate::app::local_actors`]), so they need no certificate.
//!
//! # Backpressure
//! A stream may have at most [`MAX_STEP_BATCHES_IN_FLIGHT`] step batches
//! whose actions have not yet been taken by its response stream; one more
//! ends the stream with RESOURCE_EXHAUSTED. Actors pipeline two halves, so a
//! well-behaved actor never gets close; a misbehaving one cannot queue
//! unbounded work or memory. (Rejecting beats stalling the reader: a stalled
//! reader would also stop seeing the client's disconnect.)
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use seed_shared::pb::learner_server::{Learner, LearnerServer};
use seed_shared::{pb, EnvSpec, Keepalive, ProtocolError};
use tokio::sync::{mpsc, watch};
use tokio::task::AbortHandle;
use tokio_stream::wrappers::UnixListenerStream;
use tokio_stream::Stream;
use tonic::transport::server::TcpIncoming;
use tonic::{Request, Response, Status, Streaming};
use tracing::{debug, info, warn};

use crate::error::LearnerError;
use crate::infer::batcher::DynamicBatcher;
use crate::infer::inference::InlineInference;
use crate::infer::state_table::{SlotLease, StateTable};
use crate::infer::step_request::{ReplySender, StepRequest};
use crate::log_throttle::{LogThrottle, WARN_INTERVAL};
use crate::metrics::{Metrics, MetricsSnapshot};
use crate::model::weights::WeightsHandle;
use crate::serve::spec_gate::SpecGate;
use crate::serve::stream_error::StreamError;
use crate::serve::tls::ServerTls;
use crate::serve::transport::{BoundListener, ListenAddr, PrivateSocket};

/// Step batches a stream may have awaiting actions (see module docs).
pub const MAX_STEP_BATCHES_IN_FLIGHT: usize = 8;

/// The service's own settings (the stages it forwards to come apart, in
/// [`ServiceStages`]).
pub struct ServiceConfig {
    /// The env spec every actor must declare, or the first one declared.
    pub spec: SpecGate,
    /// The learner's counters (`Status`, stream errors, episodes).
    pub metrics: Arc<Metrics>,
    /// Shared secret actors must send in their hello; `None` or empty: none.
    pub token: Option<String>,
    /// Largest message accepted (and sent) on a stream.
    pub max_message_bytes: usize,
    /// HTTP/2 (and TCP) keepalive of every connection.
    pub keepalive: Keepalive,
    /// TLS on the public listener; `None`: plaintext.
    pub tls: Option<ServerTls>,
}

/// Where the service accepts connections.
pub struct Listeners {
    /// `--listen`, bound; serves TLS when the config has it.
    pub public: BoundListener,
    /// The address `public` is bound at (ephemeral port resolved).
    pub public_addr: ListenAddr,
    /// A private plaintext unix socket for local actors (only opened when
    /// `public` serves TLS and local actors run).
    pub private: Option<PrivateSocket>,
}

/// The stages a stream task hands its work to, built by the composition
/// root ([`crate::app::Learner::start`]) and handed over with
/// [`ServerHandle::install`]: streams that arrive earlier wait for them
/// after their hello.
pub struct ServiceStages {
    pub table: Arc<StateTable>,
    pub batcher: Arc<DynamicBatcher<StepRequest>>,
    pub inline: InlineInference,
    pub weights: Arc<WeightsHandle>,
}

/// The live streams, so shutdown can end each with UNAVAILABLE. Touched at
/// stream start and end only (never per step), hence the mutex.
#[derive(Default)]
struct StreamRegistry {
    next_id: AtomicU64,
    live: Mutex<RegistryState>,
}

#[derive(Default)]
struct RegistryState {
    closed: bool,
    streams: HashMap<u64, (ReplySender, Option<AbortHandle>)>,
}

impl StreamRegistry {
    fn lock(&self) -> std::sync::MutexGuard<'_, RegistryState> {
        // A panic while holding this lock cannot leave the map inconsistent.
        self.live.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a new stream; `None` once shutting down.
    fn register(&self, tx: ReplySender) -> Option<u64> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut live = self.lock();
        if live.closed {
            return None;
        }
        live.streams.insert(id, (tx, None));
        Some(id)
    }

    fn set_abort(&self, id: u64, abort: AbortHandle) {
        if let Some(entry) = self.lock().streams.get_mut(&id) {
            entry.1 = Some(abort);
        }
    }

    fn remove(&self, id: u64) {
        self.lock().streams.remove(&id);
    }

    /// Ends every stream with UNAVAILABLE and refuses new ones.
    fn close(&self) {
        let mut live = self.lock();
        live.closed = true;
        for (_, (tx, abort)) in live.streams.drain() {
            let _ = tx.send(Err(Status::from(StreamError::ShuttingDown)));
            if let Some(a) = abort {
                a.abort();
            }
        }
    }
}

/// State shared by every stream task.
struct ServiceContext {
    spec: SpecGate,
    token: Option<String>,
    max_message_bytes: usize,
    metrics: Arc<Metrics>,
    /// Set once by [`ServerHandle::install`].
    stages: OnceLock<ServiceStages>,
    /// `true` once `stages` is set.
    stages_set: watch::Sender<bool>,
    streams: StreamRegistry,
    /// Rate limit of the "ending actor stream" warning (a misbehaving actor
    /// that reconnects at once would otherwise write one line per stream).
    ended_log: LogThrottle,
}

impl ServiceContext {
    /// The stages, waiting until they are installed.
    async fn stages(&self) -> Result<&ServiceStages, StreamError> {
        let mut set = self.stages_set.subscribe();
        // The sender lives in `self`; shutdown aborts waiting tasks.
        if set.wait_for(|s| *s).await.is_err() {
            return Err(StreamError::ShuttingDown);
        }
        self.stages.get().ok_or(StreamError::ShuttingDown)
    }
}

/// The `seed.v1.Learner` service implementation.
#[derive(Clone)]
pub struct ActorService {
    ctx: Arc<ServiceContext>,
}

/// Starts learner servers.
pub struct Server;

impl Server {
    /// Serves the `Learner` service and gRPC health checking on
    /// `listeners` until [`ServerHandle::shutdown`]. Streams are accepted at
    /// once; they get their welcome once [`ServerHandle::install`] has
    /// handed over the stages. Must run inside a tokio runtime. Fails only
    /// when the TLS configuration cannot be built (which
    /// [`ServerTls::from_files`] has already checked).
    pub async fn serve(
        listeners: Listeners,
        config: ServiceConfig,
    ) -> Result<ServerHandle, LearnerError> {
        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        let service = ActorService {
            ctx: Arc::new(ServiceContext {
                spec: config.spec,
                token: config.token.filter(|t| !t.is_empty()),
                max_message_bytes: config.max_message_bytes,
                metrics: config.metrics,
                stages: OnceLock::new(),
                stages_set: watch::channel(false).0,
                streams: StreamRegistry::default(),
                ended_log: LogThrottle::new(WARN_INTERVAL),
            }),
        };
        let ctx = Arc::clone(&service.ctx);
        let learner = LearnerServer::new(service)
            .max_decoding_message_size(config.max_message_bytes)
            .max_encoding_message_size(config.max_message_bytes);
        let (health_reporter, health_service) = tonic_health::server::health_reporter();
        health_reporter
            .set_serving::<LearnerServer<ActorService>>()
            .await;

        let keepalive = config.keepalive;
        let signal = |mut stop: watch::Receiver<bool>| async move {
            let _ = stop.wait_for(|s| *s).await;
        };
        let mut public = builder(keepalive);
        if let Some(tls) = &config.tls {
            public = public.tls_config(tls.tonic_config()).map_err(|e| {
                LearnerError::Serve(format!(
                    "cannot configure TLS (--tls-cert): {}",
                    crate::serve::tls::error_chain(&e)
                ))
            })?;
        }
        let router = public
            .add_service(health_service.clone())
            .add_service(learner.clone());
        let mut serve = Vec::with_capacity(2);
        serve.push(match listeners.public {
            BoundListener::Tcp(l) => tokio::spawn(
                router.serve_with_incoming_shutdown(
                    TcpIncoming::from(l)
                        .with_nodelay(Some(true))
                        .with_keepalive(keepalive.interval),
                    signal(shutdown_rx.clone()),
                ),
            ),
            BoundListener::Unix(l) => tokio::spawn(router.serve_with_incoming_shutdown(
                UnixListenerStream::new(l),
                signal(shutdown_rx.clone()),
            )),
        });
        info!(addr = %listeners.public_addr, tls = config.tls.is_some(),
            mutual_tls = config.tls.as_ref().is_some_and(|t| t.client_ca.is_some()),
            keepalive_interval = ?keepalive.interval, keepalive_timeout = ?keepalive.timeout,
            "learner listening");
        let private = match listeners.private {
            Some(PrivateSocket {
                listener,
                addr,
                dir,
            }) => {
                let router = builder(keepalive)
                    .add_service(health_service)
                    .add_service(learner);
                serve.push(tokio::spawn(router.serve_with_incoming_shutdown(
                    UnixListenerStream::new(listener),
                    signal(shutdown_rx),
                )));
                info!(addr = %addr, "plaintext socket for local actors (private directory)");
                Some(dir)
            }
            None => None,
        };
        Ok(ServerHandle {
            addr: listeners.public_addr,
            ctx,
            shutdown: shutdown_tx,
            serve,
            _private_dir: private,
        })
    }
}

/// A tonic server with the learner's connection settings: HTTP/2 keepalive
/// (see the module docs).
fn builder(keepalive: Keepalive) -> tonic::transport::Server {
    tonic::transport::Server::builder()
        .http2_keepalive_interval(keepalive.interval)
        .http2_keepalive_timeout(Some(keepalive.timeout))
}

/// A running `Learner` service.
pub struct ServerHandle {
    addr: ListenAddr,
    ctx: Arc<ServiceContext>,
    shutdown: watch::Sender<bool>,
    /// The public listener's server, then the private socket's.
    serve: Vec<tokio::task::JoinHandle<Result<(), tonic::transport::Error>>>,
    /// The private socket's directory, removed when the handle drops.
    _private_dir: Option<tempfile::TempDir>,
}

impl ServerHandle {
    /// The address actually listened on (ephemeral port resolved).
    pub fn local_addr(&self) -> &ListenAddr {
        &self.addr
    }

    /// The run's env spec once fixed: at once when it was given, else when
    /// the first actor with a usable spec says hello.
    pub async fn env_spec(&self) -> EnvSpec {
        self.ctx.spec.adopted().await.clone()
    }

    /// Hands the stream tasks their stages; streams waiting after their
    /// hello go on. A second call is ignored (the first stages stay).
    pub fn install(&self, stages: ServiceStages) {
        if self.ctx.stages.set(stages).is_ok() {
            self.ctx.stages_set.send_replace(true);
        }
    }

    /// Ends every stream with UNAVAILABLE and stops serving: the port or
    /// socket is free when this returns. Request still queued in the batcher
    /// are answered into closed channels, which is harmless.
    pub async fn shutdown(self) -> Result<(), LearnerError> {
        self.ctx.streams.close();
        let _ = self.shutdown.send(true);
        // Streams end at once; connections then close. A client that keeps
        // its connection open cannot hold the learner: cut it after a grace.
        let grace = tokio::time::Instant::now() + Duration::from_secs(2);
        let mut first_error = None;
        for mut serve in self.serve {
            let served = match tokio::time::timeout_at(grace, &mut serve).await {
                Ok(joined) => joined,
                Err(_) => {
                    serve.abort();
                    Ok(Ok(()))
                }
            };
            let error = match served {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(e.to_string()),
                Err(e) if e.is_cancelled() => None,
                Err(e) => Some(e.to_string()),
            };
            first_error = first_error.or(error);
        }
        if let ListenAddr::Unix(path) = &self.addr {
            let _ = std::fs::remove_file(path);
        }
        match first_error {
            None => Ok(()),
            Some(e) => Err(LearnerError::Serve(e)),
        }
    }
}

/// The response side of one `Act` call: drains the stream's reply channel
/// and counts action batches leaving, for the in-flight bound.
pub struct ResponseStream {
    rx: mpsc::UnboundedReceiver<Result<pb::LearnerMessage, Status>>,
    /// Step batches accepted and not yet answered out of this stream.
    /// Incremented by the stream task, decremented here; Relaxed: it is a
    /// count, and the actor's next dependent step causally follows the
    /// decrement (it needs these actions first).
    in_flight: Arc<AtomicUsize>,
}

impl Stream for ResponseStream {
    type Item = Result<pb::LearnerMessage, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let polled = self.rx.poll_recv(cx);
        if let Poll::Ready(Some(Ok(pb::LearnerMessage {
            kind: Some(pb::learner_message::Kind::Actions(_)),
        }))) = &polled
        {
            self.in_flight.fetch_sub(1, Ordering::Relaxed);
        }
        polled
    }
}

#[tonic::async_trait]
impl Learner for ActorService {
    type ActStream = ResponseStream;

    async fn act(
        &self,
        request: Request<Streaming<pb::ActorMessage>>,
    ) -> Result<Response<Self::ActStream>, Status> {
        let inbound = request.into_inner();
        let (tx, rx) = mpsc::unbounded_channel();
        let in_flight = Arc::new(AtomicUsize::new(0));
        let id = self
            .ctx
            .streams
            .register(tx.clone())
            .ok_or_else(|| Status::from(StreamError::ShuttingDown))?;
        let task = StreamTask {
            ctx: Arc::clone(&self.ctx),
            id,
            tx,
            in_flight: Arc::clone(&in_flight),
            actor_id: String::new(),
            lease: None,
        };
        let handle = tokio::spawn(task.run(inbound));
        self.ctx.streams.set_abort(id, handle.abort_handle());
        Ok(Response::new(ResponseStream { rx, in_flight }))
    }

    async fn status(
        &self,
        _request: Request<pb::StatusRequest>,
    ) -> Result<Response<pb::StatusReply>, Status> {
        Ok(Response::new(status_reply(&self.ctx.metrics.snapshot())))
    }
}

/// The `Status` reply: every figure of `m` (the `/metrics` endpoint renders
/// the same snapshot type).
pub fn status_reply(m: &MetricsSnapshot) -> pb::StatusReply {
    let t = m.training.unwrap_or_default();
    pb::StatusReply {
        uptime_seconds: m.uptime.as_secs_f64(),
        connected_actors: m.connected_actors,
        live_env_slots: m.live_slots as u32,
        env_steps: m.env_steps,
        inference_batches: m.inference_batches,
        inline_batches: m.inline_batches,
        mean_batch_size: m.mean_batch_size(),
        policy_version: m.policy_version,
        episodes: m.episodes,
        mean_return_last_100: m.mean_return_last_100,
        learner_steps: m.learner_steps,
        step_latency_p50_us: m.step_latency.quantile(0.5),
        step_latency_p99_us: m.step_latency.quantile(0.99),
        step_batches: m.step_batches,
        action_batches: m.action_batches,
        inference_rows: m.inference_rows,
        stream_errors: m.stream_errors,
        batcher_queued_requests: m.batcher_queued as u64,
        inference_batch_rows_p50: m.inference_batch_rows.quantile(0.5),
        inference_batch_rows_p99: m.inference_batch_rows.quantile(0.99),
        training: m.training.is_some(),
        replay_stored_unrolls: t.replay_stored as u64,
        prefetch_ready_batches: t.prefetch_queue as u64,
        total_loss: t.total_loss.into(),
        pg_loss: t.pg_loss.into(),
        value_loss: t.value_loss.into(),
        entropy: t.entropy.into(),
        grad_norm: t.grad_norm.into(),
        learning_rate: t.learning_rate.into(),
        skipped_learner_steps: t.skipped_steps,
        active_env_slots: m.active_slots as u32,
    }
}

/// One actor stream's task.
/// Its `Drop` does the bookkeeping, so it also runs when shutdown aborts it.
struct StreamTask {
    ctx: Arc<ServiceContext>,
    /// Key in the stream registry.
    id: u64,
    tx: ReplySender,
    in_flight: Arc<AtomicUsize>,
    actor_id: String,
    /// The stream's env slots, once welcomed.
    lease: Option<Arc<SlotLease>>,
}

impl StreamTask {
    async fn run(mut self, mut inbound: Streaming<pb::ActorMessage>) {
        let result = self.serve(&mut inbound).await;
        match result {
            Ok(()) => debug!(actor = %self.actor_id, "actor stream closed"),
            Err(e) => {
                if !matches!(e, StreamError::ShuttingDown | StreamError::Transport(_)) {
                    if let Some(streams) = self.ctx.ended_log.hit() {
                        warn!(actor = %self.actor_id, error = %e, streams,
                            "ending actor stream (streams ended for bad input since the last such \
                             line, at most one line per {} s; all are counted in Status)",
                            WARN_INTERVAL.as_secs());
                    }
                } else if matches!(e, StreamError::Transport(_)) && self.lease.is_some() {
                    // A welcomed actor's connection failed: it vanished, or
                    // stopped answering keepalive pings.
                    info!(actor = %self.actor_id, error = %e,
                        "actor connection lost; its env slots are freed");
                } else {
                    debug!(actor = %self.actor_id, error = %e, "actor stream ended");
                }
                self.ctx
                    .metrics
                    .stream_errors
                    .fetch_add(1, Ordering::Relaxed);
                let _ = self.tx.send(Err(Status::from(e)));
            }
        }
    }

    /// The next message; `Ok(None)` when the actor closed its side.
    async fn next_message(
        &mut self,
        inbound: &mut Streaming<pb::ActorMessage>,
    ) -> Result<Option<pb::ActorMessage>, StreamError> {
        inbound.message().await.map_err(|s| self.transport_error(s))
    }

    /// Tonic reports an oversize message as OUT_OF_RANGE; gRPC's convention
    /// (and our contract) is RESOURCE_EXHAUSTED naming the limit. Bytes that
    /// do not decode come from tonic-prost's codec as INTERNAL (its mapping,
    /// fixed inside the codec); they are the actor's fault, so the stream
    /// ends with INVALID_ARGUMENT and prost's message, which names the
    /// message and field where decoding failed.
    fn transport_error(&self, status: Status) -> StreamError {
        const DECODE_PREFIX: &str = "failed to decode Protobuf message";
        if status.code() == tonic::Code::OutOfRange && status.message().contains("too large") {
            StreamError::MessageTooLarge {
                limit: self.ctx.max_message_bytes,
                detail: status.message().to_string(),
            }
        } else if status.code() == tonic::Code::Internal
            && status.message().starts_with(DECODE_PREFIX)
        {
            StreamError::Undecodable {
                detail: status.message().to_string(),
            }
        } else {
            StreamError::Transport(status)
        }
    }

    async fn serve(
        &mut self,
        inbound: &mut Streaming<pb::ActorMessage>,
    ) -> Result<(), StreamError> {
        let Some(first) = self.next_message(inbound).await? else {
            return Ok(());
        };
        let hello = match first.kind {
            Some(pb::actor_message::Kind::Hello(h)) => h,
            Some(pb::actor_message::Kind::Steps(_)) => {
                return Err(StreamError::FirstNotHello { got: "steps" })
            }
            None => return Err(StreamError::EmptyMessage),
        };
        self.actor_id = hello.actor_id.clone();
        let ctx = Arc::clone(&self.ctx);
        let (num_envs, spec) = self.check_hello(&ctx, &hello)?;
        let stages = ctx.stages().await?;
        let lease =
            stages
                .table
                .lease(num_envs as usize)
                .map_err(|e| StreamError::SlotsExhausted {
                    asked: e.asked,
                    free: e.free,
                    capacity: e.capacity,
                })?;
        let welcome = pb::Welcome {
            env_slots: lease.slots().iter().map(|s| s.0).collect(),
            policy_version: stages.weights.version().0,
        };
        self.lease = Some(Arc::clone(&lease));
        self.ctx
            .metrics
            .connected_actors
            .fetch_add(1, Ordering::Relaxed);
        info!(actor = %self.actor_id, envs = num_envs, lease = lease.id().0, "actor welcomed");
        self.send(pb::learner_message::Kind::Welcome(welcome))?;

        let mut expected_seq = 0u64;
        loop {
            let Some(msg) = self.next_message(inbound).await? else {
                return Ok(());
            };
            let received_at = Instant::now();
            let batch = match msg.kind {
                Some(pb::actor_message::Kind::Steps(b)) => b,
                Some(pb::actor_message::Kind::Hello(_)) => return Err(StreamError::SecondHello),
                None => return Err(StreamError::EmptyMessage),
            };
            if batch.seq != expected_seq {
                return Err(ProtocolError::Sequence {
                    expected: expected_seq,
                    got: batch.seq,
                }
                .into());
            }
            expected_seq += 1;
            spec.validate_step_batch(&batch, num_envs)?;
            let unanswered = self.in_flight.fetch_add(1, Ordering::Relaxed);
            if unanswered >= MAX_STEP_BATCHES_IN_FLIGHT {
                return Err(StreamError::TooManyInFlight {
                    limit: MAX_STEP_BATCHES_IN_FLIGHT,
                    seq: batch.seq,
                });
            }
            lease.touch(received_at);
            let claim = lease
                .claim(&batch.env_indices)
                .map_err(|e| StreamError::EnvBusy {
                    position: e.position,
                    index: e.index,
                })?;
            let metrics = &self.ctx.metrics;
            for ep in &batch.episodes {
                if ep.episode_return.is_finite() {
                    metrics.record_episode(ep.episode_return);
                }
            }
            metrics.step_batches.fetch_add(1, Ordering::Relaxed);
            let request = StepRequest {
                batch,
                claim,
                reply: self.tx.clone(),
                received_at,
            };
            // Inline only when every earlier batch of this stream has been
            // answered: one still queued in the batcher (or being inferred)
            // would be answered after this one, out of order. `in_flight`
            // drops only when an answer leaves the reply channel, so 0 here
            // means nothing of this stream is left upstream of it.
            let request = if unanswered == 0 {
                stages.inline.try_infer(request)
            } else {
                Some(request)
            };
            if let Some(request) = request {
                stages
                    .batcher
                    .push(request)
                    .map_err(|_| StreamError::ShuttingDown)?;
            }
        }
    }

    /// Checks token, spec (admitted through the [`SpecGate`]) and env count;
    /// returns the number of envs and the run's spec.
    fn check_hello<'c>(
        &self,
        ctx: &'c ServiceContext,
        hello: &pb::Hello,
    ) -> Result<(u32, &'c EnvSpec), StreamError> {
        if let Some(token) = &self.ctx.token {
            if hello.token.is_empty() {
                return Err(StreamError::MissingToken);
            }
            if !constant_time_eq(hello.token.as_bytes(), token.as_bytes()) {
                return Err(StreamError::WrongToken);
            }
        }
        let spec_proto = hello
            .spec
            .as_ref()
            .ok_or(ProtocolError::Missing { field: "spec" })?;
        let spec = EnvSpec::from_proto(spec_proto)?;
        let ours = ctx.spec.admit(&spec, &hello.actor_id)?;
        if hello.num_envs == 0 {
            return Err(StreamError::InvalidHello {
                field: "num_envs",
                reason: "must be at least 1".into(),
            });
        }
        let bytes_per_batch = (hello.num_envs as usize).saturating_mul(ours.obs_bytes());
        if bytes_per_batch > self.ctx.max_message_bytes {
            return Err(StreamError::MessageTooLarge {
                limit: self.ctx.max_message_bytes,
                detail: format!(
                    "field `num_envs` = {}: a step batch of all envs would carry {bytes_per_batch} observation bytes",
                    hello.num_envs
                ),
            });
        }
        Ok((hello.num_envs, ours))
    }

    fn send(&self, kind: pb::learner_message::Kind) -> Result<(), StreamError> {
        self.tx
            .send(Ok(pb::LearnerMessage { kind: Some(kind) }))
            .map_err(|_| StreamError::Transport(Status::cancelled("actor went away")))
    }
}

impl Drop for StreamTask {
    fn drop(&mut self) {
        if self.lease.is_some() {
            self.ctx
                .metrics
                .connected_actors
                .fetch_sub(1, Ordering::Relaxed);
        }
        self.ctx.streams.remove(self.id);
        // `self.lease` drops after this; the slots are released once the
        // last in-flight request holding it is answered.
    }
}

/// Compares secrets without an early exit on the first differing byte.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_comparison() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
    }
}
