//! Sample-stream flow control: a client that stops reading stops the
//! server's producer (it waits, counted in `sample_flow_control_waits`)
//! before a consume-once table is drained into buffers, and every item
//! still arrives, once, when the client reads again.
use crate::support;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use seed_replay_service::client::SampleOptions;
use seed_replay_service::{FieldBlocks, InsertBatch, ServiceConfig};
use support::*;

const ITEMS: u64 = 400;
const ITEM_BYTES: usize = 64 * 1024;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_holds_the_producer_back() {
    let json = format!(
        r#"{{"tables": [{{"name": "big", "capacity": {ITEMS},
            "fields": [{{"name": "blob", "dtype": "u8", "shape": [{ITEM_BYTES}]}},
                       {{"name": "id", "dtype": "u64", "shape": []}}],
            "sampler": {{"kind": "fifo"}}}}]}}"#
    );
    let server = serve(ServiceConfig::from_json(&json).unwrap()).await;
    let mut c = client(&server).await;
    let mut ins = c.inserter("big").await.unwrap();
    for i in 0..ITEMS {
        let blob = vec![(i % 251) as u8; ITEM_BYTES];
        let batch = InsertBatch::new(1)
            .u8("blob", &[ITEM_BYTES], &blob)
            .unwrap()
            .u64("id", &[], &[i])
            .unwrap();
        ins.insert(batch).await.unwrap();
    }
    // 26 MB of items; a stream that is never read.
    let mut opts = SampleOptions::new(1);
    opts.max_in_flight = 2;
    let mut stream = c.sample_stream("big", opts).await.unwrap();

    // Wait (generous deadline) for the producer to have to wait.
    let deadline = Instant::now() + Duration::from_secs(60);
    let info = loop {
        let info = c.info(Some("big")).await.unwrap().remove(0);
        if info.sample_flow_control_waits > 0 {
            break info;
        }
        assert!(
            Instant::now() < deadline,
            "the producer never waited: {info:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    // It stopped with most of the table still unsampled: what it took is
    // bounded by the HTTP/2 window and socket buffers, not by the table.
    assert!(
        info.sampled < ITEMS / 2,
        "sampled {} of {ITEMS} before waiting",
        info.sampled
    );
    assert_eq!(info.sample_streams, 1);

    // Reading again drains everything, each item once, bytes intact.
    let mut seen = HashSet::new();
    while (seen.len() as u64) < ITEMS {
        let b = stream.next().await.unwrap().unwrap();
        let id = b.field_u64("id").unwrap()[0];
        let blob = b.field("blob").unwrap();
        assert!(
            blob.iter().all(|&x| x == (id % 251) as u8),
            "item {id} torn"
        );
        assert!(seen.insert(id), "item {id} twice");
    }
    drop(stream);
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sample_waits_for_items_and_times_out_with_deadline_exceeded() {
    let server = serve(config(&[table_json(
        "q",
        64,
        r#""sampler": {"kind": "fifo"}"#,
    )]))
    .await;
    let mut c = client(&server).await;
    let mut opts = SampleOptions::new(4);
    opts.max_batches = 1;
    opts.timeout = Some(Duration::from_millis(50));
    let mut s = c.sample_stream("q", opts).await.unwrap();
    let e = s.next().await.unwrap_err();
    assert_eq!(e.code(), Some(tonic::Code::DeadlineExceeded), "{e}");
    assert!(e.to_string().contains("timeout_ms"), "{e}");

    // A waiting sample is served by a later insert.
    let mut waiting = c.clone();
    let sampler = tokio::spawn(async move { waiting.sample("q", 4).await });
    let mut w = client(&server).await;
    w.insert("q", items(5, 0, 4)).await.unwrap();
    let b = sampler.await.unwrap().unwrap();
    assert_eq!(verify(&b), (0..4).map(|s| (5, s)).collect::<Vec<_>>());
    server.stop().await.unwrap();
}
