//! Concurrency stress: several writers and samplers at once, items carrying
//! a checksum of their own contents. Proves, for bounded operation counts:
//! no torn item (checksum), no item under the wrong key; for the FIFO
//! queue under `Block` no lost and no duplicated item; under
//! `max_times_sampled` no item handed out more than `m` times; for grouped
//! release under overwrite, every group served whole and at most once.
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use seed_replay::*;

use crate::checksummed;
use checksummed::{payload, WORDS};

fn layout() -> ItemLayout {
    ItemLayout::builder()
        .field("payload", DType::U64, &[WORDS])
        .field("tag", DType::U8, &[3])
        .build()
        .unwrap()
}

fn tag(id: u64) -> [u8; 3] {
    let b = id.to_le_bytes();
    [b[0], b[1], b[0] ^ b[1]]
}

fn insert(b: &ReplayBuffer, id: u64, timeout: Duration) -> Result<ItemKey, ReplayError> {
    let p = payload(id);
    let t = tag(id);
    b.insert_ref_timeout(
        &[
            FieldRef::new(&[WORDS], Values::U64(&p)),
            FieldRef::new(&[3], Values::U8(&t)),
        ],
        timeout,
    )
}

fn insert_in_group(b: &ReplayBuffer, id: u64, group: u64) -> ItemKey {
    let p = payload(id);
    let t = tag(id);
    b.insert_ref_in_group(
        &[
            FieldRef::new(&[WORDS], Values::U64(&p)),
            FieldRef::new(&[3], Values::U8(&t)),
        ],
        group,
    )
    .unwrap()
}

/// Checks every row of `batch` is intact; returns `(key, id)` pairs.
fn verify(batch: &SampleBatch) -> Vec<(u64, u64)> {
    let words = batch.field_u64("payload").unwrap();
    let tags = batch.field("tag").unwrap();
    words
        .chunks(WORDS)
        .zip(tags.chunks(3))
        .zip(batch.keys())
        .map(|((row, t), key)| {
            let id = row[0];
            assert_eq!(row, &payload(id)[..], "torn payload for key {key:?}");
            assert_eq!(t, &tag(id)[..], "torn tag for key {key:?}");
            (key.0, id)
        })
        .collect()
}

const WRITERS: u64 = 2;

#[test]
fn fifo_block_queue_loses_and_duplicates_nothing() {
    const PER_WRITER: u64 = 4000;
    const BATCH: usize = 8;
    let total = (WRITERS * PER_WRITER) as usize;
    let cfg = ReplayConfig::new(64, SamplerConfig::Fifo).with_writer_policy(WriterPolicy::Block {
        timeout: Duration::from_secs(60),
    });
    let b = Arc::new(ReplayBuffer::new(layout(), cfg).unwrap());
    let consumed = Arc::new(AtomicUsize::new(0));
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let b = Arc::clone(&b);
            thread::spawn(move || {
                for seq in 0..PER_WRITER {
                    insert(&b, w << 32 | seq, Duration::from_secs(60)).unwrap();
                }
            })
        })
        .collect();
    let samplers: Vec<_> = (0..2)
        .map(|_| {
            let (b, consumed) = (Arc::clone(&b), Arc::clone(&consumed));
            thread::spawn(move || {
                let mut batch = b.new_batch(BATCH);
                let mut got = Vec::new();
                loop {
                    match b.sample_into_timeout(&mut batch, BATCH, Duration::from_secs(60)) {
                        Ok(()) => {
                            assert_eq!(batch.len(), BATCH);
                            let rows = verify(&batch);
                            assert!(
                                rows.windows(2).all(|w| w[0].0 < w[1].0),
                                "FIFO order within a batch"
                            );
                            got.extend(rows);
                            if consumed.fetch_add(BATCH, Ordering::Relaxed) + BATCH == total {
                                b.close();
                            }
                        }
                        Err(ReplayError::Closed) => return got,
                        Err(e) => panic!("sampler: {e}"),
                    }
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    let got: Vec<(u64, u64)> = samplers
        .into_iter()
        .flat_map(|s| s.join().unwrap())
        .collect();
    assert_eq!(got.len(), total, "every item handed out");
    let ids: HashSet<u64> = got.iter().map(|&(_, id)| id).collect();
    assert_eq!(ids.len(), total, "no item handed out twice");
    let keys: HashSet<u64> = got.iter().map(|&(k, _)| k).collect();
    assert_eq!(keys, (0..total as u64).collect(), "keys dense, none lost");
    for w in 0..WRITERS {
        for seq in 0..PER_WRITER {
            assert!(ids.contains(&(w << 32 | seq)));
        }
    }
    let s = b.stats();
    assert_eq!((s.evicted_unconsumed, s.superseded_inserts), (0, 0));
}

fn overwrite_stress(sampler: SamplerConfig, order: StorageOrder) {
    const PER_WRITER: u64 = 15_000;
    const SAMPLES: usize = 800;
    let config = ReplayConfig::new(128, sampler).with_storage_order(order);
    let b = Arc::new(ReplayBuffer::new(layout(), config).unwrap());
    // Seed one item per slot so samplers never find the buffer empty.
    for i in 0..128 {
        insert(&b, 1 << 40 | i, Duration::ZERO).unwrap();
    }
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let b = Arc::clone(&b);
            thread::spawn(move || {
                (0..PER_WRITER)
                    .map(|seq| {
                        let id = w << 32 | seq;
                        (insert(&b, id, Duration::ZERO).unwrap().0, id)
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let prioritized = matches!(sampler, SamplerConfig::Prioritized(_));
    let samplers: Vec<_> = (0..2)
        .map(|_| {
            let b = Arc::clone(&b);
            thread::spawn(move || {
                let mut batch = b.new_batch(32);
                let mut got = Vec::new();
                let mut updates = 0;
                for i in 0..SAMPLES {
                    b.sample_into(&mut batch, 32).unwrap();
                    got.extend(verify(&batch));
                    if prioritized {
                        let prios: Vec<f32> =
                            (0..batch.len()).map(|j| ((i + j) % 5) as f32).collect();
                        let r = b.update_priorities(batch.keys(), &prios).unwrap();
                        assert_eq!(r.applied + r.stale, batch.len());
                        updates += batch.len();
                    }
                }
                (got, updates)
            })
        })
        .collect();
    let mut key_to_id: HashMap<u64, u64> = (0..128).map(|i| (i, 1 << 40 | i)).collect();
    for w in writers {
        for (k, id) in w.join().unwrap() {
            assert!(key_to_id.insert(k, id).is_none(), "key {k} given twice");
        }
    }
    let mut updates = 0;
    for s in samplers {
        let (got, u) = s.join().unwrap();
        updates += u;
        for (k, id) in got {
            assert_eq!(
                key_to_id.get(&k),
                Some(&id),
                "key {k} returned another item's data"
            );
        }
    }
    let s = b.stats();
    assert_eq!(s.inserted, 128 + WRITERS * PER_WRITER);
    if prioritized {
        assert!(s.stale_priority_updates <= updates as u64);
    }
}

#[test]
fn uniform_overwrite_never_tears_or_mislabels() {
    overwrite_stress(SamplerConfig::Uniform, StorageOrder::Records);
}

#[test]
fn uniform_overwrite_in_columns_never_tears_or_mislabels() {
    overwrite_stress(SamplerConfig::Uniform, StorageOrder::Columns);
}

#[test]
fn prioritized_with_concurrent_updates_never_tears_or_mislabels() {
    overwrite_stress(
        SamplerConfig::Prioritized(PrioritizedConfig::default()),
        StorageOrder::Records,
    );
}

/// `max_times_sampled` under overwrite: items may be evicted before their
/// `m`-th sample, but none is ever handed out more than `m` times, torn, or
/// under another key, while writers lap the ring.
#[test]
fn max_times_never_hands_an_item_out_more_than_m_times() {
    const PER_WRITER: u64 = 6000;
    const M: u32 = 3;
    const BATCH: usize = 8;
    let cfg = ReplayConfig::new(64, SamplerConfig::MaxTimesSampled { max_times: M });
    let b = Arc::new(ReplayBuffer::new(layout(), cfg).unwrap());
    let done = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let b = Arc::clone(&b);
            thread::spawn(move || {
                for seq in 0..PER_WRITER {
                    insert(&b, w << 32 | seq, Duration::ZERO).unwrap();
                }
            })
        })
        .collect();
    let samplers: Vec<_> = (0..2)
        .map(|_| {
            let (b, done) = (Arc::clone(&b), Arc::clone(&done));
            thread::spawn(move || {
                let mut batch = b.new_batch(BATCH);
                let mut got = Vec::new();
                // Until the writers are done, then until fewer than a batch
                // of samples is left.
                loop {
                    let finished = done.load(Ordering::Acquire);
                    match b.sample_into(&mut batch, BATCH) {
                        Ok(()) => got.extend(verify(&batch)),
                        Err(ReplayError::NotEnoughItems { .. }) if finished => return got,
                        Err(ReplayError::NotEnoughItems { .. }) => {}
                        Err(e) => panic!("sampler: {e}"),
                    }
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    done.store(true, Ordering::Release);
    let mut times: HashMap<u64, (u64, u32)> = HashMap::new();
    let mut rows = 0;
    for s in samplers {
        for (key, id) in s.join().unwrap() {
            let e = times.entry(id).or_insert((key, 0));
            assert_eq!(e.0, key, "item {id} came back under two keys");
            e.1 += 1;
            rows += 1;
        }
    }
    if let Some((id, (_, n))) = times.iter().find(|(_, &(_, n))| n > M) {
        panic!("item {id} handed out {n} times, more than {M}");
    }
    assert_eq!(b.stats().sampled, rows);
}

/// Writers insert groups of `GROUP` items (ids `group << 8 | index`) into
/// a small ring that laps while groups are open, ready, or being copied;
/// a sampler takes whole groups. Every group it gets must be complete, in
/// insert order, intact, and new.
#[test]
fn grouped_overwrite_serves_only_whole_groups_once() {
    const GROUPS_PER_WRITER: u64 = 3000;
    const GROUP: u64 = 4;
    let cfg = ReplayConfig::new(32, SamplerConfig::Grouped);
    let b = Arc::new(ReplayBuffer::new(layout(), cfg).unwrap());
    let done = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let b = Arc::clone(&b);
            thread::spawn(move || {
                for g in 0..GROUPS_PER_WRITER {
                    let group = w << 32 | g;
                    for i in 0..GROUP {
                        insert_in_group(&b, group << 8 | i, group);
                    }
                    b.complete_group(group);
                }
            })
        })
        .collect();
    let sampler = {
        let (b, done) = (Arc::clone(&b), Arc::clone(&done));
        thread::spawn(move || {
            let mut batch = b.new_batch(GROUP as usize);
            let mut seen = HashSet::new();
            // Until the writers are done, then until the queue is empty.
            loop {
                let finished = done.load(Ordering::Acquire);
                match b.sample_group_into(&mut batch, None) {
                    Ok(group) => {
                        let rows = verify(&batch);
                        let ids: Vec<u64> = rows.iter().map(|&(_, id)| id).collect();
                        let whole: Vec<u64> = (0..GROUP).map(|i| group << 8 | i).collect();
                        assert_eq!(ids, whole, "group {group} served whole, in order");
                        assert!(batch.groups().iter().all(|&g| g == group));
                        assert!(seen.insert(group), "group {group} served twice");
                    }
                    Err(ReplayError::NotEnoughItems { .. }) if finished => return seen.len(),
                    Err(ReplayError::NotEnoughItems { .. }) => {}
                    Err(e) => panic!("sampler: {e}"),
                }
            }
        })
    };
    for w in writers {
        w.join().unwrap();
    }
    done.store(true, Ordering::Release);
    let served = sampler.join().unwrap() as u64;
    let s = b.stats();
    assert_eq!(s.inserted, WRITERS * GROUPS_PER_WRITER * GROUP);
    // Every item was served with its group or counted as lost: displaced
    // unconsumed, dropped with its group, or never published (a writer
    // lapped it mid-write). The counters may count an item twice (a writer
    // displacing it races the drop of its group: both count), never miss
    // one.
    let accounted =
        served * GROUP + s.evicted_unconsumed + s.dropped_with_group + s.superseded_inserts;
    assert!(
        accounted >= s.inserted,
        "served {served} groups; stats {s:?}"
    );
}
