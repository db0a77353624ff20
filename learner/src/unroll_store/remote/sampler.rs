//! [`RemoteSampler`]: one prefetch thread's `Sample` stream from a remote
//! table.
//!
//! Each prefetch thread keeps its own stream of batches of `B` open for the
//! whole run, on a connection whose HTTP/2 window holds only a couple of
//! batches (`sample_connection`): the server samples the next batches (at
//! most [`MAX_IN_FLIGHT`] ahead, and no further than the window lets it
//! send) while the thread collates the last one, so a sample costs the
//! thread no round trip and the batches are only a few steps old. A stream
//! that fails (server restart) is counted, logged at most once per interval
//! and reopened on the next call after a short pause; a closed learner ends
//! the thread. Cost per batch: the received message (one block per field),
//! no further copy before the collator's transpose.
use std::sync::Arc;
use std::time::Duration;

use seed_replay_service::pb::SampleReply;
use tonic::Streaming;
use tracing::warn;

use crate::log_throttle::{LogThrottle, WARN_INTERVAL};
use crate::unroll_store::remote::sample_connection::{self, SampleConnection};
use crate::unroll_store::remote::stats::RemoteStats;
use crate::unroll_store::remote::table::RemoteTable;

/// Batches the server may prepare ahead of this thread.
pub const MAX_IN_FLIGHT: u32 = 2;

/// Why a remote sample gave no batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RemoteSampleError {
    /// Nothing arrived within the wait (too few items, the rate limiter,
    /// or a stream being reopened): try again.
    NotYet,
    /// The learner closed the table: stop.
    Closed,
}

/// One prefetch thread's sample stream (see the module docs).
pub struct RemoteSampler {
    table: Arc<RemoteTable>,
    connection: SampleConnection,
    batch_size: u32,
    stream: Option<Streaming<SampleReply>>,
    last: Option<SampleReply>,
    warnings: LogThrottle,
}

impl RemoteSampler {
    /// A sampler of batches of `batch_size`; fails only on a connection
    /// setting the main connection accepted (so, never in practice).
    pub fn new(table: Arc<RemoteTable>, batch_size: usize) -> Result<Self, String> {
        let reply_bytes = batch_size.saturating_mul(table.item_bytes().saturating_add(64));
        let connection = {
            let _runtime = table.runtime().handle().enter();
            sample_connection::connect(table.config(), reply_bytes)?
        };
        Ok(RemoteSampler {
            table,
            connection,
            batch_size: batch_size.clamp(1, u32::MAX as usize) as u32,
            stream: None,
            last: None,
            warnings: LogThrottle::new(WARN_INTERVAL),
        })
    }

    /// The next batch, waiting up to `wait`.
    pub fn next(&mut self, wait: Duration) -> Result<&SampleReply, RemoteSampleError> {
        if self.table.is_closed() {
            return Err(RemoteSampleError::Closed);
        }
        let table = Arc::clone(&self.table);
        let connection = &mut self.connection;
        let stream = &mut self.stream;
        let request =
            sample_connection::request(table.table_name(), self.batch_size, MAX_IN_FLIGHT);
        let result = table.runtime().block_on(async {
            let mut s = match stream.take() {
                Some(s) => s,
                None => match tokio::time::timeout(wait, connection.sample(request)).await {
                    Ok(Ok(s)) => s.into_inner(),
                    Ok(Err(status)) => return Err(Some(status.to_string())),
                    Err(_) => return Err(None),
                },
            };
            // `message` is cancel-safe: a timed-out wait keeps the stream.
            match tokio::time::timeout(wait, s.message()).await {
                Ok(Ok(Some(batch))) => {
                    *stream = Some(s);
                    Ok(batch)
                }
                Ok(Ok(None)) => Err(Some("the sample stream ended".to_owned())),
                Ok(Err(status)) => Err(Some(status.to_string())),
                Err(_) => {
                    *stream = Some(s);
                    Err(None)
                }
            }
        });
        match result {
            Ok(batch) => {
                RemoteStats::add(&table.stats.sampled_batches, 1);
                Ok(self.last.insert(batch))
            }
            Err(None) => Err(RemoteSampleError::NotYet),
            Err(Some(reason)) => {
                if table.is_closed() {
                    return Err(RemoteSampleError::Closed);
                }
                RemoteStats::add(&table.stats.stream_errors, 1);
                if let Some(n) = self.warnings.hit() {
                    warn!(table = %table.address(), occurrences = n, error = %reason,
                        "the replay sample stream failed; reopening");
                }
                // A pause before the reopen, so a server that is down is
                // not called in a tight loop.
                std::thread::sleep(wait.min(Duration::from_millis(200)));
                Err(RemoteSampleError::NotYet)
            }
        }
    }
}
