//! Peer liveness by HTTP/2 keepalive: a frozen actor is dropped and its env
//! slots freed while the others keep going, an idle actor that answers
//! pings keeps its stream, and an actor notices a frozen learner and
//! reconnects.
//!
//! "Frozen" is a proxy that stops forwarding bytes both ways but keeps both
//! sockets open (support/proxy.rs), which is what a SIGSTOPped peer or a
//! half-open connection looks like. Keepalive runs at 1 s / 1 s here; the
//! tests wait for conditions (slots freed, pings answered), never for time.
use crate::support;

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use seed_actor::{run_actor, ActorConfig, ReconnectPolicy};
use seed_env::EnvConfig;
use seed_learner::app::Learner;
use seed_learner::infer::sink::{InferenceSink, InferredBatch};
use seed_learner::infer::state_table::{EnvSlot, LeaseId};
use seed_learner::serve::transport::ListenAddr;
use seed_shared::pb::actor_message::Kind;
use seed_shared::pb::learner_message;
use seed_shared::Keepalive;
use support::proxy::FreezableProxy;
use support::{steps, GoodActor, RawStream};

fn fast_keepalive() -> Keepalive {
    Keepalive {
        interval: Some(Duration::from_secs(1)),
        timeout: Duration::from_secs(1),
    }
}

fn tcp_addr(server: &Learner) -> SocketAddr {
    match server.local_addr() {
        ListenAddr::Tcp(a) => *a,
        other => panic!("tcp learner expected, got {other}"),
    }
}

/// Slots whose release the inference side reported to the sink.
struct ReleaseLog(Arc<Mutex<Vec<u32>>>);

impl InferenceSink for ReleaseLog {
    fn on_batch(&mut self, _: &InferredBatch<'_>) {}
    fn on_slot_released(&mut self, slot: EnvSlot, _: LeaseId) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(slot.0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_actor_is_dropped_and_its_slots_freed_while_others_keep_going() {
    let released = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&released);
    let server = support::start_learner_with_sink(
        |c| c.serve.keepalive = fast_keepalive(),
        Arc::new(move |_| Box::new(ReleaseLog(Arc::clone(&log))) as Box<dyn InferenceSink>),
    )
    .await;
    let m = Arc::clone(server.metrics());
    let good = GoodActor::start(&server, 4, "").await;
    let proxy = FreezableProxy::start(tcp_addr(&server)).await;
    let victim = GoodActor::start_on(RawStream::open_at(&proxy.uri()).await, 6, "").await;
    victim.progresses(5).await;
    assert_eq!(m.snapshot().live_slots, 10);

    // Mid-stream, with steps in flight, the victim stops answering anything.
    proxy.freeze();
    support::wait_until(
        "keepalive to drop the frozen actor and free its slots",
        || m.snapshot().live_slots == 4,
    )
    .await;
    // (The proxy cannot count the learner's pings: frozen, it reads nothing.
    // Nothing but keepalive closes this connection: without it the wait
    // above fails.)
    assert_eq!(m.snapshot().connected_actors, 1);
    good.progresses(10).await;
    {
        let released: HashSet<u32> = released
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .copied()
            .collect();
        assert_eq!(
            released,
            victim.slots.iter().copied().collect(),
            "the sink (which drops partial unrolls) heard of exactly the frozen actor's slots"
        );
    }
    victim.stop();
    good.stop();
    drop(proxy);
    server.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_actor_that_answers_pings_keeps_its_stream() {
    let server = support::start_learner(|c| c.serve.keepalive = fast_keepalive()).await;
    let m = Arc::clone(server.metrics());
    let proxy = FreezableProxy::start(tcp_addr(&server)).await;
    let mut idle = RawStream::open_at(&proxy.uri()).await;
    idle.hello(3, "").await;

    // Silent from the hello on: every ping below comes after a keepalive
    // interval without traffic, and each was answered within the timeout
    // (an unanswered one would have closed the connection).
    support::wait_until("three keepalive pings answered", || {
        proxy.client_acks() >= 3
    })
    .await;
    assert!(proxy.learner_pings() >= 3);
    assert_eq!(proxy.connections(), 1);
    let snap = m.snapshot();
    assert_eq!((snap.live_slots, snap.connected_actors), (3, 1));
    assert_eq!(snap.stream_errors, 0);

    // The stream still works.
    idle.send(Kind::Steps(steps(0, &[0, 1, 2]))).await;
    let learner_message::Kind::Actions(actions) = idle.recv().await else {
        panic!("expected actions")
    };
    assert_eq!((actions.seq, actions.actions.len()), (0, 3));
    drop(idle);
    server.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_actor_drops_a_frozen_learner_and_reconnects() {
    // The learner does not ping: only the actor's keepalive can notice.
    let server = support::start_learner(|c| c.serve.keepalive = Keepalive::disabled()).await;
    let m = Arc::clone(server.metrics());
    let proxy = FreezableProxy::start(tcp_addr(&server)).await;
    let mut cfg = ActorConfig::new(proxy.addr().to_string(), EnvConfig::CartPole, 4);
    cfg.seed = 1;
    cfg.keepalive = fast_keepalive();
    cfg.reconnect = ReconnectPolicy {
        initial_backoff: Duration::from_millis(20),
        max_backoff: Duration::from_millis(200),
        max_attempts: None,
    };
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let actor = tokio::spawn(run_actor(cfg, async {
        let _ = stop_rx.await;
    }));
    support::wait_until("steps through the proxy", || {
        m.env_steps.load(Ordering::Relaxed) > 100
    })
    .await;

    proxy.freeze();
    // The learner keeps the frozen stream (no keepalive of its own); the
    // actor's unanswered ping makes it open a second connection.
    support::wait_until("the actor to reconnect past the frozen connection", || {
        proxy.connections() >= 2 && m.snapshot().connected_actors == 2
    })
    .await;
    let steps_after = m.env_steps.load(Ordering::Relaxed);
    support::wait_until("steps on the new connection", || {
        m.env_steps.load(Ordering::Relaxed) > steps_after + 100
    })
    .await;

    let _ = stop_tx.send(());
    let report = support::within("the actor to stop", actor)
        .await
        .expect("actor task")
        .expect("actor ran cleanly");
    assert!(report.sessions >= 2, "{report:?}");
    drop(proxy);
    server.shutdown().await.expect("shutdown");
}
