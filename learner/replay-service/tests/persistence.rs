//! Checkpoints through the service and tables that outlive the server: a
//! checkpoint taken while a writer runs keeps every item acknowledged before
//! it was asked for, and `--restore` brings them back; a mapped table
//! reopens with its items.
mod support;

use seed_replay_service::{ServerOptions, ServiceConfig};
use support::*;

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
