//! Loaded shards: two servers each write a mapped table and stop; a third
//! loads both directories (`load`) and serves them as one read-only table.
//! Every sampled row is byte-identical to an item a writer had acknowledged
//! in that shard, keys carry their shard, both shards are drawn in
//! proportion to their size, priorities route by key, a recent window stays
//! inside each shard's window, and shards whose layouts disagree are
//! refused with an error naming the shard and the field.
use crate::support;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use seed_replay_service::server::sharded_table::split_key;
use seed_replay_service::ServiceConfig;
use support::*;
use tonic::Code;

/// Who wrote an item and as which of their items: (writer, seq).
type ItemId = (u64, u64);

fn json_path(p: &Path) -> String {
    format!("{:?}", p.display().to_string())
}

/// A writer table called `exp` stored in `dir`.
fn writer_config(dir: &Path, capacity: usize) -> ServiceConfig {
    config(&[table_json(
        "exp",
        capacity,
        &format!(
            r#""sampler": {{"kind": "uniform"}}, "storage_dir": {}"#,
            json_path(dir)
        ),
    )])
}

/// A table `exp` loaded from `dirs` with this sampler (JSON).
fn loaded_config(dirs: &[PathBuf], capacity: usize, sampler: &str) -> ServiceConfig {
    let list: Vec<String> = dirs.iter().map(|d| json_path(d)).collect();
    config(&[table_json(
        "exp",
        capacity,
        &format!(r#""sampler": {sampler}, "load": [{}]"#, list.join(", ")),
    )])
}

/// Serves `dir` as a writer table, has `writers` clients insert `per_writer`
/// items each concurrently (in batches of 1 to 5), stops, and returns
/// key -> item for every acknowledged key. Writer ids start at `first_writer`.
async fn write_shard(
    dir: &Path,
    first_writer: u64,
    writers: u64,
    per_writer: u64,
) -> HashMap<u64, ItemId> {
    let server = serve(writer_config(dir, 1000)).await;
    let mut tasks = Vec::new();
    for w in first_writer..first_writer + writers {
        let mut c = client(&server).await;
        tasks.push(tokio::spawn(async move {
            let mut ins = c.inserter("exp").await.unwrap();
            let mut acked = Vec::new();
            let mut seq = 0;
            while seq < per_writer {
                let rows = (1 + (seq + w) % 5).min(per_writer - seq);
                let keys = ins.insert(items(w, seq, rows as u32)).await.unwrap();
                acked.extend(keys.iter().zip(seq..seq + rows).map(|(k, s)| (k, (w, s))));
                seq += rows;
            }
            acked
        }));
    }
    let mut acked = HashMap::new();
    for t in tasks {
        for (k, item) in t.await.unwrap() {
            assert!(
                acked.insert(k, item).is_none(),
                "key {k} acknowledged twice"
            );
        }
    }
    server.stop().await.unwrap();
    acked
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_written_shards_are_served_as_one_table_with_every_row_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let dirs = [dir.path().join("a"), dir.path().join("b")];
    // Shard 0: 3 writers x 100 items; shard 1: 2 writers x 50, ids apart.
    let acked = [
        write_shard(&dirs[0], 0, 3, 100).await,
        write_shard(&dirs[1], 10, 2, 50).await,
    ];
    assert_eq!((acked[0].len(), acked[1].len()), (300, 100));

    let server = serve(loaded_config(&dirs, 1000, r#"{"kind": "uniform"}"#)).await;
    let mut c = client(&server).await;
    let info = c.info(Some("exp")).await.unwrap().remove(0);
    assert_eq!((info.stored, info.capacity), (400, 2000));
    assert_eq!(info.shards.len(), 2);
    for (s, d) in info.shards.iter().zip(&dirs) {
        assert_eq!(s.dir, d.display().to_string());
    }
    assert_eq!((info.shards[0].stored, info.shards[1].stored), (300, 100));

    let mut seen: HashMap<u64, ItemId> = HashMap::new();
    for _ in 0..40 {
        let b = c.sample("exp", 128).await.unwrap();
        let rows = verify(&b);
        let mut per_shard = [0usize; 2];
        for (&key, item) in b.keys().iter().zip(rows) {
            let (shard, local) = split_key(key);
            assert!(shard < 2, "key {key}: shard {shard}");
            assert_eq!(
                acked[shard].get(&local),
                Some(&item),
                "key {key}: not the item shard {shard} acknowledged as {local}"
            );
            // One key, one item, however often it is drawn.
            assert_eq!(*seen.entry(key).or_insert(item), item, "key {key}");
            per_shard[shard] += 1;
        }
        // 300 : 100 items, systematic split of 128: exactly 96 and 32.
        assert_eq!(per_shard, [96, 32]);
    }
    // Both shards' items were drawn, under distinct keys.
    let from = |s: usize| seen.keys().filter(|k| split_key(**k).0 == s).count();
    assert!(from(0) > 150 && from(1) > 60, "{} {}", from(0), from(1));

    // Read-only: inserts and checkpoints are refused, the table goes on.
    let e = c.insert("exp", items(99, 0, 1)).await.unwrap_err();
    assert_eq!(e.code(), Some(Code::FailedPrecondition), "{e}");
    assert!(e.to_string().contains("read-only"), "{e}");
    let e = c.checkpoint("exp").await.unwrap_err();
    assert_eq!(e.code(), Some(Code::FailedPrecondition), "{e}");
    let e = c.update_priorities("exp", &[0], &[1.0]).await.unwrap_err();
    assert_eq!(e.code(), Some(Code::FailedPrecondition), "{e}");
    verify(&c.sample("exp", 8).await.unwrap());
    let info = c.info(None).await.unwrap().remove(0);
    assert_eq!(info.sampled, 40 * 128 + 8);
    assert_eq!(info.rejected_requests, 3);
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shards_whose_layouts_disagree_are_refused_naming_the_shard_and_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good");
    write_shard(&good, 0, 1, 10).await;
    // Same field names, `obs` transposed.
    let transposed = dir.path().join("transposed");
    let t = format!(
        r#"{{"name": "exp", "capacity": 1000, "sampler": {{"kind": "uniform"}},
            "fields": [{{"name": "obs", "dtype": "f32", "shape": [4, 3]}},
                       {{"name": "tag", "dtype": "u64", "shape": [4]}}],
            "storage_dir": {}}}"#,
        json_path(&transposed)
    );
    seed_replay_service::start(config(&[t]), Default::default())
        .await
        .unwrap()
        .stop()
        .await
        .unwrap();
    let small = dir.path().join("small");
    serve(writer_config(&small, 500))
        .await
        .stop()
        .await
        .unwrap();

    let start = |dirs: Vec<PathBuf>| async move {
        seed_replay_service::start(
            loaded_config(&dirs, 1000, r#"{"kind": "uniform"}"#),
            Default::default(),
        )
        .await
        .map(|_| ())
        .unwrap_err()
        .to_string()
    };
    let e = start(vec![good.clone(), transposed.clone()]).await;
    assert!(
        e.contains("table `exp`, shard 1")
            && e.contains(&transposed.display().to_string())
            && e.contains("field `obs`: shape [3, 4] in the config, [4, 3] in the directory"),
        "{e}"
    );
    let e = start(vec![small.clone(), good.clone()]).await;
    assert!(
        e.contains("shard 0") && e.contains("`capacity`: 500 in the directory, 1000"),
        "{e}"
    );
    // The same directory under another spelling.
    let e = start(vec![good.clone(), good.join("..").join("good")]).await;
    assert!(
        e.contains("shard 1") && e.contains("same directory as shard 0"),
        "{e}"
    );
    let e = start(vec![good.clone(), dir.path().join("missing")]).await;
    assert!(e.contains("shard 1") && e.contains("layout.json"), "{e}");

    // Shards that agree but hold nothing: served, and a sample is refused
    // at once (nothing will ever arrive) rather than left waiting.
    let empty = [dir.path().join("e0"), dir.path().join("e1")];
    for d in &empty {
        serve(writer_config(d, 1000)).await.stop().await.unwrap();
    }
    let server = serve(loaded_config(&empty, 1000, r#"{"kind": "uniform"}"#)).await;
    let mut c = client(&server).await;
    let e = c.sample("exp", 1).await.unwrap_err();
    assert_eq!(e.code(), Some(Code::FailedPrecondition), "{e}");
    assert!(e.to_string().contains("hold no items"), "{e}");
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recent_window_over_loaded_shards_returns_only_each_shards_newest_items() {
    let dir = tempfile::tempdir().unwrap();
    let dirs = [dir.path().join("a"), dir.path().join("b")];
    let acked = [
        write_shard(&dirs[0], 0, 2, 100).await,
        write_shard(&dirs[1], 10, 1, 50).await,
    ];
    let newest = |shard: usize| acked[shard].keys().max().copied().unwrap();
    let server = serve(loaded_config(
        &dirs,
        1000,
        r#"{"kind": "recent", "window": 20}"#,
    ))
    .await;
    let mut c = client(&server).await;
    let mut per_shard = [0usize; 2];
    for _ in 0..20 {
        let b = c.sample("exp", 64).await.unwrap();
        for (&key, item) in b.keys().iter().zip(verify(&b)) {
            let (shard, local) = split_key(key);
            assert_eq!(acked[shard].get(&local), Some(&item), "key {key}");
            // The shard's 20 newest keys, and nothing older.
            assert!(
                local + 20 > newest(shard),
                "key {key}: shard {shard}, local {local}"
            );
            per_shard[shard] += 1;
        }
    }
    // Windows of 20 and 20: half each.
    assert_eq!(per_shard, [640, 640]);
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn priorities_of_loaded_shards_route_by_key_and_share_one_weight_scale() {
    let dir = tempfile::tempdir().unwrap();
    let dirs = [dir.path().join("a"), dir.path().join("b")];
    let acked = [
        write_shard(&dirs[0], 0, 1, 30).await,
        write_shard(&dirs[1], 10, 1, 30).await,
    ];
    let server = serve(loaded_config(
        &dirs,
        1000,
        r#"{"kind": "prioritized", "alpha": 1.0, "beta": 1.0, "eps": 0.0}"#,
    ))
    .await;
    let mut c = client(&server).await;
    let key = |shard: usize, local: u64| ((shard as u64) << 56) | local;
    // Shard 0's items 2.0; shard 1's 1.0, except its item 7: 117.0. Mass
    // 60 + 29 + 117: item (1, 7) is drawn 117/206 of the time.
    let mut keys: Vec<u64> = (0..30).map(|l| key(0, l)).collect();
    keys.extend((0..30).map(|l| key(1, l)));
    let mut priorities = vec![2.0; 30];
    priorities.extend((0..30).map(|l| if l == 7 { 117.0 } else { 1.0 }));
    let r = c
        .update_priorities("exp", &keys, &priorities)
        .await
        .unwrap();
    assert_eq!((r.applied, r.stale, r.invalid), (60, 0, 0));

    let b = c.sample("exp", 206).await.unwrap();
    let mut heavy = 0;
    for ((&k, w), item) in b.keys().iter().zip(b.weights()).zip(verify(&b)) {
        let (shard, local) = split_key(k);
        assert_eq!(acked[shard].get(&local), Some(&item), "key {k}");
        // One normalisation over both shards: the smallest priority (1.0).
        let expected = match (shard, local) {
            (1, 7) => 1.0 / 117.0,
            (1, _) => 1.0,
            _ => 0.5,
        };
        assert!(
            (w - expected).abs() < 1e-6,
            "key {k}: weight {w}, expected {expected}"
        );
        heavy += usize::from(k == key(1, 7));
    }
    // Systematic over the union's mass: 117 of 206 draws, give or take one.
    assert!(
        (116..=118).contains(&heavy),
        "heavy item drawn {heavy} times"
    );

    let e = c
        .update_priorities("exp", &[key(0, 1), key(5, 1)], &[1.0, 1.0])
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(Code::InvalidArgument), "{e}");
    assert!(
        e.to_string().contains("keys[1]") && e.to_string().contains("shard 5"),
        "{e}"
    );
    server.stop().await.unwrap();
}
