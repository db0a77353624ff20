//! Bad input over loopback: each malformed request gets a status whose
//! code and message name the field; the stream it came on ends, batches
//! acknowledged before it stay stored, and a good client inserting and
//! sampling all along notices nothing.
use crate::support;

use bytes::Bytes;
use seed_replay_service::pb::replay_client::ReplayClient as RawClient;
use seed_replay_service::pb::{FieldBlock, FieldDtype, InsertRequest, SampleRequest};
use seed_replay_service::ServerOptions;
use support::*;
use tokio_stream::StreamExt;
use tonic::Code;

fn block(name: &str, dtype: FieldDtype, shape: &[u32], bytes: usize) -> FieldBlock {
    FieldBlock {
        name: name.into(),
        dtype: dtype as i32,
        shape: shape.to_vec(),
        data: Bytes::from(vec![0u8; bytes]),
        offsets: vec![],
    }
}

/// A correct request of `rows` rows for the test table.
fn good(rows: u32) -> InsertRequest {
    let r = rows as usize;
    InsertRequest {
        table: "t".into(),
        rows,
        fields: vec![
            block("obs", FieldDtype::F32, &[3, 4], r * 48),
            block("tag", FieldDtype::U64, &[4], r * 32),
        ],
        priorities: vec![],
        policy_versions: vec![],
    }
}

/// Sends `good(1)` then `bad` on one stream; returns the status the stream
/// ended with after acknowledging the good batch.
async fn insert_after_one_good(addr: &str, bad: InsertRequest) -> tonic::Status {
    let mut raw = RawClient::connect(addr.to_owned()).await.unwrap();
    let requests = tokio_stream::iter(vec![good(1), bad]);
    let mut replies = raw.insert(requests).await.unwrap().into_inner();
    let first = replies.next().await.unwrap().unwrap();
    assert_eq!(first.count, 1);
    match replies.next().await {
        Some(Err(status)) => status,
        other => panic!("expected a status, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_inserts_get_statuses_naming_the_field_and_lose_nothing() {
    let server = serve(config(&[
        table_json("t", 100_000, r#""sampler": {"kind": "fifo"}"#),
        table_json("u", 64, r#""sampler": {"kind": "uniform"}"#),
    ]))
    .await;
    let url = server.url(false);

    // A good client keeps inserting and sampling (its own table, and the
    // shared one) while the bad requests arrive.
    let good_client = {
        let mut c = client(&server).await;
        tokio::spawn(async move {
            let mut ins = c.inserter("u").await.unwrap();
            for i in 0..200u64 {
                ins.insert(items(9, i * 4, 4)).await.unwrap();
                let b = c.sample("u", 8).await.unwrap();
                verify(&b);
            }
        })
    };

    let with = |f: &dyn Fn(&mut InsertRequest)| {
        let mut r = good(2);
        f(&mut r);
        r
    };
    let cases: Vec<(InsertRequest, Code, &str)> = vec![
        (
            with(&|r| r.fields[0].name = "observation".into()),
            Code::InvalidArgument,
            "fields[0].name",
        ),
        (
            with(&|r| r.fields[0].dtype = FieldDtype::F64 as i32),
            Code::InvalidArgument,
            "fields[\"obs\"].dtype",
        ),
        (
            with(&|r| r.fields[1].dtype = 0),
            Code::InvalidArgument,
            "fields[\"tag\"].dtype",
        ),
        (
            with(&|r| r.fields[0].shape = vec![4, 3]),
            Code::InvalidArgument,
            "fields[\"obs\"].shape",
        ),
        (
            // Offsets are for a grouped table's variable-length fields.
            with(&|r| r.fields[0].offsets = vec![0, 12, 24]),
            Code::InvalidArgument,
            "fields[\"obs\"].offsets",
        ),
        (
            with(&|r| r.fields[1].data = Bytes::from(vec![0u8; 63])),
            Code::InvalidArgument,
            "fields[\"tag\"].data",
        ),
        (
            with(&|r| {
                r.fields.remove(1);
            }),
            Code::InvalidArgument,
            "fields[\"tag\"]",
        ),
        (
            with(&|r| {
                let dup = r.fields[0].clone();
                r.fields.push(dup);
            }),
            Code::InvalidArgument,
            "fields[\"obs\"]",
        ),
        (with(&|r| r.rows = 0), Code::InvalidArgument, "rows"),
        (
            with(&|r| r.priorities = vec![1.0, 1.0]),
            Code::InvalidArgument,
            "priorities",
        ),
        (
            with(&|r| r.policy_versions = vec![1, 2]),
            Code::InvalidArgument,
            "policy_versions",
        ),
        (
            with(&|r| r.table = "u".into()),
            Code::InvalidArgument,
            "table",
        ),
    ];
    for (bad, code, field) in cases {
        let status = insert_after_one_good(&url, bad).await;
        assert_eq!(status.code(), code, "{field}: {status:?}");
        assert!(
            status.message().contains(&format!("`{field}`")),
            "{field}: {}",
            status.message()
        );
    }

    // An unknown table: NOT_FOUND naming the table and listing the others.
    let mut raw = RawClient::connect(url.clone()).await.unwrap();
    let mut bad = good(1);
    bad.table = "nope".into();
    let mut replies = raw
        .insert(tokio_stream::iter(vec![bad]))
        .await
        .unwrap()
        .into_inner();
    let status = replies.next().await.unwrap().unwrap_err();
    assert_eq!(status.code(), Code::NotFound);
    assert!(
        status.message().contains("`nope`") && status.message().contains("t, u"),
        "{}",
        status.message()
    );

    // Bad sample requests.
    for (req, code, field) in [
        (
            SampleRequest {
                table: "t".into(),
                batch_size: 0,
                ..Default::default()
            },
            Code::InvalidArgument,
            "batch_size",
        ),
        (
            SampleRequest {
                table: "t".into(),
                batch_size: 4,
                max_in_flight: 99,
                ..Default::default()
            },
            Code::InvalidArgument,
            "max_in_flight",
        ),
        (
            SampleRequest {
                table: "u".into(),
                batch_size: 10_000_000,
                ..Default::default()
            },
            Code::InvalidArgument,
            "batch_size",
        ),
        (
            SampleRequest {
                table: "zz".into(),
                batch_size: 1,
                ..Default::default()
            },
            Code::NotFound,
            "table",
        ),
    ] {
        let status = raw.sample(req).await.unwrap_err();
        assert_eq!(status.code(), code, "{field}: {status:?}");
        assert!(
            status.message().contains(&format!("`{field}`")),
            "{field}: {}",
            status.message()
        );
    }

    // Priorities for a table without them.
    let mut c = client(&server).await;
    let e = c.update_priorities("u", &[0], &[1.0]).await.unwrap_err();
    assert_eq!(e.code(), Some(Code::FailedPrecondition));

    good_client.await.unwrap();
    // Every good batch that went before a bad one was kept: 12 cases.
    let info = &c.info(Some("t")).await.unwrap()[0];
    assert_eq!(info.inserted, 12);
    // 12 inserts and 2 samples refused on `t`.
    assert_eq!(info.rejected_requests, 14);
    let b = c.sample("t", 11).await.unwrap();
    assert_eq!(b.keys(), (0..11).collect::<Vec<u64>>());
    let u = &c.info(Some("u")).await.unwrap()[0];
    // One sample and one priority update refused on `u`.
    assert_eq!((u.inserted, u.rejected_requests), (800, 2));
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversize_message_ends_only_its_stream() {
    let options = ServerOptions {
        max_message_bytes: 64 * 1024,
        ..ServerOptions::default()
    };
    let server = seed_replay_service::start(
        config(&[table_json("t", 10_000, r#""sampler": {"kind": "uniform"}"#)]),
        options,
    )
    .await
    .unwrap();
    let mut raw = RawClient::connect(server.url(false)).await.unwrap();
    // 2000 rows of 80 bytes: 160 kB, over the 64 KiB limit.
    let mut replies = raw
        .insert(tokio_stream::iter(vec![good(1), good(2000)]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(replies.next().await.unwrap().unwrap().count, 1);
    let status = replies.next().await.unwrap().unwrap_err();
    assert!(
        matches!(status.code(), Code::OutOfRange | Code::ResourceExhausted),
        "{status:?}"
    );
    assert!(
        status.message().contains("too large"),
        "{}",
        status.message()
    );
    // The connection and the table still serve.
    let mut c = client(&server).await;
    let keys = c.insert("t", items(1, 0, 100)).await.unwrap();
    assert_eq!((keys.first, keys.count), (1, 100));
    assert_eq!(c.sample("t", 10).await.unwrap().rows(), 10);
    assert_eq!(c.info(None).await.unwrap()[0].inserted, 101);
    server.stop().await.unwrap();
}
