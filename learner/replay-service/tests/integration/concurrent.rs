//! Several clients writing and sampling at once over loopback, with
//! checksummed items: no sampled row is torn or foreign (its bytes are the
//! ones its writer sent, and its key is the one the writer was given for
//! it), and the consume-once table hands every acknowledged item out
//! exactly once (none lost, none twice).
use crate::support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use seed_replay_service::client::SampleOptions;
use support::*;
use tokio::sync::watch;

/// Who wrote an item and as which of their items: (writer, seq).
type ItemId = (u64, u64);

/// Key -> item, from the writers' acknowledgements, per table.
#[derive(Default)]
struct Acked {
    fifo: HashMap<u64, ItemId>,
    uniform: HashMap<u64, ItemId>,
}

/// (key, item) of every row a group of samplers received.
type Received = Arc<Mutex<Vec<(u64, ItemId)>>>;

const WRITERS: u64 = 3;
const BATCHES: u64 = 150;

/// Rows of writer `w`'s batch `i` (1 to 8, varying).
fn rows_of(w: u64, i: u64) -> u32 {
    (1 + (w * 7 + i * 3) % 8) as u32
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_clients_see_whole_items_and_fifo_loses_none() {
    let server = serve(config(&[
        table_json("q", 100_000, r#""sampler": {"kind": "fifo"}"#),
        // Small: writers lap it while samplers copy, so overwrites race reads.
        table_json("u", 256, r#""sampler": {"kind": "uniform"}"#),
    ]))
    .await;
    let total: u64 = (0..WRITERS)
        .map(|w| (0..BATCHES).map(|i| u64::from(rows_of(w, i))).sum::<u64>())
        .sum();
    let acked: Arc<Mutex<Acked>> = Arc::default();

    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let mut c = client(&server).await;
        let acked = Arc::clone(&acked);
        writers.push(tokio::spawn(async move {
            let mut q = c.inserter("q").await.unwrap();
            let mut u = c.inserter("u").await.unwrap();
            let mut seq = 0u64;
            for i in 0..BATCHES {
                let rows = rows_of(w, i);
                // One batch in flight on each stream at once.
                q.send(items(w, seq, rows)).await.unwrap();
                u.send(items(w, seq, rows)).await.unwrap();
                let uk = u.ack().await.unwrap();
                let qk = q.ack().await.unwrap();
                let mut a = acked.lock().unwrap();
                for (j, (kq, ku)) in qk.iter().zip(uk.iter()).enumerate() {
                    a.fifo.insert(kq, (w, seq + j as u64));
                    a.uniform.insert(ku, (w, seq + j as u64));
                }
                seq += u64::from(rows);
            }
        }));
    }

    // FIFO samplers read until every item has come out somewhere.
    let (done_tx, done_rx) = watch::channel(false);
    let received: Received = Arc::default();
    let mut fifo_samplers = Vec::new();
    for _ in 0..2 {
        let mut c = client(&server).await;
        let received = Arc::clone(&received);
        let done_tx = done_tx.clone();
        let mut done_rx = done_rx.clone();
        fifo_samplers.push(tokio::spawn(async move {
            let mut opts = SampleOptions::new(1);
            opts.max_in_flight = 4;
            let mut s = c.sample_stream("q", opts).await.unwrap();
            loop {
                tokio::select! {
                    b = s.next() => {
                        let b = b.unwrap().unwrap();
                        let rows = verify(&b);
                        let mut r = received.lock().unwrap();
                        r.extend(b.keys().iter().copied().zip(rows));
                        if r.len() as u64 >= total {
                            let _ = done_tx.send(true);
                            return;
                        }
                    }
                    _ = done_rx.wait_for(|d| *d) => return,
                }
            }
        }));
    }
    drop(done_tx);

    // Uniform samplers: a fixed number of batches each, every row checked.
    let uniform_seen: Received = Arc::default();
    let mut uniform_samplers = Vec::new();
    for _ in 0..2 {
        let mut c = client(&server).await;
        let seen = Arc::clone(&uniform_seen);
        uniform_samplers.push(tokio::spawn(async move {
            let mut opts = SampleOptions::new(32);
            opts.max_batches = 300;
            let mut s = c.sample_stream("u", opts).await.unwrap();
            while let Some(b) = s.next().await.unwrap() {
                let rows = verify(&b);
                seen.lock()
                    .unwrap()
                    .extend(b.keys().iter().copied().zip(rows));
            }
        }));
    }

    for t in writers
        .into_iter()
        .chain(fifo_samplers)
        .chain(uniform_samplers)
    {
        t.await.unwrap();
    }
    {
        let acked = acked.lock().unwrap();
        assert_eq!(acked.fifo.len() as u64, total);

        // FIFO: exactly the acknowledged items, each once, under its own key.
        let received = received.lock().unwrap();
        assert_eq!(received.len() as u64, total);
        let mut by_key = HashMap::new();
        for (k, item) in received.iter() {
            assert!(by_key.insert(*k, *item).is_none(), "key {k} sampled twice");
            assert_eq!(acked.fifo.get(k), Some(item), "key {k}: foreign item");
        }
        // Uniform: every row is the item its key was acknowledged for.
        let seen = uniform_seen.lock().unwrap();
        assert!(!seen.is_empty());
        for (k, item) in seen.iter() {
            assert_eq!(acked.uniform.get(k), Some(item), "key {k}: foreign item");
        }
    }
    let mut c = client(&server).await;
    let info = c.info(None).await.unwrap();
    assert_eq!(info[0].name, "q");
    assert_eq!((info[0].inserted, info[0].sampled), (total, total));
    server.stop().await.unwrap();
}
