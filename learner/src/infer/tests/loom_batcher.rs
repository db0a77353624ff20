//! Loom: the dynamic batcher's hand-off between producers (stream tasks),
//! `wake`, `close` and a consumer (an inference thread). A request is never
//! lost or duplicated, however the pushes, pops and parks interleave; a
//! consumer waiting on an empty queue is always woken by a push, a `wake` or
//! a `close` (a lost wakeup shows up as a loom deadlock: every thread done or
//! parked); and a `close` racing pushes never hangs the consumer nor loses a
//! request whose push happened before the close. One known gap is pinned
//! by a `should_panic` test (`known_gap_*`), which fails once it is fixed.
//!
//! Flushing by time is not modelled (loom has no clock): the batcher is built
//! with `flush_after = 0`, so a batch is flushed as soon as the queue is
//! empty, and its timed park is never reached.
use std::sync::Arc;
use std::time::{Duration, Instant};

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;

use super::builder;
use crate::infer::batcher::{Batchable, BatcherConfig, DynamicBatcher, NextBatch};

#[derive(Debug)]
struct Req {
    id: usize,
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

fn req(id: usize, rows: usize) -> Req {
    Req {
        id,
        rows,
        at: Instant::now(),
    }
}

const MAX_ROWS: usize = 2;

fn batcher() -> Arc<DynamicBatcher<Req>> {
    Arc::new(DynamicBatcher::new(
        BatcherConfig {
            max_rows: MAX_ROWS,
            flush_after: Duration::ZERO,
        },
        1,
    ))
}

/// Checks one batch's size and returns its ids.
fn ids(out: &mut Vec<Req>) -> Vec<usize> {
    let rows: usize = out.iter().map(|r| r.rows).sum();
    assert!(
        rows <= MAX_ROWS || out.len() == 1,
        "batch of {rows} rows over max"
    );
    out.drain(..).map(|r| r.id).collect()
}

/// A consumer thread that takes batches until `Closed`; returns the ids.
fn draining_consumer(b: &Arc<DynamicBatcher<Req>>) -> thread::JoinHandle<Vec<usize>> {
    let b = Arc::clone(b);
    thread::spawn(move || {
        let mut consumer = b.consumer(0);
        let mut out = Vec::new();
        let mut seen = Vec::new();
        loop {
            match consumer.next_batch(&mut out, usize::MAX) {
                NextBatch::Batch => seen.extend(ids(&mut out)),
                NextBatch::Woken => {}
                NextBatch::Closed => return seen,
            }
        }
    })
}

/// Two producers push one request each (rows 1 and 2 with `max_rows` 2:
/// when both are queued one batch cannot take both, so some interleavings
/// carry one over) while the consumer takes batches until it has both.
/// `register_late`: the consumer registers while the producers run.
fn two_producers_one_consumer(register_late: bool) {
    let b = batcher();
    let early = (!register_late).then(|| b.consumer(0));
    let producers: Vec<_> = [(0, 1), (1, 2)]
        .into_iter()
        .map(|(id, rows)| {
            let b = Arc::clone(&b);
            thread::spawn(move || assert!(b.push(req(id, rows)).is_ok(), "open batcher"))
        })
        .collect();
    let mut consumer = early.unwrap_or_else(|| b.consumer(0));
    let mut out = Vec::new();
    let mut seen = Vec::new();
    // A lost wakeup leaves the consumer parked: loom reports a deadlock.
    while seen.len() < 2 {
        match consumer.next_batch(&mut out, usize::MAX) {
            NextBatch::Batch => seen.extend(ids(&mut out)),
            other => panic!("unexpected {other:?}"),
        }
    }
    for p in producers {
        p.join().expect("producer");
    }
    seen.sort_unstable();
    assert_eq!(seen, [0, 1], "a request lost or duplicated");
    assert_eq!(b.queued(), 0);
}

#[test]
fn every_request_is_batched_exactly_once() {
    // Bound 4 keeps this to seconds (5: about half a minute).
    builder(Some(4)).check(|| two_producers_one_consumer(false));
}

/// The consumer registers (`OnceLock::set`, Release) while two producers
/// push. Producer B fences before the registration and stalls; the consumer
/// registers, takes B's request and parks; producer A pushes, sees `parked`
/// and loses the swap to B, so leaves the unpark to B. B's swap wins; with
/// a Relaxed swap it had no happens-before with the registration, so its
/// `thread.get()` could see the lock unset (C11 allows it; x86's TSO does
/// not) and nobody unparked the consumer, which slept with A's request
/// queued until the next push (loom reported a deadlock). The consumer's
/// Release `parked = true` and the producers' Acquire swap close it.
#[test]
fn a_consumer_registering_while_two_producers_push_is_woken() {
    // The interleaving needs 4 preemptions (bound 3 misses it).
    builder(Some(4)).check(|| two_producers_one_consumer(true));
}

#[test]
fn a_push_wakes_a_waiting_consumer() {
    loom::model(|| {
        let b = batcher();
        let consumer = {
            let b = Arc::clone(&b);
            thread::spawn(move || {
                let mut consumer = b.consumer(0);
                let mut out = Vec::new();
                let got = consumer.next_batch(&mut out, 1);
                (got, ids(&mut out))
            })
        };
        assert!(b.push(req(7, 1)).is_ok(), "open batcher");
        // A lost wakeup leaves the consumer parked: loom reports a deadlock.
        let (got, ids) = consumer.join().expect("consumer");
        assert_eq!(got, NextBatch::Batch);
        assert_eq!(ids, [7]);
    });
}

#[test]
fn a_wake_reaches_a_waiting_consumer() {
    loom::model(|| {
        let b = batcher();
        let consumer = {
            let b = Arc::clone(&b);
            thread::spawn(move || {
                let mut consumer = b.consumer(0);
                let mut out = Vec::new();
                consumer.next_batch(&mut out, 1)
            })
        };
        b.wake();
        assert_eq!(consumer.join().expect("consumer"), NextBatch::Woken);
    });
}

/// A producer pushes two requests while `close` races it and a consumer
/// drains until `Closed`. The consumer always ends (no deadlock); every
/// request it gets was accepted, and none twice; every request whose push
/// returned before `close` was called (the closer read the producer's
/// progress counter) is delivered.
#[test]
fn close_racing_pushes_never_hangs_nor_loses_an_earlier_push() {
    // Bound 3 keeps this to seconds (4: about half a minute; unbounded
    // did not finish in ten minutes).
    builder(Some(3)).check(|| {
        let b = batcher();
        // Pushes completed, counted by the producer after each accepted push.
        let pushed = Arc::new(AtomicUsize::new(0));
        let producer = {
            let (b, pushed) = (Arc::clone(&b), Arc::clone(&pushed));
            thread::spawn(move || {
                let mut accepted = Vec::new();
                for id in 0..2 {
                    if b.push(req(id, 1)).is_ok() {
                        accepted.push(id);
                        // Release: pairs with the closer's Acquire load; the
                        // push is complete before the count says so.
                        pushed.store(accepted.len(), Ordering::Release);
                    }
                }
                accepted
            })
        };
        let consumer = draining_consumer(&b);
        // Acquire: pairs with the producer's Release store.
        let before_close = pushed.load(Ordering::Acquire);
        b.close();
        let accepted = producer.join().expect("producer");
        let mut seen = consumer.join().expect("consumer");
        seen.sort_unstable();
        let delivered = seen.len();
        seen.dedup();
        assert_eq!(seen.len(), delivered, "a request delivered twice");
        assert!(
            seen.iter().all(|id| accepted.contains(id)),
            "delivered a refused request"
        );
        for id in &accepted[..before_close] {
            assert!(
                seen.contains(id),
                "request {id} pushed before close was lost"
            );
        }
    });
}

/// Known gap, pinned: a push that passed its `closed` check before `close`
/// but enqueued after the consumer's last pop is accepted (`Ok`) and never
/// delivered: `push` returns `Ok` without knowing whether a consumer will
/// still drain. Only at shutdown, where the stream is being torn down. If
/// this test starts failing, the gap is fixed: make it a plain test.
#[test]
#[should_panic(expected = "accepted push lost")]
fn known_gap_a_push_accepted_while_closing_can_be_dropped() {
    loom::model(|| {
        let b = batcher();
        let producer = {
            let b = Arc::clone(&b);
            thread::spawn(move || b.push(req(0, 1)).is_ok())
        };
        let consumer = draining_consumer(&b);
        b.close();
        let accepted = producer.join().expect("producer");
        let seen = consumer.join().expect("consumer");
        assert_eq!(seen.len(), usize::from(accepted), "accepted push lost");
    });
}
