//! The Prometheus view of [`Metrics`]: a `prometheus-client` collector that
//! takes one [`Metrics::snapshot`] per scrape and writes every figure as a
//! `seed_*` metric, in the OpenMetrics text format (what `prometheus-client`
//! writes; Prometheus scrapes it natively).
//!
//! Nothing is recorded twice: the hot path only touches `Metrics`, and a
//! scrape costs one snapshot and a few kilobytes of text, paid by the
//! scraper. Histograms are re-bucketed at scrape time from the
//! [`LogHistogram`](crate::metrics::log_histogram::LogHistogram) counts onto fixed
//! power-of-two bounds, which are exact bucket edges there, so the cumulative
//! counts are exact and the series are the same on every scrape.
//!
//! Training figures (replay, prefetch, losses) appear only while the
//! learner trains (not with `--no-train`).
use std::fmt;
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeGaugeValue, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};

use crate::metrics::log_histogram::HistogramSnapshot;
use crate::metrics::{Metrics, MetricsSnapshot};

/// The `Content-Type` of [`MetricsExposition::render`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Prefix of every metric name.
pub const PREFIX: &str = "seed";

/// `le` bounds of the step latency histogram: 2^0 .. 2^25 microseconds
/// (1 us to ~34 s), then `+Inf`.
const LATENCY_LOG2_US: std::ops::RangeInclusive<u32> = 0..=25;
/// `le` bounds of the batch size histogram: 2^0 .. 2^16 rows, then `+Inf`.
const BATCH_ROWS_LOG2: std::ops::RangeInclusive<u32> = 0..=16;

/// A registry holding the snapshot collector; renders the exposition text.
#[derive(Debug)]
pub struct MetricsExposition {
    registry: Registry,
}

impl MetricsExposition {
    /// An exposition of `metrics`, read afresh on every [`render`](Self::render).
    pub fn new(metrics: Arc<Metrics>) -> Self {
        let mut registry = Registry::with_prefix(PREFIX);
        registry.register_collector(Box::new(SnapshotCollector { metrics }));
        MetricsExposition { registry }
    }

    /// The OpenMetrics text of a snapshot taken now ([`CONTENT_TYPE`]).
    pub fn render(&self) -> Result<String, fmt::Error> {
        let mut text = String::with_capacity(8 * 1024);
        prometheus_client::encoding::text::encode(&mut text, &self.registry)?;
        Ok(text)
    }
}

/// Takes one snapshot per scrape and encodes it.
struct SnapshotCollector {
    metrics: Arc<Metrics>,
}

// `Collector` requires `Debug`; the counters themselves are not worth printing.
impl fmt::Debug for SnapshotCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SnapshotCollector").finish_non_exhaustive()
    }
}

impl Collector for SnapshotCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        encode_snapshot(&self.metrics.snapshot(), &mut encoder)
    }
}

/// Writes every figure of `m`.
fn encode_snapshot(m: &MetricsSnapshot, e: &mut DescriptorEncoder) -> fmt::Result {
    counter(
        e,
        "env_steps",
        "Env steps answered (inference rows minus the reset rows after a truncation).",
        m.env_steps,
    )?;
    counter(
        e,
        "step_batches",
        "Step batches received from actors and accepted.",
        m.step_batches,
    )?;
    counter(
        e,
        "action_batches",
        "Action batches sent to actors.",
        m.action_batches,
    )?;
    counter(
        e,
        "inference_batches",
        "Inference batches run.",
        m.inference_batches,
    )?;
    counter(
        e,
        "inference_inline_batches",
        "Inference batches a stream task ran itself (one actor held every env slot).",
        m.inline_batches,
    )?;
    counter(
        e,
        "inference_rows",
        "Env rows in all inference batches.",
        m.inference_rows,
    )?;
    counter(
        e,
        "stream_errors",
        "Actor streams ended with an error status.",
        m.stream_errors,
    )?;
    counter(
        e,
        "episodes",
        "Episodes finished, as reported by actors.",
        m.episodes,
    )?;
    counter(
        e,
        "learner_steps",
        "Training steps run, skipped ones included.",
        m.learner_steps,
    )?;
    gauge(
        e,
        "uptime",
        "Time since the learner's server started.",
        Some(&Unit::Seconds),
        m.uptime.as_secs_f64(),
    )?;
    gauge(
        e,
        "connected_actors",
        "Actor streams that completed the hello.",
        None,
        m.connected_actors,
    )?;
    gauge(
        e,
        "live_env_slots",
        "Env slots leased to actor streams.",
        None,
        m.live_slots as u64,
    )?;
    gauge(
        e,
        "active_env_slots",
        "Live env slots whose actor sent a step batch within --actor-idle-ms (batches wait only for these).",
        None,
        m.active_slots as u64,
    )?;
    gauge(
        e,
        "batcher_queued_requests",
        "Step batches waiting in the dynamic batcher.",
        None,
        m.batcher_queued as u64,
    )?;
    gauge(
        e,
        "mean_return_last_100",
        "Mean return of the last 100 episodes.",
        None,
        m.mean_return_last_100,
    )?;
    gauge(
        e,
        "policy_version",
        "Policy version used by the latest inference batch.",
        None,
        m.policy_version,
    )?;
    histogram(
        e,
        "step_latency",
        "Server-side step latency: step batch received to action batch queued.",
        Some(&Unit::Seconds),
        &m.step_latency,
        LATENCY_LOG2_US,
        1e-6,
    )?;
    histogram(
        e,
        "inference_batch_rows",
        "Env rows per inference batch.",
        None,
        &m.inference_batch_rows,
        BATCH_ROWS_LOG2,
        1.0,
    )?;
    let Some(t) = &m.training else {
        return Ok(());
    };
    gauge(
        e,
        "replay_stored_unrolls",
        "Unrolls in the replay buffer.",
        None,
        t.replay_stored as u64,
    )?;
    gauge(
        e,
        "prefetch_ready_batches",
        "Collated batches ready for the trainer.",
        None,
        t.prefetch_queue as u64,
    )?;
    counter(
        e,
        "replay_inserts",
        "Unrolls inserted into the replay buffer.",
        t.unrolls_inserted,
    )?;
    counter(
        e,
        "replay_dropped_full",
        "Unrolls dropped because the replay buffer stayed full.",
        t.unrolls_dropped_full,
    )?;
    counter(
        e,
        "replay_priority_updates",
        "Sequence priorities written back by the trainer (R2D2).",
        t.priority_updates,
    )?;
    counter(
        e,
        "replay_stale_priority_updates",
        "Priority write-backs ignored because the sequence had been overwritten.",
        t.stale_priority_updates,
    )?;
    counter(
        e,
        "train_skipped_steps",
        "Training steps skipped because their gradients were not finite.",
        t.skipped_steps,
    )?;
    counter(
        e,
        "train_unrolls",
        "Unrolls trained on (each reuse counted).",
        t.unrolls_trained,
    )?;
    gauge(
        e,
        "train_total_loss",
        "Total loss of the latest training step.",
        None,
        t.total_loss,
    )?;
    gauge(
        e,
        "train_pg_loss",
        "Policy-gradient loss of the latest training step.",
        None,
        t.pg_loss,
    )?;
    gauge(
        e,
        "train_value_loss",
        "Value loss of the latest training step.",
        None,
        t.value_loss,
    )?;
    gauge(
        e,
        "train_entropy",
        "Policy entropy of the latest training step.",
        None,
        t.entropy,
    )?;
    gauge(
        e,
        "train_grad_norm",
        "Gradient norm (before clipping) of the latest training step.",
        None,
        t.grad_norm,
    )?;
    gauge(
        e,
        "train_learning_rate",
        "Learning rate of the latest training step.",
        None,
        t.learning_rate,
    )
}

fn counter(e: &mut DescriptorEncoder, name: &str, help: &str, value: u64) -> fmt::Result {
    let metric = ConstCounter::new(value);
    metric.encode(e.encode_descriptor(name, help, None, metric.metric_type())?)
}

fn gauge<N: EncodeGaugeValue>(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    value: N,
) -> fmt::Result {
    let metric = ConstGauge::new(value);
    metric.encode(e.encode_descriptor(name, help, unit, metric.metric_type())?)
}

/// A histogram of `h` with `le` bounds `2^k` (in recorded units) for `k` in
/// `log2_bounds`, then `+Inf`; bounds and sum are multiplied by `scale`.
fn histogram(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    h: &HistogramSnapshot,
    log2_bounds: std::ops::RangeInclusive<u32>,
    scale: f64,
) -> fmt::Result {
    let count = h.count();
    let mut buckets = Vec::with_capacity(log2_bounds.clone().count() + 1);
    let mut below = 0;
    for k in log2_bounds {
        let le = 1u64 << k;
        let at_most = h.at_most(le);
        // `encode_histogram` wants per-bucket counts and accumulates them.
        buckets.push((le as f64 * scale, at_most.saturating_sub(below)));
        below = at_most;
    }
    buckets.push((f64::INFINITY, count.saturating_sub(below)));
    let mut metric = e.encode_descriptor(name, help, unit, MetricType::Histogram)?;
    metric.encode_histogram::<NoLabelSet>(h.sum() as f64 * scale, count, &buckets, None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    fn render(m: Metrics) -> String {
        MetricsExposition::new(Arc::new(m))
            .render()
            .expect("rendering into a String cannot fail")
    }

    /// The value of the sample named `sample` (labels included) in `text`.
    fn value(text: &str, sample: &str) -> String {
        text.lines()
            .find_map(|l| l.strip_prefix(sample)?.strip_prefix(' '))
            .unwrap_or_else(|| panic!("no sample {sample} in\n{text}"))
            .to_string()
    }

    #[test]
    fn renders_every_figure_of_a_synthetic_snapshot() {
        let m = Metrics::new();
        m.env_steps.store(1234, Ordering::Relaxed);
        m.step_batches.store(7, Ordering::Relaxed);
        m.action_batches.store(6, Ordering::Relaxed);
        m.inference_batches.store(3, Ordering::Relaxed);
        m.inline_batches.store(2, Ordering::Relaxed);
        m.inference_rows.store(1240, Ordering::Relaxed);
        m.stream_errors.store(2, Ordering::Relaxed);
        m.connected_actors.store(4, Ordering::Relaxed);
        m.policy_version.store(9, Ordering::Relaxed);
        m.learner_steps.store(11, Ordering::Relaxed);
        m.record_episode(10.0, 10);
        m.record_episode(20.0, 20);
        for us in [3, 900, 1000, 5_000_000] {
            m.step_latency.record(us);
        }
        for rows in [1, 200, 256] {
            m.inference_batch_rows.record(rows);
        }
        let text = render(m);

        assert!(text.contains("# HELP seed_env_steps Env steps answered"));
        assert!(text.contains("# TYPE seed_env_steps counter\n"));
        assert_eq!(value(&text, "seed_env_steps_total"), "1234");
        assert_eq!(value(&text, "seed_step_batches_total"), "7");
        assert_eq!(value(&text, "seed_action_batches_total"), "6");
        assert_eq!(value(&text, "seed_inference_batches_total"), "3");
        assert_eq!(value(&text, "seed_inference_inline_batches_total"), "2");
        assert_eq!(value(&text, "seed_inference_rows_total"), "1240");
        assert_eq!(value(&text, "seed_stream_errors_total"), "2");
        assert_eq!(value(&text, "seed_episodes_total"), "2");
        assert_eq!(value(&text, "seed_learner_steps_total"), "11");
        assert_eq!(value(&text, "seed_connected_actors"), "4");
        assert_eq!(value(&text, "seed_live_env_slots"), "0");
        assert_eq!(value(&text, "seed_batcher_queued_requests"), "0");
        assert_eq!(value(&text, "seed_policy_version"), "9");
        assert_eq!(value(&text, "seed_mean_return_last_100"), "15.0");
        assert!(text.contains("# TYPE seed_uptime_seconds gauge\n"));

        // Latency: cumulative buckets in seconds, exact at powers of two.
        assert!(text.contains("# TYPE seed_step_latency_seconds histogram\n"));
        assert_eq!(value(&text, "seed_step_latency_seconds_count"), "4");
        let sum: f64 = value(&text, "seed_step_latency_seconds_sum")
            .parse()
            .expect("sum is a float");
        assert!((sum - 5.001903).abs() < 1e-9, "{sum}");
        for (le, count) in [
            ("0.000004", "1"),
            ("0.000512", "1"),
            ("0.001024", "3"),
            ("4.194304", "3"),
            ("8.388608", "4"),
            ("+Inf", "4"),
        ] {
            let bucket = format!("seed_step_latency_seconds_bucket{{le=\"{le}\"}}");
            assert_eq!(value(&text, &bucket), count, "{bucket}");
        }

        // Batch rows: le is inclusive, so a full 256-row batch is in le=256.
        assert_eq!(value(&text, "seed_inference_batch_rows_count"), "3");
        assert_eq!(value(&text, "seed_inference_batch_rows_sum"), "457.0");
        for (le, count) in [("1.0", "1"), ("128.0", "1"), ("256.0", "3")] {
            let bucket = format!("seed_inference_batch_rows_bucket{{le=\"{le}\"}}");
            assert_eq!(value(&text, &bucket), count, "{bucket}");
        }

        // No training attached: no training series.
        assert!(!text.contains("seed_train_"), "{text}");
        assert!(text.ends_with("# EOF\n"));
    }

    #[test]
    fn an_empty_histogram_still_has_all_its_buckets() {
        let text = render(Metrics::new());
        let buckets = text
            .lines()
            .filter(|l| l.starts_with("seed_step_latency_seconds_bucket"))
            .count();
        assert_eq!(buckets, LATENCY_LOG2_US.count() + 1);
        assert_eq!(
            value(&text, "seed_step_latency_seconds_bucket{le=\"+Inf\"}"),
            "0"
        );
    }
}
