//! Checkpoints through the service and tables that outlive the server: a
//! checkpoint taken while a writer runs keeps every item acknowledged before
//! it was asked for, and `--restore` brings them back; a mapped table
//! reopens with its items, and a server stopped while writers are still
//! inserting into one comes back with every item it acknowledged, byte for
//! byte, and its FIFO position.
use crate::support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use seed_replay_service::{ServerOptions, ServiceConfig};
use support::*;
use tokio::sync::watch;

fn config_with(dir: &std::path::Path, table: String) -> ServiceConfig {
    ServiceConfig::from_json(&format!(
        r#"{{"checkpoint_dir": {:?}, "tables": [{table}]}}"#,
        dir.join("ckpt").display().to_string()
    ))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkpoint_under_load_restores_every_item_acknowledged_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let table = table_json("q", 10_000, r#""sampler": {"kind": "fifo"}"#);
    let server = serve(config_with(dir.path(), table.clone())).await;
    let mut c = client(&server).await;
    c.insert("q", items(1, 0, 500)).await.unwrap();

    // A writer keeps going while the checkpoint is written.
    let mut w = client(&server).await;
    let writer = tokio::spawn(async move {
        let mut ins = w.inserter("q").await.unwrap();
        for i in 0..100 {
            ins.insert(items(2, i * 10, 10)).await.unwrap();
        }
    });
    let written = c.checkpoint("q").await.unwrap();
    assert!(written.items >= 500, "{written:?}");
    assert!(written.path.ends_with("q.seedrpl"), "{}", written.path);
    writer.await.unwrap();
    server.stop().await.unwrap();

    let options = ServerOptions {
        restore: true,
        ..ServerOptions::default()
    };
    let server = seed_replay_service::start(config_with(dir.path(), table), options)
        .await
        .unwrap();
    let mut c = client(&server).await;
    // Writer 1's 500 items, acknowledged before the checkpoint was asked
    // for, all there, in order, under their keys. (The stored count the
    // restored table reports can exceed `written.items`: a checkpoint taken
    // under load copies the items first and the counters a moment later.)
    let b = c.sample("q", 500).await.unwrap();
    assert_eq!(verify(&b), (0..500).map(|s| (1, s)).collect::<Vec<_>>());
    assert_eq!(b.keys(), (0..500).collect::<Vec<u64>>());
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkpoint_without_a_directory_is_refused() {
    let server = serve(config(&[table_json(
        "q",
        8,
        r#""sampler": {"kind": "fifo"}"#,
    )]))
    .await;
    let mut c = client(&server).await;
    let e = c.checkpoint("q").await.unwrap_err();
    assert_eq!(e.code(), Some(tonic::Code::FailedPrecondition));
    assert!(e.to_string().contains("checkpoint_dir"), "{e}");
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mapped_table_reopens_with_its_items() {
    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("u");
    let table = table_json(
        "u",
        64,
        &format!(
            r#""sampler": {{"kind": "uniform"}}, "storage_dir": {:?}"#,
            storage.display().to_string()
        ),
    );
    let server = serve(config(std::slice::from_ref(&table))).await;
    let mut c = client(&server).await;
    c.insert("u", items(4, 0, 40)).await.unwrap();
    server.stop().await.unwrap();

    let server = serve(config(&[table])).await;
    let mut c = client(&server).await;
    let info = c.info(Some("u")).await.unwrap().remove(0);
    assert_eq!(info.stored, 40);
    assert!(info.storage_dir.ends_with("/u"), "{}", info.storage_dir);
    let b = c.sample("u", 64).await.unwrap();
    for ((w, s), k) in verify(&b).into_iter().zip(b.keys()) {
        assert_eq!((w, s), (4, *k));
    }
    // New keys continue after the reopened ones.
    assert_eq!(c.insert("u", items(4, 40, 1)).await.unwrap().first, 40);
    server.stop().await.unwrap();
}

/// `storage_order: columns` makes a mapped directory in columns (its
/// header says so), which reopens with its items; a value that is no order
/// is refused naming the setting and the value, and so is the setting on a
/// grouped table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_in_columns_is_mapped_in_columns_and_a_bad_order_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("c");
    let table = table_json(
        "c",
        64,
        &format!(
            r#""sampler": {{"kind": "uniform"}}, "storage_order": "columns", "storage_dir": {:?}"#,
            storage.display().to_string()
        ),
    );
    let server = serve(config(std::slice::from_ref(&table))).await;
    let mut c = client(&server).await;
    c.insert("c", items(5, 0, 40)).await.unwrap();
    server.stop().await.unwrap();
    let header = std::fs::read_to_string(storage.join("layout.json")).unwrap();
    assert!(header.contains("\"Columns\""), "{header}");
    let server = serve(config(&[table])).await;
    let mut c = client(&server).await;
    let b = c.sample("c", 64).await.unwrap();
    for ((w, s), k) in verify(&b).into_iter().zip(b.keys()) {
        assert_eq!((w, s), (5, *k));
    }
    server.stop().await.unwrap();

    let bad = table_json(
        "b",
        8,
        r#""sampler": {"kind": "uniform"}, "storage_order": "rows""#,
    );
    let e = ServiceConfig::from_json(&format!(r#"{{"tables": [{bad}]}}"#))
        .unwrap_err()
        .to_string();
    assert!(e.contains("storage_order") && e.contains("rows"), "{e}");
    let grouped = table_json(
        "g",
        8,
        r#""sampler": {"kind": "grouped", "group_size": 2}, "storage_order": "columns""#,
    );
    let e = ServiceConfig::from_json(&format!(r#"{{"tables": [{grouped}]}}"#))
        .unwrap_err()
        .to_string();
    assert!(e.contains("storage_order"), "{e}");
}

/// Three writers insert into a mapped FIFO table without pause while a
/// sampler takes 50 batches of 4 (they complete while the writes go on:
/// a slot copy never waits for a writer outside that slot); the server is
/// stopped under the writers. The restarted server has every acknowledged
/// item under its key with its exact bytes, the 200 consumed ones gone and
/// its FIFO cursor right after them (a mapped table keeps the consumed
/// marks); items stored but not acknowledged before the stop (the writers'
/// last batches) are there whole too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_from_a_mapped_directory_keeps_every_acknowledged_item() {
    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("q");
    let table = table_json(
        "q",
        100_000,
        &format!(
            r#""sampler": {{"kind": "fifo"}}, "storage_dir": {:?}"#,
            storage.display().to_string()
        ),
    );
    let server = serve(config(std::slice::from_ref(&table))).await;
    let acked: Arc<Mutex<HashMap<u64, (u64, u64)>>> = Arc::default();
    let (count_tx, mut count_rx) = watch::channel(0usize);
    let mut writers = Vec::new();
    for w in 0..3u64 {
        let mut c = client(&server).await;
        let acked = Arc::clone(&acked);
        let count_tx = count_tx.clone();
        writers.push(tokio::spawn(async move {
            let mut ins = c.inserter("q").await.unwrap();
            let mut seq = 0u64;
            // Until the server stops under it.
            loop {
                let rows = 1 + (seq + w) % 8;
                let Ok(keys) = ins.insert(items(w, seq, rows as u32)).await else {
                    return;
                };
                let mut a = acked.lock().unwrap();
                for (k, s) in keys.iter().zip(seq..) {
                    assert!(a.insert(k, (w, s)).is_none(), "key {k} acknowledged twice");
                }
                count_tx.send_replace(a.len());
                seq += rows;
            }
        }));
    }
    drop(count_tx);
    let mut c = client(&server).await;
    let mut received = Vec::new();
    for _ in 0..50 {
        let b = c.sample("q", 4).await.unwrap();
        received.extend(b.keys().iter().copied().zip(verify(&b)));
    }
    count_rx.wait_for(|n| *n >= 2000).await.unwrap();
    server.stop().await.unwrap();
    for w in writers {
        w.await.unwrap();
    }
    let acked = std::mem::take(&mut *acked.lock().unwrap());

    // FIFO handed out keys 0..200 in order, each the acknowledged item.
    assert_eq!(
        received.iter().map(|r| r.0).collect::<Vec<_>>(),
        (0..200).collect::<Vec<u64>>()
    );
    for (k, item) in &received {
        assert_eq!(acked.get(k), Some(item), "key {k}");
    }

    let server = serve(config(&[table])).await;
    let mut c = client(&server).await;
    let info = c.info(Some("q")).await.unwrap().remove(0);
    // Counters are read back from the slots: every item written, the 200
    // consumed ones removed.
    assert!(info.inserted as usize >= acked.len(), "{info:?}");
    assert_eq!(info.removed, 200, "{info:?}");
    assert_eq!(info.available, info.inserted - 200, "{info:?}");
    let b = c.sample("q", info.available as u32).await.unwrap();
    let rows = verify(&b);
    // The cursor resumes right after the consumed items, and every key
    // from there on is stored: no hole, nothing foreign.
    assert_eq!(b.keys(), (200..200 + info.available).collect::<Vec<u64>>());
    let remaining: HashMap<u64, (u64, u64)> = b.keys().iter().copied().zip(rows).collect();
    for (k, item) in &acked {
        if *k >= 200 {
            assert_eq!(
                remaining.get(k),
                Some(item),
                "acknowledged key {k} lost or changed"
            );
        }
    }
    server.stop().await.unwrap();
}
