//! The `seed.v1.Learner` service: [`ActorService`] answers `Act` by
//! spawning a [`StreamTask`] per actor stream and returning its
//! [`ResponseStream`], and answers `Status` from the metrics snapshot.
//! [`ServiceContext`] is the state every stream task shares.
//!
//! Cost: one registry lock and one task spawn per stream; nothing per step.
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use seed_shared::pb;
use seed_shared::pb::learner_server::Learner;
use tokio::sync::mpsc;
use tokio_stream::Stream;
use tonic::{Request, Response, Status, Streaming};

use crate::metrics::MetricsSnapshot;
use crate::serve::context::ServiceContext;
use crate::serve::stream_error::StreamError;
use crate::serve::stream_task::StreamTask;

/// The `seed.v1.Learner` service implementation.
#[derive(Clone)]
pub struct ActorService {
    pub(super) ctx: Arc<ServiceContext>,
}

/// The response side of one `Act` call: drains the stream's reply channel
/// and counts action batches leaving, for the in-flight bound.
pub struct ResponseStream {
    pub(super) rx: mpsc::UnboundedReceiver<Result<pb::LearnerMessage, Status>>,
    /// Step batches accepted and not yet answered out of this stream.
    /// Incremented by the stream task, decremented here; Relaxed: it is a
    /// count, and the actor's next dependent step causally follows the
    /// decrement (it needs these actions first).
    pub(super) in_flight: Arc<AtomicUsize>,
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
    let t = m.training.clone().unwrap_or_default();
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
