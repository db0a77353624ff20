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
use crate::client::grouped::{StepBatch, SubmitReport};
use crate::client::ordered_stream::{self, OrderedStream};
use crate::client::replay_client::ReplayClient;
use crate::error::ClientError;
use crate::pb;

/// A `SubmitStepsStream` into one table.
#[derive(Debug)]
pub struct StepSubmitter {
    table: String,
    stream: OrderedStream<pb::SubmitStepsRequest, pb::SubmitStepsReply>,
}

impl StepSubmitter {
    /// Queues `steps` (waits while the queue is full).
    pub async fn send(&mut self, steps: StepBatch) -> Result<(), ClientError> {
        self.stream.send(steps.into_request(&self.table)).await
    }

    /// The reply to the oldest batch not yet answered.
    pub async fn ack(&mut self) -> Result<SubmitReport, ClientError> {
        let r = self.stream.ack().await?;
        Ok(SubmitReport {
            groups_completed: r.groups_completed,
            groups_dropped_over_capacity: r.groups_dropped_over_capacity,
            groups_dropped_queue_full: r.groups_dropped_queue_full,
        })
    }

    /// Sends `steps` and waits for their reply.
    pub async fn submit(&mut self, steps: StepBatch) -> Result<SubmitReport, ClientError> {
        self.send(steps).await?;
        self.ack().await
    }

    /// Batches sent and not yet answered.
    pub fn pending(&self) -> usize {
        self.stream.pending()
    }
}

impl ReplayClient {
    /// Opens a `SubmitStepsStream` into grouped table `table`.
    pub async fn step_submitter(&mut self, table: &str) -> Result<StepSubmitter, ClientError> {
        let (tx, requests) = ordered_stream::requests();
        let replies = self.raw().submit_steps_stream(requests).await?.into_inner();
        Ok(StepSubmitter {
            table: table.to_owned(),
            stream: OrderedStream::new(tx, replies),
        })
    }
}
