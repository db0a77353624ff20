//! [`OrderedStream`]: a client stream on which every request gets one
//! reply, in order: what `Insert` and `SubmitStepsStream` are. `send`
//! queues a request, `ack` takes the oldest reply, so several requests may
//! be in flight; the first refusal ends the stream, and `send` or `ack`
//! then return the server's status. A `send` that finds the stream ended
//! keeps the replies that came before the refusal, so `ack` still hands
//! each answered request its reply before the status. [`Inserter`](super::Inserter) and
//! [`StepSubmitter`](super::StepSubmitter) wrap one each, turning their
//! batches into requests and the replies into their reports.
use std::collections::VecDeque;

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Streaming;

use crate::error::ClientError;

/// Requests queued on the client before `send` waits.
const QUEUE: usize = 32;

#[derive(Debug)]
pub(crate) struct OrderedStream<Req, Rep> {
    tx: mpsc::Sender<Req>,
    replies: Streaming<Rep>,
    pending: usize,
    /// Replies read off the stream by a failed `send`, not yet acked.
    answered: VecDeque<Rep>,
    /// How the reply stream ended, once it has: the refusal, or `None`
    /// for a stream closed without one.
    ended: Option<Option<tonic::Status>>,
}

/// The request side to hand to the call, and the sender to keep for
/// [`OrderedStream::new`].
pub(crate) fn requests<Req>() -> (mpsc::Sender<Req>, ReceiverStream<Req>) {
    let (tx, rx) = mpsc::channel(QUEUE);
    (tx, ReceiverStream::new(rx))
}

impl<Req, Rep> OrderedStream<Req, Rep> {
    /// The stream of a call opened with [`requests`]' receiver.
    pub(crate) fn new(tx: mpsc::Sender<Req>, replies: Streaming<Rep>) -> Self {
        OrderedStream {
            tx,
            replies,
            pending: 0,
            answered: VecDeque::new(),
            ended: None,
        }
    }

    /// Queues `request` (waits while the queue is full).
    pub(crate) async fn send(&mut self, request: Req) -> Result<(), ClientError> {
        if self.tx.send(request).await.is_err() {
            // The request stream ended: the server's reason is on the
            // reply stream.
            return Err(self.failure().await);
        }
        self.pending += 1;
        Ok(())
    }

    /// The reply to the oldest request not yet answered.
    pub(crate) async fn ack(&mut self) -> Result<Rep, ClientError> {
        if self.pending == 0 {
            return Err(ClientError::Protocol {
                reason: "ack without a request in flight".into(),
            });
        }
        if let Some(r) = self.answered.pop_front() {
            self.pending -= 1;
            return Ok(r);
        }
        if let Some(end) = &self.ended {
            return Err(end_error(end));
        }
        match self.replies.message().await {
            Ok(Some(r)) => {
                self.pending -= 1;
                Ok(r)
            }
            Ok(None) => {
                self.ended = Some(None);
                Err(ClientError::StreamClosed)
            }
            Err(status) => {
                let e = ClientError::from(status.clone());
                self.ended = Some(Some(status));
                Err(e)
            }
        }
    }

    /// Requests sent and not yet answered.
    pub(crate) fn pending(&self) -> usize {
        self.pending
    }

    /// Reads the replies left on an ended stream into `answered`, up to
    /// the server's reason, which it returns.
    async fn failure(&mut self) -> ClientError {
        while self.ended.is_none() {
            match self.replies.message().await {
                Ok(Some(r)) => self.answered.push_back(r),
                Ok(None) => self.ended = Some(None),
                Err(status) => self.ended = Some(Some(status)),
            }
        }
        self.ended
            .as_ref()
            .map_or(ClientError::StreamClosed, end_error)
    }
}

fn end_error(end: &Option<tonic::Status>) -> ClientError {
    match end {
        Some(status) => status.clone().into(),
        None => ClientError::StreamClosed,
    }
}
