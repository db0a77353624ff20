//! The soak's replay side: writers and samplers on one table of a
//! `replay-server`, and the check at the end that every acknowledged item
//! the table still holds is there, with its own bytes.
//!
//! Each item carries its writer's id and its sequence number (`tag`, two
//! `u64`) beside a 4-f32 `obs`. A writer paces its batches, keeps a few in
//! flight, and records each acknowledgement (first key, count, its first
//! sequence number). At the end the table is read with `Follow` from key 0:
//! the ring must hold exactly the newest `capacity` keys, consecutively,
//! and each item's tag must be what the writer acknowledged for its key.
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use seed_replay_service::client::{ClientOptions, FollowEvent, InsertedKeys, Inserter};
use seed_replay_service::{InsertBatch, ReplayClient};
use serde::Serialize;
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;

/// The soak's table.
pub const TABLE: &str = "soak";
/// Items per insert batch.
const BATCH: u32 = 64;
/// Insert batches a writer keeps in flight.
const WINDOW: usize = 4;
/// Items per sample.
const SAMPLE: u32 = 128;
/// How long the final read may take.
const READ_TIMEOUT: Duration = Duration::from_secs(300);

/// The server's config file for the soak's table: memory-mapped in
/// `storage_dir`, uniform sampling once 128 items are in.
pub fn table_config(capacity: u64, storage_dir: &std::path::Path) -> String {
    serde_json::json!({
        "tables": [{
            "name": TABLE,
            "capacity": capacity,
            "fields": [
                {"name": "tag", "dtype": "u64", "shape": [2]},
                {"name": "obs", "dtype": "f32", "shape": [4]}
            ],
            "sampler": {"kind": "uniform"},
            "rate_limiter": {"min_size_to_sample": SAMPLE},
            "storage_dir": storage_dir,
        }]
    })
    .to_string()
}

/// One acknowledged insert batch.
#[derive(Debug, Clone, Copy)]
struct Acked {
    first_key: u64,
    count: u32,
    writer: u64,
    first_seq: u64,
}

/// Counters the writers and samplers share with the minute records.
#[derive(Debug, Default)]
pub struct LoadCounters {
    /// Relaxed throughout: counters read for reports; nothing is ordered by
    /// them.
    pub inserted: AtomicU64,
    pub sampled: AtomicU64,
    pub errors: AtomicU64,
}

/// Writers and samplers running against one table.
pub struct ReplayLoad {
    stop: Arc<AtomicBool>,
    acked: Arc<Mutex<Vec<Acked>>>,
    pub counters: Arc<LoadCounters>,
    tasks: Vec<JoinHandle<Result<()>>>,
}

impl ReplayLoad {
    /// Starts `writers` writers of `items_per_s` each and `samplers`
    /// samplers of one `sample(128)` per `sample_every`.
    pub async fn start(
        addr: &str,
        writers: usize,
        items_per_s: f64,
        samplers: usize,
        sample_every: Duration,
    ) -> Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let acked = Arc::new(Mutex::new(Vec::new()));
        let counters = Arc::new(LoadCounters::default());
        let mut tasks = Vec::new();
        for w in 0..writers {
            let client = ReplayClient::connect(addr, ClientOptions::default()).await?;
            let (stop, acked, counters) = (stop.clone(), acked.clone(), counters.clone());
            tasks.push(tokio::spawn(async move {
                write(client, w as u64, items_per_s, stop, acked, counters).await
            }));
        }
        for _ in 0..samplers {
            let client = ReplayClient::connect(addr, ClientOptions::default()).await?;
            let (stop, counters) = (stop.clone(), counters.clone());
            tasks.push(tokio::spawn(async move {
                sample(client, sample_every, stop, counters).await
            }));
        }
        Ok(ReplayLoad {
            stop,
            acked,
            counters,
            tasks,
        })
    }

    /// Stops the writers (each waits for its acknowledgements) and samplers.
    pub async fn stop(&mut self) -> Result<()> {
        // Relaxed: each task polls the flag; the acks it recorded are
        // published by the mutex and the join below.
        self.stop.store(true, Ordering::Relaxed);
        for t in self.tasks.drain(..) {
            t.await.context("a replay task panicked")??;
        }
        Ok(())
    }

    /// Reads the whole table back and checks it against the
    /// acknowledgements (call after [`stop`](Self::stop)).
    pub async fn check(&self, addr: &str, capacity: u64) -> Result<ReplayCheck> {
        let mut acked = self
            .acked
            .lock()
            .map_err(|_| anyhow::anyhow!("a writer panicked holding the ack list"))?
            .clone();
        acked.sort_by_key(|a| a.first_key);
        let acked_items: u64 = acked.iter().map(|a| u64::from(a.count)).sum();
        let end = acked.last().map_or(0, |a| a.first_key + u64::from(a.count));
        let oldest_expected = end.saturating_sub(capacity);
        let mut client = ReplayClient::connect(addr, ClientOptions::default()).await?;
        let read = async {
            let mut follow = client.follow(TABLE, 0).await?;
            let mut check = ReplayCheck {
                acked_items,
                end_key: end,
                oldest_expected,
                ..ReplayCheck::default()
            };
            let mut next = 0u64;
            let mut first_event = true;
            while next < end {
                let Some(event) = follow.next().await? else {
                    bail!("the follow stream ended at key {next} of {end}");
                };
                match event {
                    FollowEvent::Gap { requested, oldest } => {
                        if first_event && requested == 0 {
                            check.oldest_read = oldest;
                        } else {
                            check.missing += oldest.saturating_sub(requested);
                        }
                        next = oldest;
                    }
                    FollowEvent::Items(batch) => {
                        if first_event {
                            check.oldest_read = batch.keys().start;
                        }
                        let keys = batch.keys();
                        next = batch.next_key();
                        let items = batch.into_items();
                        let tag = items
                            .fields
                            .iter()
                            .find(|f| f.name == "tag")
                            .context("a followed batch without its tag field")?;
                        for (row, key) in keys.enumerate() {
                            if key >= end {
                                break;
                            }
                            let at = row * 16;
                            let word = |o: usize| -> Option<u64> {
                                Some(u64::from_le_bytes(
                                    tag.data.get(at + o..at + o + 8)?.try_into().ok()?,
                                ))
                            };
                            check.items_checked += 1;
                            match (word(0), word(8), expected(&acked, key)) {
                                (Some(w), Some(s), Some(want)) if (w, s) == want => {}
                                _ => check.mismatched += 1,
                            }
                        }
                    }
                }
                first_event = false;
            }
            Ok(check)
        };
        tokio::time::timeout(READ_TIMEOUT, read)
            .await
            .context("reading the table back took over 300 s")?
    }
}

/// The (writer, sequence number) acknowledged for `key`.
fn expected(acked: &[Acked], key: u64) -> Option<(u64, u64)> {
    let i = acked
        .partition_point(|a| a.first_key <= key)
        .checked_sub(1)?;
    let a = acked[i];
    (key < a.first_key + u64::from(a.count)).then(|| (a.writer, a.first_seq + key - a.first_key))
}

/// What the final read found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ReplayCheck {
    /// Items the writers had acknowledged, and one past the newest key.
    pub acked_items: u64,
    pub end_key: u64,
    /// The oldest key a ring of `capacity` must still hold, and the oldest
    /// the server sent.
    pub oldest_expected: u64,
    pub oldest_read: u64,
    /// Items read and compared; of those, items whose tag was not the one
    /// acknowledged for their key.
    pub items_checked: u64,
    pub mismatched: u64,
    /// Keys inside the held range that the server skipped.
    pub missing: u64,
}

impl ReplayCheck {
    /// Every acknowledged key the ring holds came back with its own bytes.
    pub fn passed(&self) -> bool {
        self.oldest_read == self.oldest_expected
            && self.missing == 0
            && self.mismatched == 0
            && self.items_checked == self.end_key - self.oldest_expected
    }
}

async fn write(
    mut client: ReplayClient,
    writer: u64,
    items_per_s: f64,
    stop: Arc<AtomicBool>,
    acked: Arc<Mutex<Vec<Acked>>>,
    counters: Arc<LoadCounters>,
) -> Result<()> {
    let mut ins = client.inserter(TABLE).await?;
    let mut tick = tokio::time::interval(Duration::from_secs_f64(f64::from(BATCH) / items_per_s));
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let obs = vec![0.5f32; BATCH as usize * 4];
    let mut seq = 0u64;
    // First sequence number of each batch in flight, oldest first.
    let mut in_flight = VecDeque::new();
    let record = |keys: InsertedKeys, first_seq: u64| -> Result<()> {
        acked
            .lock()
            .map_err(|_| anyhow::anyhow!("the ack list's lock is poisoned"))?
            .push(Acked {
                first_key: keys.first,
                count: keys.count,
                writer,
                first_seq,
            });
        counters
            .inserted
            .fetch_add(u64::from(keys.count), Ordering::Relaxed);
        Ok(())
    };
    // Relaxed: see `ReplayLoad::stop`.
    while !stop.load(Ordering::Relaxed) {
        tick.tick().await;
        if ins.pending() >= WINDOW {
            ack_oldest(&mut ins, &mut in_flight, &record).await?;
        }
        let tags: Vec<u64> = (0..u64::from(BATCH))
            .flat_map(|r| [writer, seq + r])
            .collect();
        let batch = InsertBatch::new(BATCH)
            .u64("tag", &[2], &tags)?
            .f32("obs", &[4], &obs)?;
        ins.send(batch).await?;
        in_flight.push_back(seq);
        seq += u64::from(BATCH);
    }
    while ins.pending() > 0 {
        ack_oldest(&mut ins, &mut in_flight, &record).await?;
    }
    Ok(())
}

/// Waits for the oldest batch in flight and records its keys beside its
/// first sequence number.
async fn ack_oldest(
    ins: &mut Inserter,
    in_flight: &mut VecDeque<u64>,
    record: &impl Fn(InsertedKeys, u64) -> Result<()>,
) -> Result<()> {
    let keys = ins.ack().await?;
    let first = in_flight
        .pop_front()
        .context("an ack with no batch in flight")?;
    record(keys, first)
}

async fn sample(
    mut client: ReplayClient,
    every: Duration,
    stop: Arc<AtomicBool>,
    counters: Arc<LoadCounters>,
) -> Result<()> {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    // Relaxed: see `ReplayLoad::stop`.
    while !stop.load(Ordering::Relaxed) {
        tick.tick().await;
        match client.sample(TABLE, SAMPLE).await {
            Ok(b) => {
                counters
                    .sampled
                    .fetch_add(b.rows() as u64, Ordering::Relaxed);
            }
            Err(e) => {
                tracing::warn!(error = %e, "a sample failed");
                counters.errors.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acked(first_key: u64, count: u32, writer: u64, first_seq: u64) -> Acked {
        Acked {
            first_key,
            count,
            writer,
            first_seq,
        }
    }

    #[test]
    fn a_key_maps_to_the_writer_and_sequence_number_acknowledged_for_it() {
        // Two writers interleaved; keys 10..12 were never acknowledged.
        let acks = [acked(0, 4, 0, 0), acked(4, 6, 1, 0), acked(12, 4, 0, 4)];
        assert_eq!(expected(&acks, 0), Some((0, 0)));
        assert_eq!(expected(&acks, 3), Some((0, 3)));
        assert_eq!(expected(&acks, 4), Some((1, 0)));
        assert_eq!(expected(&acks, 9), Some((1, 5)));
        assert_eq!(expected(&acks, 10), None);
        assert_eq!(expected(&acks, 13), Some((0, 5)));
        assert_eq!(expected(&acks, 16), None);
    }

    #[test]
    fn the_check_passes_only_with_the_whole_held_range_back_and_matching() {
        let whole = ReplayCheck {
            acked_items: 30,
            end_key: 30,
            oldest_expected: 10,
            oldest_read: 10,
            items_checked: 20,
            mismatched: 0,
            missing: 0,
        };
        assert!(whole.passed());
        let short = ReplayCheck {
            items_checked: 19,
            ..whole.clone()
        };
        assert!(!short.passed());
        let late = ReplayCheck {
            oldest_read: 11,
            ..whole.clone()
        };
        assert!(!late.passed());
        let wrong = ReplayCheck {
            mismatched: 1,
            ..whole.clone()
        };
        assert!(!wrong.passed());
        let gap = ReplayCheck {
            missing: 1,
            ..whole
        };
        assert!(!gap.passed());
    }
}
