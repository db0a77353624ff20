//! The run summary (`--summary-json`): the headline figures of one run, read
//! from the learner's metrics when it stops.
use std::path::Path;
use std::time::Duration;

use serde::Serialize;

use crate::error::LearnerError;
use crate::metrics::MetricsSnapshot;

/// Step latency quantiles in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LatencyQuantiles {
    pub p50: f64,
    pub p99: f64,
}

/// What `--summary-json` writes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunSummary {
    pub env_steps: u64,
    pub episodes: u64,
    pub wall_seconds: f64,
    pub env_steps_per_second: f64,
    pub mean_inference_batch: f64,
    /// Server side: StepBatch received to ActionBatch queued.
    pub step_latency_us: LatencyQuantiles,
    pub mean_return_last_100: f64,
    pub step_batches: u64,
    pub inference_batches: u64,
    /// Of those, run on a stream task (`--inline-max-rows`).
    pub inline_batches: u64,
    pub stream_errors: u64,
    pub policy_version: u64,
    /// Local actor processes that exited on their own before the end.
    pub local_actor_failures: usize,
    /// Where the learner listened.
    pub listen: String,
    /// Training figures (absent with `--no-train`), flattened into the JSON.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub training: Option<TrainingSummary>,
}

/// What training adds to the summary.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrainingSummary {
    /// Solved as a user means it: the mean return over the last 100
    /// episodes reached `target_return` and was still at or above it when
    /// the run ended (`final_mean_return`). A run that reached the target
    /// and then fell below it is not solved; `env_steps_to_solve` still says
    /// when it first got there.
    pub solved: bool,
    pub target_return: f64,
    /// Env steps and seconds (from the run's start, the clock of
    /// `wall_seconds`) when it was first reached.
    pub env_steps_to_solve: Option<u64>,
    pub seconds_to_solve: Option<f64>,
    /// The mean return over the last 100 episodes when the run ended.
    pub final_mean_return: f64,
    /// The lowest mean return over the last 100 episodes seen after the
    /// target was first reached: at each progress interval and at the end
    /// (`None` if it never was). How far a solved run fell back.
    pub min_mean_return_after_solve: Option<f64>,
    pub learner_steps: u64,
    pub learner_steps_per_second: f64,
    /// Fraction of the trainer's time spent waiting for a batch.
    pub trainer_wait_fraction: f64,
    pub mean_policy_lag: f64,
    pub max_policy_lag: u64,
    pub unrolls_trained: u64,
    /// Unrolls dropped because the replay buffer stayed full past the timeout.
    pub unrolls_dropped_full: u64,
    /// Seconds inference spent blocked on a full replay buffer (backpressure).
    pub insert_wait_seconds: f64,
    /// Sequence priorities written back (R2D2), and write-backs ignored
    /// because the sequence had been overwritten meanwhile.
    pub priority_updates: u64,
    pub stale_priority_updates: u64,
    /// What one training step costs and the replay's part of it, in
    /// microseconds: `train_step_us` is the trainer's computing time per
    /// step (loss, backward, optimizer, publishing, and the priority
    /// write-back, which is `priority_update_us`); `sample_us` is one
    /// batch's sampling on a prefetch thread, timed on the batches that did
    /// not wait for items or the rate limiter (`None` with a remote table or
    /// when none was timed). `replay_share_of_step` is
    /// `(sample_us + priority_update_us) / (sample_us + train_step_us)`:
    /// the replay's share of the work behind one step, wherever it runs.
    pub train_step_us: f64,
    pub priority_update_us: f64,
    pub sample_us: Option<f64>,
    pub replay_share_of_step: Option<f64>,
}

impl TrainingSummary {
    pub fn new(
        t: &crate::metrics::TrainingSnapshot,
        train_seconds: f64,
        target_return: f64,
        solved: Option<(u64, f64)>,
        final_mean_return: f64,
        min_mean_return_after_solve: Option<f64>,
    ) -> Self {
        let steps = (t.learner_steps + t.skipped_steps).max(1) as f64;
        let per_step = |seconds: f64| seconds * 1e6 / steps;
        let sample_us =
            (t.timed_samples > 0).then(|| t.sample_seconds * 1e6 / t.timed_samples as f64);
        TrainingSummary {
            solved: solved.is_some() && final_mean_return >= target_return,
            target_return,
            env_steps_to_solve: solved.map(|s| s.0),
            seconds_to_solve: solved.map(|s| s.1),
            final_mean_return,
            min_mean_return_after_solve: min_mean_return_after_solve
                .map(|m| m.min(final_mean_return)),
            learner_steps: t.learner_steps,
            learner_steps_per_second: if train_seconds > 0.0 {
                t.learner_steps as f64 / train_seconds
            } else {
                0.0
            },
            trainer_wait_fraction: t.wait_fraction(),
            mean_policy_lag: t.mean_policy_lag,
            max_policy_lag: t.max_policy_lag,
            unrolls_trained: t.unrolls_trained,
            unrolls_dropped_full: t.unrolls_dropped_full,
            insert_wait_seconds: t.insert_wait_seconds,
            priority_updates: t.priority_updates,
            stale_priority_updates: t.stale_priority_updates,
            train_step_us: per_step(t.trainer_busy_seconds),
            priority_update_us: per_step(t.priority_update_seconds),
            sample_us,
            replay_share_of_step: sample_us.map(|s| {
                let step = per_step(t.trainer_busy_seconds);
                (s + per_step(t.priority_update_seconds)) / (s + step).max(f64::MIN_POSITIVE)
            }),
        }
    }
}

impl RunSummary {
    pub fn new(
        m: &MetricsSnapshot,
        wall: Duration,
        local_actor_failures: usize,
        listen: String,
    ) -> Self {
        let secs = wall.as_secs_f64();
        RunSummary {
            env_steps: m.env_steps,
            episodes: m.episodes,
            wall_seconds: secs,
            env_steps_per_second: if secs > 0.0 {
                m.env_steps as f64 / secs
            } else {
                0.0
            },
            mean_inference_batch: m.mean_batch_size(),
            step_latency_us: LatencyQuantiles {
                p50: m.step_latency.quantile(0.5),
                p99: m.step_latency.quantile(0.99),
            },
            mean_return_last_100: m.mean_return_last_100,
            step_batches: m.step_batches,
            inference_batches: m.inference_batches,
            inline_batches: m.inline_batches,
            stream_errors: m.stream_errors,
            policy_version: m.policy_version,
            local_actor_failures,
            listen,
            training: None,
        }
    }

    /// Writes the summary as pretty JSON.
    pub fn write_json(&self, path: &Path) -> Result<(), LearnerError> {
        let err = |source| LearnerError::Summary {
            path: path.to_path_buf(),
            source,
        };
        let json = serde_json::to_string_pretty(self).map_err(|e| err(e.into()))?;
        std::fs::write(path, json + "\n").map_err(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_has_the_promised_keys() {
        let s = RunSummary::new(
            &MetricsSnapshot {
                env_steps: 100,
                ..Default::default()
            },
            Duration::from_secs(2),
            0,
            "127.0.0.1:1".into(),
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.json");
        s.write_json(&path).unwrap();
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        for key in [
            "env_steps",
            "episodes",
            "wall_seconds",
            "env_steps_per_second",
            "mean_inference_batch",
            "mean_return_last_100",
        ] {
            assert!(v.get(key).is_some(), "{key}");
        }
        assert_eq!(v["env_steps_per_second"], 50.0);
        assert!(v["step_latency_us"]["p50"].is_number());
        assert!(v["step_latency_us"]["p99"].is_number());
    }

    /// `solved` means still solved at the end; the fall-back after the
    /// first solve includes the final mean.
    #[test]
    fn solved_means_reached_and_still_at_the_target_at_the_end() {
        let t = crate::metrics::TrainingSnapshot::default();
        let at = |reached: Option<(u64, f64)>, last: f64, min: Option<f64>| {
            TrainingSummary::new(&t, 1.0, 475.0, reached, last, min)
        };
        let kept = at(Some((1000, 2.0)), 490.0, Some(460.0));
        assert!(kept.solved);
        assert_eq!(kept.env_steps_to_solve, Some(1000));
        assert_eq!(kept.min_mean_return_after_solve, Some(460.0));
        let lost = at(Some((1000, 2.0)), 300.0, Some(460.0));
        assert!(!lost.solved, "reached, then fell below the target");
        assert_eq!(lost.env_steps_to_solve, Some(1000));
        assert_eq!(lost.min_mean_return_after_solve, Some(300.0));
        let never = at(None, 480.0, None);
        assert!(!never.solved && never.min_mean_return_after_solve.is_none());
    }

    /// The replay's share of a step: sampling (prefetch threads, per timed
    /// batch) plus the priority write-back (inside the trainer's time) over
    /// sampling plus the trainer's time, all per step.
    #[test]
    fn replay_share_counts_sampling_and_the_write_back() {
        let t = crate::metrics::TrainingSnapshot {
            learner_steps: 90,
            skipped_steps: 10,
            trainer_busy_seconds: 0.1,
            priority_update_seconds: 0.01,
            timed_samples: 50,
            sample_seconds: 0.005,
            ..Default::default()
        };
        let s = TrainingSummary::new(&t, 1.0, 475.0, None, 0.0, None);
        assert!((s.train_step_us - 1000.0).abs() < 1e-9);
        assert!((s.priority_update_us - 100.0).abs() < 1e-9);
        assert_eq!(s.sample_us, Some(100.0));
        let share = s.replay_share_of_step.expect("sampling was timed");
        assert!((share - 200.0 / 1100.0).abs() < 1e-12, "{share}");
        let untimed = crate::metrics::TrainingSnapshot {
            timed_samples: 0,
            ..t
        };
        let s = TrainingSummary::new(&untimed, 1.0, 475.0, None, 0.0, None);
        assert!(s.sample_us.is_none() && s.replay_share_of_step.is_none());
    }
}
