//! `Follow` and mirrors over loopback: a mirror of a table that wraps many
//! times under concurrent writers ends with the primary's keys and bytes;
//! a follow resumed from its cursor misses and repeats nothing; a cursor
//! older than the oldest item gets a gap marker; a follower that stops
//! reading holds the server back and then learns what it missed; writes on
//! a mirror are refused with a status naming the table.
use crate::support;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use seed_replay::{FollowRead, SampleBatch};
use seed_replay_service::client::{FollowEvent, FollowOptions, FollowStream};
use seed_replay_service::server::{start_mirror, MirrorOptions, Table};
use seed_replay_service::{FieldBlocks, InsertBatch, RunningServer, ServerOptions, ServiceConfig};
use support::*;
use tonic::Code;

/// How long a test waits for a mirror before calling it stuck (a hang
/// guard, not a timing assertion).
const STUCK: Duration = Duration::from_secs(120);

async fn mirror_of(primary: &RunningServer) -> RunningServer {
    let options = MirrorOptions {
        upstream: primary.addr().to_string(),
        client: Default::default(),
    };
    start_mirror(options, ServerOptions::default())
        .await
        .unwrap()
}

/// Every stored item of `table`, oldest first: (keys, `obs` bytes, `tag`
/// bytes), read through the slot protocol.
fn contents(table: &Table) -> (Vec<u64>, Vec<u8>, Vec<u8>) {
    let b = table.buffer();
    let mut batch: SampleBatch = b.new_batch(b.capacity());
    let read = b.read_since(b.oldest_key(), &mut batch, b.capacity());
    assert!(matches!(read, FollowRead::Items { .. }), "{read:?}");
    (
        batch.keys().iter().map(|k| k.0).collect(),
        batch.field("obs").unwrap().to_vec(),
        batch.field("tag").unwrap().to_vec(),
    )
}

/// The next event, which must come within [`STUCK`].
async fn next_event(stream: &mut FollowStream) -> FollowEvent {
    tokio::time::timeout(STUCK, stream.next())
        .await
        .expect("follow stream stuck")
        .unwrap()
        .expect("follow stream ended")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mirror_follows_concurrent_inserts_and_overwrites_and_ends_byte_identical() {
    const CAPACITY: usize = 64;
    const WRITERS: u64 = 3;
    const PER_WRITER: u64 = 400;
    let primary = serve(config(&[table_json(
        "t",
        CAPACITY,
        r#""sampler": {"kind": "prioritized"}"#,
    )]))
    .await;
    let mirror = mirror_of(&primary).await;

    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let mut c = client(&primary).await;
        writers.push(tokio::spawn(async move {
            let mut ins = c.inserter("t").await.unwrap();
            let mut seq = 0;
            while seq < PER_WRITER {
                // Batches of 1 to 7 rows, several in flight.
                let rows = (1 + (seq + w) % 7).min(PER_WRITER - seq) as u32;
                ins.send(items(w, seq, rows)).await.unwrap();
                seq += u64::from(rows);
                if ins.pending() > 4 {
                    ins.ack().await.unwrap();
                }
            }
            while ins.pending() > 0 {
                ins.ack().await.unwrap();
            }
        }));
    }
    for w in writers {
        w.await.unwrap();
    }
    let total = WRITERS * PER_WRITER;
    let primary_table = primary.service().table("t").unwrap();
    assert_eq!(primary_table.buffer().next_key(), total);
    let mirror_table = mirror.service().table("t").unwrap();
    tokio::time::timeout(STUCK, mirror_table.wait_for_next_key(total))
        .await
        .expect("the mirror never caught up");

    // The ring wrapped total / CAPACITY times; both hold the last lap.
    let (keys, obs, tag) = contents(&primary_table);
    assert_eq!(keys, (total - CAPACITY as u64..total).collect::<Vec<_>>());
    let (m_keys, m_obs, m_tag) = contents(&mirror_table);
    assert_eq!(m_keys, keys, "the mirror holds other keys");
    assert!(m_obs == obs && m_tag == tag, "the mirror's bytes differ");

    // The mirror serves samples itself: whole items of the last lap.
    let mut m = client(&mirror).await;
    let batch = m.sample("t", 32).await.unwrap();
    verify(&batch);
    assert!(batch
        .keys()
        .iter()
        .all(|&k| k >= total - CAPACITY as u64 && k < total));
    let info = m.info(Some("t")).await.unwrap().remove(0);
    assert_eq!(info.sampler, "uniform");
    assert_eq!(info.capacity, CAPACITY as u64);
    assert_eq!(info.stored, CAPACITY as u64);
    mirror.stop().await.unwrap();
    primary.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resuming_a_follow_from_a_cursor_continues_without_gap_or_duplicate() {
    let server = serve(config(&[table_json(
        "t",
        1000,
        r#""sampler": {"kind": "uniform"}"#,
    )]))
    .await;
    let mut c = client(&server).await;
    c.insert("t", items(0, 0, 100)).await.unwrap();

    let mut seen: Vec<u64> = Vec::new();
    let mut check = |event: FollowEvent| match event {
        FollowEvent::Items(b) => {
            let tag = b.field("tag").unwrap();
            for (row, key) in b.keys().enumerate() {
                let at = row * 32;
                let seq = u64::from_le_bytes(tag[at + 8..at + 16].try_into().unwrap());
                assert_eq!(seq, key, "key {key} carries item {seq}'s bytes");
            }
            assert!(b.replaced().is_empty(), "nothing was overwritten");
            seen.extend(b.keys());
            b.next_key()
        }
        FollowEvent::Gap { requested, oldest } => panic!("gap {requested}..{oldest}"),
    };
    let options = |cursor| FollowOptions {
        cursor,
        max_batch: 7,
        max_in_flight: 1,
    };
    let mut stream = c.follow_with("t", options(0)).await.unwrap();
    let mut cursor = 0;
    while cursor < 40 {
        cursor = check(next_event(&mut stream).await);
    }
    assert_eq!(stream.cursor(), cursor);
    drop(stream);

    c.insert("t", items(0, 100, 50)).await.unwrap();
    let mut stream = c.follow_with("t", options(cursor)).await.unwrap();
    while cursor < 150 {
        cursor = check(next_event(&mut stream).await);
    }
    assert_eq!(cursor, 150);
    assert_eq!(seen, (0..150).collect::<Vec<_>>());
    drop(stream);

    // A cursor past the table's next key is refused, naming the field.
    let err = c.follow("t", 151).await.expect_err("refused");
    assert_eq!(err.code(), Some(Code::InvalidArgument), "{err}");
    assert!(err.to_string().contains("cursor"), "{err}");
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cursor_older_than_the_oldest_item_gets_a_gap_marker() {
    let server = serve(config(&[table_json(
        "t",
        16,
        r#""sampler": {"kind": "uniform"}"#,
    )]))
    .await;
    let mut c = client(&server).await;
    for first in (0..50).step_by(10) {
        c.insert("t", items(0, first, 10)).await.unwrap();
    }
    let mut stream = c.follow("t", 3).await.unwrap();
    match next_event(&mut stream).await {
        FollowEvent::Gap { requested, oldest } => assert_eq!((requested, oldest), (3, 34)),
        FollowEvent::Items(b) => panic!("items {:?} instead of a gap", b.keys()),
    }
    let mut next = 34;
    while next < 50 {
        match next_event(&mut stream).await {
            FollowEvent::Items(b) => {
                assert_eq!(b.keys().start, next);
                // Keys from 16 on took the slots of the keys a lap below.
                assert_eq!(b.replaced(), b.keys().start - 16..b.keys().end - 16);
                next = b.next_key();
            }
            FollowEvent::Gap { requested, oldest } => panic!("second gap {requested}..{oldest}"),
        }
    }
    assert_eq!(next, 50);
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_that_stops_reading_holds_the_server_back_then_gets_a_gap() {
    const ITEMS: u64 = 400;
    const ITEM_BYTES: usize = 64 * 1024;
    let json = format!(
        r#"{{"tables": [{{"name": "big", "capacity": 100,
            "fields": [{{"name": "blob", "dtype": "u8", "shape": [{ITEM_BYTES}]}},
                       {{"name": "id", "dtype": "u64", "shape": []}}],
            "sampler": {{"kind": "uniform"}}}}]}}"#
    );
    let server = serve(ServiceConfig::from_json(&json).unwrap()).await;
    let mut c = client(&server).await;
    let insert = |c: &mut seed_replay_service::ReplayClient, from: u64, to: u64| {
        let mut c = c.clone();
        async move {
            let mut ins = c.inserter("big").await.unwrap();
            for i in from..to {
                let blob = vec![(i % 251) as u8; ITEM_BYTES];
                let batch = InsertBatch::new(1)
                    .u8("blob", &[ITEM_BYTES], &blob)
                    .unwrap()
                    .u64("id", &[], &[i])
                    .unwrap();
                ins.insert(batch).await.unwrap();
            }
        }
    };
    insert(&mut c, 0, 100).await;
    let options = FollowOptions {
        cursor: 0,
        max_batch: 1,
        max_in_flight: 1,
    };
    let mut stream = c.follow_with("big", options).await.unwrap();
    // The ring goes round three more times while the follower does not
    // read.
    let writer = tokio::spawn(insert(&mut c, 100, ITEMS));
    // The producer must stop at the channel once HTTP/2's window and the
    // socket buffers are full (generous deadline: a hang guard).
    let deadline = Instant::now() + STUCK;
    loop {
        let info = c.info(Some("big")).await.unwrap().remove(0);
        if info.sample_flow_control_waits > 0 {
            break;
        }
        assert!(Instant::now() < deadline, "the producer never waited");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    writer.await.unwrap();

    let mut seen = HashSet::new();
    let mut gaps = 0;
    let mut next = 0;
    while next < ITEMS {
        match next_event(&mut stream).await {
            FollowEvent::Items(b) => {
                let id = u64::from_le_bytes(b.field("id").unwrap().try_into().unwrap());
                assert_eq!(id, b.keys().start);
                assert!(
                    b.field("blob")
                        .unwrap()
                        .iter()
                        .all(|&x| x == (id % 251) as u8),
                    "item {id} torn"
                );
                assert!(seen.insert(id), "item {id} twice");
                next = b.next_key();
            }
            FollowEvent::Gap { requested, oldest } => {
                assert_eq!(requested, next);
                assert!(oldest > requested);
                gaps += 1;
                next = oldest;
            }
        }
    }
    assert!(gaps >= 1, "a follower three laps behind got no gap");
    // Items held back by flow control plus the last lap, not the 400.
    assert!(seen.len() < ITEMS as usize, "{} items sent", seen.len());
    assert!(
        (300..ITEMS).all(|k| seen.contains(&k)),
        "the last lap is incomplete"
    );
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_on_a_mirror_are_refused_naming_the_table() {
    let primary = serve(config(&[table_json(
        "exp",
        32,
        r#""sampler": {"kind": "prioritized"}"#,
    )]))
    .await;
    let mirror = mirror_of(&primary).await;
    let mut m = client(&mirror).await;

    let err = m.insert("exp", items(0, 0, 1)).await.expect_err("refused");
    assert_eq!(err.code(), Some(Code::FailedPrecondition), "{err}");
    assert!(err.to_string().contains("table `exp` is a mirror"), "{err}");
    let err = m
        .update_priorities("exp", &[0], &[1.0])
        .await
        .expect_err("refused");
    assert_eq!(err.code(), Some(Code::FailedPrecondition), "{err}");
    assert!(err.to_string().contains("`exp`"), "{err}");
    let err = m.follow("exp", 0).await.expect_err("refused");
    assert_eq!(err.code(), Some(Code::FailedPrecondition), "{err}");

    // The primary still takes writes, and the mirror gets them.
    let mut p = client(&primary).await;
    p.insert("exp", items(0, 0, 5)).await.unwrap();
    let table = mirror.service().table("exp").unwrap();
    tokio::time::timeout(STUCK, table.wait_for_next_key(5))
        .await
        .expect("the mirror never caught up");
    let info = m.info(Some("exp")).await.unwrap().remove(0);
    assert_eq!(info.stored, 5);
    assert!(info.rejected_requests >= 3);
    mirror.stop().await.unwrap();
    primary.stop().await.unwrap();
}
