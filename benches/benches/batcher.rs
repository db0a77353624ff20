//! The dynamic batcher's costs, a group per scenario:
//! - `batcher/enqueue`: one `push` of a one-row request (lock-free queue
//!   push, the store-buffering fence, the parked-consumer check), no
//!   consumer waiting;
//! - `batcher/flush/N`: the consumer's `next_batch` taking a batch of N
//!   pre-pushed one-row requests (N = 1, 64, 256, 1024; `max_rows` = N, so
//!   the size rule flushes and no timeout is involved);
//! - `batcher/round_trip`: 1024 one-row requests pushed by a producer thread
//!   while this thread takes batches of up to 64 rows, timed from the
//!   producer's start to the last request taken (thread hand-offs, parking
//!   and unparking included).
//!
//! Requests are a tiny `Batchable` (rows and a timestamp), so the figures
//! are the batcher's own, without protobuf or channel costs.
//!
//! Run: `cargo bench -p seed-benches --bench batcher`.
use std::hint::black_box;
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use seed_learner::infer::batcher::{
    BatchConsumer, Batchable, BatcherConfig, DynamicBatcher, NextBatch,
};

/// The smallest request: what the batcher reads of a step request.
struct Req {
    rows: usize,
    at: Instant,
}

impl Batchable for Req {
    fn rows(&self) -> usize {
        self.rows
    }
    fn enqueued_at(&self) -> Instant {
        self.at
    }
}

/// A one-row request stamped `at` (reused: stamping is the stream task's cost).
fn req(at: Instant) -> Req {
    Req { rows: 1, at }
}

/// One consumer; flushes only by size within the bench's lifetime.
fn batcher(max_rows: usize) -> DynamicBatcher<Req> {
    DynamicBatcher::new(
        BatcherConfig {
            max_rows,
            flush_after: Duration::from_secs(3600),
        },
        1,
    )
}

/// Takes everything queued (untimed clean-up between pushes).
fn drain(consumer: &mut BatchConsumer<'_, Req>, out: &mut Vec<Req>, queued: usize) {
    let mut left = queued;
    while left > 0 {
        match consumer.next_batch(out, left) {
            NextBatch::Batch => left -= out.len(),
            NextBatch::Woken => {}
            NextBatch::Closed => return,
        }
    }
}

fn enqueue(c: &mut Criterion) {
    const CHUNK: u64 = 4096;
    let mut g = c.benchmark_group("batcher");
    g.throughput(Throughput::Elements(1));
    g.bench_function("enqueue", |b| {
        b.iter_custom(|iters| {
            // A fresh batcher per sample (a consumer registers once per
            // batcher); pushes are timed in chunks, drained in between so the
            // queue stays small as it does when inference keeps up.
            let batcher = batcher(CHUNK as usize);
            let mut consumer = batcher.consumer(0);
            let mut out = Vec::with_capacity(CHUNK as usize);
            let at = Instant::now();
            let mut timed = Duration::ZERO;
            let mut left = iters;
            while left > 0 {
                let n = left.min(CHUNK);
                let start = Instant::now();
                for _ in 0..n {
                    let pushed = batcher.push(black_box(req(at)));
                    debug_assert!(pushed.is_ok());
                }
                timed += start.elapsed();
                drain(&mut consumer, &mut out, n as usize);
                left -= n;
            }
            timed
        })
    });
    g.finish();
}

fn flush(c: &mut Criterion) {
    let mut g = c.benchmark_group("batcher/flush");
    for n in [1usize, 64, 256, 1024] {
        g.throughput(Throughput::Elements(n as u64));
        g.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, &n| {
            let batcher = batcher(n);
            let mut consumer = batcher.consumer(0);
            let mut out = Vec::with_capacity(n);
            let at = Instant::now();
            // Setup pushes one batch's worth; the routine takes exactly one
            // batch (max_rows = target = n), so batches never mix.
            b.iter_batched(
                || {
                    for _ in 0..n {
                        let _ = batcher.push(req(at));
                    }
                },
                |()| {
                    let r = consumer.next_batch(&mut out, n);
                    debug_assert_eq!(out.len(), n);
                    black_box(r)
                },
                BatchSize::SmallInput,
            );
        });
    }
    g.finish();
}

/// A producer thread that pushes `count` requests each time it is told to.
struct Producer {
    go: Option<SyncSender<usize>>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl Producer {
    fn spawn(batcher: Arc<DynamicBatcher<Req>>) -> Producer {
        let (go, rx) = sync_channel::<usize>(1);
        let handle = std::thread::Builder::new()
            .name("bench-producer".into())
            .spawn(move || {
                while let Ok(count) = rx.recv() {
                    for _ in 0..count {
                        if batcher.push(req(Instant::now())).is_err() {
                            return;
                        }
                    }
                }
            })
            .expect("spawn the producer thread");
        Producer {
            go: Some(go),
            handle: Some(handle),
        }
    }

    fn push(&self, count: usize) {
        if let Some(go) = &self.go {
            go.send(count).expect("producer alive");
        }
    }
}

impl Drop for Producer {
    fn drop(&mut self) {
        // Closing the channel ends the thread's loop.
        self.go.take();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn round_trip(c: &mut Criterion) {
    const REQUESTS: usize = 1024;
    const MAX_ROWS: usize = 64;
    let mut g = c.benchmark_group("batcher/round_trip");
    g.throughput(Throughput::Elements(REQUESTS as u64));
    g.bench_function(format!("{REQUESTS}x1row_max{MAX_ROWS}"), |b| {
        b.iter_custom(|iters| {
            let batcher = Arc::new(DynamicBatcher::new(
                BatcherConfig {
                    max_rows: MAX_ROWS,
                    // Partial batches wait for more rows as inference does.
                    flush_after: Duration::from_micros(500),
                },
                1,
            ));
            let mut consumer = batcher.consumer(0);
            let producer = Producer::spawn(Arc::clone(&batcher));
            let mut out = Vec::with_capacity(MAX_ROWS);
            let mut timed = Duration::ZERO;
            for _ in 0..iters {
                let start = Instant::now();
                producer.push(REQUESTS);
                let mut left = REQUESTS;
                while left > 0 {
                    // Target the rows still to come, so the last batch
                    // flushes without waiting out the timeout.
                    if consumer.next_batch(&mut out, left) == NextBatch::Batch {
                        left -= out.len();
                    }
                }
                timed += start.elapsed();
            }
            drop(producer);
            timed
        })
    });
    g.finish();
}

criterion_group!(benches, enqueue, flush, round_trip);
criterion_main!(benches);
