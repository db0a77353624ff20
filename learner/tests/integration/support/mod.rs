//! Shared helpers: an in-process learner on an ephemeral loopback port, a
//! raw tonic actor (to send anything, including bad input) and a well-behaved
//! raw actor that runs in the background and counts the actions it gets.
//!
//! Tests wait for conditions with generous deadlines that fail the test;
//! they never sleep to synchronise.
#![allow(dead_code)] // each test binary uses a different part

pub mod cartpole_training;
pub mod pki;
pub mod proxy;

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Once};
use std::time::Duration;

use seed_learner::app::{Learner, LearnerConfig};
use seed_learner::infer::sink::SinkFactory;
use seed_learner::serve::transport::ListenAddr;
use seed_shared::pb::learner_client::LearnerClient;
use seed_shared::pb::{self, actor_message, learner_message};
use seed_shared::EnvSpec;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;
use tonic::{Status, Streaming};

/// Deadline for anything a test waits on; only reached when something hangs.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// Must run before any candle code (it writes the environment), so every
/// test calls it first; `Once` makes later calls wait for the first.
pub fn init() {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        seed_learner::app::threads::configure_candle_threads(Some(1));
        let _ = tracing_subscriber::fmt()
            .with_env_filter("warn")
            .with_test_writer()
            .try_init();
    });
}

/// A serving (not training) CartPole learner on `127.0.0.1:0`, adjusted by `tweak`.
pub async fn start_learner(tweak: impl FnOnce(&mut LearnerConfig)) -> Learner {
    init();
    Learner::start(&serving_config(tweak))
        .await
        .expect("learner starts")
}

/// Like [`start_learner`], with `sink` receiving every inferred batch.
pub async fn start_learner_with_sink(
    tweak: impl FnOnce(&mut LearnerConfig),
    sink: SinkFactory,
) -> Learner {
    init();
    Learner::start_with_sink(&serving_config(tweak), sink)
        .await
        .expect("learner starts")
}

fn serving_config(tweak: impl FnOnce(&mut LearnerConfig)) -> LearnerConfig {
    let mut cfg = LearnerConfig::serving(
        "127.0.0.1:0"
            .parse::<ListenAddr>()
            .expect("literal address"),
        seed_env::EnvConfig::CartPole,
    );
    tweak(&mut cfg);
    cfg
}

/// Fails the test if `fut` does not finish within [`DEADLINE`].
pub async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    match tokio::time::timeout(DEADLINE, fut).await {
        Ok(v) => v,
        Err(_) => panic!("timed out waiting for {what}"),
    }
}

/// Polls `cond` (cheaply, yielding) until it holds or the deadline fails the test.
pub async fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    within(what, async {
        let mut tick = tokio::time::interval(Duration::from_millis(5));
        while !cond() {
            tick.tick().await;
        }
    })
    .await
}

pub async fn client(server: &Learner) -> LearnerClient<Channel> {
    client_at(&server.http_uri().expect("tcp learner")).await
}

/// A plaintext client of the learner (or proxy) at `uri`.
pub async fn client_at(uri: &str) -> LearnerClient<Channel> {
    let channel = Channel::from_shared(uri.to_owned())
        .expect("valid uri")
        .connect()
        .await
        .expect("connect");
    client_on(channel)
}

/// A client on an open channel (plaintext or TLS).
pub fn client_on(channel: Channel) -> LearnerClient<Channel> {
    LearnerClient::new(channel)
        .max_decoding_message_size(usize::MAX)
        .max_encoding_message_size(usize::MAX)
}

/// A TLS channel to the learner at `addr`, trusting the CA certificates in
/// `ca` for the name `localhost`, presenting `identity` (certificate and
/// key files) when given.
pub async fn tls_channel(
    addr: std::net::SocketAddr,
    ca: &std::path::Path,
    identity: Option<(&std::path::Path, &std::path::Path)>,
) -> Result<Channel, tonic::transport::Error> {
    use tonic::transport::{Certificate, ClientTlsConfig, Identity};
    let read = |p: &std::path::Path| std::fs::read(p).expect("test pem file");
    let mut tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(read(ca)))
        .domain_name("localhost");
    if let Some((cert, key)) = identity {
        tls = tls.identity(Identity::from_pem(read(cert), read(key)));
    }
    Channel::from_shared(format!("https://{addr}"))
        .expect("valid uri")
        .tls_config(tls)?
        .connect()
        .await
}

/// Opens an `Act` stream on `channel` and says hello: the welcome, or what
/// failed on the way (connecting, the call, or the first reply), as text.
pub async fn try_hello(
    channel: Result<Channel, tonic::transport::Error>,
    num_envs: u32,
    token: &str,
) -> Result<pb::Welcome, String> {
    within("a hello's outcome", async {
        let channel = channel.map_err(|e| format!("connect: {e:?}"))?;
        let mut c = client_on(channel);
        let (tx, out) = mpsc::channel(4);
        tx.send(pb::ActorMessage {
            kind: Some(actor_message::Kind::Hello(hello(num_envs, token))),
        })
        .await
        .map_err(|_| "request stream closed".to_string())?;
        let mut rx = c
            .act(ReceiverStream::new(out))
            .await
            .map_err(|s| format!("call: {s:?}"))?
            .into_inner();
        match rx.message().await {
            Ok(Some(pb::LearnerMessage {
                kind: Some(learner_message::Kind::Welcome(w)),
            })) => Ok(w),
            other => Err(format!("first reply: {other:?}")),
        }
    })
    .await
}

/// One raw `Act` stream.
pub struct RawStream {
    pub tx: mpsc::Sender<pb::ActorMessage>,
    pub rx: Streaming<pb::LearnerMessage>,
}

impl RawStream {
    pub async fn open(server: &Learner) -> RawStream {
        Self::open_on(client(server).await).await
    }

    /// A stream through the learner (or proxy) at `uri`.
    pub async fn open_at(uri: &str) -> RawStream {
        Self::open_on(client_at(uri).await).await
    }

    pub async fn open_on(mut c: LearnerClient<Channel>) -> RawStream {
        let (tx, out) = mpsc::channel(64);
        let rx = c
            .act(ReceiverStream::new(out))
            .await
            .expect("call accepted")
            .into_inner();
        RawStream { tx, rx }
    }

    pub async fn send(&self, kind: actor_message::Kind) {
        // The stream may already be closed by the learner; the test then
        // reads the status from `rx`.
        let _ = self.tx.send(pb::ActorMessage { kind: Some(kind) }).await;
    }

    /// The next message; panics on a status or end of stream.
    pub async fn recv(&mut self) -> learner_message::Kind {
        match within("a learner message", self.rx.message()).await {
            Ok(Some(pb::LearnerMessage { kind: Some(k) })) => k,
            other => panic!("expected a message, got {other:?}"),
        }
    }

    /// Reads until the stream ends with a status, which is returned.
    pub async fn status(&mut self) -> Status {
        final_status(&mut self.rx).await
    }

    /// Sends a hello and returns the welcome.
    pub async fn hello(&mut self, num_envs: u32, token: &str) -> pb::Welcome {
        self.send(actor_message::Kind::Hello(hello(num_envs, token)))
            .await;
        match self.recv().await {
            learner_message::Kind::Welcome(w) => w,
            other => panic!("expected welcome, got {other:?}"),
        }
    }
}

/// Reads `rx` until the stream ends with a status, which is returned;
/// panics if it ends cleanly.
pub async fn final_status(rx: &mut Streaming<pb::LearnerMessage>) -> Status {
    within("the stream's status", async {
        loop {
            match rx.message().await {
                Ok(Some(_)) => continue,
                Ok(None) => panic!("stream ended without an error status"),
                Err(s) => return s,
            }
        }
    })
    .await
}

pub fn hello(num_envs: u32, token: &str) -> pb::Hello {
    pb::Hello {
        actor_id: "test".into(),
        num_envs,
        spec: Some(EnvSpec::cartpole().to_proto()),
        token: token.into(),
    }
}

/// A valid CartPole step batch for `envs`.
pub fn steps(seq: u64, envs: &[u32]) -> pb::StepBatch {
    let n = envs.len();
    let mut obs = Vec::with_capacity(n * 16);
    for (i, _) in envs.iter().enumerate() {
        for k in 0..4 {
            obs.extend_from_slice(&((i * 4 + k) as f32 * 0.01).to_le_bytes());
        }
    }
    pb::StepBatch {
        seq,
        env_indices: envs.to_vec(),
        observations: obs.into(),
        rewards: vec![1.0; n],
        terminated: vec![false; n],
        truncated: vec![false; n],
        run_ids: vec![1; n],
        episodes: vec![],
    }
}

/// A well-behaved raw actor in the background: steps all its envs in two
/// pipelined halves and checks each answer.
pub struct GoodActor {
    /// Action batches received and checked.
    pub answered: Arc<AtomicU64>,
    /// The env slots its welcome leased.
    pub slots: Vec<u32>,
    task: tokio::task::JoinHandle<Result<(), String>>,
}

impl GoodActor {
    pub async fn start(server: &Learner, num_envs: u32, token: &str) -> GoodActor {
        Self::start_on(RawStream::open(server).await, num_envs, token).await
    }

    /// A good actor on an already open stream.
    pub async fn start_on(mut s: RawStream, num_envs: u32, token: &str) -> GoodActor {
        let slots = s.hello(num_envs, token).await.env_slots;
        let answered = Arc::new(AtomicU64::new(0));
        let count = Arc::clone(&answered);
        let half = num_envs.div_ceil(2);
        let halves: [Vec<u32>; 2] = [(0..half).collect(), (half..num_envs).collect()];
        let task = tokio::spawn(async move {
            let mut seq = 0u64;
            let mut sent = std::collections::VecDeque::new();
            for h in halves.iter().filter(|h| !h.is_empty()) {
                s.send(actor_message::Kind::Steps(steps(seq, h))).await;
                sent.push_back((seq, h.clone()));
                seq += 1;
            }
            loop {
                let msg = match s.rx.message().await {
                    Ok(Some(pb::LearnerMessage { kind: Some(k) })) => k,
                    other => return Err(format!("good actor got {other:?}")),
                };
                let learner_message::Kind::Actions(a) = msg else {
                    return Err("good actor: unexpected welcome".into());
                };
                let Some((want_seq, envs)) = sent.pop_front() else {
                    return Err("good actor: unsolicited action batch".into());
                };
                if a.seq != want_seq
                    || a.actions.len() != envs.len()
                    || a.actions.iter().any(|&x| x >= 2)
                {
                    return Err(format!("good actor: bad answer {a:?} for seq {want_seq}"));
                }
                count.fetch_add(1, Ordering::Relaxed);
                s.send(actor_message::Kind::Steps(steps(seq, &envs))).await;
                sent.push_back((seq, envs));
                seq += 1;
            }
        });
        GoodActor {
            answered,
            slots,
            task,
        }
    }

    /// Waits until at least `more` further batches were answered.
    pub async fn progresses(&self, more: u64) {
        let start = self.answered.load(Ordering::Relaxed);
        let task = &self.task;
        wait_until("the good actor to keep being served", || {
            assert!(!task.is_finished(), "good actor stopped");
            self.answered.load(Ordering::Relaxed) >= start + more
        })
        .await;
    }

    pub fn stop(self) {
        self.task.abort();
    }
}

/// An `Act` stream that sends raw bytes as its messages (each one framed by
/// gRPC, its payload not necessarily a valid `ActorMessage`), to test how
/// the learner treats bytes that do not decode.
pub struct RawBytesStream {
    pub tx: mpsc::Sender<bytes::Bytes>,
    pub rx: Streaming<pb::LearnerMessage>,
}

impl RawBytesStream {
    pub async fn open(server: &Learner) -> RawBytesStream {
        let uri = server.http_uri().expect("tcp learner");
        let channel = Channel::from_shared(uri)
            .expect("uri")
            .connect()
            .await
            .expect("connect");
        let mut grpc = tonic::client::Grpc::new(channel);
        grpc.ready().await.expect("ready");
        let (tx, out) = mpsc::channel(64);
        let rx = grpc
            .streaming(
                tonic::Request::new(ReceiverStream::new(out)),
                tonic::codegen::http::uri::PathAndQuery::from_static("/seed.v1.Learner/Act"),
                RawCodec,
            )
            .await
            .expect("call accepted")
            .into_inner();
        RawBytesStream { tx, rx }
    }

    /// Encodes `msg` as the stream would, for sending among raw messages.
    pub fn encode(msg: &pb::ActorMessage) -> bytes::Bytes {
        prost::Message::encode_to_vec(msg).into()
    }

    /// Reads until the stream ends with a status, which is returned.
    pub async fn status(&mut self) -> Status {
        final_status(&mut self.rx).await
    }
}

/// Sends `Bytes` as they are; decodes `LearnerMessage`s.
struct RawCodec;

impl tonic::codec::Codec for RawCodec {
    type Encode = bytes::Bytes;
    type Decode = pb::LearnerMessage;
    type Encoder = RawEncoder;
    type Decoder = LearnerMessageDecoder;
    fn encoder(&mut self) -> RawEncoder {
        RawEncoder
    }
    fn decoder(&mut self) -> LearnerMessageDecoder {
        LearnerMessageDecoder
    }
}

struct RawEncoder;

impl tonic::codec::Encoder for RawEncoder {
    type Item = bytes::Bytes;
    type Error = Status;
    fn encode(
        &mut self,
        item: bytes::Bytes,
        dst: &mut tonic::codec::EncodeBuf<'_>,
    ) -> Result<(), Status> {
        bytes::BufMut::put_slice(dst, &item);
        Ok(())
    }
}

struct LearnerMessageDecoder;

impl tonic::codec::Decoder for LearnerMessageDecoder {
    type Item = pb::LearnerMessage;
    type Error = Status;
    fn decode(
        &mut self,
        src: &mut tonic::codec::DecodeBuf<'_>,
    ) -> Result<Option<pb::LearnerMessage>, Status> {
        <pb::LearnerMessage as prost::Message>::decode(src)
            .map(Some)
            .map_err(|e| Status::internal(e.to_string()))
    }
}
