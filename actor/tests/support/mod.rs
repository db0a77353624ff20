//! A scripted fake learner for the client tests.
//!
//! It implements the generated `Learner` service, answers according to a
//! [`Script`], checks every step batch against the contract (spec, sequence
//! numbers, at most two outstanding batches with disjoint envs) and reports
//! everything it sees as [`Event`]s on a channel the test reads. Tests wait on
//! those events, never on time; [`next_event`] only guards against a hang.

#![allow(dead_code)] // each test binary uses a different part

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use seed_shared::pb;
use seed_shared::pb::learner_message::Kind;
use seed_shared::pb::learner_server::{Learner, LearnerServer};
use seed_shared::EnvSpec;
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream, UnixListenerStream};
use tokio_stream::StreamExt;
use tonic::{Code, Request, Response, Status, Streaming};

/// How the fake answers a stream.
#[derive(Debug, Clone, Copy)]
pub enum Script {
    /// Answer every step batch at once with valid actions.
    Serve,
    /// Hold answers until two batches are outstanding, then answer both:
    /// an actor that does not pipeline deadlocks against this.
    AnswerInPairs,
    /// Welcome, then answer the first step batch with a broken action batch.
    Corrupt(Corruption),
    /// Fail the call itself with this code (before any message).
    RejectCall(Code),
    /// Welcome, then end the stream with this code on the first step batch.
    FailAfterHello(Code),
    /// Answer `batches` batches, then end the stream with `code`; every later
    /// call on this fake is refused with `UNAVAILABLE`.
    EndAfter { batches: u64, code: Code },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Corruption {
    WrongSeq,
    WrongCount,
    OutOfRange,
}

#[derive(Debug, Clone)]
pub enum Event {
    Hello(pb::Hello),
    Steps(pb::StepBatch),
    /// The contract was broken by the actor.
    Violation(String),
    /// The fake ended a stream with a status.
    Ended(Code),
}

/// Policy version the fake reports for the action batch answering `seq`.
pub fn policy_version_for(seq: u64) -> u64 {
    1000 + seq
}

/// Welcome's policy version.
pub const WELCOME_POLICY_VERSION: u64 = 7;

struct FakeLearner {
    script: Script,
    events: mpsc::UnboundedSender<Event>,
    calls: Arc<AtomicUsize>,
    ended: Arc<AtomicBool>,
}

#[tonic::async_trait]
impl Learner for FakeLearner {
    type ActStream = ReceiverStream<Result<pb::LearnerMessage, Status>>;

    async fn act(
        &self,
        request: Request<Streaming<pb::ActorMessage>>,
    ) -> Result<Response<Self::ActStream>, Status> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if let Script::RejectCall(code) = self.script {
            return Err(Status::new(code, "fake learner refuses this actor"));
        }
        if self.ended.load(Ordering::SeqCst) {
            return Err(Status::unavailable("fake learner is going away"));
        }
        let (tx, rx) = mpsc::channel(16);
        let stream = Stream {
            script: self.script,
            events: self.events.clone(),
            ended: self.ended.clone(),
            tx,
        };
        tokio::spawn(stream.run(request.into_inner()));
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    async fn status(
        &self,
        _request: Request<pb::StatusRequest>,
    ) -> Result<Response<pb::StatusReply>, Status> {
        Ok(Response::new(pb::StatusReply::default()))
    }
}

/// One actor stream on the fake.
struct Stream {
    script: Script,
    events: mpsc::UnboundedSender<Event>,
    ended: Arc<AtomicBool>,
    tx: mpsc::Sender<Result<pb::LearnerMessage, Status>>,
}

impl Stream {
    fn violation(&self, what: String) {
        let _ = self.events.send(Event::Violation(what));
    }

    async fn reply(&self, kind: Kind) -> bool {
        self.tx
            .send(Ok(pb::LearnerMessage { kind: Some(kind) }))
            .await
            .is_ok()
    }

    async fn end(&self, code: Code) {
        let _ = self.events.send(Event::Ended(code));
        let _ = self
            .tx
            .send(Err(Status::new(code, "fake learner ends the stream")))
            .await;
    }

    async fn run(self, mut inbound: Streaming<pb::ActorMessage>) {
        use pb::actor_message::Kind as A;
        let hello = match inbound.message().await {
            Ok(Some(pb::ActorMessage {
                kind: Some(A::Hello(h)),
            })) => h,
            other => return self.violation(format!("first message is not a hello: {other:?}")),
        };
        let _ = self.events.send(Event::Hello(hello.clone()));
        let Some(spec) = hello
            .spec
            .as_ref()
            .and_then(|s| EnvSpec::from_proto(s).ok())
        else {
            return self.violation("hello without a valid spec".into());
        };
        let welcome = pb::Welcome {
            env_slots: (0..hello.num_envs).collect(),
            policy_version: WELCOME_POLICY_VERSION,
        };
        if !self.reply(Kind::Welcome(welcome)).await {
            return;
        }
        let mut next_seq = 0u64;
        let mut outstanding: VecDeque<pb::StepBatch> = VecDeque::new();
        let mut answered = 0u64;
        loop {
            let batch = match inbound.message().await {
                Ok(Some(pb::ActorMessage {
                    kind: Some(A::Steps(b)),
                })) => b,
                Ok(Some(other)) => return self.violation(format!("not a step batch: {other:?}")),
                Ok(None) | Err(_) => return, // the actor went away
            };
            let _ = self.events.send(Event::Steps(batch.clone()));
            if let Err(e) = spec.validate_step_batch(&batch, hello.num_envs) {
                self.violation(format!("batch {}: {e}", batch.seq));
            }
            if batch.seq != next_seq {
                self.violation(format!("seq {} after {}", batch.seq, next_seq));
            }
            next_seq = batch.seq + 1;
            for earlier in &outstanding {
                if earlier
                    .env_indices
                    .iter()
                    .any(|i| batch.env_indices.contains(i))
                {
                    self.violation(format!(
                        "batch {} steps envs still awaiting actions",
                        batch.seq
                    ));
                }
            }
            outstanding.push_back(batch);
            if outstanding.len() > 2 {
                self.violation(format!("{} batches outstanding", outstanding.len()));
            }
            match self.script {
                Script::FailAfterHello(code) => return self.end(code).await,
                Script::EndAfter { batches, code } if answered == batches => {
                    self.ended.store(true, Ordering::SeqCst);
                    return self.end(code).await;
                }
                Script::AnswerInPairs if outstanding.len() < 2 => continue,
                _ => {}
            }
            while let Some(b) = outstanding.pop_front() {
                let mut actions = pb::ActionBatch {
                    seq: b.seq,
                    // Alternating actions, always valid.
                    actions: (0..b.env_indices.len() as u32)
                        .map(|i| (i + b.seq as u32) % spec.action.dim() as u32)
                        .collect(),
                    policy_version: policy_version_for(b.seq),
                    continuous_actions: vec![],
                };
                if let Script::Corrupt(c) = self.script {
                    match c {
                        Corruption::WrongSeq => actions.seq += 1,
                        Corruption::WrongCount => {
                            actions.actions.pop();
                        }
                        Corruption::OutOfRange => actions.actions[0] = spec.action.dim() as u32,
                    }
                }
                if !self.reply(Kind::Actions(actions)).await {
                    return;
                }
                answered += 1;
            }
        }
    }
}

/// A running fake learner.
pub struct FakeServer {
    /// What the actor's `--learner` should say.
    pub learner: String,
    pub events: mpsc::UnboundedReceiver<Event>,
    /// Calls of `Learner.Act` so far (connection attempts that got through).
    pub calls: Arc<AtomicUsize>,
    /// Connections accepted so far (one per HTTP/2 connection, however
    /// many calls it carries).
    pub connections: Arc<AtomicUsize>,
    shutdown: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl FakeServer {
    /// Serves on `addr` (`127.0.0.1:0` for an ephemeral port).
    pub async fn tcp(addr: SocketAddr, script: Script) -> FakeServer {
        let listener = TcpListener::bind(addr).await.expect("bind fake learner");
        let local = listener.local_addr().expect("local addr");
        Self::serve(format!("{local}"), TcpListenerStream::new(listener), script)
    }

    /// Serves on a unix socket at `path`.
    pub fn unix(path: &Path, script: Script) -> FakeServer {
        let listener = UnixListener::bind(path).expect("bind fake learner socket");
        Self::serve(
            format!("unix:{}", path.display()),
            UnixListenerStream::new(listener),
            script,
        )
    }

    fn serve<S, IO>(learner: String, incoming: S, script: Script) -> FakeServer
    where
        S: tokio_stream::Stream<Item = std::io::Result<IO>> + Send + 'static,
        IO: tonic::transport::server::Connected
            + tokio::io::AsyncRead
            + tokio::io::AsyncWrite
            + Unpin
            + Send
            + 'static,
    {
        let (events_tx, events) = mpsc::unbounded_channel();
        let calls = Arc::new(AtomicUsize::new(0));
        let connections = Arc::new(AtomicUsize::new(0));
        let accepted = connections.clone();
        let incoming = incoming.map(move |c| {
            if c.is_ok() {
                accepted.fetch_add(1, Ordering::SeqCst);
            }
            c
        });
        let fake = FakeLearner {
            script,
            events: events_tx,
            calls: calls.clone(),
            ended: Arc::new(AtomicBool::new(false)),
        };
        let (shutdown, stop) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            tonic::transport::Server::builder()
                .add_service(LearnerServer::new(fake))
                .serve_with_incoming_shutdown(incoming, async {
                    let _ = stop.await;
                })
                .await
                .expect("fake learner serve");
        });
        FakeServer {
            learner,
            events,
            calls,
            connections,
            shutdown: Some(shutdown),
            task,
        }
    }

    /// The listening address (TCP only).
    pub fn addr(&self) -> SocketAddr {
        self.learner.parse().expect("tcp fake learner address")
    }

    /// Stops accepting, lets open connections finish, and waits until the
    /// listener is closed.
    pub async fn shut_down(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        let _ = (&mut self.task).await;
    }

    /// The next event; panics (instead of hanging the suite) if none comes.
    pub async fn next_event(&mut self) -> Event {
        next_event(&mut self.events).await
    }
}

/// Guard against a hang: the suite fails after this long instead of stalling CI.
pub const HANG_GUARD: Duration = Duration::from_secs(60);

pub async fn next_event(events: &mut mpsc::UnboundedReceiver<Event>) -> Event {
    tokio::time::timeout(HANG_GUARD, events.recv())
        .await
        .expect("fake learner: no event (hang)")
        .expect("fake learner: event channel closed")
}

/// Every event received so far, without waiting.
pub fn drain(events: &mut mpsc::UnboundedReceiver<Event>) -> Vec<Event> {
    let mut out = Vec::new();
    while let Ok(e) = events.try_recv() {
        out.push(e);
    }
    out
}

/// Runs `fut` under [`HANG_GUARD`].
pub async fn guarded<F: std::future::Future>(fut: F) -> F::Output {
    tokio::time::timeout(HANG_GUARD, fut)
        .await
        .expect("test hung")
}
