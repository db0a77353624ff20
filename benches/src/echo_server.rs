//! [`EchoLearner`]: the floor a learner's step round trip is compared to.
//!
//! It implements the same `seed.v1.Learner` service over the same tonic
//! server settings as the learner (TCP with `TCP_NODELAY`, or a unix socket;
//! the same message-size limits), but `Act` answers every `StepBatch` at once
//! with an `ActionBatch` of the right length (all zeros): no validation, no
//! batching across streams, no inference, no thread hand-off. Whatever the
//! real learner takes beyond this is its overhead.
//!
//! The stream is served the way tonic's bidi example does it (and the
//! learner too): a task drains the request stream into a bounded channel
//! whose receiver is the response stream.
use std::net::SocketAddr;

use seed_shared::pb;
use seed_shared::pb::actor_message::Kind as ActorKind;
use seed_shared::pb::learner_message::Kind as LearnerKind;
use seed_shared::pb::learner_server::{Learner, LearnerServer};
use seed_shared::DEFAULT_MAX_MESSAGE_BYTES;
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::mpsc;
use tokio_stream::wrappers::{ReceiverStream, UnixListenerStream};
use tonic::transport::server::TcpIncoming;
use tonic::{Request, Response, Status, Streaming};

use crate::error::HarnessError;

/// Responses queued per stream; the actor has at most two batches in flight.
const RESPONSE_CAPACITY: usize = 4;

/// The echo service (stateless).
#[derive(Debug, Default, Clone, Copy)]
pub struct EchoLearner;

#[tonic::async_trait]
impl Learner for EchoLearner {
    type ActStream = ReceiverStream<Result<pb::LearnerMessage, Status>>;

    async fn act(
        &self,
        request: Request<Streaming<pb::ActorMessage>>,
    ) -> Result<Response<Self::ActStream>, Status> {
        let mut inbound = request.into_inner();
        let (tx, rx) = mpsc::channel(RESPONSE_CAPACITY);
        tokio::spawn(async move {
            while let Ok(Some(msg)) = inbound.message().await {
                let reply = match msg.kind {
                    Some(ActorKind::Hello(h)) => LearnerKind::Welcome(pb::Welcome {
                        env_slots: (0..h.num_envs).collect(),
                        policy_version: 0,
                    }),
                    Some(ActorKind::Steps(s)) => LearnerKind::Actions(pb::ActionBatch {
                        seq: s.seq,
                        actions: vec![0; s.env_indices.len()],
                        policy_version: 0,
                        continuous_actions: Vec::new(),
                    }),
                    None => continue,
                };
                let reply = pb::LearnerMessage { kind: Some(reply) };
                if tx.send(Ok(reply)).await.is_err() {
                    break;
                }
            }
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    async fn status(
        &self,
        _request: Request<pb::StatusRequest>,
    ) -> Result<Response<pb::StatusReply>, Status> {
        Ok(Response::new(pb::StatusReply::default()))
    }
}

/// A bound echo listener: once this exists, clients can connect (the
/// kernel queues them until [`EchoListener::serve`] accepts).
pub enum EchoListener {
    Tcp(TcpListener, String),
    Unix(UnixListener, String),
}

/// Binds `listen` (`IP:PORT` or `unix:/path`) for the echo.
pub async fn bind_echo(listen: &str) -> Result<EchoListener, HarnessError> {
    if let Some(path) = listen.strip_prefix("unix:") {
        Ok(EchoListener::Unix(
            UnixListener::bind(path)?,
            listen.to_string(),
        ))
    } else {
        let addr: SocketAddr = listen
            .parse()
            .map_err(|e| HarnessError::Config(format!("echo --listen {listen:?}: {e}")))?;
        Ok(EchoListener::Tcp(
            TcpListener::bind(addr).await?,
            listen.to_string(),
        ))
    }
}

impl EchoListener {
    /// Serves [`EchoLearner`] until `shutdown` resolves.
    pub async fn serve(
        self,
        shutdown: impl std::future::Future<Output = ()> + Send,
    ) -> Result<(), HarnessError> {
        let service = LearnerServer::new(EchoLearner)
            .max_decoding_message_size(DEFAULT_MAX_MESSAGE_BYTES)
            .max_encoding_message_size(DEFAULT_MAX_MESSAGE_BYTES);
        let router = tonic::transport::Server::builder().add_service(service);
        let (served, listen) = match self {
            EchoListener::Unix(listener, listen) => (
                router
                    .serve_with_incoming_shutdown(UnixListenerStream::new(listener), shutdown)
                    .await,
                listen,
            ),
            EchoListener::Tcp(listener, listen) => (
                router
                    .serve_with_incoming_shutdown(
                        TcpIncoming::from(listener).with_nodelay(Some(true)),
                        shutdown,
                    )
                    .await,
                listen,
            ),
        };
        served.map_err(|e| HarnessError::Echo(format!("server on {listen}: {e}")))
    }
}

/// Serves [`EchoLearner`] on `listen` (`IP:PORT` or `unix:/path`) until
/// `shutdown` resolves.
pub async fn serve_echo(
    listen: &str,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), HarnessError> {
    bind_echo(listen).await?.serve(shutdown).await
}
