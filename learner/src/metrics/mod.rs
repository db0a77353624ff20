//! Learner-wide counters: the one place every report reads from.
//!
//! Stream tasks and inference threads bump plain atomics; the `Status` RPC,
//! the progress line, `metrics.jsonl`, the summary JSON and the Prometheus
//! endpoint all read a [`MetricsSnapshot`]. Every counter is independent and
//! monotonic (gauges are single numbers), so writers use `Relaxed`: no reader
//! infers anything about other memory from them, and a snapshot taken
//! mid-update is off by at most the updates in flight.
//!
//! Figures that other parts already keep (live slots, the batcher's queue,
//! the training side) are not copied here: their owners attach a probe once
//! (a closure over their own state) that is read at snapshot time, so nothing
//! is counted twice.
//!
//! This module is a leaf: it imports no stage. Stages push into the counters
//! below or attach probes; every report reads a snapshot.
//!
//! Cost per step request: a handful of uncontended `fetch_add`s and one
//! histogram record; per inference batch, one more histogram record.
pub mod log_histogram;
pub mod snapshot;
pub mod training;

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use self::log_histogram::LogHistogram;

pub use snapshot::{IntervalStats, MetricsSnapshot};
pub use training::TrainingSnapshot;

/// A figure a stage keeps itself, read at snapshot time (must be cheap: a
/// few atomic loads).
pub type Gauge = Box<dyn Fn() -> usize + Send + Sync>;

/// Reads the training side's figures at snapshot time.
pub type TrainingGauge = Box<dyn Fn() -> TrainingSnapshot + Send + Sync>;

/// Episodes whose returns make up the reported mean.
pub const RETURN_WINDOW: usize = 100;

/// Episodes kept for readers that take them in batches (the learning
/// curve and TensorBoard, every 500 ms): about 4k short CartPole episodes
/// per half second at 150k env steps/s. 32 KiB.
pub const EPISODE_RING: usize = 4096;

/// One finished episode, as an actor reported it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Episode {
    pub episode_return: f32,
    /// Env steps.
    pub length: u32,
}

/// Counters of a running learner.
pub struct Metrics {
    started: Instant,
    /// Env steps answered (rows, minus the reset rows that follow a
    /// truncation: those carry no env transition). Written by inference.
    pub env_steps: AtomicU64,
    /// Step batches received and accepted. Written by stream tasks.
    pub step_batches: AtomicU64,
    /// Action batches sent. Written by inference.
    pub action_batches: AtomicU64,
    /// Inference batches run. Written by inference.
    pub inference_batches: AtomicU64,
    /// Of those, the batches a stream task ran itself
    /// (the inline path of inference). Written by inference.
    pub inline_batches: AtomicU64,
    /// Env rows in those batches (reset rows included). Written by inference.
    pub inference_rows: AtomicU64,
    /// Env rows per inference batch, one record per batch. Written by inference.
    pub inference_batch_rows: LogHistogram,
    /// Streams that completed the hello (gauge).
    pub connected_actors: AtomicU32,
    /// Streams ended with an error status.
    pub stream_errors: AtomicU64,
    /// Episodes reported by actors.
    pub episodes: AtomicU64,
    /// Policy version used by the latest inference batch.
    pub policy_version: AtomicU64,
    /// Training steps, skipped ones included (written by the trainer;
    /// restored from a checkpoint with `--resume`).
    pub learner_steps: AtomicU64,
    /// Server-side step latency in microseconds: StepBatch received ->
    /// ActionBatch queued, one record per step batch. Written by inference.
    pub step_latency: LogHistogram,
    /// Ring of the last [`EPISODE_RING`] episode returns (f32 bits); slot
    /// `i % EPISODE_RING` holds episode `i`. A reader may see a slot being
    /// overwritten by a newer episode, which only shifts the window by one.
    returns: Box<[AtomicU32]>,
    /// The same episodes' lengths (env steps). Written after the return; a
    /// reader racing a writer may pair a return with the slot's previous
    /// length (figures for plots, not for accounting).
    lengths: Box<[AtomicU32]>,
    /// Returns recorded so far; indexes the ring.
    returns_written: AtomicU64,
    /// Source of the live-slot gauge, attached by the state table's owner.
    live_slots: OnceLock<Gauge>,
    /// Source of the active-slot gauge, attached likewise.
    active_slots: OnceLock<Gauge>,
    /// Source of the queued-requests gauge, attached by the batcher's owner.
    batcher_queued: OnceLock<Gauge>,
    /// The training side, attached when training starts (absent with `--no-train`).
    training: OnceLock<TrainingGauge>,
    /// Evaluations (`--eval-every`) not yet reported: pushed by the
    /// evaluator thread, taken by the run monitor. A mutex: a few pushes a
    /// minute, never on a hot path.
    evaluations: Mutex<Vec<Evaluation>>,
}

/// One evaluation of the policy (`--eval-every`): greedy episodes on the
/// learner's own env, not trained on.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluation {
    /// The counters of the evaluated weights.
    pub learner_steps: u64,
    pub policy_version: u64,
    pub env_steps: u64,
    pub episodes: usize,
    pub mean_return: f64,
    pub min_return: f64,
    pub max_return: f64,
    /// Whether it is the best so far (and so now in `RUN_DIR/best/`).
    pub best: bool,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// All counters at zero; the clock of [`uptime`](Metrics::uptime) starts now.
    pub fn new() -> Self {
        Metrics {
            started: Instant::now(),
            env_steps: AtomicU64::new(0),
            step_batches: AtomicU64::new(0),
            action_batches: AtomicU64::new(0),
            inference_batches: AtomicU64::new(0),
            inline_batches: AtomicU64::new(0),
            inference_rows: AtomicU64::new(0),
            inference_batch_rows: LogHistogram::new(),
            connected_actors: AtomicU32::new(0),
            stream_errors: AtomicU64::new(0),
            episodes: AtomicU64::new(0),
            policy_version: AtomicU64::new(0),
            learner_steps: AtomicU64::new(0),
            step_latency: LogHistogram::new(),
            returns: (0..EPISODE_RING).map(|_| AtomicU32::new(0)).collect(),
            lengths: (0..EPISODE_RING).map(|_| AtomicU32::new(0)).collect(),
            returns_written: AtomicU64::new(0),
            live_slots: OnceLock::new(),
            active_slots: OnceLock::new(),
            batcher_queued: OnceLock::new(),
            training: OnceLock::new(),
            evaluations: Mutex::new(Vec::new()),
        }
    }

    /// Records an evaluation for the run monitor.
    pub fn push_evaluation(&self, e: Evaluation) {
        if let Ok(mut v) = self.evaluations.lock() {
            v.push(e);
        }
    }

    /// The evaluations recorded since the last call.
    pub fn take_evaluations(&self) -> Vec<Evaluation> {
        self.evaluations
            .lock()
            .map(|mut v| std::mem::take(&mut *v))
            .unwrap_or_default()
    }

    /// Time since these metrics were created (the server's start).
    pub fn uptime(&self) -> Duration {
        self.started.elapsed()
    }

    /// Records one finished episode.
    pub fn record_episode(&self, episode_return: f32, length: u32) {
        self.episodes.fetch_add(1, Ordering::Relaxed);
        // Relaxed: independent figures (field docs).
        let i = self.returns_written.fetch_add(1, Ordering::Relaxed);
        let slot = (i % EPISODE_RING as u64) as usize;
        self.returns[slot].store(episode_return.to_bits(), Ordering::Relaxed);
        self.lengths[slot].store(length, Ordering::Relaxed);
    }

    /// Appends to `out` the episodes recorded after the first `seen` ones
    /// (at most the last [`EPISODE_RING`]: older ones are overwritten) and
    /// returns the count to pass next time. For plots: an episode being
    /// recorded at this moment may read as its slot's previous one.
    pub fn episodes_since(&self, seen: u64, out: &mut Vec<Episode>) -> u64 {
        let written = self.returns_written.load(Ordering::Relaxed);
        let from = seen.max(written.saturating_sub(EPISODE_RING as u64));
        out.extend((from..written).map(|i| {
            let slot = (i % EPISODE_RING as u64) as usize;
            Episode {
                episode_return: f32::from_bits(self.returns[slot].load(Ordering::Relaxed)),
                length: self.lengths[slot].load(Ordering::Relaxed),
            }
        }));
        written
    }

    /// Mean of the last [`RETURN_WINDOW`] returns; 0 before any episode.
    pub fn mean_return(&self) -> f64 {
        let written = self.returns_written.load(Ordering::Relaxed);
        let n = written.min(RETURN_WINDOW as u64);
        if n == 0 {
            return 0.0;
        }
        let sum: f64 = (written - n..written)
            .map(|i| {
                let slot = (i % EPISODE_RING as u64) as usize;
                f32::from_bits(self.returns[slot].load(Ordering::Relaxed)) as f64
            })
            .sum();
        sum / n as f64
    }

    /// Makes snapshots report the env slots leased to streams (first call wins).
    pub fn attach_live_slots(&self, gauge: Gauge) {
        let _ = self.live_slots.set(gauge);
    }

    /// Attaches the source of the active-slot gauge (once).
    pub fn attach_active_slots(&self, gauge: Gauge) {
        let _ = self.active_slots.set(gauge);
    }

    /// Makes snapshots report the step requests queued for inference (first call wins).
    pub fn attach_batcher_queued(&self, gauge: Gauge) {
        let _ = self.batcher_queued.set(gauge);
    }

    /// Makes snapshots report the training side (first call wins).
    pub fn attach_training(&self, probe: TrainingGauge) {
        let _ = self.training.set(probe);
    }

    /// Every figure at once.
    pub fn snapshot(&self) -> MetricsSnapshot {
        let batches = self.inference_batches.load(Ordering::Relaxed);
        let rows = self.inference_rows.load(Ordering::Relaxed);
        MetricsSnapshot {
            uptime: self.uptime(),
            env_steps: self.env_steps.load(Ordering::Relaxed),
            step_batches: self.step_batches.load(Ordering::Relaxed),
            action_batches: self.action_batches.load(Ordering::Relaxed),
            inference_batches: batches,
            inline_batches: self.inline_batches.load(Ordering::Relaxed),
            inference_rows: rows,
            inference_batch_rows: self.inference_batch_rows.snapshot(),
            connected_actors: self.connected_actors.load(Ordering::Relaxed),
            live_slots: self.live_slots.get().map_or(0, |g| g()),
            active_slots: self.active_slots.get().map_or(0, |g| g()),
            batcher_queued: self.batcher_queued.get().map_or(0, |g| g()),
            stream_errors: self.stream_errors.load(Ordering::Relaxed),
            episodes: self.episodes.load(Ordering::Relaxed),
            mean_return_last_100: self.mean_return(),
            policy_version: self.policy_version.load(Ordering::Relaxed),
            learner_steps: self.learner_steps.load(Ordering::Relaxed),
            step_latency: self.step_latency.snapshot(),
            training: self.training.get().map(|probe| probe()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_return_covers_only_the_last_hundred() {
        let m = Metrics::new();
        assert_eq!(m.mean_return(), 0.0);
        for _ in 0..50 {
            m.record_episode(1000.0, 5);
        }
        for _ in 0..100 {
            m.record_episode(10.0, 7);
        }
        assert_eq!(m.mean_return(), 10.0);
        assert_eq!(m.snapshot().episodes, 150);
        let mut out = Vec::new();
        assert_eq!(m.episodes_since(0, &mut out), 150);
        assert_eq!(out.len(), 150);
        assert_eq!(
            out[0],
            Episode {
                episode_return: 1000.0,
                length: 5
            }
        );
        assert_eq!(
            out[149],
            Episode {
                episode_return: 10.0,
                length: 7
            }
        );
        m.record_episode(7.0, 3);
        out.clear();
        assert_eq!(m.episodes_since(150, &mut out), 151);
        assert_eq!(
            out,
            vec![Episode {
                episode_return: 7.0,
                length: 3
            }]
        );
    }

    #[test]
    fn the_ring_keeps_the_last_episodes_and_the_mean_its_last_hundred() {
        let m = Metrics::new();
        for i in 0..EPISODE_RING as u32 + 10 {
            m.record_episode(i as f32, i);
        }
        let mut out = Vec::new();
        let written = m.episodes_since(0, &mut out);
        assert_eq!(written, EPISODE_RING as u64 + 10);
        assert_eq!(out.len(), EPISODE_RING, "older episodes are overwritten");
        assert_eq!(out[0].length, 10);
        // The last hundred: 4006..=4105, mean 4055.5.
        assert_eq!(m.mean_return(), 4055.5);
    }

    #[test]
    fn mean_batch_size_and_interval_rates() {
        let m = Metrics::new();
        let a = m.snapshot();
        m.inference_batches.fetch_add(4, Ordering::Relaxed);
        m.inference_rows.fetch_add(100, Ordering::Relaxed);
        m.env_steps.fetch_add(100, Ordering::Relaxed);
        m.step_latency.record(40);
        let b = m.snapshot();
        assert_eq!(b.mean_batch_size(), 25.0);
        let i = b.since(&a);
        assert_eq!(i.mean_batch_size, 25.0);
        assert!(i.step_latency_p50_us >= 39.0 && i.step_latency_p50_us <= 42.0);
    }
}
