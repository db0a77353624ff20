//! The writer thread: takes batches of points off the queue, writes each
//! as an event and flushes once per batch, until the handle closes the
//! queue. The first failed write or flush is logged with the file and the
//! error; from then on points are only counted as dropped (the run goes
//! on; see the module docs of [`super`]).
use std::sync::atomic::Ordering;
use std::time::Instant;

use crossbeam::channel::Receiver;
use tracing::error;

use super::event_file::EventFile;
use super::{Point, WriterCounts};

pub(super) fn run(mut file: EventFile, rx: Receiver<Vec<Point>>, counts: &WriterCounts) {
    let mut failed = false;
    for batch in rx {
        let n = batch.len() as u64;
        if failed {
            // Relaxed: counters (`WriterCounts`).
            counts.dropped.fetch_add(n, Ordering::Relaxed);
            continue;
        }
        let started = Instant::now();
        let result = batch
            .iter()
            .filter_map(Point::to_event)
            .try_for_each(|e| file.write(&e))
            .and_then(|()| file.flush());
        counts
            .busy_us
            .fetch_add(started.elapsed().as_micros() as u64, Ordering::Relaxed);
        match result {
            Ok(()) => {
                counts.written.fetch_add(n, Ordering::Relaxed);
            }
            Err(e) => {
                failed = true;
                counts.dropped.fetch_add(n, Ordering::Relaxed);
                error!(
                    path = %file.path().display(),
                    error = %e,
                    "writing TensorBoard events failed; no more are written this run, \
                     training goes on"
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tensorboard::PointKind;

    fn batch(n: usize) -> Vec<Point> {
        (0..n as u64)
            .map(|step| Point {
                step,
                wall_time: 0.0,
                kind: PointKind::Scalar {
                    tag: "env/steps".into(),
                    value: step as f64,
                },
            })
            .collect()
    }

    #[test]
    fn a_full_disk_stops_the_writing_not_the_writer() {
        // /dev/full: every write fails with ENOSPC.
        let file = EventFile::open_existing(std::path::Path::new("/dev/full")).unwrap();
        let (tx, rx) = crossbeam::channel::unbounded();
        tx.send(batch(3)).unwrap();
        tx.send(batch(4)).unwrap();
        drop(tx);
        let counts = WriterCounts::default();
        // Returns (the queue closed) after counting both batches as dropped.
        run(file, rx, &counts);
        assert_eq!(counts.written.load(Ordering::Relaxed), 0);
        assert_eq!(counts.dropped.load(Ordering::Relaxed), 7);
    }
}
