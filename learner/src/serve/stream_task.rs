//! [`StreamTask`]: one actor stream's life, on its own tokio task.
//!
//! Reads the hello, checks the token and the env spec ([`crate::serve::SpecGate`]),
//! waits for the stages if they are still being built, leases env slots and
//! sends the welcome; then, per step batch: validate, check the sequence
//! number and the in-flight bound, claim the envs, and hand a
//! [`StepRequest`] to inline inference or the batcher. Any
//! [`StreamError`] ends this stream only, with its gRPC status; the task's
//! `Drop` does the bookkeeping, so it also runs when shutdown aborts it.
//! The rules are in the `serve::server` module docs.
//!
//! Cost per step batch: the spec's validation (a scan for non-finite f32
//! values), one atomic claim per env, and one queue push or inline forward.
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use seed_shared::{pb, EnvSpec, ProtocolError};
use tonic::{Status, Streaming};
use tracing::{debug, info, warn};

use crate::infer::state_table::SlotLease;
use crate::infer::step_request::{ReplySender, StepRequest};
use crate::log_throttle::WARN_INTERVAL;
use crate::serve::context::{ServiceContext, MAX_STEP_BATCHES_IN_FLIGHT};
use crate::serve::stream_error::StreamError;

/// One actor stream's task.
/// Its `Drop` does the bookkeeping, so it also runs when shutdown aborts it.
pub(super) struct StreamTask {
    pub(super) ctx: Arc<ServiceContext>,
    /// Key in the stream registry.
    pub(super) id: u64,
    pub(super) tx: ReplySender,
    pub(super) in_flight: Arc<AtomicUsize>,
    pub(super) actor_id: String,
    /// The stream's env slots, once welcomed.
    pub(super) lease: Option<Arc<SlotLease>>,
}

impl StreamTask {
    pub(super) async fn run(mut self, mut inbound: Streaming<pb::ActorMessage>) {
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
                    metrics.record_episode(ep.episode_return, ep.episode_length);
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
            if !token.matches(&hello.token) {
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
