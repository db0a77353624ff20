//! The progress line (a log line every `--progress-secs`) and its record in
//! `metrics.jsonl`: the figures of the last interval, from two snapshots.
use tracing::info;

use crate::metrics::{MetricsSnapshot, TrainingSnapshot};

/// One `metrics.jsonl` object: the interval since `last`, keys `area/name`.
pub fn interval_record(
    now: &MetricsSnapshot,
    last: &MetricsSnapshot,
    t: &TrainingSnapshot,
    seconds: f64,
) -> serde_json::Value {
    let i = now.since(last);
    let per_second = |now: u64, earlier: u64| {
        if i.seconds > 0.0 {
            now.saturating_sub(earlier) as f64 / i.seconds
        } else {
            0.0
        }
    };
    let before = last.training.clone().unwrap_or_default();
    serde_json::json!({
        "time/seconds": seconds,
        "env/steps": now.env_steps,
        "env/steps_per_second": i.env_steps_per_second,
        "env/episodes": now.episodes,
        "env/mean_return_last_100": now.mean_return_last_100,
        "inference/mean_batch": i.mean_batch_size,
        "inference/step_latency_p50_us": i.step_latency_p50_us,
        "inference/step_latency_p99_us": i.step_latency_p99_us,
        "train/learner_steps": t.learner_steps,
        "train/learner_steps_per_second": if i.seconds > 0.0 {
            now.learner_steps.saturating_sub(last.learner_steps) as f64 / i.seconds
        } else { 0.0 },
        "train/total_loss": t.total_loss,
        "train/pg_loss": t.pg_loss,
        "train/value_loss": t.value_loss,
        "train/entropy": t.entropy,
        "train/grad_norm": t.grad_norm,
        "train/learning_rate": t.learning_rate,
        "train/mean_policy_lag": t.mean_policy_lag,
        "train/max_policy_lag": t.max_policy_lag,
        "train/wait_fraction": t.wait_fraction(),
        "replay/stored": t.replay_stored,
        "replay/inserts": t.unrolls_inserted,
        "replay/inserts_per_second": per_second(t.unrolls_inserted, before.unrolls_inserted),
        "replay/samples_per_second": per_second(t.unrolls_trained, before.unrolls_trained),
        "replay/dropped_full": t.unrolls_dropped_full,
        "replay/insert_wait_seconds": t.insert_wait_seconds,
        "replay/priority_updates": t.priority_updates,
        "replay/stale_priority_updates": t.stale_priority_updates,
        "prefetch/queue_depth": t.prefetch_queue,
    })
}

/// The progress line: a log line with the figures of the last interval.
pub fn log_progress(now: &MetricsSnapshot, last: &MetricsSnapshot, t: Option<&TrainingSnapshot>) {
    let i = now.since(last);
    if let Some(t) = t {
        let steps_per_s = if i.seconds > 0.0 {
            now.learner_steps.saturating_sub(last.learner_steps) as f64 / i.seconds
        } else {
            0.0
        };
        info!(
            "{} env steps | {:.0} env steps/s | {} episodes | mean return {:.1} | learner {} steps ({:.1}/s, waits {:.0}%) | loss pg {:.3} v {:.3} entropy {:.3} | grad norm {:.2} | lag mean {:.2} max {} | replay {} prefetch {} | batch {:.1}",
            now.env_steps,
            i.env_steps_per_second,
            now.episodes,
            now.mean_return_last_100,
            now.learner_steps,
            steps_per_s,
            100.0 * t.wait_fraction(),
            t.pg_loss,
            t.value_loss,
            t.entropy,
            t.grad_norm,
            t.mean_policy_lag,
            t.max_policy_lag,
            t.replay_stored,
            t.prefetch_queue,
            i.mean_batch_size,
        );
        return;
    }
    info!(
        "{:.0} env steps/s | {} episodes | mean return {:.1} | batch {:.1} | step latency p50 {:.0} us p99 {:.0} us | actors {} | slots {}",
        i.env_steps_per_second,
        now.episodes,
        now.mean_return_last_100,
        i.mean_batch_size,
        i.step_latency_p50_us,
        i.step_latency_p99_us,
        now.connected_actors,
        now.live_slots,
    );
}
