//! The soak's actor side: a fixed number of actor streams that churn, and
//! streams that send garbage.
//!
//! [`ChurningStreams`] keeps `n` library actors ([`seed_actor::run_actor`],
//! each its own HTTP/2 connection and `Act` stream) on this process's
//! runtime. [`ChurningStreams::churn`] ends some of them and starts their
//! replacements under new actor ids: half stop cleanly (the shutdown
//! future fires, the stream ends with OK), half are aborted (the task is
//! dropped mid-step, the connection closes under the learner), which is
//! what a restarted or crashed actor looks like to it. [`send_garbage`]
//! opens a stream, says hello and sends one malformed step batch; the
//! learner must end that stream alone with `InvalidArgument`.
use std::time::Duration;

use seed_actor::learner_address::LearnerAddress;
use seed_actor::{run_actor, ActorConfig, ActorReport, ReconnectPolicy};
use seed_env::EnvConfig;
use seed_shared::pb;
use seed_shared::pb::learner_client::LearnerClient;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tracing::warn;

/// How long a cleanly stopped actor may take to end its stream.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// One running actor stream and the switch that stops it.
struct Running {
    stop: oneshot::Sender<()>,
    task: JoinHandle<Result<ActorReport, seed_actor::ActorError>>,
}

/// `n` actor streams, some of which are replaced on each [`churn`](Self::churn).
pub struct ChurningStreams {
    addr: String,
    envs: usize,
    slots: Vec<Option<Running>>,
    /// Where the next churn starts (it walks round the slots).
    cursor: usize,
    /// Actors started so far (ids and seeds stay unique).
    started: usize,
    /// Streams ended by a churn: cleanly, and by abort.
    pub stopped_cleanly: u64,
    pub aborted: u64,
    /// Of the clean stops, those whose actor returned an error.
    pub failed_stops: u64,
}

impl ChurningStreams {
    /// Starts `n` streams of `envs` CartPole envs against `addr`.
    pub fn start(addr: &str, n: usize, envs: usize) -> Self {
        let mut s = ChurningStreams {
            addr: addr.to_owned(),
            envs,
            slots: Vec::with_capacity(n),
            cursor: 0,
            started: 0,
            stopped_cleanly: 0,
            aborted: 0,
            failed_stops: 0,
        };
        for _ in 0..n {
            let r = s.spawn();
            s.slots.push(Some(r));
        }
        s
    }

    fn spawn(&mut self) -> Running {
        let i = self.started;
        self.started += 1;
        let mut cfg = ActorConfig::new(self.addr.clone(), EnvConfig::CartPole, self.envs);
        cfg.actor_id = format!("soak-{i}");
        cfg.seed = i as u64;
        // Retry for as long as the soak runs: the learner never goes away.
        cfg.reconnect = ReconnectPolicy {
            max_attempts: None,
            ..ReconnectPolicy::default()
        };
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(run_actor(cfg, async move {
            let _ = stopped.await;
        }));
        Running { stop, task }
    }

    /// Ends `count` streams (every other one cleanly, the rest aborted) and
    /// starts as many new ones in their place.
    pub async fn churn(&mut self, count: usize) {
        let n = self.slots.len();
        for k in 0..count.min(n) {
            let at = (self.cursor + k) % n;
            if let Some(old) = self.slots[at].take() {
                if k % 2 == 0 {
                    let _ = old.stop.send(());
                    match tokio::time::timeout(STOP_TIMEOUT, old.task).await {
                        Ok(Ok(Ok(_))) => {}
                        Ok(Ok(Err(e))) => {
                            warn!(error = %e, "a churned actor ended with an error");
                            self.failed_stops += 1;
                        }
                        Ok(Err(e)) => {
                            warn!(error = %e, "a churned actor's task failed");
                            self.failed_stops += 1;
                        }
                        Err(_) => {
                            warn!("a churned actor did not stop within 30 s");
                            self.failed_stops += 1;
                        }
                    }
                    self.stopped_cleanly += 1;
                } else {
                    old.task.abort();
                    self.aborted += 1;
                }
            }
            self.slots[at] = Some(self.spawn());
        }
        self.cursor = (self.cursor + count) % n.max(1);
    }

    /// Streams whose actor task has ended (it should not have: they retry
    /// forever until stopped).
    pub fn ended_unasked(&self) -> usize {
        self.slots
            .iter()
            .flatten()
            .filter(|r| r.task.is_finished())
            .count()
    }

    /// Stops every stream cleanly.
    pub async fn stop_all(&mut self) {
        for r in self.slots.iter_mut().filter_map(Option::take) {
            let _ = r.stop.send(());
            let _ = tokio::time::timeout(STOP_TIMEOUT, r.task).await;
        }
    }
}

/// Kinds of malformed step batch [`send_garbage`] sends, in turn.
#[derive(Debug, Clone, Copy)]
pub enum Garbage {
    /// Observation bytes of the wrong length.
    ObservationBytes,
    /// An env index the stream was not given.
    EnvIndex,
}

/// Opens a stream to `addr`, says hello for 2 CartPole envs, sends one
/// malformed step batch of `kind` and returns the status the learner ended
/// the stream with (`Ok` is what must not happen).
pub async fn send_garbage(addr: &str, id: &str, kind: Garbage) -> Result<tonic::Code, String> {
    let address = LearnerAddress::parse(addr).map_err(|e| format!("address {addr}: {e}"))?;
    let channel = address
        .connect()
        .await
        .map_err(|e| format!("connect {addr}: {e}"))?;
    let mut client = LearnerClient::new(channel);
    let (tx, rx) = tokio::sync::mpsc::channel::<pb::ActorMessage>(4);
    let hello = pb::ActorMessage {
        kind: Some(pb::actor_message::Kind::Hello(pb::Hello {
            actor_id: id.to_owned(),
            num_envs: 2,
            spec: Some(EnvConfig::CartPole.spec().to_proto()),
            token: String::new(),
        })),
    };
    tx.send(hello).await.map_err(|e| e.to_string())?;
    let mut replies = client
        .act(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .map_err(|s| format!("Act: {s}"))?
        .into_inner();
    let slots = match replies.message().await {
        Ok(Some(pb::LearnerMessage {
            kind: Some(pb::learner_message::Kind::Welcome(w)),
        })) => w.env_slots,
        Ok(other) => return Err(format!("expected a welcome, got {other:?}")),
        Err(status) => return Ok(status.code()),
    };
    let (env_indices, observations) = match kind {
        // Two envs of 4 f32 are 32 bytes: send 31.
        Garbage::ObservationBytes => (vec![0, 1], vec![0u8; 31]),
        Garbage::EnvIndex => (vec![0, slots.len() as u32 + 7], vec![0u8; 32]),
    };
    let steps = pb::ActorMessage {
        kind: Some(pb::actor_message::Kind::Steps(pb::StepBatch {
            seq: 0,
            env_indices,
            observations: observations.into(),
            rewards: vec![0.0; 2],
            terminated: vec![false; 2],
            truncated: vec![false; 2],
            run_ids: vec![0; 2],
            episodes: Vec::new(),
        })),
    };
    tx.send(steps).await.map_err(|e| e.to_string())?;
    // Keep the sending half open: the learner, not a closed request stream,
    // must end the call.
    let answer = replies.message().await;
    drop(tx);
    match answer {
        Ok(Some(_)) => Err("the learner answered a malformed step batch".into()),
        Ok(None) => Ok(tonic::Code::Ok),
        Err(status) => Ok(status.code()),
    }
}
