//! The training thread: runs the [`Trainer`] on the prefetcher's batches
//! until the run stops or the prefetcher closes, records each step in
//! [`TrainerStats`], and calls the periodic-checkpoint hook between steps.
//!
//! Why a thread of its own: a step takes milliseconds of CPU (or waits on
//! an accelerator), and inference must never wait for it; the trainer
//! hands its weights over through the `WeightsHandle` instead. Cost: one
//! OS thread; waiting for a batch polls the stop flag every 50 ms.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tracing::{debug, error, warn};

use crate::error::LearnerError;
use crate::learn::prefetch::{NextBatchError, Prefetcher};
use crate::learn::trainer::{TrainError, TrainStep, Trainer};
use crate::learn::trainer_stats::TrainerStats;
use crate::log_throttle::{LogThrottle, WARN_INTERVAL};

/// Called by the training thread after each step (periodic checkpoints).
pub type BetweenSteps = Box<dyn FnMut(&Trainer) + Send>;

/// Runs `trainer` on `prefetcher`'s batches until `stop` is set or the
/// prefetcher closes; returns the trainer (for the final checkpoint).
pub fn spawn_training_thread(
    mut trainer: Trainer,
    prefetcher: Arc<Prefetcher>,
    stats: Arc<TrainerStats>,
    stop: Arc<AtomicBool>,
    mut between_steps: Option<BetweenSteps>,
    on_step: Arc<dyn Fn(&TrainStep) + Send + Sync>,
) -> Result<JoinHandle<Result<Trainer, TrainError>>, LearnerError> {
    let skipped_log = LogThrottle::new(WARN_INTERVAL);
    std::thread::Builder::new()
        .name("trainer".into())
        .spawn(move || {
            // Relaxed: a plain request flag, re-checked at least every 50 ms.
            while !stop.load(Ordering::Relaxed) {
                let batch = match prefetcher.next(Duration::from_millis(50)) {
                    Ok(b) => b,
                    Err(NextBatchError::Timeout) => continue,
                    Err(NextBatchError::Closed) => break,
                };
                let started = Instant::now();
                let step = trainer.step(&batch).inspect_err(|e| {
                    // Said now: the run itself reports it only when it ends.
                    error!(error = %e, "training step failed; training stops");
                })?;
                if step.skipped {
                    if let Some(steps) = skipped_log.hit() {
                        warn!(
                            grad_norm = step.grad_norm,
                            steps,
                            "non-finite gradients; steps skipped since the last such line \
                             (at most one line per {} s)",
                            WARN_INTERVAL.as_secs()
                        );
                    }
                }
                stats.record(&step, batch.len(), started.elapsed());
                on_step(&step);
                if let Some(f) = between_steps.as_mut() {
                    f(&trainer);
                }
            }
            debug!("training thread stopped");
            Ok(trainer)
        })
        .map_err(|source| LearnerError::Io {
            what: "spawning the training thread".into(),
            source,
        })
}
