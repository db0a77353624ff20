//! The serving path end to end: exactly one action batch per step batch,
//! slot release on disconnect, the sink hook, unix sockets, recurrent state.
use crate::support;

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use seed_actor::{run_actor, ActorConfig};
use seed_env::EnvConfig;
use seed_learner::infer::sink::{InferenceSink, InferredBatch, SampledAction};
use seed_learner::infer::state_table::{EnvSlot, LeaseId};
use seed_learner::serve::transport::ListenAddr;
use seed_shared::pb::{self, actor_message::Kind, learner_message};
use support::{steps, GoodActor, RawStream};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_step_batch_gets_exactly_one_action_batch() {
    let server = support::start_learner(|_| {}).await;
    let mut s = RawStream::open(&server).await;
    let welcome = s.hello(8, "").await;
    assert_eq!(welcome.env_slots.len(), 8);
    assert_eq!(
        welcome.env_slots.iter().collect::<HashSet<_>>().len(),
        8,
        "distinct slots"
    );
    // Two pipelined halves of unequal size, 200 rounds.
    let halves = [vec![0u32, 1, 2], vec![3, 4, 5, 6, 7]];
    let mut expected = std::collections::HashMap::new();
    let mut seq = 0;
    for h in &halves {
        s.send(Kind::Steps(steps(seq, h))).await;
        expected.insert(seq, h.len());
        seq += 1;
    }
    let mut answered = HashSet::new();
    while answered.len() < 400 {
        let learner_message::Kind::Actions(a) = s.recv().await else {
            panic!("second welcome")
        };
        let want = expected
            .remove(&a.seq)
            .unwrap_or_else(|| panic!("unexpected or repeated seq {}", a.seq));
        assert_eq!(a.actions.len(), want);
        assert!(a.actions.iter().all(|&x| x < 2), "{a:?}");
        assert_eq!(a.policy_version, 0);
        assert!(answered.insert(a.seq));
        let envs = if want == 3 { &halves[0] } else { &halves[1] };
        s.send(Kind::Steps(steps(seq, envs))).await;
        expected.insert(seq, envs.len());
        seq += 1;
    }

    let mut c = support::client(&server).await;
    let st = c
        .status(pb::StatusRequest {})
        .await
        .expect("status")
        .into_inner();
    assert_eq!(st.connected_actors, 1);
    assert_eq!(st.live_env_slots, 8);
    assert!(st.env_steps >= 400 * 3, "{st:?}");
    assert!(
        st.inference_batches > 0 && st.mean_batch_size >= 1.0,
        "{st:?}"
    );
    assert!(st.uptime_seconds > 0.0);
    assert!(st.step_latency_p99_us >= st.step_latency_p50_us);
    server.shutdown().await.expect("shutdown");
}

#[derive(Default)]
struct Recorded {
    rows: u64,
    released: Vec<(EnvSlot, LeaseId)>,
    bad_rows: Vec<String>,
}

struct RecordingSink(Arc<Mutex<Recorded>>);

impl InferenceSink for RecordingSink {
    fn on_batch(&mut self, batch: &InferredBatch<'_>) {
        let mut r = self.0.lock().unwrap_or_else(|p| p.into_inner());
        for row in batch.rows() {
            r.rows += 1;
            let action_ok = matches!(row.action, SampledAction::Discrete(a) if a < 2);
            if row.observation.len() != 16 || row.policy_params.len() != 2 || !action_ok {
                r.bad_rows.push(format!("{row:?}"));
            }
        }
    }

    fn on_slot_released(&mut self, slot: EnvSlot, lease: LeaseId) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .released
            .push((slot, lease));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_actor_frees_its_slots_and_the_others_keep_going() {
    let recorded = Arc::new(Mutex::new(Recorded::default()));
    let sink_state = Arc::clone(&recorded);
    let server = support::start_learner_with_sink(
        |c| c.serve.max_env_slots = 12,
        Arc::new(move |_| {
            Box::new(RecordingSink(Arc::clone(&sink_state))) as Box<dyn InferenceSink>
        }),
    )
    .await;
    let good = GoodActor::start(&server, 4, "").await;

    // The victim takes the other 8 slots, has a step in flight, then vanishes.
    let mut victim = RawStream::open(&server).await;
    let welcome = victim.hello(8, "").await;
    victim.send(Kind::Steps(steps(0, &[0, 1, 2, 3]))).await;
    drop(victim);

    // A newcomer can only be welcomed once the victim's slots are recycled.
    let m = Arc::clone(server.metrics());
    support::wait_until("the victim's slots to be freed", || {
        m.snapshot().live_slots == 4
    })
    .await;
    good.progresses(10).await;
    let mut newcomer = RawStream::open(&server).await;
    let again = newcomer.hello(8, "").await;
    let mut a: Vec<u32> = welcome.env_slots.clone();
    let mut b: Vec<u32> = again.env_slots.clone();
    a.sort_unstable();
    b.sort_unstable();
    assert_eq!(a, b, "the freed slots were reused");
    newcomer.send(Kind::Steps(steps(0, &[0, 7]))).await;
    let learner_message::Kind::Actions(actions) = newcomer.recv().await else {
        panic!("expected actions")
    };
    assert_eq!(actions.seq, 0);
    good.progresses(10).await;

    {
        let r = recorded.lock().unwrap_or_else(|p| p.into_inner());
        assert!(r.bad_rows.is_empty(), "{:?}", r.bad_rows);
        assert!(r.rows > 0);
        let released: HashSet<u32> = r.released.iter().map(|(s, _)| s.0).collect();
        assert_eq!(
            released,
            welcome.env_slots.iter().copied().collect(),
            "the sink heard of exactly the victim's slots"
        );
    }
    good.stop();
    server.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_actors_over_tcp_and_a_unix_socket() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sock = dir.path().join("learner.sock");
    for listen in [
        "127.0.0.1:0".parse::<ListenAddr>().expect("literal"),
        ListenAddr::Unix(sock.clone()),
    ] {
        let server = support::start_learner(|c| c.serve.listen = listen.clone()).await;
        let mut cfg = ActorConfig::new(server.local_addr().to_string(), EnvConfig::CartPole, 6);
        cfg.seed = 3;
        cfg.max_env_steps = Some(3_000);
        let report = support::within(
            "the actor to finish",
            run_actor(cfg, std::future::pending()),
        )
        .await
        .expect("actor runs cleanly");
        assert!(report.env_steps >= 3_000, "{report:?}");
        assert!(report.episodes > 0, "{report:?}");
        let snap = server.metrics().snapshot();
        assert!(
            snap.episodes > 0 && snap.mean_return_last_100 > 0.0,
            "{snap:?}"
        );
        server.shutdown().await.expect("shutdown");
    }
    assert!(!sock.exists(), "socket file removed at shutdown");
}

/// Checks that recurrent rows see zero state exactly at episode starts.
struct StartChecker(Arc<Mutex<(u64, Vec<String>)>>);

impl InferenceSink for StartChecker {
    fn on_batch(&mut self, batch: &InferredBatch<'_>) {
        let mut r = self.0.lock().unwrap_or_else(|p| p.into_inner());
        for row in batch.rows() {
            let (Some(h), Some(c)) = (row.recurrent_h, row.recurrent_c) else {
                r.1.push("no recurrent state".into());
                continue;
            };
            let zero = h.iter().chain(c).all(|&x| x == 0.0);
            if row.episode_start != zero {
                r.1.push(format!("start={} zero={zero}", row.episode_start));
            }
            r.0 += u64::from(row.episode_start);
        }
    }
    fn on_slot_released(&mut self, _: EnvSlot, _: LeaseId) {}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recurrent_state_is_zeroed_exactly_at_episode_starts() {
    let seen = Arc::new(Mutex::new((0u64, Vec::new())));
    let sink_state = Arc::clone(&seen);
    let server = support::start_learner_with_sink(
        |c| c.model.lstm_size = Some(8),
        Arc::new(move |_| {
            Box::new(StartChecker(Arc::clone(&sink_state))) as Box<dyn InferenceSink>
        }),
    )
    .await;
    let mut s = RawStream::open(&server).await;
    s.hello(2, "").await;
    // Round 1: first steps (start); 2: continue; 3: env 0 terminated (start);
    // 4: env 1 truncated; 5: env 1 after truncation (start); 6: env 0 new run id (start).
    let mut expect_starts = 0;
    for round in 1..=6u64 {
        let seq = round - 1;
        let mut b = steps(seq, &[0, 1]);
        match round {
            1 => expect_starts += 2,
            3 => {
                b.terminated[0] = true;
                expect_starts += 1
            }
            4 => b.truncated[1] = true,
            5 => expect_starts += 1,
            6 => {
                b.run_ids[0] = 2;
                b.run_ids[1] = 1;
                expect_starts += 1
            }
            _ => {}
        }
        s.send(Kind::Steps(b)).await;
        let learner_message::Kind::Actions(a) = s.recv().await else {
            panic!("expected actions")
        };
        assert_eq!(a.seq, seq);
    }
    // An inference thread counts a batch just after sending its actions,
    // so the last batch's count may trail our receipt of them (a count that
    // stays short fails at the deadline; one too high fails below).
    let metrics = server.metrics();
    support::wait_until("every batch counted", || {
        metrics.env_steps.load(Ordering::Relaxed) >= 12 - 1
    })
    .await;
    {
        let r = seen.lock().unwrap_or_else(|p| p.into_inner());
        assert!(r.1.is_empty(), "{:?}", r.1);
        assert_eq!(r.0, expect_starts);
        // The reset row after a truncation is not an env step.
        assert_eq!(metrics.env_steps.load(Ordering::Relaxed), 12 - 1);
    }
    server.shutdown().await.expect("shutdown");
}

/// Sends `rounds` step batches of `envs`, one at a time, and returns the
/// learner's figures once every batch is counted (an inference thread
/// counts a batch just after sending its actions).
async fn step_one_at_a_time(
    server: &seed_learner::app::Learner,
    s: &mut RawStream,
    envs: &[u32],
    rounds: u64,
) -> seed_learner::metrics::MetricsSnapshot {
    let metrics = server.metrics();
    let env_steps = metrics.env_steps.load(Ordering::Relaxed) + rounds * envs.len() as u64;
    for seq in 0..rounds {
        s.send(Kind::Steps(steps(seq, envs))).await;
        let learner_message::Kind::Actions(a) = s.recv().await else {
            panic!("second welcome")
        };
        assert_eq!((a.seq, a.actions.len()), (seq, envs.len()));
    }
    // Env steps are the last figure an inference thread writes per batch.
    support::wait_until("every batch counted", || {
        metrics.env_steps.load(Ordering::Relaxed) >= env_steps
    })
    .await;
    metrics.snapshot()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_request_no_other_can_join_is_inferred_inline() {
    let server = support::start_learner(|c| c.inference.inline_max_rows = 4).await;
    let mut s = RawStream::open(&server).await;
    s.hello(4, "").await;
    let st = step_one_at_a_time(&server, &mut s, &[0, 1, 2, 3], 20).await;
    assert_eq!(st.inference_batches, 20, "{st:?}");
    // Only a request racing inference thread 0's start-up (it holds the
    // worker while it looks for released slots) may take the batcher path.
    assert!(st.inline_batches >= 19, "{st:?}");
    assert_eq!(st.env_steps, 80, "{st:?}");
    assert_eq!(st.inference_rows, 80, "{st:?}");
    server.shutdown().await.expect("shutdown");

    // Half of one stream's envs: the batch does not wait for the other
    // half of a stream already in it (the actor is stepping that half), so
    // the request holds all that can join and is inferred inline.
    let server = support::start_learner(|c| c.inference.inline_max_rows = 4).await;
    let mut s = RawStream::open(&server).await;
    s.hello(4, "").await;
    let st = step_one_at_a_time(&server, &mut s, &[0, 1], 10).await;
    assert_eq!(st.inference_batches, 10, "{st:?}");
    assert!(st.inline_batches >= 9, "{st:?}");
    server.shutdown().await.expect("shutdown");

    // One actor with one env (the latency benchmark's 1 x 1): each step
    // is answered on the stream's own task, no hand-off to an inference
    // thread, with the default settings.
    let server = support::start_learner(|_| {}).await;
    let mut s = RawStream::open(&server).await;
    s.hello(1, "").await;
    let st = step_one_at_a_time(&server, &mut s, &[0], 20).await;
    assert_eq!(st.inference_batches, 20, "{st:?}");
    assert!(st.inline_batches >= 19, "{st:?}");
    server.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_that_others_could_join_or_that_are_large_go_through_the_batcher() {
    // Every env of one stream, but another stream's envs are active (never
    // parked here): its request could still join the batch.
    let server = support::start_learner(|c| {
        c.inference.inline_max_rows = 4;
        c.inference.actor_idle = None;
    })
    .await;
    let mut s = RawStream::open(&server).await;
    s.hello(2, "").await;
    let mut other = RawStream::open(&server).await;
    other.hello(2, "").await;
    let st = step_one_at_a_time(&server, &mut s, &[0, 1], 10).await;
    assert_eq!((st.inference_batches, st.inline_batches), (10, 0), "{st:?}");
    drop(other);
    server.shutdown().await.expect("shutdown");

    // Every env, but more rows than `inline_max_rows`.
    let server = support::start_learner(|c| c.inference.inline_max_rows = 3).await;
    let mut s = RawStream::open(&server).await;
    s.hello(4, "").await;
    let st = step_one_at_a_time(&server, &mut s, &[0, 1, 2, 3], 10).await;
    assert_eq!((st.inference_batches, st.inline_batches), (10, 0), "{st:?}");
    server.shutdown().await.expect("shutdown");

    // A sink (training) may block on a full replay buffer: never inline.
    let server = support::start_learner_with_sink(
        |c| c.inference.inline_max_rows = 4,
        Arc::new(|_| Box::new(RecordingSink(Arc::default())) as Box<dyn InferenceSink>),
    )
    .await;
    let mut s = RawStream::open(&server).await;
    s.hello(1, "").await;
    let st = step_one_at_a_time(&server, &mut s, &[0], 10).await;
    assert_eq!((st.inference_batches, st.inline_batches), (10, 0), "{st:?}");
    server.shutdown().await.expect("shutdown");

    // Turned off.
    let server = support::start_learner(|c| c.inference.inline_max_rows = 0).await;
    let mut s = RawStream::open(&server).await;
    s.hello(1, "").await;
    let st = step_one_at_a_time(&server, &mut s, &[0], 10).await;
    assert_eq!((st.inference_batches, st.inline_batches), (10, 0), "{st:?}");
    server.shutdown().await.expect("shutdown");
}

/// A stream whose step batches take both paths, a large half through the
/// batcher and a small half inline, gets its action batches in the order
/// it sent them: the small half, sent right behind the large one, must not
/// overtake it by being inferred inline while the large one waits for an
/// inference thread (the stream task's "nothing unanswered" rule).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn action_batches_keep_their_order_when_halves_take_both_paths() {
    let server = support::start_learner(|c| c.inference.inline_max_rows = 2).await;
    let metrics = server.metrics();
    let mut s = RawStream::open(&server).await;
    s.hello(4, "").await;
    let (large, small) = ([0u32, 1, 2], [3u32]);
    let mut seq = 0;
    for _ in 0..50 {
        // Back to back: the small half arrives while the large one is
        // queued for (or being inferred by) the inference thread.
        s.send(Kind::Steps(steps(seq, &large))).await;
        s.send(Kind::Steps(steps(seq + 1, &small))).await;
        for (want, rows) in [(seq, large.len()), (seq + 1, small.len())] {
            let learner_message::Kind::Actions(a) = s.recv().await else {
                panic!("second welcome")
            };
            assert_eq!((a.seq, a.actions.len()), (want, rows), "out of order");
        }
        // Alone, with nothing unanswered, the small half is inferred inline.
        s.send(Kind::Steps(steps(seq + 2, &small))).await;
        let learner_message::Kind::Actions(a) = s.recv().await else {
            panic!("second welcome")
        };
        assert_eq!(a.seq, seq + 2);
        seq += 3;
    }
    // Env steps are the last figure an inference thread writes per batch.
    support::wait_until("every batch counted", || {
        metrics.env_steps.load(Ordering::Relaxed) >= 50 * 5
    })
    .await;
    let st = metrics.snapshot();
    let batched = st.inference_batches - st.inline_batches;
    // Both paths were taken: 50 large halves at least through the batcher,
    // the lone small halves inline (but one racing the inference thread's
    // start-up, which holds the worker while it looks for released slots).
    assert!(batched >= 50, "{st:?}");
    assert!(st.inline_batches >= 49, "{st:?}");
    assert_eq!(st.step_batches, 150, "{st:?}");
    server.shutdown().await.expect("shutdown");
}
