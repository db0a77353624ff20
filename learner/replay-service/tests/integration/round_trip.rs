//! Insert, sample and priority round trips over loopback for every sampler
//! the service serves, plus info and the policy-version path.
use crate::support;

use std::collections::HashSet;

use seed_replay_service::client::SampleOptions;
use seed_replay_service::FieldBlocks;
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifo_hands_each_item_out_once_in_order() {
    let server = serve(config(&[table_json(
        "q",
        64,
        r#""sampler": {"kind": "fifo"}"#,
    )]))
    .await;
    let mut c = client(&server).await;
    let keys = c.insert("q", items(1, 0, 10)).await.unwrap();
    assert_eq!((keys.first, keys.count), (0, 10));
    let keys = c.insert("q", items(1, 10, 5)).await.unwrap();
    assert_eq!((keys.first, keys.count), (10, 5));
    let b = c.sample("q", 15).await.unwrap();
    assert_eq!(b.keys(), (0..15).collect::<Vec<u64>>());
    let rows = verify(&b);
    assert_eq!(rows, (0..15).map(|s| (1, s)).collect::<Vec<_>>());
    assert!(b.weights().iter().all(|&w| w == 1.0));
    let info = &c.info(Some("q")).await.unwrap()[0];
    assert_eq!((info.inserted, info.sampled, info.available), (15, 15, 0));
    assert_eq!(info.sampler, "fifo");
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uniform_max_times_recent_and_without_replacement_sample_stored_items() {
    let server = serve(config(&[
        table_json("u", 32, r#""sampler": {"kind": "uniform"}"#),
        table_json(
            "m",
            32,
            r#""sampler": {"kind": "max_times_sampled", "max_times": 2}"#,
        ),
        table_json("r", 32, r#""sampler": {"kind": "recent", "window": 4}"#),
        table_json(
            "w",
            32,
            r#""sampler": {"kind": "uniform_without_replacement"}"#,
        ),
    ]))
    .await;
    let mut c = client(&server).await;
    for t in ["u", "m", "r", "w"] {
        c.insert(t, items(7, 0, 20)).await.unwrap();
    }
    // Uniform: rows are whole stored items.
    let b = c.sample("u", 64).await.unwrap();
    assert_eq!(b.rows(), 64);
    for ((w, s), k) in verify(&b).into_iter().zip(b.keys()) {
        assert_eq!((w, s), (7, *k));
    }
    // Max times 2: 20 items give 40 samples, each item at most twice.
    let mut counts = [0u32; 20];
    for _ in 0..4 {
        let b = c.sample("m", 10).await.unwrap();
        for (_, s) in verify(&b) {
            counts[s as usize] += 1;
        }
    }
    assert!(counts.iter().all(|&n| n == 2), "{counts:?}");
    // Recent window 4: only the last four keys.
    let b = c.sample("r", 50).await.unwrap();
    assert!(
        b.keys().iter().all(|&k| (16..20).contains(&k)),
        "{:?}",
        b.keys()
    );
    verify(&b);
    // Without replacement: one pass of 20 covers every item once.
    let b = c.sample("w", 20).await.unwrap();
    let seen: HashSet<u64> = b.keys().iter().copied().collect();
    assert_eq!(seen.len(), 20);
    verify(&b);
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prioritized_follows_priorities_from_insert_and_update() {
    let server = serve(config(&[table_json(
        "p",
        64,
        r#""sampler": {"kind": "prioritized", "alpha": 1.0, "beta": 1.0, "eps": 1e-9}"#,
    )]))
    .await;
    let mut c = client(&server).await;
    // Priorities given with the insert: only item 3 can be drawn.
    let mut prio = vec![0.0f32; 8];
    prio[3] = 1.0;
    let batch = items(2, 0, 8).priorities(prio).unwrap();
    c.insert("p", batch).await.unwrap();
    let b = c.sample("p", 32).await.unwrap();
    assert!(b.keys().iter().all(|&k| k == 3), "{:?}", b.keys());
    verify(&b);
    // Move all the mass to item 6 by key.
    let r = c
        .update_priorities("p", &[3, 6, 1_000], &[0.0, 5.0, 1.0])
        .await
        .unwrap();
    assert_eq!((r.applied, r.stale), (2, 1));
    let b = c.sample("p", 32).await.unwrap();
    assert!(b.keys().iter().all(|&k| k == 6), "{:?}", b.keys());
    // Importance weights: the only drawable item has the largest weight.
    assert!(b.weights().iter().all(|&w| w > 0.0 && w <= 1.0));
    let info = &c.info(Some("p")).await.unwrap()[0];
    assert_eq!(info.stale_priority_updates, 1);
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policy_versions_travel_as_the_version_field_and_feed_the_lag_cap() {
    let json = r#"{"tables": [{"name": "v", "capacity": 16,
        "fields": [{"name": "x", "dtype": "i32", "shape": [2]},
                   {"name": "version", "dtype": "u64", "shape": []}],
        "policy_version_field": "version",
        "sampler": {"kind": "fifo"},
        "policy_lag": {"max_lag": 2, "action": "drop"}}]}"#;
    let server = serve(seed_replay_service::ServiceConfig::from_json(json).unwrap()).await;
    let mut c = client(&server).await;
    let batch = seed_replay_service::InsertBatch::new(4)
        .i32("x", &[2], &[0, 1, 2, 3, 4, 5, 6, 7])
        .unwrap()
        .policy_versions(vec![1, 5, 9, 10])
        .unwrap();
    c.insert("v", batch).await.unwrap();
    c.set_policy_version("v", 10).await.unwrap();
    // Lag > 2 is dropped: versions 1 and 5 go, 9 and 10 come out.
    let mut opts = SampleOptions::new(4);
    opts.max_batches = 1;
    let mut s = c.sample_stream("v", opts).await.unwrap();
    let b = s.next().await.unwrap().unwrap();
    assert_eq!(b.policy_versions(), &[9, 10]);
    assert_eq!(b.keys(), &[2, 3]);
    let x: Vec<i32> = b
        .field("x")
        .unwrap()
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    assert_eq!(x, vec![4, 5, 6, 7]);
    let info = &c.info(None).await.unwrap()[0];
    assert_eq!(info.dropped_policy_lag, 2);
    assert_eq!(info.policy_version_field, "version");
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pipelined_stream_delivers_its_batches_and_ends() {
    let server = serve(config(&[table_json(
        "u",
        256,
        r#""sampler": {"kind": "uniform"}"#,
    )]))
    .await;
    let mut c = client(&server).await;
    let mut inserter = c.inserter("u").await.unwrap();
    for i in 0..20 {
        inserter.send(items(3, i * 10, 10)).await.unwrap();
    }
    for i in 0..20 {
        let k = inserter.ack().await.unwrap();
        assert_eq!((k.first, k.count), (i * 10, 10));
    }
    let mut opts = SampleOptions::new(16);
    opts.max_batches = 50;
    opts.max_in_flight = 4;
    let mut s = c.sample_stream("u", opts).await.unwrap();
    let mut batches = 0;
    while let Some(b) = s.next().await.unwrap() {
        verify(&b);
        batches += 1;
    }
    assert_eq!(batches, 50);
    server.stop().await.unwrap();
}
