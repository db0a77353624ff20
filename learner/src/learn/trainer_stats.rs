//! [`TrainerStats`]: what the training thread reports (`train/<name>`),
//! counters and the latest step's figures, read by the progress line, the
//! metrics snapshot and TensorBoard; and [`F32Gauge`], a float in an atomic.
//!
//! Written by the training thread only, once per step; every field is
//! independent of the others, so every access is Relaxed. Cost per step: a
//! dozen relaxed atomic stores and one histogram record per unroll.
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use crate::learn::trainer::TrainStep;
use crate::metrics::log_histogram::LogHistogram;

/// A float gauge in an `AtomicU32` (f32 bits); Relaxed, reporting only.
#[derive(Debug, Default)]
pub struct F32Gauge(AtomicU32);

impl F32Gauge {
    pub fn set(&self, v: f32) {
        self.0.store(v.to_bits(), Ordering::Relaxed);
    }
    pub fn get(&self) -> f32 {
        f32::from_bits(self.0.load(Ordering::Relaxed))
    }
}

/// What the training thread reports (`train/<name>`): counters and the
/// latest step's figures. Written by the training thread only, read by the
/// progress line; every field is independent, so Relaxed.
#[derive(Debug, Default)]
pub struct TrainerStats {
    /// Updates applied.
    pub steps: AtomicU64,
    /// Steps skipped for non-finite gradients.
    pub skipped_steps: AtomicU64,
    /// Unrolls trained on, and the sum of their policy lags.
    pub unrolls: AtomicU64,
    pub policy_lag_sum: AtomicU64,
    /// Largest policy lag seen so far.
    pub policy_lag_max: AtomicU64,
    /// Each trained unroll's policy lag (TensorBoard's histogram).
    pub policy_lags: LogHistogram,
    /// Microseconds spent computing steps (not waiting).
    pub busy_us: AtomicU64,
    pub total_loss: F32Gauge,
    pub pg_loss: F32Gauge,
    pub value_loss: F32Gauge,
    pub entropy: F32Gauge,
    pub grad_norm: F32Gauge,
    pub learning_rate: F32Gauge,
    /// Sequence priorities written back (R2D2).
    pub priority_updates: AtomicU64,
    /// Microseconds of `busy_us` spent writing them back.
    pub priority_update_us: AtomicU64,
}

impl TrainerStats {
    pub(crate) fn record(&self, step: &TrainStep, unrolls: usize, busy: Duration) {
        self.busy_us
            .fetch_add(busy.as_micros() as u64, Ordering::Relaxed);
        self.priority_updates
            .fetch_add(step.priorities_written as u64, Ordering::Relaxed);
        self.priority_update_us
            .fetch_add(step.priority_update.as_micros() as u64, Ordering::Relaxed);
        if step.skipped {
            // Nothing was learned from these unrolls, and the loss gauges
            // keep the last finite step's figures (a NaN there would hide
            // them); the count says what happened.
            self.skipped_steps.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.steps.fetch_add(1, Ordering::Relaxed);
        self.unrolls.fetch_add(unrolls as u64, Ordering::Relaxed);
        self.policy_lag_sum.fetch_add(
            (step.mean_policy_lag * unrolls as f64).round() as u64,
            Ordering::Relaxed,
        );
        self.policy_lag_max
            .fetch_max(step.max_policy_lag, Ordering::Relaxed);
        for &lag in &step.policy_lags {
            self.policy_lags.record(lag);
        }
        self.total_loss.set(step.total_loss);
        self.pg_loss.set(step.pg_loss);
        self.value_loss.set(step.value_loss);
        self.entropy.set(step.entropy);
        self.grad_norm.set(step.grad_norm);
        self.learning_rate.set(step.learning_rate as f32);
    }
}
