//! A copy of every figure at one moment, and rates between two copies: what
//! the `Status` RPC, the progress line, `metrics.jsonl`, the summary and the
//! Prometheus endpoint render.
use std::time::Duration;

use super::log_histogram::HistogramSnapshot;
use super::training::TrainingSnapshot;

/// A copy of every figure, taken at one moment; fields mirror [`Metrics`].
#[derive(Debug, Clone, Default)]
pub struct MetricsSnapshot {
    /// Time since the server started.
    pub uptime: Duration,
    /// Env steps answered.
    pub env_steps: u64,
    /// Step batches accepted.
    pub step_batches: u64,
    /// Action batches sent.
    pub action_batches: u64,
    /// Inference batches run.
    pub inference_batches: u64,
    /// Of those, run inline by a stream task.
    pub inline_batches: u64,
    /// Env rows in those batches.
    pub inference_rows: u64,
    /// Env rows per inference batch.
    pub inference_batch_rows: HistogramSnapshot,
    /// Streams that completed the hello.
    pub connected_actors: u32,
    /// Env slots leased to streams.
    pub live_slots: usize,
    /// Of those, the slots of active streams (not parked as idle).
    pub active_slots: usize,
    /// Step requests waiting in the batcher (approximate).
    pub batcher_queued: usize,
    /// Streams ended with an error status.
    pub stream_errors: u64,
    /// Episodes reported by actors.
    pub episodes: u64,
    /// Mean return of the last [`super::RETURN_WINDOW`] episodes.
    pub mean_return_last_100: f64,
    /// Policy version used by the latest inference batch.
    pub policy_version: u64,
    /// Training steps, skipped ones included.
    pub learner_steps: u64,
    /// Cumulative step latency histogram, in microseconds.
    pub step_latency: HistogramSnapshot,
    /// The training side; `None` when not training.
    pub training: Option<TrainingSnapshot>,
}

impl MetricsSnapshot {
    /// Mean env rows per inference batch (0 before any batch).
    pub fn mean_batch_size(&self) -> f64 {
        if self.inference_batches == 0 {
            0.0
        } else {
            self.inference_rows as f64 / self.inference_batches as f64
        }
    }

    /// Rates and latencies between `earlier` and `self`.
    pub fn since(&self, earlier: &MetricsSnapshot) -> IntervalStats {
        let secs = self.uptime.saturating_sub(earlier.uptime).as_secs_f64();
        let batches =
            self.inference_batches - earlier.inference_batches.min(self.inference_batches);
        let rows = self.inference_rows - earlier.inference_rows.min(self.inference_rows);
        let latency = self.step_latency.since(&earlier.step_latency);
        IntervalStats {
            seconds: secs,
            env_steps_per_second: if secs > 0.0 {
                self.env_steps.saturating_sub(earlier.env_steps) as f64 / secs
            } else {
                0.0
            },
            mean_batch_size: if batches == 0 {
                0.0
            } else {
                rows as f64 / batches as f64
            },
            step_latency_p50_us: latency.quantile(0.5),
            step_latency_p99_us: latency.quantile(0.99),
        }
    }
}

/// Figures over an interval (progress lines).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IntervalStats {
    /// Length of the interval.
    pub seconds: f64,
    /// Env steps answered per second.
    pub env_steps_per_second: f64,
    /// Mean env rows per inference batch.
    pub mean_batch_size: f64,
    /// Median step latency, microseconds.
    pub step_latency_p50_us: f64,
    /// 99th percentile step latency, microseconds.
    pub step_latency_p99_us: f64,
}
