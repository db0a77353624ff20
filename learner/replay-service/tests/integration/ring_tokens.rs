//! Ring tables (not grouped) with a variable-length field over loopback:
//! token lists go in through `Insert` and come back through `Sample`,
//! `Follow`, a mirror and loaded shards without padding and byte for
//! byte; bad offsets end only their stream, with a status naming the field
//! and the offset at fault; a batch whose rows outgrow a message is refused
//! naming `batch_size`, and a follower gets its rows in messages that fit.
use crate::support;

use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use seed_replay::DType;
use seed_replay_service::client::FollowEvent;
use seed_replay_service::pb::replay_client::ReplayClient as RawClient;
use seed_replay_service::pb::{FieldBlock, FieldDtype, InsertRequest};
use seed_replay_service::server::{start_mirror, MirrorOptions};
use seed_replay_service::{FieldBlocks, InsertBatch, ServerOptions, ServiceConfig};
use support::*;
use tokio_stream::StreamExt;
use tonic::Code;

/// How long a test waits for a mirror (a hang guard, not a timing
/// assertion).
const STUCK: Duration = Duration::from_secs(120);

/// A table `r` of `id: u64` and `tokens: i32 [-1]` (at most `max_len`),
/// with `extra` (its sampler at least).
fn token_table(capacity: usize, max_len: &str, extra: &str) -> String {
    format!(
        r#"{{"name": "r", "capacity": {capacity},
            "fields": [{{"name": "id", "dtype": "u64", "shape": []}},
                       {{"name": "tokens", "dtype": "i32", "shape": [-1]{max_len}}}],
            {extra}}}"#
    )
}

/// Item `id` holds `id % 29` tokens, each `id * 7`.
fn tokens_of(id: u64) -> Vec<i32> {
    vec![(id * 7) as i32; (id % 29) as usize]
}

/// Items `ids` as one batch.
fn token_batch(ids: &[u64]) -> InsertBatch {
    let mut data = Vec::new();
    let mut offsets = vec![0u64];
    for &id in ids {
        let t = tokens_of(id);
        data.extend(t.iter().flat_map(|x| x.to_le_bytes()));
        offsets.push(offsets.last().unwrap() + t.len() as u64);
    }
    InsertBatch::new(ids.len() as u32)
        .u64("id", &[], ids)
        .unwrap()
        .variable("tokens", DType::I32, &[], Bytes::from(data), offsets)
        .unwrap()
}

/// Each row of a received batch against its id; returns the ids.
fn check_rows(fields: &impl FieldBlocks) -> Vec<u64> {
    let ids = fields.field_u64("id").unwrap();
    let values = fields.field("tokens").unwrap();
    let offsets = fields.offsets("tokens").unwrap();
    assert_eq!(offsets.len(), ids.len() + 1);
    assert_eq!(values.len() as u64, offsets[ids.len()] * 4, "no padding");
    for (i, &id) in ids.iter().enumerate() {
        let row: Vec<i32> = values[offsets[i] as usize * 4..offsets[i + 1] as usize * 4]
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        assert_eq!(row, tokens_of(id), "tokens of item {id}");
    }
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_lists_go_in_and_come_out_unpadded_through_sample_and_follow() {
    let server = serve(config(&[token_table(
        64,
        r#", "max_len": 28"#,
        r#""sampler": {"kind": "fifo"}"#,
    )]))
    .await;
    let mut c = client(&server).await;
    let ids: Vec<u64> = (0..40).collect();
    c.insert("r", token_batch(&ids[..25])).await.unwrap();
    c.insert("r", token_batch(&ids[25..])).await.unwrap();
    let b = c.sample("r", 40).await.unwrap();
    assert_eq!(check_rows(&b), ids, "FIFO: every item once, in order");
    let info = c.info(Some("r")).await.unwrap().remove(0);
    assert!(info.fields[1].variable_length && info.fields[1].max_len == 28);
    let mut f = c.follow("r", 0).await.unwrap();
    let mut seen = Vec::new();
    while seen.len() < 40 {
        match f.next().await.unwrap().unwrap() {
            FollowEvent::Items(batch) => seen.extend(check_rows(&batch)),
            gap => panic!("{gap:?}"),
        }
    }
    assert_eq!(seen, ids);
    drop(f);
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_offsets_end_only_their_stream_naming_the_field_and_offset() {
    let server = serve(config(&[token_table(
        64,
        r#", "max_len": 4"#,
        r#""sampler": {"kind": "uniform"}"#,
    )]))
    .await;
    let addr = server.url(false);
    // Two rows: ids 0 and 0, `tokens` tokens of 0 split by `offsets`.
    let request = |offsets: Vec<u64>, tokens: usize| InsertRequest {
        table: "r".into(),
        rows: 2,
        fields: vec![
            FieldBlock {
                name: "id".into(),
                dtype: FieldDtype::U64 as i32,
                shape: vec![],
                data: Bytes::from(vec![0u8; 16]),
                offsets: vec![],
            },
            FieldBlock {
                name: "tokens".into(),
                dtype: FieldDtype::I32 as i32,
                shape: vec![],
                data: Bytes::from(vec![0u8; tokens * 4]),
                offsets,
            },
        ],
        priorities: vec![],
        policy_versions: vec![],
    };
    let cases = [
        (
            request(vec![0, 3, 2], 3),
            r#"fields["tokens"].offsets[2]"#,
            "backwards",
        ),
        (
            request(vec![0, 1, 6], 6),
            r#"fields["tokens"].offsets[2]"#,
            "max_len 4",
        ),
        (
            request(vec![0, 1, 2], 3),
            r#"fields["tokens"].data"#,
            "offsets end at 2",
        ),
        (
            request(vec![0, 1], 1),
            r#"fields["tokens"].offsets"#,
            "rows + 1",
        ),
        (
            request(vec![], 2),
            r#"fields["tokens"].offsets"#,
            "rows + 1",
        ),
    ];
    let mut good = client(&server).await;
    for (i, (bad, field, what)) in cases.into_iter().enumerate() {
        let mut raw = RawClient::connect(addr.clone()).await.unwrap();
        let ok = request(vec![0, 1, 3], 3);
        let mut replies = raw
            .insert(tokio_stream::iter(vec![ok, bad]))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(replies.next().await.unwrap().unwrap().count, 2);
        let status = replies.next().await.unwrap().unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
        assert!(
            status.message().contains(field) && status.message().contains(what),
            "{}",
            status.message()
        );
        // Everyone else goes on.
        good.insert("r", token_batch(&[203 + i as u64]))
            .await
            .unwrap();
    }
    let info = good.info(Some("r")).await.unwrap().remove(0);
    assert_eq!(info.inserted, 5 * 3, "the good batches, nothing of the bad");
    drop(good);
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_that_outgrow_a_message_are_refused_or_split() {
    let config = config(&[token_table(64, "", r#""sampler": {"kind": "uniform"}"#)]);
    let options = ServerOptions {
        max_message_bytes: 64 * 1024,
        ..ServerOptions::default()
    };
    let server = seed_replay_service::start(config, options).await.unwrap();
    let mut c = client(&server).await;
    // Six items of 4,000 tokens (16 KB each): 96 KB in all, inserted
    // three at a time.
    for first in [0u64, 3] {
        let mut data = Vec::new();
        let mut offsets = vec![0u64];
        for id in first..first + 3 {
            data.extend(std::iter::repeat_n((id as i32).to_le_bytes(), 4000).flatten());
            offsets.push(offsets.last().unwrap() + 4000);
        }
        let batch = InsertBatch::new(3)
            .u64("id", &[], &[first, first + 1, first + 2])
            .unwrap()
            .variable("tokens", DType::I32, &[], Bytes::from(data), offsets)
            .unwrap();
        c.insert("r", batch).await.unwrap();
    }
    match c.sample("r", 6).await {
        Err(seed_replay_service::ClientError::Status { code, message }) => {
            assert_eq!(code, Code::ResourceExhausted);
            assert!(message.contains("batch_size"), "{message}");
        }
        other => panic!("expected RESOURCE_EXHAUSTED, got {other:?}"),
    }
    assert_eq!(c.sample("r", 2).await.unwrap().rows(), 2);
    // A follower gets every item, in messages that fit.
    let mut f = c.follow("r", 0).await.unwrap();
    let mut seen = 0;
    while seen < 6 {
        match f.next().await.unwrap().unwrap() {
            FollowEvent::Items(b) => {
                assert!(b.rows() >= 1 && b.rows() <= 3, "{} rows", b.rows());
                seen += b.rows();
            }
            gap => panic!("{gap:?}"),
        }
    }
    drop(f);
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mirror_holds_the_primarys_token_lists() {
    let primary = serve(config(&[token_table(
        32,
        "",
        r#""sampler": {"kind": "uniform"}"#,
    )]))
    .await;
    let mut c = client(&primary).await;
    for first in (0..100u64).step_by(10) {
        let ids: Vec<u64> = (first..first + 10).collect();
        c.insert("r", token_batch(&ids)).await.unwrap();
    }
    let options = MirrorOptions {
        upstream: primary.addr().to_string(),
        client: Default::default(),
    };
    let mirror = start_mirror(options, ServerOptions::default())
        .await
        .unwrap();
    let table = mirror.service().table("r").expect("mirrored table");
    tokio::time::timeout(STUCK, table.wait_for_next_key(100))
        .await
        .expect("mirror stuck");
    let mut m = client(&mirror).await;
    let ids = check_rows(&m.sample("r", 64).await.unwrap());
    assert!(ids.iter().all(|&id| (68..100).contains(&id)), "{ids:?}");
    drop((c, m));
    mirror.stop().await.unwrap();
    primary.stop().await.unwrap();
}

fn shard_config(dir: &Path) -> ServiceConfig {
    config(&[token_table(
        50,
        "",
        &format!(
            r#""sampler": {{"kind": "uniform"}}, "storage_dir": {:?}"#,
            dir.display().to_string()
        ),
    )])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loaded_shards_serve_their_token_lists_as_one_table() {
    let dir = tempfile::tempdir().unwrap();
    let dirs = [dir.path().join("a"), dir.path().join("b")];
    for (s, d) in dirs.iter().enumerate() {
        let server = serve(shard_config(d)).await;
        let mut c = client(&server).await;
        let ids: Vec<u64> = (s as u64 * 1000..s as u64 * 1000 + 30).collect();
        c.insert("r", token_batch(&ids)).await.unwrap();
        drop(c);
        server.stop().await.unwrap();
    }
    let list: Vec<String> = dirs
        .iter()
        .map(|d| format!("{:?}", d.display().to_string()))
        .collect();
    let loaded = serve(config(&[token_table(
        50,
        "",
        &format!(
            r#""sampler": {{"kind": "uniform"}}, "load": [{}]"#,
            list.join(", ")
        ),
    )]))
    .await;
    let mut c = client(&loaded).await;
    let ids = check_rows(&c.sample("r", 128).await.unwrap());
    assert!(ids.iter().any(|&id| id < 1000) && ids.iter().any(|&id| id >= 1000));
    drop(c);
    loaded.stop().await.unwrap();
    // A shard's layout must agree on the variable dimension too.
    let fixed = config(&[format!(
        r#"{{"name": "r", "capacity": 50,
            "fields": [{{"name": "id", "dtype": "u64", "shape": []}},
                       {{"name": "tokens", "dtype": "i32", "shape": []}}],
            "sampler": {{"kind": "uniform"}}, "load": [{}]}}"#,
        list[0]
    )]);
    let e = seed_replay_service::start(fixed, ServerOptions::default())
        .await
        .map(|_| ())
        .unwrap_err();
    assert!(e.to_string().contains("variable-length"), "{e}");
}
