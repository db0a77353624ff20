//! [`StepSubmitter`]: one `SubmitStepsStream` into a grouped table, for a
//! writer that submits trajectory after trajectory.
//!
//! Why a stream: a unary `SubmitSteps` opens an HTTP/2 stream per call
//! (headers and trailers both ways, a task and a service call on the
//! server); on the pool benchmark's LLM-shaped trajectories that was most
//! of the call's cost. On one stream a submit is one message each way.
//! [`StepSubmitter::send`] queues a batch and [`StepSubmitter::ack`] takes
//! the next reply (in order), so several batches may be in flight;
//! [`StepSubmitter::submit`] does both. The first refusal ends the stream:
//! `ack` returns it (naming the field, as `submit_steps` would), batches
//! sent after the refused one were not stored, and a new submitter is
//! needed.
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Streaming;

use crate::client::grouped::{StepBatch, SubmitReport};
use crate::client::replay_client::ReplayClient;
use crate::error::ClientError;
use crate::pb;

/// A `SubmitStepsStream` into one table.
#[derive(Debug)]
pub struct StepSubmitter {
    table: String,
    tx: mpsc::Sender<pb::SubmitStepsRequest>,
    replies: Streaming<pb::SubmitStepsReply>,
    pending: usize,
}

impl StepSubmitter {
    /// Batches queued on the client before `send` waits.
    const QUEUE: usize = 32;

    /// Queues `steps` (waits while the queue is full).
    pub async fn send(&mut self, steps: StepBatch) -> Result<(), ClientError> {
        let request = steps.into_request(&self.table);
        if self.tx.send(request).await.is_err() {
            // The request stream ended: the server's reason is on the
            // reply stream.
            return Err(self.failure().await);
        }
        self.pending += 1;
        Ok(())
    }

    /// The reply to the oldest batch not yet answered.
    pub async fn ack(&mut self) -> Result<SubmitReport, ClientError> {
        if self.pending == 0 {
            return Err(ClientError::Protocol {
                reason: "ack without a batch in flight".into(),
            });
        }
        match self.replies.message().await? {
            Some(r) => {
                self.pending -= 1;
                Ok(SubmitReport {
                    groups_completed: r.groups_completed,
                    groups_dropped_over_capacity: r.groups_dropped_over_capacity,
                    groups_dropped_queue_full: r.groups_dropped_queue_full,
                })
            }
            None => Err(ClientError::StreamClosed),
        }
    }

    /// Sends `steps` and waits for their reply.
    pub async fn submit(&mut self, steps: StepBatch) -> Result<SubmitReport, ClientError> {
        self.send(steps).await?;
        self.ack().await
    }

    /// Batches sent and not yet answered.
    pub fn pending(&self) -> usize {
        self.pending
    }

    async fn failure(&mut self) -> ClientError {
        loop {
            match self.replies.message().await {
                Ok(Some(_)) => self.pending = self.pending.saturating_sub(1),
                Ok(None) => return ClientError::StreamClosed,
                Err(status) => return status.into(),
            }
        }
    }
}

impl ReplayClient {
    /// Opens a `SubmitStepsStream` into grouped table `table`.
    pub async fn step_submitter(&mut self, table: &str) -> Result<StepSubmitter, ClientError> {
        let (tx, rx) = mpsc::channel(StepSubmitter::QUEUE);
        let replies = self
            .raw()
            .submit_steps_stream(ReceiverStream::new(rx))
            .await?
            .into_inner();
        Ok(StepSubmitter {
            table: table.to_owned(),
            tx,
            replies,
            pending: 0,
        })
    }
}
