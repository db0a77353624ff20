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
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use seed_shared::pb::learner_server::LearnerServer;
use seed_shared::{EnvSpec, Keepalive};
use tokio::sync::watch;
use tokio_stream::wrappers::UnixListenerStream;
use tonic::transport::server::TcpIncoming;
use tracing::info;

use crate::error::LearnerError;
use crate::log_throttle::{LogThrottle, WARN_INTERVAL};
use crate::metrics::Metrics;
use crate::serve::context::ServiceContext;
pub use crate::serve::context::{ServiceStages, MAX_STEP_BATCHES_IN_FLIGHT};
use crate::serve::registry::StreamRegistry;
use crate::serve::service::ActorService;
use crate::serve::spec_gate::SpecGate;
use crate::serve::tls::ServerTls;
use crate::serve::transport::{BoundListener, ListenAddr, PrivateSocket};

/// The service's own settings (the stages it forwards to come apart, in
/// [`ServiceStages`]).
pub struct ServiceConfig {
    /// The env spec every actor must declare, or the first one declared.
    pub spec: SpecGate,
    /// The learner's counters (`Status`, stream errors, episodes).
    pub metrics: Arc<Metrics>,
    /// Shared secret actors must send in their hello; `None` or empty: none.
    pub token: Option<seed_shared::Token>,
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
                token: config.token,
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
                    seed_shared::error_chain(&e)
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
