//! TensorBoard event files from the learner: `RUN_DIR/tensorboard/` (or
//! `--tensorboard DIR`), what CleanRL, SB3, Sample Factory and RLlib write,
//! so runs can be overlaid in TensorBoard or imported with `wandb sync`.
//!
//! What is written (by the run monitor, [`crate::app::run_monitor`]):
//! every figure of the progress record (`metrics.jsonl`'s keys, `area/name`)
//! as scalars at each progress interval, each episode's return and length,
//! histograms of the interval's returns and policy lags, the resolved
//! config as text at the start and the summary at the end. The step axis is
//! env steps.
//!
//! Why a queue and a thread: the monitor runs on the server's runtime, and
//! a file write can stall for as long as the disk likes (a full disk, a
//! network file system). [`TensorBoard::send`] only tries to put a batch
//! of points on a bounded queue ([`QUEUE_BATCHES`]); when it is full the
//! batch is dropped and counted, never waited for. One writer thread
//! encodes and writes ([`writer`]). A write that fails (a full disk, a
//! vanished directory) is logged once, with the path and the error; the
//! writer then drops what follows, counted, and training goes on.
//!
//! A resumed run writes a new file into the same directory, starting with
//! a restart marker at its first step, so TensorBoard joins its curve to
//! the earlier run's (dropping what that run logged past the checkpoint).
//!
//! Cost: per progress interval, one batch of about forty points; per
//! episode, two scalars (batched with the curve's sampling every 500 ms).
//! Measured in `docs/metrics.md` (TensorBoard).
//!
//! Why not a TensorBoard crate: `tensorboard-rs` (last release 2022) pulls
//! protobuf 2 and an image crate, `tfrecord` 0.15 an HTTP client and prost
//! 0.12, `syntaxdot-summary` writes scalars only. The messages are prost
//! derives of TensorFlow's protos ([`event`]); the framing's checksum is
//! the `crc32c` crate's ([`event_file`]).
pub mod event;
pub mod event_file;
pub mod point;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam::channel::{self, Sender, TrySendError};
use tracing::{info, warn};

use crate::error::LearnerError;
use crate::log_throttle::{LogThrottle, WARN_INTERVAL};
pub use point::{Point, PointKind};

/// Batches of points the queue holds before [`TensorBoard::send`] drops.
/// A batch is a progress interval's or a curve sample's: 64 is minutes of
/// a stalled disk at the default intervals.
pub const QUEUE_BATCHES: usize = 64;

/// Points dropped and written, shared by the handle and the writer.
#[derive(Debug, Default)]
pub struct WriterCounts {
    /// Points dropped: the queue full, or the writer stopped by an error.
    /// Relaxed: counters read for the final log line.
    pub dropped: AtomicU64,
    /// Points written.
    pub written: AtomicU64,
    /// Microseconds the writer spent encoding and writing.
    pub busy_us: AtomicU64,
}

/// The handle the run monitor sends points through (module docs).
pub struct TensorBoard {
    dir: PathBuf,
    tx: Option<Sender<Vec<Point>>>,
    thread: Option<JoinHandle<()>>,
    counts: Arc<WriterCounts>,
    full_log: LogThrottle,
}

impl TensorBoard {
    /// Creates an event file in `dir` (creating `dir`) and starts the
    /// writer thread. Fails (for the caller to log: the run goes on
    /// without) when the directory or file cannot be made.
    pub fn start(dir: &Path) -> Result<TensorBoard, LearnerError> {
        let file = event_file::EventFile::create(dir).map_err(|source| LearnerError::Io {
            what: format!("creating a TensorBoard event file in {}", dir.display()),
            source,
        })?;
        info!(path = %file.path().display(), "TensorBoard events");
        let (tx, rx) = channel::bounded(QUEUE_BATCHES);
        let counts = Arc::new(WriterCounts::default());
        let thread = {
            let counts = Arc::clone(&counts);
            std::thread::Builder::new()
                .name("tensorboard".into())
                .spawn(move || writer::run(file, rx, &counts))
                .map_err(|source| LearnerError::Io {
                    what: "spawning the TensorBoard writer thread".into(),
                    source,
                })?
        };
        Ok(TensorBoard {
            dir: dir.to_owned(),
            tx: Some(tx),
            thread: Some(thread),
            counts,
            full_log: LogThrottle::new(WARN_INTERVAL),
        })
    }

    /// A handle whose queue nobody drains (tests of the drop rule).
    #[cfg(test)]
    fn unattended(dir: &Path) -> (TensorBoard, channel::Receiver<Vec<Point>>) {
        let (tx, rx) = channel::bounded(QUEUE_BATCHES);
        let tb = TensorBoard {
            dir: dir.to_owned(),
            tx: Some(tx),
            thread: None,
            counts: Arc::default(),
            full_log: LogThrottle::new(WARN_INTERVAL),
        };
        (tb, rx)
    }

    /// Queues `points` for the writer without waiting: when the queue is
    /// full they are dropped and counted (and said, at most once per
    /// [`WARN_INTERVAL`]).
    pub fn send(&self, points: Vec<Point>) {
        if points.is_empty() {
            return;
        }
        let Some(tx) = &self.tx else { return };
        let n = points.len() as u64;
        match tx.try_send(points) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                // Relaxed: a counter (struct docs).
                self.counts.dropped.fetch_add(n, Ordering::Relaxed);
                if let Some(times) = self.full_log.hit() {
                    warn!(
                        dir = %self.dir.display(),
                        times,
                        "TensorBoard writer behind (queue full): points dropped, training goes on"
                    );
                }
            }
        }
    }

    /// The counters so far.
    pub fn counts(&self) -> &WriterCounts {
        &self.counts
    }

    /// Stops the writer after it has written what is queued, and says
    /// what it wrote and dropped.
    pub fn finish(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        drop(self.tx.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
            let r = Ordering::Relaxed;
            info!(
                dir = %self.dir.display(),
                points = self.counts.written.load(r),
                dropped = self.counts.dropped.load(r),
                writer_ms = self.counts.busy_us.load(r) / 1000,
                "TensorBoard events written"
            );
        }
    }
}

impl Drop for TensorBoard {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scalar(step: u64, value: f64) -> Point {
        Point {
            step,
            wall_time: 0.0,
            kind: PointKind::Scalar {
                tag: "env/steps".into(),
                value,
            },
        }
    }

    #[test]
    fn a_full_queue_drops_and_counts_instead_of_waiting() {
        let dir = tempfile::tempdir().unwrap();
        let (tb, rx) = TensorBoard::unattended(dir.path());
        for i in 0..QUEUE_BATCHES as u64 {
            tb.send(vec![scalar(i, 1.0), scalar(i, 2.0)]);
        }
        assert_eq!(tb.counts().dropped.load(Ordering::Relaxed), 0);
        // Nobody drains: the next batch returns at once, dropped.
        tb.send(vec![scalar(99, 1.0), scalar(99, 2.0), scalar(99, 3.0)]);
        assert_eq!(tb.counts().dropped.load(Ordering::Relaxed), 3);
        assert_eq!(rx.len(), QUEUE_BATCHES);
    }

    #[test]
    fn points_sent_are_in_the_file_when_finished() {
        let dir = tempfile::tempdir().unwrap();
        let tb = TensorBoard::start(dir.path()).unwrap();
        tb.send(vec![scalar(10, 1.5), scalar(20, 2.5)]);
        tb.finish();
        let files: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(files.len(), 1);
        let events = event_file::read_events(&files[0]);
        let steps: Vec<i64> = events.iter().skip(1).map(|e| e.step).collect();
        assert_eq!(steps, [10, 20]);
    }

    #[test]
    fn a_directory_that_cannot_be_made_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a-file");
        std::fs::write(&file, b"x").unwrap();
        let err = TensorBoard::start(&file.join("tb")).err().expect("refused");
        assert!(err.to_string().contains("a-file"), "{err}");
    }
}
