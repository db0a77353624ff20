//! [`OrderedStream`]: a client stream on which every request gets one
//! reply, in order: what `Insert` and `SubmitStepsStream` are. `send`
//! queues a request, `ack` takes the oldest reply, so several requests may
//! be in flight; the first refusal ends the stream, and `send` or `ack`
//! then return the server's status. [`Inserter`](super::Inserter) and
//! [`StepSubmitter`](super::StepSubmitter) wrap one each, turning their
//! batches into requests and the replies into their reports.
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
        match self.replies.message().await? {
            Some(r) => {
                self.pending -= 1;
                Ok(r)
            }
            None => Err(ClientError::StreamClosed),
        }
    }

    /// Requests sent and not yet answered.
    pub(crate) fn pending(&self) -> usize {
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
