//! [`SampleSource`]: what a `Sample` stream needs of the table it reads, so
//! that one producer (`sample_stream`, with its flow control) serves both a
//! [`Table`] (one buffer) and a
//! [`ShardedTable`](crate::server::sharded_table::ShardedTable) (several
//! loaded shard directories as one table).
//!
//! Why a trait rather than a second producer: the flow control and the
//! waiting in slices are the subtle part of a sample stream; written once,
//! they behave the same for both. Cost: static dispatch, nothing at run
//! time.
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use seed_replay::{ReplayError, SampleBatch, SamplerConfig};

use crate::error::RequestError;
use crate::pb::SampleReply;
use crate::server::field_block::{batch_blocks, batch_field_bytes};
use crate::server::reply_size::{max_item_bytes, reply_bytes, too_big};
use crate::server::table::Table;

/// A table a sample stream can read.
pub(crate) trait SampleSource: Send + Sync + 'static {
    /// The preallocated batch one stream reuses.
    type Batch: Send + 'static;

    fn name(&self) -> &str;
    /// Bytes of one item (all fields; a variable-length field's `max_len`
    /// elements, or one without it), to bound a reply's size.
    fn item_bytes(&self) -> usize;
    /// `Some(capacity)` when a sample consumes items: a batch larger than
    /// the capacity could never be served.
    fn consume_once_capacity(&self) -> Option<usize>;
    fn new_batch(&self, max_rows: usize) -> Self::Batch;
    /// Samples `n` items without waiting.
    fn sample_now(&self, batch: &mut Self::Batch, n: usize) -> Result<(), ReplayError>;
    /// Samples `n` items, waiting up to `timeout` for items or the limiter.
    fn sample_waiting(
        &self,
        batch: &mut Self::Batch,
        n: usize,
        timeout: Duration,
    ) -> Result<(), ReplayError>;
    /// Whether waiting can help: `false` for a table that takes no inserts,
    /// whose "not enough items" is final.
    fn can_grow(&self) -> bool;
    /// The reply for the rows in `batch`; refused (`too_big`) when it would
    /// pass `max_message_bytes` (variable-length rows).
    fn reply(
        &self,
        batch: &Self::Batch,
        max_message_bytes: usize,
    ) -> Result<SampleReply, RequestError>;
    /// Statistics (`Relaxed`: read by `Info`, ordering nothing).
    fn sample_streams(&self) -> &AtomicU64;
    fn flow_control_waits(&self) -> &AtomicU64;
}

impl SampleSource for Table {
    type Batch = SampleBatch;

    fn name(&self) -> &str {
        &self.name
    }
    fn item_bytes(&self) -> usize {
        max_item_bytes(self.buffer.layout())
    }
    fn consume_once_capacity(&self) -> Option<usize> {
        matches!(
            self.buffer.config().sampler,
            SamplerConfig::Fifo | SamplerConfig::MaxTimesSampled { .. }
        )
        .then(|| self.buffer.capacity())
    }
    fn new_batch(&self, max_rows: usize) -> SampleBatch {
        self.buffer.new_batch(max_rows)
    }
    fn sample_now(&self, batch: &mut SampleBatch, n: usize) -> Result<(), ReplayError> {
        self.buffer.sample_into(batch, n)
    }
    fn sample_waiting(
        &self,
        batch: &mut SampleBatch,
        n: usize,
        timeout: Duration,
    ) -> Result<(), ReplayError> {
        self.buffer.sample_into_timeout(batch, n, timeout)
    }
    fn can_grow(&self) -> bool {
        true
    }
    fn reply(
        &self,
        batch: &SampleBatch,
        max_message_bytes: usize,
    ) -> Result<SampleReply, RequestError> {
        let layout = self.buffer.layout();
        if layout.has_variable() {
            let bytes = batch_field_bytes(layout, batch);
            if reply_bytes(batch.len(), bytes) > max_message_bytes {
                return Err(too_big(batch.len(), bytes, max_message_bytes));
            }
        }
        Ok(SampleReply {
            rows: batch.len() as u32,
            fields: batch_blocks(layout, batch),
            keys: batch.keys().iter().map(|k| k.0).collect(),
            weights: batch.weights().to_vec(),
            policy_versions: batch.policy_versions().to_vec(),
        })
    }
    fn sample_streams(&self) -> &AtomicU64 {
        &self.sample_streams
    }
    fn flow_control_waits(&self) -> &AtomicU64 {
        &self.flow_control_waits
    }
}

/// Counts an open sample stream for as long as it lives.
#[derive(Debug)]
pub(crate) struct StreamGuard<S: SampleSource>(std::sync::Arc<S>);

impl<S: SampleSource> StreamGuard<S> {
    pub(crate) fn new(table: std::sync::Arc<S>) -> Self {
        // Relaxed: a statistic (module docs).
        table.sample_streams().fetch_add(1, Ordering::Relaxed);
        StreamGuard(table)
    }
}

impl<S: SampleSource> Drop for StreamGuard<S> {
    fn drop(&mut self) {
        self.0.sample_streams().fetch_sub(1, Ordering::Relaxed);
    }
}
