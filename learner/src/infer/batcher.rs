//! Dynamic batching of step requests from all actor streams.
//!
//! Stream tasks [`push`](DynamicBatcher::push) requests onto one lock-free
//! queue (crossbeam `SegQueue`); each inference thread takes batches from it
//! through its [`BatchConsumer`]. A batch is flushed when the first of these
//! happens:
//! - it holds `max_rows` env rows (a request is never split: one that would
//!   overflow the batch is carried over to the next);
//! - `flush_after` has passed since its first request was enqueued, so a slow
//!   or dead actor never stalls the others (SEED's fill-only batching does);
//! - it holds `target_rows` rows, the caller's bound on how many rows can
//!   arrive at all (inference passes the number of active env slots, asked
//!   once the batch's first request is in: once every env that can still
//!   report is in the batch, waiting longer cannot add anything; envs of an
//!   actor parked as idle are not counted, see `infer::state_table`), less
//!   the rows of streams already in the batch that are not in it yet.
//!
//! # Not waiting for a stream's other half
//! An actor pipelines: it sends one half of its envs, steps the other half
//! while the first is inferred, and so on (`seed_actor`'s halves). Waiting
//! for the second half of a stream whose first half is in the batch undoes
//! that: the actor has to finish stepping before either half gets actions,
//! and a single actor with a handful of fast envs spends most of its time
//! waiting (a Gymnasium CartPole actor with 64 envs ran at 0.58 of a bare
//! Python loop's rate). So each stream's rows that are not in the batch
//! are taken off the target ([`Batchable::stream`]); requests already in
//! the queue when the target is met are still taken (they cost no wait).
//!
//! # Waiting
//! An idle consumer spins briefly (a back-to-back request is caught without
//! a futex round trip), then parks; producers unpark a parked consumer after
//! each push. This is the only thread hand-off between a stream task and
//! inference, and it costs a futex wake only when the consumer is asleep.
//!
//! The sleep protocol is the classic store-buffering pair, so both sides use
//! a `SeqCst` fence: the consumer stores `parked = true`, fences, then checks
//! the queue; a producer pushes, fences, then checks `parked`. With both
//! fences, at least one side sees the other's write, so either the consumer
//! finds the item or the producer unparks it (std's park token makes an
//! unpark that lands before `park` return at once). Without them each side
//! could read the other's old value and the consumer would sleep on a
//! non-empty queue.
//!
//! # Model checking
//! The atomics, the queue, the parking and the spin's backoff come from
//! [`crate::loom`], so under `cfg(loom)` the tests in `infer/tests`
//! (`loom_batcher`) explore the interleavings of producers, `close`, `wake`
//! and a consumer (the larger models up to a preemption bound); in the
//! normal build they are the std/crossbeam items themselves (no cost). Under
//! loom the queue is a lock-based stand-in, parking uses a loom `Notify`, a
//! timed park is a yield (time is not modelled), the spin does not spin, and
//! the stores to the two swapped flags are swaps (`crate::loom::store_flag`:
//! loom's approximate modification order).
//!
//! One known gap, pinned by a `known_gap_*` loom test: a push racing `close`
//! can be accepted after the consumer's last pop (shutdown only; closing it
//! would cost every push an in-flight count).
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

use crate::loom::atomic::{fence, AtomicBool, Ordering};
use crate::loom::queue::SegQueue;
use crate::loom::sync::OnceLock;
use crate::loom::thread::{self, Thread};
use crate::loom::{store_flag, Backoff};

/// Something the batcher can batch: it knows its env rows and arrival time.
pub trait Batchable {
    /// Env rows in this request (never split across batches).
    fn rows(&self) -> usize;
    /// When the request was enqueued; the flush deadline counts from the
    /// first request of a batch.
    fn enqueued_at(&self) -> Instant;
    /// The stream (actor) this request came from, as a key that is distinct
    /// among the streams live at once, and the env rows that stream holds in
    /// all. A batch does not wait for a stream's rows beyond those already
    /// in it (module docs). `None`: unknown, the batch waits for every row.
    fn stream(&self) -> Option<(u64, usize)> {
        None
    }
}

/// The streams of the batch being built and how many of their rows are not
/// in it yet; the batch does not wait for those (module docs).
#[derive(Debug, Default)]
struct StreamsInBatch {
    /// `(stream key, rows of it not in the batch)`; a batch holds a handful
    /// of streams, so a linear scan beats a map.
    streams: Vec<(u64, usize)>,
    /// Sum of the second fields.
    missing: usize,
}

impl StreamsInBatch {
    fn clear(&mut self) {
        self.streams.clear();
        self.missing = 0;
    }

    fn add(&mut self, item: &impl Batchable) {
        let Some((key, stream_rows)) = item.stream() else {
            return;
        };
        let rows = item.rows();
        match self.streams.iter_mut().find(|(k, _)| *k == key) {
            Some((_, outstanding)) => {
                let taken = rows.min(*outstanding);
                *outstanding -= taken;
                self.missing -= taken;
            }
            None => {
                let outstanding = stream_rows.saturating_sub(rows);
                self.streams.push((key, outstanding));
                self.missing += outstanding;
            }
        }
    }
}

/// Flush rules.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BatcherConfig {
    /// Flush once a batch holds this many env rows (`--max-batch`).
    pub max_rows: usize,
    /// Flush this long after a batch's first request was enqueued (`--flush-us`).
    pub flush_after: Duration,
}

/// Per consumer: whether it is parked, and the thread to unpark.
struct Sleeper {
    /// Written `true` by the consumer before parking (Release) and `false` by
    /// whoever wakes it; read by producers after their SeqCst fence (module
    /// docs). Whether a producer sees it comes from the SeqCst fence pair
    /// (consumer in `park_until`, producer in `push`/`wake`/`close`); the
    /// Release store and the producers' Acquire swap add that the winner of
    /// the swap sees the consumer's registration in `thread` (`unpark_one`).
    parked: CachePadded<AtomicBool>,
    /// Set once by the consumer's thread in `consumer` (before it first
    /// parks), read to unpark it. `close` reads it after its SeqCst fence: if
    /// it reads `None`, the consumer's first `park_until` fence comes later
    /// and its check sees `closed`. `unpark_one` reads it after an Acquire
    /// swap that read the consumer's Release `parked = true`, which comes
    /// after the registration.
    thread: OnceLock<Thread>,
}

/// What [`BatchConsumer::next_batch`] produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextBatch {
    /// `out` holds a batch.
    Batch,
    /// [`DynamicBatcher::wake`] was called; `out` is empty.
    Woken,
    /// The batcher is closed and drained.
    Closed,
}

/// Lock-free multi-producer queue of requests with size/time flushing.
pub struct DynamicBatcher<T> {
    queue: SegQueue<T>,
    config: BatcherConfig,
    sleepers: Box<[Sleeper]>,
    /// Set once by `close` (Release), read by consumers (Acquire) so they see
    /// every push that came before it.
    closed: AtomicBool,
    /// Set by `wake` for out-of-band work (released slots); consumed by the
    /// consumer that sees it. Release/Acquire pair like `closed`.
    wake_requested: AtomicBool,
}

impl<T: Batchable> DynamicBatcher<T> {
    /// A batcher for `consumers` inference threads.
    pub fn new(config: BatcherConfig, consumers: usize) -> Self {
        DynamicBatcher {
            queue: SegQueue::new(),
            config: BatcherConfig {
                max_rows: config.max_rows.max(1),
                flush_after: config.flush_after,
            },
            sleepers: (0..consumers.max(1))
                .map(|_| Sleeper {
                    parked: CachePadded::new(AtomicBool::new(false)),
                    thread: OnceLock::new(),
                })
                .collect(),
            closed: AtomicBool::new(false),
            wake_requested: AtomicBool::new(false),
        }
    }

    pub fn config(&self) -> BatcherConfig {
        self.config
    }

    /// Requests waiting (approximate; for metrics).
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Whether [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        // Acquire: pairs with the Release store in `close`.
        self.closed.load(Ordering::Acquire)
    }

    /// Enqueues a request; gives it back if the batcher is closed.
    pub fn push(&self, item: T) -> Result<(), T> {
        // Acquire: pairs with the Release store in `close` (a refused push
        // needs nothing from it; the check only refuses work after close).
        if self.closed.load(Ordering::Acquire) {
            return Err(item);
        }
        self.queue.push(item);
        // Store-buffering pair with the consumer's fence in `park_until`:
        // either this push is seen by its post-fence queue check, or our
        // `parked` load in `unpark_one` sees its `parked = true`.
        fence(Ordering::SeqCst);
        self.unpark_one();
        Ok(())
    }

    /// Wakes a consumer so it returns [`NextBatch::Woken`] (used when env
    /// slots are released, so they are recycled without waiting for traffic).
    pub fn wake(&self) {
        // Release: pairs with the Acquire swap in `wait_first` (the woken
        // consumer sees what the waker did before, e.g. a released lease).
        store_flag(&self.wake_requested, true, Ordering::Release);
        // Store-buffering pair with `park_until`'s fence, as in `push`.
        fence(Ordering::SeqCst);
        self.unpark_one();
    }

    /// Stops accepting requests; consumers drain the queue, then see `Closed`.
    pub fn close(&self) {
        // Release: pairs with the consumers' Acquire loads of `closed`, so a
        // consumer that sees it also sees every push that came before it.
        self.closed.store(true, Ordering::Release);
        // Store-buffering pair with `park_until`'s fence: either the parking
        // consumer sees `closed`, or our `thread.get()` below sees its
        // registration and unparks it.
        fence(Ordering::SeqCst);
        for s in self.sleepers.iter() {
            // Relaxed: a hint only; every consumer is unparked regardless.
            store_flag(&s.parked, false, Ordering::Relaxed);
            if let Some(t) = s.thread.get() {
                t.unpark();
            }
        }
    }

    fn unpark_one(&self) {
        for s in self.sleepers.iter() {
            // The swap makes one producer do the (syscall) unpark per sleep.
            // The load (Relaxed) comes after the caller's SeqCst fence, which
            // pairs with the consumer's fence in `park_until`. The swap is
            // Acquire, pairing with the consumer's Release `parked = true`:
            // the producer that wins it then sees the consumer's registration
            // in `thread`, even if its own fence came before the consumer
            // registered (with a Relaxed swap C11 let `thread.get()` read
            // `None` here while the producer that lost the swap relied on the
            // winner: loom test `a_consumer_registering_while_two_producers_
            // push_is_woken`). On x86 both are the same instructions as before.
            if s.parked.load(Ordering::Relaxed) && s.parked.swap(false, Ordering::Acquire) {
                if let Some(t) = s.thread.get() {
                    t.unpark();
                }
                return;
            }
        }
    }

    /// The consumer end for inference thread `index` (`0..consumers`); must
    /// be called on the thread that will consume.
    ///
    /// # Panics
    /// If `index` is out of range or already taken by another thread.
    pub fn consumer(&self, index: usize) -> BatchConsumer<'_, T> {
        let sleeper = &self.sleepers[index];
        assert!(
            sleeper.thread.set(thread::current()).is_ok(),
            "batch consumer {index} registered twice"
        );
        BatchConsumer {
            batcher: self,
            sleeper,
            carry: None,
            in_batch: StreamsInBatch::default(),
        }
    }
}

/// One inference thread's end of a [`DynamicBatcher`].
pub struct BatchConsumer<'a, T> {
    batcher: &'a DynamicBatcher<T>,
    sleeper: &'a Sleeper,
    /// A request that did not fit the previous batch; first of the next.
    carry: Option<T>,
    /// The streams of the batch being built (reused allocation).
    in_batch: StreamsInBatch,
}

/// Spin steps before parking (crossbeam `Backoff::spin` doubles each step,
/// so 6 steps are ~127 spin-loop hints: about a microsecond).
#[cfg(not(loom))]
const SPIN_STEPS: u32 = 6;
/// Under loom one pop before parking: spinning is only a latency
/// optimisation, and each extra pop multiplies the interleavings to explore.
#[cfg(loom)]
const SPIN_STEPS: u32 = 0;

impl<T: Batchable> BatchConsumer<'_, T> {
    /// Blocks until a batch is ready and appends it to `out` (cleared first).
    /// `target_rows`: flush as soon as this many rows are in, less the rows
    /// of the batch's streams that are not in it ([`Batchable::stream`];
    /// clamped to `1..=max_rows`), after taking what is already queued.
    pub fn next_batch(&mut self, out: &mut Vec<T>, target_rows: usize) -> NextBatch {
        self.next_batch_with(out, || target_rows)
    }

    /// Like [`next_batch`](Self::next_batch), asking `target_rows` for the
    /// target once the batch's first request is in hand (after a wait of any
    /// length, so the target is current).
    pub fn next_batch_with(
        &mut self,
        out: &mut Vec<T>,
        target_rows: impl FnOnce() -> usize,
    ) -> NextBatch {
        out.clear();
        let max_rows = self.batcher.config.max_rows;
        let first = match self.carry.take() {
            Some(item) => item,
            None => match self.wait_first() {
                Ok(item) => item,
                Err(other) => return other,
            },
        };
        let target = target_rows();
        let deadline = first.enqueued_at() + self.batcher.config.flush_after;
        self.in_batch.clear();
        self.in_batch.add(&first);
        let mut rows = first.rows();
        out.push(first);
        loop {
            let met = rows
                >= target
                    .saturating_sub(self.in_batch.missing)
                    .clamp(1, max_rows);
            // Met: take only what is queued already (no spin, no wait).
            let next = if met {
                self.batcher.queue.pop()
            } else {
                self.pop_spinning()
            };
            if let Some(item) = next {
                if rows + item.rows() > max_rows {
                    self.carry = Some(item);
                    break;
                }
                rows += item.rows();
                self.in_batch.add(&item);
                out.push(item);
                continue;
            }
            if met {
                break;
            }
            // Acquire: pairs with the Release store in `close`.
            if self.batcher.closed.load(Ordering::Acquire) {
                break;
            }
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            self.park_until(Some(deadline));
        }
        NextBatch::Batch
    }

    /// Pops, spinning briefly if the queue is empty.
    fn pop_spinning(&self) -> Option<T> {
        let backoff = Backoff::new();
        for _ in 0..=SPIN_STEPS {
            if let Some(item) = self.batcher.queue.pop() {
                return Some(item);
            }
            backoff.spin();
        }
        None
    }

    fn wait_first(&mut self) -> Result<T, NextBatch> {
        loop {
            if let Some(item) = self.pop_spinning() {
                return Ok(item);
            }
            // Acquire: pairs with the Release store in `wake`.
            if self.batcher.wake_requested.swap(false, Ordering::Acquire) {
                return Err(NextBatch::Woken);
            }
            // Acquire: pairs with the Release store in `close`, so the pop
            // below sees every push that came before the close.
            if self.batcher.closed.load(Ordering::Acquire) {
                // `close` happened after every accepted push; one last pop.
                // (A push that passed its `closed` check before `close` can
                // still land after this pop: the known gap in the docs.)
                return self.batcher.queue.pop().ok_or(NextBatch::Closed);
            }
            self.park_until(None);
        }
    }

    /// Parks until unparked, or until `deadline`; returns at once if work
    /// arrived between the caller's check and here (module docs).
    fn park_until(&self, deadline: Option<Instant>) {
        // Release: pairs with the Acquire swap in `unpark_one` (the winner
        // sees our registration in `thread`); made visible to the producers'
        // checks by the fence below.
        store_flag(&self.sleeper.parked, true, Ordering::Release);
        // Store-buffering pair with the producers' fence in `push`/`wake`/
        // `close`: either they see `parked` (and unpark us) or the Relaxed
        // loads below see their push, wake request or close.
        fence(Ordering::SeqCst);
        let has_work = !self.batcher.queue.is_empty()
            || self.batcher.wake_requested.load(Ordering::Relaxed)
            || self.batcher.closed.load(Ordering::Relaxed);
        if !has_work {
            match deadline {
                None => thread::park(),
                Some(d) => {
                    let now = Instant::now();
                    if d > now {
                        thread::park_timeout(d - now);
                    }
                }
            }
        }
        // Relaxed: only stops later producers from paying for an unpark; a
        // stale `true` costs one spare unpark (the park token absorbs it).
        store_flag(&self.sleeper.parked, false, Ordering::Relaxed);
    }
}

// Plain unit tests (std threads, real time); under loom they are compiled
// out (loom's types only work inside a model; see `infer/tests`).
#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::thread;

    #[derive(Debug)]
    struct Req {
        id: u64,
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

    fn req(id: u64, rows: usize) -> Req {
        Req {
            id,
            rows,
            at: Instant::now(),
        }
    }

    fn batcher(max_rows: usize, flush_after: Duration) -> DynamicBatcher<Req> {
        DynamicBatcher::new(
            BatcherConfig {
                max_rows,
                flush_after,
            },
            1,
        )
    }

    #[test]
    fn flushes_by_size_without_waiting_for_the_timeout() {
        // A one-hour timeout: the test only finishes if size triggers the flush.
        let b = batcher(8, Duration::from_secs(3600));
        for i in 0..4 {
            b.push(req(i, 4)).unwrap();
        }
        let mut c = b.consumer(0);
        let mut out = Vec::new();
        assert_eq!(c.next_batch(&mut out, usize::MAX), NextBatch::Batch);
        assert_eq!(out.iter().map(|r| r.id).collect::<Vec<_>>(), [0, 1]);
        assert_eq!(c.next_batch(&mut out, usize::MAX), NextBatch::Batch);
        assert_eq!(out.iter().map(|r| r.id).collect::<Vec<_>>(), [2, 3]);
    }

    #[test]
    fn a_request_that_would_overflow_is_carried_not_split() {
        let b = batcher(10, Duration::from_secs(3600));
        b.push(req(0, 6)).unwrap();
        b.push(req(1, 6)).unwrap();
        b.push(req(2, 4)).unwrap();
        let mut c = b.consumer(0);
        let mut out = Vec::new();
        c.next_batch(&mut out, usize::MAX);
        assert_eq!(
            out.iter().map(|r| (r.id, r.rows)).collect::<Vec<_>>(),
            [(0, 6)]
        );
        c.next_batch(&mut out, usize::MAX);
        assert_eq!(
            out.iter().map(|r| (r.id, r.rows)).collect::<Vec<_>>(),
            [(1, 6), (2, 4)]
        );
    }

    #[test]
    fn an_oversized_request_forms_its_own_batch() {
        let b = batcher(4, Duration::from_secs(3600));
        b.push(req(0, 9)).unwrap();
        let mut c = b.consumer(0);
        let mut out = Vec::new();
        c.next_batch(&mut out, usize::MAX);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].rows, 9);
    }

    #[test]
    fn a_lone_request_is_flushed_by_the_timeout() {
        // max_rows is never reached: only the timeout can flush. If it did
        // not, next_batch would block forever and the test would hang.
        let b = batcher(1000, Duration::from_millis(2));
        b.push(req(7, 1)).unwrap();
        let mut c = b.consumer(0);
        let mut out = Vec::new();
        assert_eq!(c.next_batch(&mut out, usize::MAX), NextBatch::Batch);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].id, 7);
    }

    #[test]
    fn reaching_the_target_rows_flushes_at_once() {
        let b = batcher(1000, Duration::from_secs(3600));
        b.push(req(0, 3)).unwrap();
        let mut c = b.consumer(0);
        let mut out = Vec::new();
        assert_eq!(c.next_batch(&mut out, 3), NextBatch::Batch);
        assert_eq!(out.len(), 1);
    }

    /// A request of `rows` of the `total` rows of stream `key`.
    #[derive(Debug)]
    struct Half {
        key: u64,
        rows: usize,
        total: usize,
    }

    impl Batchable for Half {
        fn rows(&self) -> usize {
            self.rows
        }
        fn enqueued_at(&self) -> Instant {
            Instant::now()
        }
        fn stream(&self) -> Option<(u64, usize)> {
            Some((self.key, self.total))
        }
    }

    fn half(key: u64, rows: usize, total: usize) -> Half {
        Half { key, rows, total }
    }

    fn half_batcher() -> DynamicBatcher<Half> {
        // A one-hour timeout: only the target can flush within the test.
        DynamicBatcher::new(
            BatcherConfig {
                max_rows: 1000,
                flush_after: Duration::from_secs(3600),
            },
            1,
        )
    }

    fn keys_and_rows(out: &[Half]) -> Vec<(u64, usize)> {
        out.iter().map(|h| (h.key, h.rows)).collect()
    }

    #[test]
    fn a_batch_does_not_wait_for_the_other_half_of_its_stream() {
        // One actor of 8 envs, all active, sent its first half. Without the
        // rule the batch would wait an hour for the other 4 rows.
        let b = half_batcher();
        b.push(half(1, 4, 8)).unwrap();
        let mut c = b.consumer(0);
        let mut out = Vec::new();
        assert_eq!(c.next_batch(&mut out, 8), NextBatch::Batch);
        assert_eq!(keys_and_rows(&out), [(1, 4)]);
    }

    #[test]
    fn a_batch_still_waits_for_streams_not_in_it() {
        let b = Arc::new(half_batcher());
        b.push(half(1, 4, 8)).unwrap();
        let b2 = Arc::clone(&b);
        let consumer = thread::spawn(move || {
            let mut c = b2.consumer(0);
            let mut out = Vec::new();
            c.next_batch(&mut out, 16);
            keys_and_rows(&out)
        });
        // Stream 2 (8 envs) reports whenever this thread gets here; the
        // batch can only be flushed once it has: 4 + 4 of 16, the other
        // halves of both streams not waited for.
        b.push(half(2, 4, 8)).unwrap();
        assert_eq!(consumer.join().unwrap(), [(1, 4), (2, 4)]);
    }

    #[test]
    fn halves_already_queued_are_batched_together() {
        // Both halves waited in the queue (inference was busy): the target
        // is met by the first, and the second is still taken, since taking
        // it costs no wait. A third stream's request is taken too.
        let b = half_batcher();
        b.push(half(1, 4, 8)).unwrap();
        b.push(half(1, 4, 8)).unwrap();
        b.push(half(3, 2, 2)).unwrap();
        let mut c = b.consumer(0);
        let mut out = Vec::new();
        c.next_batch(&mut out, 10);
        assert_eq!(keys_and_rows(&out), [(1, 4), (1, 4), (3, 2)]);
    }

    #[test]
    fn streams_in_batch_count_each_streams_missing_rows_once() {
        let mut s = StreamsInBatch::default();
        s.add(&half(1, 4, 8));
        s.add(&half(2, 3, 6));
        assert_eq!(s.missing, 4 + 3);
        s.add(&half(1, 4, 8));
        assert_eq!(s.missing, 3);
        // More rows than the stream said it holds: never below zero.
        s.add(&half(2, 5, 6));
        assert_eq!(s.missing, 0);
        s.clear();
        assert_eq!((s.missing, s.streams.len()), (0, 0));
    }

    #[test]
    fn wake_and_close_end_a_waiting_consumer() {
        let b = Arc::new(batcher(8, Duration::from_millis(1)));
        let b2 = Arc::clone(&b);
        let consumer = thread::spawn(move || {
            let mut c = b2.consumer(0);
            let mut out = Vec::new();
            let first = c.next_batch(&mut out, usize::MAX);
            let mut rest = Vec::new();
            loop {
                match c.next_batch(&mut out, usize::MAX) {
                    NextBatch::Closed => break,
                    NextBatch::Batch => rest.extend(out.drain(..).map(|r| r.id)),
                    NextBatch::Woken => {}
                }
            }
            (first, rest)
        });
        b.wake();
        // The consumer sees the wake before any request.
        b.push(req(1, 1)).unwrap();
        b.close();
        assert!(b.push(req(2, 1)).is_err(), "closed batcher refuses pushes");
        let (first, rest) = consumer.join().unwrap();
        // Either order of wake/first batch is fine, but request 1 is delivered once.
        match first {
            NextBatch::Woken => assert_eq!(rest, [1]),
            NextBatch::Batch => assert!(rest.is_empty()),
            NextBatch::Closed => panic!("closed before draining"),
        }
    }

    #[test]
    fn concurrent_requests_are_never_lost_split_or_duplicated() {
        const PRODUCERS: u64 = 4;
        const PER_PRODUCER: u64 = if cfg!(miri) { 50 } else { 5_000 };
        let b = Arc::new(batcher(64, Duration::from_micros(50)));
        let producers: Vec<_> = (0..PRODUCERS)
            .map(|p| {
                let b = Arc::clone(&b);
                thread::spawn(move || {
                    for i in 0..PER_PRODUCER {
                        let id = p * PER_PRODUCER + i;
                        b.push(req(id, 1 + (id % 7) as usize)).unwrap();
                    }
                })
            })
            .collect();
        let b2 = Arc::clone(&b);
        let consumer = thread::spawn(move || {
            let mut c = b2.consumer(0);
            let mut out = Vec::new();
            let mut seen = Vec::new();
            loop {
                match c.next_batch(&mut out, usize::MAX) {
                    NextBatch::Closed => break,
                    NextBatch::Woken => {}
                    NextBatch::Batch => {
                        let rows: usize = out.iter().map(|r| r.rows).sum();
                        assert!(rows <= 64, "batch of {rows} rows over max");
                        for r in &out {
                            assert_eq!(r.rows, 1 + (r.id % 7) as usize, "request altered");
                        }
                        seen.extend(out.drain(..).map(|r| r.id));
                    }
                }
            }
            seen
        });
        for p in producers {
            p.join().unwrap();
        }
        b.close();
        let mut seen = consumer.join().unwrap();
        seen.sort_unstable();
        let want: Vec<u64> = (0..PRODUCERS * PER_PRODUCER).collect();
        assert_eq!(seen.len(), want.len(), "lost or duplicated requests");
        assert_eq!(seen, want);
    }
}
