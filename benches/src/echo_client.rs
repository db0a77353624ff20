//! The echo client: drives one stream the way an actor does, against any
//! `Learner` service (normally [`EchoLearner`](crate::echo_server::EchoLearner)),
//! and records the same round trip the actor records.
//!
//! Payload and pipelining match the actor exactly: the step batches are made
//! by an [`EnvPool`] of the same env and size (so the same observation bytes,
//! rewards, flags and run ids per message), and one batch per pool half is
//! in flight (two for K >= 2, one for K = 1). What it leaves out is stepping
//! the envs, which the actor's round trip excludes too; so the difference
//! between the two is the server's work, plus the actor's stepping delaying
//! when it reads the other half's answer.
//!
//! Each client runs on its own thread with a current-thread runtime, like an
//! actor process. Cost: a clone of each template batch per send (the
//! observation buffer is `Bytes`, so a reference-count bump; the small
//! vectors are copied).
use std::collections::VecDeque;
use std::time::Duration;

use seed_actor::learner_address::LearnerAddress;
use seed_actor::{EnvPool, RoundTripHistogram, RoundTripPercentiles};
use seed_env::EnvConfig;
use seed_shared::pb;
use seed_shared::pb::actor_message::Kind as ActorKind;
use seed_shared::pb::learner_client::LearnerClient;
use seed_shared::pb::learner_message::Kind as LearnerKind;
use seed_shared::DEFAULT_MAX_MESSAGE_BYTES;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_stream::wrappers::ReceiverStream;

use crate::error::HarnessError;

/// What the echo clients send and for how long.
#[derive(Debug, Clone)]
pub struct EchoLoad {
    /// Server address (`IP:PORT` or `unix:/path`).
    pub address: String,
    /// Env whose observations make the payload.
    pub env: EnvConfig,
    /// Envs per client (K); split into halves as the actor does.
    pub envs: usize,
    /// Concurrent clients (streams), one thread each.
    pub clients: usize,
    /// How long each client keeps sending.
    pub duration: Duration,
}

/// One client's figures.
#[derive(Debug, Clone)]
pub struct EchoClientResult {
    pub round_trip: RoundTripPercentiles,
    /// Env rows answered.
    pub rows: u64,
    /// Seconds from the first send to the last answer.
    pub seconds: f64,
}

/// Runs `load.clients` echo clients at once and returns each one's result.
pub fn run_echo_clients(load: &EchoLoad) -> Result<Vec<EchoClientResult>, HarnessError> {
    let handles: Vec<_> = (0..load.clients)
        .map(|i| {
            let load = load.clone();
            std::thread::Builder::new()
                .name(format!("echo-client-{i}"))
                .spawn(move || {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()?;
                    runtime.block_on(echo_client(&load, i as u64))
                })
        })
        .collect::<Result<_, _>>()?;
    handles
        .into_iter()
        .map(|h| {
            h.join()
                .map_err(|_| HarnessError::Echo("client thread panicked".into()))?
        })
        .collect()
}

/// One stream: hello, then keep every half's batch in flight for `duration`.
pub async fn echo_client(load: &EchoLoad, seed: u64) -> Result<EchoClientResult, HarnessError> {
    let err = |what: &str, e: &dyn std::fmt::Display| HarnessError::Echo(format!("{what}: {e}"));
    let mut pool = EnvPool::from_config(&load.env, load.envs, seed).map_err(|e| err("env", &e))?;
    let templates: Vec<pb::StepBatch> = (0..pool.num_halves())
        .map(|h| pool.take_batch(h, 0))
        .collect();

    let address = LearnerAddress::parse(&load.address).map_err(|e| err("address", &e))?;
    let channel = address.connect().await.map_err(|e| err("connect", &e))?;
    let mut client = LearnerClient::new(channel)
        .max_decoding_message_size(DEFAULT_MAX_MESSAGE_BYTES)
        .max_encoding_message_size(DEFAULT_MAX_MESSAGE_BYTES);
    let (outbound, requests) = mpsc::channel(templates.len() + 2);
    let hello = pb::Hello {
        actor_id: format!("echo-client-{seed}"),
        num_envs: load.envs as u32,
        spec: Some(load.env.spec().to_proto()),
        token: String::new(),
    };
    let closed = |_| HarnessError::Echo("request stream closed".into());
    outbound
        .send(message(ActorKind::Hello(hello)))
        .await
        .map_err(closed)?;
    let mut inbound = client
        .act(ReceiverStream::new(requests))
        .await
        .map_err(|e| err("act", &e))?
        .into_inner();
    if !matches!(next_kind(&mut inbound).await?, LearnerKind::Welcome(_)) {
        return Err(HarnessError::Echo("first reply is not a Welcome".into()));
    }

    let mut histogram = RoundTripHistogram::new();
    let mut in_flight: VecDeque<(usize, Instant)> = VecDeque::with_capacity(templates.len());
    let mut seq = 0u64;
    let start = Instant::now();
    let deadline = start + load.duration;
    let mut rows = 0u64;
    for (half, template) in templates.iter().enumerate() {
        let batch = pb::StepBatch {
            seq,
            ..template.clone()
        };
        seq += 1;
        in_flight.push_back((half, Instant::now()));
        outbound
            .send(message(ActorKind::Steps(batch)))
            .await
            .map_err(closed)?;
    }
    let mut last = start;
    while let Some((half, sent)) = in_flight.pop_front() {
        let reply = next_kind(&mut inbound).await?;
        last = Instant::now();
        histogram.record(last - sent);
        if let LearnerKind::Actions(a) = reply {
            rows += a.actions.len() as u64;
        }
        if last >= deadline {
            continue; // drain what is in flight, send nothing new
        }
        let batch = pb::StepBatch {
            seq,
            ..templates[half].clone()
        };
        seq += 1;
        in_flight.push_back((half, Instant::now()));
        outbound
            .send(message(ActorKind::Steps(batch)))
            .await
            .map_err(closed)?;
    }
    Ok(EchoClientResult {
        round_trip: histogram.percentiles(),
        rows,
        seconds: (last - start).as_secs_f64(),
    })
}

async fn next_kind(
    inbound: &mut tonic::Streaming<pb::LearnerMessage>,
) -> Result<LearnerKind, HarnessError> {
    match inbound.message().await {
        Ok(Some(pb::LearnerMessage { kind: Some(kind) })) => Ok(kind),
        Ok(_) => Err(HarnessError::Echo("stream ended or empty message".into())),
        Err(status) => Err(HarnessError::Echo(format!("stream: {status}"))),
    }
}

fn message(kind: ActorKind) -> pb::ActorMessage {
    pb::ActorMessage { kind: Some(kind) }
}
