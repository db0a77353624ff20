//! The training side's figures at one moment (progress line, metrics file,
//! summary, Prometheus). Defined here, filled by the training stage's probe,
//! so that reports never import the trainer.
use serde::Serialize;

use super::log_histogram::HistogramSnapshot;

/// A moment's view of the training side (progress line, metrics file, summary).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TrainingSnapshot {
    pub learner_steps: u64,
    /// Steps skipped for non-finite gradients (not in `learner_steps`).
    pub skipped_steps: u64,
    pub unrolls_trained: u64,
    pub total_loss: f32,
    pub pg_loss: f32,
    pub value_loss: f32,
    pub entropy: f32,
    pub grad_norm: f32,
    pub learning_rate: f32,
    /// Mean policy lag over all trained unrolls so far, and the largest.
    pub mean_policy_lag: f64,
    pub max_policy_lag: u64,
    /// Every trained unroll's policy lag so far (subtract two snapshots
    /// for an interval's).
    #[serde(skip)]
    pub policy_lags: HistogramSnapshot,
    /// Seconds the trainer waited for batches / computed, so far.
    pub trainer_wait_seconds: f64,
    pub trainer_busy_seconds: f64,
    pub replay_stored: usize,
    pub prefetch_queue: usize,
    pub unrolls_inserted: u64,
    pub unrolls_dropped_full: u64,
    /// Seconds inference spent blocked on a full buffer (backpressure).
    pub insert_wait_seconds: f64,
    /// Sequence priorities written back by the trainer (R2D2).
    pub priority_updates: u64,
    /// Priority write-backs ignored because the sequence had been
    /// overwritten meanwhile.
    pub stale_priority_updates: u64,
    /// Seconds of `trainer_busy_seconds` spent writing priorities back.
    pub priority_update_seconds: f64,
    /// Local batches sampled without waiting, and the seconds their
    /// sampling took (on the prefetch threads).
    pub timed_samples: u64,
    pub sample_seconds: f64,
}

impl TrainingSnapshot {
    /// Fraction of the trainer's time spent waiting for data.
    pub fn wait_fraction(&self) -> f64 {
        let total = self.trainer_wait_seconds + self.trainer_busy_seconds;
        if total > 0.0 {
            self.trainer_wait_seconds / total
        } else {
            0.0
        }
    }
}
