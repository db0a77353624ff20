//! Behaviour of the replay buffer's public API, one property per test.
use std::sync::Arc;
use std::time::Duration;

use seed_replay::*;

/// Items of one `x: [3] f32` field holding `[v, v + 1, v + 2]` and a
/// `policy_version` scalar.
fn layout() -> ItemLayout {
    ItemLayout::builder()
        .field("x", DType::F32, &[3])
        .field("v", DType::U64, &[])
        .policy_version_field("v")
        .build()
        .unwrap()
}

fn insert(b: &ReplayBuffer, v: f32, version: u64) -> ItemKey {
    b.insert_ref(&[
        FieldRef::new(&[3], Values::F32(&[v, v + 1.0, v + 2.0])),
        FieldRef::new(&[], Values::U64(&[version])),
    ])
    .unwrap()
}

fn firsts(batch: &SampleBatch) -> Vec<f32> {
    batch
        .field_f32("x")
        .unwrap()
        .chunks(3)
        .map(|c| c[0])
        .collect()
}

fn buffer(capacity: usize, sampler: SamplerConfig) -> ReplayBuffer {
    ReplayBuffer::new(layout(), ReplayConfig::new(capacity, sampler)).unwrap()
}

#[test]
fn fifo_hands_each_item_out_once_in_order_and_refuses_oversampling() {
    let b = buffer(8, SamplerConfig::Fifo);
    let keys: Vec<_> = (0..5).map(|i| insert(&b, i as f32, 0)).collect();
    let mut batch = b.new_batch(8);
    b.sample_into(&mut batch, 3).unwrap();
    assert_eq!(batch.keys(), &keys[..3]);
    assert_eq!(firsts(&batch), vec![0.0, 1.0, 2.0]);
    // Asking for more than remain fails and consumes nothing.
    let err = b.sample_into(&mut batch, 3).unwrap_err();
    assert!(matches!(
        err,
        ReplayError::NotEnoughItems {
            requested: 3,
            available: 2
        }
    ));
    b.sample_into(&mut batch, 2).unwrap();
    assert_eq!(firsts(&batch), vec![3.0, 4.0]);
    assert_eq!(b.stats().sampled, 5);
    assert_eq!(b.len(), 0);
}

#[test]
fn wrong_shape_or_dtype_is_an_error_and_the_owned_item_comes_back() {
    let b = buffer(4, SamplerConfig::Uniform);
    let bad_shape = Item::new()
        .with_f32("x", &[4], &[0.0; 4])
        .with_u64("v", &[], &[0]);
    let err = b.insert(bad_shape.clone()).unwrap_err();
    assert!(matches!(err.error, ReplayError::Shape { .. }));
    assert_eq!(err.item, bad_shape);
    let bad_dtype = Item::new()
        .with_u32("x", &[3], &[0; 3])
        .with_u64("v", &[], &[0]);
    assert!(matches!(
        b.insert(bad_dtype).unwrap_err().error,
        ReplayError::DType { .. }
    ));
    let missing = Item::new()
        .with_f32("x", &[3], &[0.0; 3])
        .with_u64("w", &[], &[0]);
    assert!(matches!(
        b.insert(missing).unwrap_err().error,
        ReplayError::MissingField { .. }
    ));
    let short = [
        FieldRef::new(&[3], Values::F32(&[0.0; 2])),
        FieldRef::new(&[], Values::U64(&[0])),
    ];
    assert!(matches!(
        b.insert_ref(&short),
        Err(ReplayError::DataLength { .. })
    ));
    // Named fields in any order are fine.
    let ok = Item::new()
        .with_u64("v", &[], &[9])
        .with_f32("x", &[3], &[1.0, 2.0, 3.0]);
    let key = b.insert(ok).unwrap();
    let mut batch = b.new_batch(1);
    b.sample_into(&mut batch, 1).unwrap();
    assert_eq!(batch.keys(), &[key]);
    assert_eq!(batch.field_f32("x").unwrap(), vec![1.0, 2.0, 3.0]);
    assert_eq!(batch.policy_versions(), &[9]);
    assert_eq!(b.stats().inserted, 1);
}

#[test]
fn batch_insert_gives_consecutive_keys_and_rows() {
    let b = buffer(16, SamplerConfig::Fifo);
    let xs: Vec<f32> = (0..12).map(|i| i as f32).collect();
    let keys = b
        .insert_batch(
            &[
                FieldRef::new(&[4, 3], Values::F32(&xs)),
                FieldRef::new(&[4], Values::U64(&[1, 2, 3, 4])),
            ],
            4,
        )
        .unwrap();
    assert_eq!(
        keys.iter().collect::<Vec<_>>(),
        vec![ItemKey(0), ItemKey(1), ItemKey(2), ItemKey(3)]
    );
    let mut batch = b.new_batch(4);
    b.sample_into(&mut batch, 4).unwrap();
    assert_eq!(batch.field_f32("x").unwrap(), xs);
    assert_eq!(batch.policy_versions(), &[1, 2, 3, 4]);
    let wrong_rows = [
        FieldRef::new(&[3, 3], Values::F32(&xs[..9])),
        FieldRef::new(&[4], Values::U64(&[1, 2, 3, 4])),
    ];
    assert!(matches!(
        b.insert_batch(&wrong_rows, 4),
        Err(ReplayError::Shape { .. })
    ));
}

#[test]
fn overwrite_ring_keeps_newest_and_uniform_samples_only_stored_items() {
    let b = buffer(4, SamplerConfig::Uniform);
    for i in 0..10 {
        insert(&b, (i * 10) as f32, 0);
    }
    let mut batch = b.new_batch(64);
    b.sample_into(&mut batch, 64).unwrap();
    assert_eq!(batch.len(), 64);
    for (k, x) in batch.keys().iter().zip(firsts(&batch)) {
        assert!((6..10).contains(&k.0), "key {k:?} was overwritten");
        assert_eq!(x, (k.0 * 10) as f32, "row belongs to its key");
    }
    let distinct: std::collections::HashSet<_> = batch.keys().iter().collect();
    assert_eq!(distinct.len(), 4, "with replacement over all 4 items");
}

#[test]
fn without_replacement_covers_every_item_once_per_pass() {
    let b = buffer(10, SamplerConfig::UniformWithoutReplacement);
    for i in 0..10 {
        insert(&b, i as f32, 0);
    }
    let mut batch = b.new_batch(5);
    for _pass in 0..3 {
        let mut seen = Vec::new();
        for _ in 0..2 {
            b.sample_into(&mut batch, 5).unwrap();
            seen.extend(batch.keys().iter().map(|k| k.0));
        }
        seen.sort_unstable();
        assert_eq!(seen, (0..10).collect::<Vec<_>>());
    }
}

#[test]
fn recent_window_samples_only_the_newest_items() {
    let b = buffer(100, SamplerConfig::Recent { window: 3 });
    for i in 0..50 {
        insert(&b, i as f32, 0);
    }
    let mut batch = b.new_batch(100);
    b.sample_into(&mut batch, 100).unwrap();
    assert!(batch.keys().iter().all(|k| (47..50).contains(&k.0)));
    assert!(matches!(
        ReplayBuffer::new(
            layout(),
            ReplayConfig::new(2, SamplerConfig::Recent { window: 3 })
        ),
        Err(ReplayError::Config { .. })
    ));
}

#[test]
fn max_times_sampled_hands_each_item_out_exactly_m_times() {
    let b = buffer(8, SamplerConfig::MaxTimesSampled { max_times: 3 });
    for i in 0..4 {
        insert(&b, i as f32, 0);
    }
    let mut counts = [0; 4];
    let mut batch = b.new_batch(4);
    for _ in 0..3 {
        b.sample_into(&mut batch, 4).unwrap();
        for k in batch.keys() {
            counts[k.0 as usize] += 1;
        }
    }
    assert_eq!(counts, [3; 4]);
    assert!(matches!(
        b.sample_into(&mut batch, 1),
        Err(ReplayError::NotEnoughItems { .. })
    ));
}

#[test]
fn prioritized_follows_priorities_normalises_weights_and_ignores_stale_keys() {
    let cfg = PrioritizedConfig {
        alpha: 1.0,
        beta: 1.0,
        eps: 0.0,
    };
    let b = buffer(4, SamplerConfig::Prioritized(cfg));
    let keys: Vec<_> = (0..4).map(|i| insert(&b, i as f32, 0)).collect();
    let r = b.update_priorities(&keys, &[1.0, 1.0, 1.0, 97.0]).unwrap();
    assert_eq!(r.applied, 4);
    let mut batch = b.new_batch(1000);
    b.sample_into(&mut batch, 1000).unwrap();
    let heavy = batch.keys().iter().filter(|k| k.0 == 3).count();
    // Stratified: 97% of the mass gives 970 +- a few of 1000 draws.
    assert!(
        (960..=980).contains(&heavy),
        "heavy item drawn {heavy} times"
    );
    for (k, w) in batch.keys().iter().zip(batch.weights()) {
        let expected = if k.0 == 3 { 1.0 / 97.0 } else { 1.0 };
        assert!((w - expected).abs() < 1e-6, "key {k:?} weight {w}");
    }
    // Overwrite key 0 (slot 0) with key 4: an update for key 0 is stale.
    let k4 = insert(&b, 40.0, 0);
    let r = b.update_priorities(&[keys[0], k4], &[1000.0, 1.0]).unwrap();
    assert_eq!((r.applied, r.stale), (1, 1));
    assert_eq!(b.stats().stale_priority_updates, 1);
    let r = b.update_priorities(&[k4], &[f32::NAN]).unwrap();
    assert_eq!(r.invalid, 1);
    assert!(b.update_priorities(&[k4], &[]).is_err());
}

#[test]
fn priority_mass_reports_the_trees_total_and_minimum() {
    let cfg = PrioritizedConfig {
        alpha: 2.0,
        beta: 1.0,
        eps: 0.0,
    };
    let b = buffer(4, SamplerConfig::Prioritized(cfg));
    let empty = b.priority_mass().unwrap();
    assert_eq!(empty.total, 0.0);
    let keys: Vec<_> = (0..3).map(|i| insert(&b, i as f32, 0)).collect();
    b.update_priorities(&keys, &[1.0, 2.0, 3.0]).unwrap();
    // p^alpha: 1 + 4 + 9.
    let m = b.priority_mass().unwrap();
    assert!((m.total - 14.0).abs() < 1e-9, "{m:?}");
    assert!((m.min_positive - 1.0).abs() < 1e-9, "{m:?}");
    assert_eq!(buffer(4, SamplerConfig::Uniform).priority_mass(), None);
}

#[test]
fn grouped_release_hides_open_groups_and_serves_groups_fifo() {
    let b = buffer(16, SamplerConfig::Grouped);
    let f = |v: f32| [v, v, v];
    let ins = |v: f32, g: u64| {
        let x = f(v);
        b.insert_ref_in_group(
            &[
                FieldRef::new(&[3], Values::F32(&x)),
                FieldRef::new(&[], Values::U64(&[0])),
            ],
            g,
        )
        .unwrap()
    };
    ins(1.0, 7);
    ins(2.0, 8);
    ins(3.0, 7);
    let mut batch = b.new_batch(8);
    assert!(matches!(
        b.sample_group_into(&mut batch, None),
        Err(ReplayError::NotEnoughItems { .. })
    ));
    assert_eq!(b.complete_group(8), 1);
    assert_eq!(b.complete_group(7), 2);
    assert_eq!(b.sample_group_into(&mut batch, None).unwrap(), 8);
    assert_eq!(firsts(&batch), vec![2.0]);
    assert_eq!(b.sample_group_into(&mut batch, None).unwrap(), 7);
    assert_eq!(firsts(&batch), vec![1.0, 3.0]);
    assert_eq!(batch.groups(), &[7, 7]);
    assert_eq!(b.available(), 0);
}

#[test]
fn grouped_drops_a_whole_group_when_the_ring_displaces_one_of_its_items() {
    let cfg =
        ReplayConfig::new(3, SamplerConfig::Grouped).with_writer_policy(WriterPolicy::DropOldest);
    let b = ReplayBuffer::new(layout(), cfg).unwrap();
    let item = [
        FieldRef::new(&[3], Values::F32(&[0.0; 3])),
        FieldRef::new(&[], Values::U64(&[0])),
    ];
    b.insert_ref_in_group(&item, 1).unwrap();
    b.insert_ref_in_group(&item, 1).unwrap();
    b.complete_group(1);
    b.insert_ref_in_group(&item, 2).unwrap();
    // Displaces key 0, breaking group 1 (ready): all of it goes.
    b.insert_ref_in_group(&item, 2).unwrap();
    assert_eq!(b.available(), 0);
    assert_eq!(b.complete_group(2), 2);
    let mut batch = b.new_batch(4);
    b.sample_into(&mut batch, 2).unwrap();
    assert_eq!(batch.groups(), &[2, 2]);
    let s = b.stats();
    assert_eq!((s.evicted_unconsumed, s.dropped_with_group), (1, 1));
}

#[test]
fn block_policy_waits_for_consumption_and_times_out() {
    let cfg = ReplayConfig::new(2, SamplerConfig::Fifo).with_writer_policy(WriterPolicy::Block {
        timeout: Duration::from_millis(1),
    });
    let b = Arc::new(ReplayBuffer::new(layout(), cfg).unwrap());
    insert(&b, 0.0, 0);
    insert(&b, 1.0, 0);
    let item = [
        FieldRef::new(&[3], Values::F32(&[2.0; 3])),
        FieldRef::new(&[], Values::U64(&[0])),
    ];
    assert!(matches!(
        b.insert_ref(&item),
        Err(ReplayError::Timeout { .. })
    ));
    // A writer blocked (long timeout) is released by a consumer.
    let writer = {
        let b = Arc::clone(&b);
        std::thread::spawn(move || {
            let item = [
                FieldRef::new(&[3], Values::F32(&[2.0; 3])),
                FieldRef::new(&[], Values::U64(&[0])),
            ];
            b.insert_ref_timeout(&item, Duration::from_secs(60))
        })
    };
    let mut batch = b.new_batch(1);
    b.sample_into(&mut batch, 1).unwrap();
    assert_eq!(writer.join().unwrap().unwrap(), ItemKey(2));
    b.sample_into(&mut batch, 1).unwrap();
    b.sample_into(&mut batch, 1).unwrap();
    assert_eq!(firsts(&batch), vec![2.0]);
    assert_eq!(b.stats().evicted_unconsumed, 0);
}

#[test]
fn close_wakes_a_blocked_sampler() {
    let b = Arc::new(buffer(4, SamplerConfig::Fifo));
    let sampler = {
        let b = Arc::clone(&b);
        std::thread::spawn(move || {
            let mut batch = b.new_batch(1);
            b.sample_into_timeout(&mut batch, 1, Duration::from_secs(600))
        })
    };
    b.close();
    assert!(matches!(sampler.join().unwrap(), Err(ReplayError::Closed)));
    let item = [
        FieldRef::new(&[3], Values::F32(&[0.0; 3])),
        FieldRef::new(&[], Values::U64(&[0])),
    ];
    assert!(matches!(b.insert_ref(&item), Err(ReplayError::Closed)));
}

#[test]
fn blocked_sampler_wakes_on_insert() {
    let b = Arc::new(buffer(4, SamplerConfig::Fifo));
    let sampler = {
        let b = Arc::clone(&b);
        std::thread::spawn(move || {
            let mut batch = b.new_batch(2);
            b.sample_into_timeout(&mut batch, 2, Duration::from_secs(600))
                .map(|()| batch.keys().to_vec())
        })
    };
    insert(&b, 0.0, 0);
    insert(&b, 1.0, 0);
    assert_eq!(
        sampler.join().unwrap().unwrap(),
        vec![ItemKey(0), ItemKey(1)]
    );
}

#[test]
fn deadlocking_configurations_are_rejected() {
    let block = WriterPolicy::Block {
        timeout: Duration::from_secs(1),
    };
    for s in [
        SamplerConfig::Uniform,
        SamplerConfig::UniformWithoutReplacement,
        SamplerConfig::Prioritized(PrioritizedConfig::default()),
        SamplerConfig::Recent { window: 2 },
        // Consumes in random order while the ring frees slots in key order.
        SamplerConfig::MaxTimesSampled { max_times: 2 },
    ] {
        let cfg = ReplayConfig::new(4, s).with_writer_policy(block);
        assert!(matches!(
            ReplayBuffer::new(layout(), cfg),
            Err(ReplayError::Config { .. })
        ));
    }
    let too_big = ReplayConfig::new(4, SamplerConfig::Uniform)
        .with_rate_limiter(RateLimiterConfig::min_size(5));
    assert!(ReplayBuffer::new(layout(), too_big).is_err());
    let ratio = ReplayConfig::new(4, SamplerConfig::Fifo)
        .with_rate_limiter(RateLimiterConfig::sample_to_insert_ratio(2.0, 1, 10.0));
    assert!(
        ReplayBuffer::new(layout(), ratio).is_err(),
        "FIFO cannot sample an item twice"
    );
    assert!(ReplayBuffer::new(layout(), ReplayConfig::new(0, SamplerConfig::Fifo)).is_err());
}

#[test]
fn rate_limiter_enforces_min_size_and_ratio() {
    let cfg = ReplayConfig::new(100, SamplerConfig::Uniform)
        .with_rate_limiter(RateLimiterConfig::sample_to_insert_ratio(1.0, 2, 3.0));
    let b = ReplayBuffer::new(layout(), cfg).unwrap();
    let mut batch = b.new_batch(8);
    insert(&b, 0.0, 0);
    assert!(matches!(
        b.sample_into(&mut batch, 1),
        Err(ReplayError::RateLimited { .. })
    ));
    insert(&b, 1.0, 0);
    // diff = 2 inserts - 0 samples = 2, min_diff = -1: 3 samples allowed.
    b.sample_into(&mut batch, 3).unwrap();
    assert!(matches!(
        b.sample_into(&mut batch, 1),
        Err(ReplayError::RateLimited { .. })
    ));
    // max_diff = 5: from diff -1, six more inserts pass, the seventh waits.
    for i in 0..6 {
        insert(&b, i as f32, 0);
    }
    let item = [
        FieldRef::new(&[3], Values::F32(&[0.0; 3])),
        FieldRef::new(&[], Values::U64(&[0])),
    ];
    assert!(matches!(
        b.insert_ref(&item),
        Err(ReplayError::WouldBlock { .. })
    ));
    assert!(matches!(
        b.insert_ref_timeout(&item, Duration::from_millis(1)),
        Err(ReplayError::Timeout { .. })
    ));
    assert_eq!(
        b.stats().rate_limiter,
        Some(RateLimiterCounters {
            inserts: 8,
            samples: 3
        })
    );
}

#[test]
fn policy_lag_cap_drops_or_down_weights_stale_items() {
    let drop = ReplayConfig::new(8, SamplerConfig::Fifo).with_policy_lag(PolicyLagCap {
        max_lag: 2,
        action: LagAction::Drop,
    });
    let b = ReplayBuffer::new(layout(), drop).unwrap();
    for v in [1, 5, 2, 6] {
        insert(&b, v as f32, v);
    }
    b.set_policy_version(6);
    let mut batch = b.new_batch(4);
    b.sample_into(&mut batch, 4).unwrap();
    assert_eq!(batch.policy_versions(), &[5, 6]);
    assert_eq!(b.stats().dropped_policy_lag, 2);

    let weigh = ReplayConfig::new(8, SamplerConfig::Fifo).with_policy_lag(PolicyLagCap {
        max_lag: 2,
        action: LagAction::DownWeight(0.25),
    });
    let b = ReplayBuffer::new(layout(), weigh).unwrap();
    insert(&b, 0.0, 1);
    insert(&b, 0.0, 5);
    b.set_policy_version(6);
    b.sample_into(&mut batch, 2).unwrap();
    assert_eq!(batch.weights(), &[0.25, 1.0]);
}

/// Uniform copies rows a chunk at a time and closes the gaps that lag drops
/// leave: every returned row's data, key, version and weight still belong
/// together. Key `k` holds `x = [k, k + 1, k + 2]`; every third key is stale.
#[test]
fn uniform_rows_stay_aligned_with_their_keys_across_lag_drops_and_down_weights() {
    for action in [LagAction::Drop, LagAction::DownWeight(0.25)] {
        let config = ReplayConfig::new(64, SamplerConfig::Uniform)
            .with_policy_lag(PolicyLagCap { max_lag: 2, action });
        let b = ReplayBuffer::new(layout(), config).unwrap();
        for k in 0..64u64 {
            insert(&b, k as f32, if k % 3 == 0 { 0 } else { 10 });
        }
        b.set_policy_version(10);
        let mut batch = b.new_batch(100);
        b.sample_into(&mut batch, 100).unwrap();
        assert_eq!(batch.len(), 100, "{action:?}: dropped rows are redrawn");
        let versions = batch.field_u64("v").unwrap();
        for (i, (&key, x)) in batch.keys().iter().zip(firsts(&batch)).enumerate() {
            let stale = key.0 % 3 == 0;
            assert_eq!(x, key.0 as f32, "{action:?}: row {i} holds another item");
            assert_eq!(versions[i], if stale { 0 } else { 10 });
            assert_eq!(batch.policy_versions()[i], versions[i]);
            assert_eq!(batch.weights()[i], if stale { 0.25 } else { 1.0 });
            assert!(
                !(stale && action == LagAction::Drop),
                "{action:?}: stale row kept"
            );
        }
        assert_eq!(
            b.stats().dropped_policy_lag > 0,
            action == LagAction::Drop,
            "{action:?}"
        );
    }
}

#[test]
fn lazy_buffer_takes_its_layout_from_the_first_item() {
    let lazy = LazyReplayBuffer::new(ReplayConfig::new(4, SamplerConfig::Fifo)).unwrap();
    assert!(lazy.get().is_none());
    lazy.insert(
        Item::new()
            .with_f32("a", &[2], &[1.0, 2.0])
            .with_u8("b", &[1], &[1]),
    )
    .unwrap();
    let layout = lazy.get().unwrap().layout().clone();
    assert_eq!(layout.fields().len(), 2);
    assert_eq!(layout.field("a").unwrap().1.shape(), &[2]);
    let wrong = Item::new()
        .with_f32("a", &[3], &[0.0; 3])
        .with_u8("b", &[1], &[1]);
    assert!(matches!(
        lazy.insert(wrong).unwrap_err().error,
        ReplayError::Shape { .. }
    ));
    let mut batch = SampleBatch::new(&layout, 1);
    lazy.sample_into(&mut batch, 1).unwrap();
    assert_eq!(batch.field_f32("a").unwrap(), vec![1.0, 2.0]);
}

#[test]
fn mapped_storage_reopens_with_items_keys_and_fifo_position() {
    for order in [StorageOrder::Records, StorageOrder::Columns] {
        let dir = tempfile::tempdir().unwrap();
        let cfg = ReplayConfig::new(8, SamplerConfig::Fifo).with_storage_order(order);
        {
            let b = ReplayBuffer::create_mapped(dir.path(), layout(), cfg.clone()).unwrap();
            for i in 0..5 {
                insert(&b, i as f32, i);
            }
            let mut batch = b.new_batch(2);
            b.sample_into(&mut batch, 2).unwrap();
            b.flush().unwrap();
        }
        // The directory's order wins over the config's.
        let other = match order {
            StorageOrder::Records => StorageOrder::Columns,
            StorageOrder::Columns => StorageOrder::Records,
        };
        let b =
            ReplayBuffer::open_mapped(dir.path(), cfg.clone().with_storage_order(other)).unwrap();
        assert_eq!(b.config().storage_order, order);
        assert_eq!(b.layout(), &layout());
        let mut batch = b.new_batch(8);
        b.sample_into(&mut batch, 3).unwrap();
        assert_eq!(batch.keys(), &[ItemKey(2), ItemKey(3), ItemKey(4)]);
        assert_eq!(firsts(&batch), vec![2.0, 3.0, 4.0], "{order:?}");
        assert_eq!(insert(&b, 9.0, 0), ItemKey(5), "keys continue");
        let wrong = ReplayConfig::new(9, SamplerConfig::Fifo);
        drop(b);
        assert!(matches!(
            ReplayBuffer::open_mapped(dir.path(), wrong),
            Err(ReplayError::Mismatch { .. })
        ));
    }
}

/// A mapped table reopened with a prioritized sampler: every stored item
/// (and only those) gets the leaf of a new item in one pass over the
/// slots, so the mass is the item count, each is drawn, and an empty slot
/// never is; priority updates then work as on any table.
#[test]
fn a_prioritized_reopen_weighs_every_stored_item_as_a_new_one() {
    let dir = tempfile::tempdir().unwrap();
    {
        let cfg = ReplayConfig::new(64, SamplerConfig::Uniform);
        let b = ReplayBuffer::create_mapped(dir.path(), layout(), cfg).unwrap();
        for i in 0..37 {
            insert(&b, i as f32, 0);
        }
        b.flush().unwrap();
    }
    let cfg = ReplayConfig::new(64, SamplerConfig::Prioritized(PrioritizedConfig::default()));
    let b = ReplayBuffer::open_mapped(dir.path(), cfg).unwrap();
    let mass = b.priority_mass().unwrap();
    assert_eq!((mass.total, mass.min_positive), (37.0, 1.0));
    let mut seen = [0usize; 64];
    let mut batch = b.new_batch(128);
    for _ in 0..20 {
        b.sample_into(&mut batch, 128).unwrap();
        for k in batch.keys() {
            seen[k.0 as usize] += 1;
        }
    }
    assert!(seen[..37].iter().all(|&n| n > 0), "{seen:?}");
    assert!(seen[37..].iter().all(|&n| n == 0), "{seen:?}");
    b.update_priorities(&[ItemKey(3)], &[0.25]).unwrap();
    let mass = b.priority_mass().unwrap();
    assert!(mass.total < 37.0 && mass.min_positive < 1.0, "{mass:?}");
}

/// Group ids live in a cold column that samples read only once some item
/// was stored in a group: under a non-grouped sampler, rows inserted before
/// and after the first grouped insert must each come back with their own
/// group (`u64::MAX` for none) and policy version, also after the mapped
/// directory is reopened (the storage's flag word must say groups were
/// stored).
#[test]
fn groups_and_policy_versions_come_back_with_their_items_before_and_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = ReplayConfig::new(8, SamplerConfig::Uniform);
    let check = |b: &ReplayBuffer| {
        let mut batch = b.new_batch(16);
        b.sample_into(&mut batch, 16).unwrap();
        let versions = batch.field_u64("v").unwrap();
        for (i, &x) in firsts(&batch).iter().enumerate() {
            let k = x as u64;
            let want = if k >= 2 { 100 + k } else { u64::MAX };
            assert_eq!(batch.keys()[i], ItemKey(k));
            assert_eq!(batch.groups()[i], want, "group of item {k}");
            assert_eq!(batch.policy_versions()[i], 10 + k, "version of item {k}");
            assert_eq!(versions[i], 10 + k);
        }
    };
    {
        let b = ReplayBuffer::create_mapped(dir.path(), layout(), cfg.clone()).unwrap();
        for k in 0..4u64 {
            let x = [k as f32; 3];
            let v = [10 + k];
            let item = [
                FieldRef::new(&[3], Values::F32(&x)),
                FieldRef::new(&[], Values::U64(&v)),
            ];
            if k < 2 {
                b.insert_ref(&item).unwrap();
                check(&b);
            } else {
                b.insert_ref_in_group(&item, 100 + k).unwrap();
            }
        }
        check(&b);
        b.flush().unwrap();
    }
    let b = ReplayBuffer::open_mapped(dir.path(), cfg).unwrap();
    check(&b);
}

/// Inserts without a group leave the group column unwritten until some
/// item is stored in a group; from then on they clear the word an earlier
/// item left. That must hold across a reopen: the ring (capacity 2) holds
/// items in groups 5 and 7; after the reopen item 2 (no group) replaces
/// the first and item 3 (group 9) the second. Were the flag lost with the
/// process, item 1 would come back without its group and item 2 with
/// group 5.
#[test]
fn an_item_without_a_group_replacing_a_grouped_one_after_reopen_has_no_group() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = ReplayConfig::new(2, SamplerConfig::Uniform);
    let put = |b: &ReplayBuffer, k: u64, group: Option<u64>| {
        let x = [k as f32; 3];
        let v = [k];
        let item = [
            FieldRef::new(&[3], Values::F32(&x)),
            FieldRef::new(&[], Values::U64(&v)),
        ];
        match group {
            Some(g) => b.insert_ref_in_group(&item, g).unwrap(),
            None => b.insert_ref(&item).unwrap(),
        };
    };
    let groups = |b: &ReplayBuffer| {
        let mut batch = b.new_batch(64);
        b.sample_into(&mut batch, 64).unwrap();
        let mut seen: Vec<(u64, u64)> = batch
            .keys()
            .iter()
            .zip(batch.groups())
            .map(|(k, &g)| (k.0, g))
            .collect();
        seen.sort_unstable();
        seen.dedup();
        seen
    };
    {
        let b = ReplayBuffer::create_mapped(dir.path(), layout(), cfg.clone()).unwrap();
        put(&b, 0, Some(5));
        put(&b, 1, Some(7));
        b.flush().unwrap();
    }
    let b = ReplayBuffer::open_mapped(dir.path(), cfg).unwrap();
    assert_eq!(groups(&b), [(0, 5), (1, 7)]);
    put(&b, 2, None);
    assert_eq!(groups(&b), [(1, 7), (2, u64::MAX)]);
    put(&b, 3, Some(9));
    assert_eq!(groups(&b), [(2, u64::MAX), (3, 9)]);
}

/// A mapped table whose items have no group never writes its group column,
/// so a sparse file leaves those pages unallocated and never in memory: at
/// 1B items of 16 bytes that is 8 GB of the 32 a columns table keeps
/// resident. 256Ki items of a 16-byte field, filled twice over, in either
/// order: the file is the slots (sequence words and rows), the group and
/// retire columns (2 MiB each) and the flag word, and holds the slots but
/// neither column. Unix only (allocated blocks).
#[cfg(unix)]
#[test]
fn a_mapped_table_without_groups_never_writes_its_group_column() {
    use std::os::unix::fs::MetadataExt;
    let capacity = 1usize << 18;
    let layout = ItemLayout::builder()
        .field("x", DType::U8, &[16])
        .build()
        .unwrap();
    // Bytes per slot of the sequence word and the row: one word and two
    // (columns), one 64-byte line (records).
    for (order, slot_bytes) in [(StorageOrder::Columns, 24), (StorageOrder::Records, 64)] {
        let dir = tempfile::tempdir().unwrap();
        let cfg = ReplayConfig::new(capacity, SamplerConfig::Uniform).with_storage_order(order);
        let b = ReplayBuffer::create_mapped(dir.path(), layout.clone(), cfg).unwrap();
        for k in 0..2 * capacity as u64 {
            let x = [k as u8; 16];
            b.insert_ref(&[FieldRef::new(&[16], Values::U8(&x))])
                .unwrap();
        }
        b.flush().unwrap();
        let meta = std::fs::metadata(dir.path().join("storage.bin")).unwrap();
        let (slots, column) = (slot_bytes * capacity as u64, 8 * capacity as u64);
        assert_eq!(meta.len(), slots + 2 * column + 8, "{order:?}: file length");
        let allocated = meta.blocks() * 512;
        // The slots are allocated whole (the fill reached every one).
        assert!(allocated >= slots, "{order:?}: {allocated} bytes allocated");
        // Half a column of slack for the file system's own rounding; the
        // group column written would add a whole one.
        assert!(
            allocated < slots + column / 2,
            "{order:?}: {allocated} bytes allocated, more than the slots' {slots}"
        );
    }
}

/// A sample copies each field's row with a copy unrolled for its width
/// (rows of 1 to 8 whole words) or a general one (other widths, partial
/// last words). Every width, both storage orders and more rows than one
/// gathered chunk: each row's bytes are exactly its own item's.
#[test]
fn every_row_width_comes_back_whole_beside_its_key() {
    // Bytes per row: 1, 2, 4 (the sub-word copies), 3, 8, 12, 48, 56, 64
    // (largest unrolled), 72, 68.
    let widths: [(DType, usize); 11] = [
        (DType::U8, 1),
        (DType::U8, 2),
        (DType::F32, 1),
        (DType::U8, 3),
        (DType::F32, 2),
        (DType::F32, 3),
        (DType::F32, 12),
        (DType::U64, 7),
        (DType::U64, 8),
        (DType::U64, 9),
        (DType::F32, 17),
    ];
    let mut builder = ItemLayout::builder();
    for (i, &(dtype, n)) in widths.iter().enumerate() {
        builder = builder.field(&format!("f{i}"), dtype, &[n]);
    }
    let layout = builder.build().unwrap();
    // Byte `b` of field `f` of item `k`.
    let byte = |k: u64, f: usize, b: usize| (k as usize * 31 + f * 7 + b) as u8;
    let shapes: Vec<[usize; 1]> = widths.iter().map(|&(_, n)| [n]).collect();
    for order in [StorageOrder::Records, StorageOrder::Columns] {
        let cfg = ReplayConfig::new(300, SamplerConfig::Uniform).with_storage_order(order);
        let b = ReplayBuffer::new(layout.clone(), cfg).unwrap();
        for k in 0..300u64 {
            let bytes: Vec<Vec<u8>> = widths
                .iter()
                .enumerate()
                .map(|(f, &(dtype, n))| (0..dtype.size() * n).map(|i| byte(k, f, i)).collect())
                .collect();
            let item: Vec<FieldRef> = widths
                .iter()
                .zip(&shapes)
                .zip(&bytes)
                .map(|((&(dtype, _), shape), raw)| {
                    FieldRef::new(shape, Values::Raw { dtype, bytes: raw })
                })
                .collect();
            assert_eq!(b.insert_ref(&item).unwrap(), ItemKey(k));
        }
        let mut batch = b.new_batch(200);
        b.sample_into(&mut batch, 200).unwrap();
        assert_eq!(batch.len(), 200);
        for (f, &(dtype, n)) in widths.iter().enumerate() {
            let w = dtype.size() * n;
            let rows = batch.field_bytes(f).unwrap();
            for (row, key) in rows.chunks_exact(w).zip(batch.keys()) {
                let want: Vec<u8> = (0..w).map(|i| byte(key.0, f, i)).collect();
                assert_eq!(
                    row,
                    &want[..],
                    "field {f} ({w} bytes) of item {}, {order:?}",
                    key.0
                );
            }
        }
    }
}

/// Formats 1 and 2 kept six metadata words per slot, format 3 group ids
/// as they are and no flag word; reading their `storage.bin` with today's
/// geometry would return garbage, so they are refused with a message that
/// says what to do.
#[test]
fn mapped_directories_of_older_formats_are_refused_with_a_clear_error() {
    for (format, order) in [
        (1, None),
        (2, Some("Records")),
        (2, Some("Columns")),
        (3, Some("Columns")),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let cfg = ReplayConfig::new(4, SamplerConfig::Fifo);
        {
            let b = ReplayBuffer::create_mapped(dir.path(), layout(), cfg.clone()).unwrap();
            insert(&b, 7.0, 0);
            b.flush().unwrap();
        }
        // Rewrite the header as that format wrote it.
        let header = dir.path().join("layout.json");
        let mut json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&header).unwrap()).unwrap();
        let obj = json.as_object_mut().unwrap();
        obj.remove("order");
        if let Some(order) = order {
            obj.insert("order".into(), serde_json::json!(order));
        }
        obj.insert("format".into(), serde_json::json!(format));
        std::fs::write(&header, serde_json::to_vec(&json).unwrap()).unwrap();
        match ReplayBuffer::open_mapped(dir.path(), cfg) {
            Err(ReplayError::Mismatch { reason, .. }) => {
                assert!(reason.contains(&format!("format {format}")), "{reason}");
                assert!(reason.contains("checkpoint"), "{reason}");
            }
            other => panic!("format {format} opened: {:?}", other.map(|_| ())),
        }
    }
}

fn sample_keys(b: &ReplayBuffer, rounds: usize) -> Vec<u64> {
    let mut batch = b.new_batch(16);
    let mut out = Vec::new();
    for _ in 0..rounds {
        b.sample_into(&mut batch, 16).unwrap();
        out.extend(batch.keys().iter().map(|k| k.0));
        out.extend(batch.weights().iter().map(|w| w.to_bits() as u64));
    }
    out
}

#[test]
fn sampling_continues_identically_after_checkpoint_restore() {
    let dir = tempfile::tempdir().unwrap();
    for sampler in [
        SamplerConfig::Uniform,
        SamplerConfig::UniformWithoutReplacement,
        SamplerConfig::Prioritized(PrioritizedConfig::default()),
        SamplerConfig::MaxTimesSampled { max_times: 4 },
        SamplerConfig::Fifo,
    ] {
        let cfg = ReplayConfig::new(64, sampler).with_seed(42);
        let b = ReplayBuffer::new(layout(), cfg.clone()).unwrap();
        for i in 0..50 {
            insert(&b, i as f32, i);
        }
        if let SamplerConfig::Prioritized(_) = sampler {
            let keys: Vec<_> = (0..50).map(ItemKey).collect();
            let prios: Vec<f32> = (0..50).map(|i| (i % 7) as f32 + 0.5).collect();
            b.update_priorities(&keys, &prios).unwrap();
        }
        sample_keys(&b, 1);
        let path = dir.path().join("replay.ckpt");
        let info = b.checkpoint(&path).unwrap();
        assert_eq!(info.items, 50);
        let restored = ReplayBuffer::restore(&path, layout(), cfg).unwrap();
        let rounds = if sampler == SamplerConfig::Fifo { 2 } else { 5 };
        assert_eq!(
            sample_keys(&b, rounds),
            sample_keys(&restored, rounds),
            "{sampler:?}"
        );
        assert_eq!(b.stats(), restored.stats(), "{sampler:?}");
        let mut x = restored.new_batch(1);
        restored.sample_into(&mut x, 1).unwrap();
        let v = x.policy_versions()[0];
        assert_eq!(firsts(&x), vec![v as f32], "contents survive");
    }
}

#[test]
fn corrupt_or_mismatched_checkpoints_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.ckpt");
    let cfg = ReplayConfig::new(8, SamplerConfig::Uniform);
    let b = ReplayBuffer::new(layout(), cfg.clone()).unwrap();
    for i in 0..8 {
        insert(&b, i as f32, 0);
    }
    b.checkpoint(&path).unwrap();
    let good = std::fs::read(&path).unwrap();

    let other_layout = ItemLayout::builder()
        .field("x", DType::F32, &[4])
        .build()
        .unwrap();
    assert!(matches!(
        ReplayBuffer::restore(&path, other_layout, cfg.clone()),
        Err(ReplayError::Mismatch { .. })
    ));
    let other_cap = ReplayConfig::new(16, SamplerConfig::Uniform);
    assert!(matches!(
        ReplayBuffer::restore(&path, layout(), other_cap),
        Err(ReplayError::Mismatch { .. })
    ));
    let other_sampler = ReplayConfig::new(8, SamplerConfig::Fifo);
    assert!(matches!(
        ReplayBuffer::restore(&path, layout(), other_sampler),
        Err(ReplayError::Mismatch { .. })
    ));

    let mut flipped = good.clone();
    let at = flipped.len() - 20;
    flipped[at] ^= 0x40;
    std::fs::write(&path, &flipped).unwrap();
    assert!(matches!(
        ReplayBuffer::restore(&path, layout(), cfg.clone()),
        Err(ReplayError::Corrupt { .. })
    ));
    std::fs::write(&path, &good[..good.len() / 2]).unwrap();
    assert!(matches!(
        ReplayBuffer::restore(&path, layout(), cfg.clone()),
        Err(ReplayError::Corrupt { .. })
    ));
    std::fs::write(&path, b"not a checkpoint at all").unwrap();
    assert!(matches!(
        ReplayBuffer::restore(&path, layout(), cfg),
        Err(ReplayError::Corrupt { .. })
    ));
    assert!(
        !dir.path().join("c.ckpt.tmp").exists(),
        "no temp file left behind"
    );
}

/// Under `Block` a full buffer holds every insert, so the limiter must then
/// allow a sample. `min_diff` above `capacity - 1`, or a ratio below the
/// samples that consume an item, would refuse it: rejected at construction.
/// The boundary (`min_diff = capacity - 1`) is accepted and a full buffer
/// does sample.
#[test]
fn block_with_a_limiter_that_refuses_a_full_buffer_is_rejected() {
    let block = WriterPolicy::Block {
        timeout: Duration::ZERO,
    };
    let limiter = |spi: f64, min_diff: f64| RateLimiterConfig {
        min_size_to_sample: 4,
        samples_per_insert: spi,
        min_diff,
        max_diff: min_diff + 10.0,
    };
    let cfg = |sampler, l| {
        ReplayConfig::new(4, sampler)
            .with_writer_policy(block)
            .with_rate_limiter(l)
    };
    for (sampler, l) in [
        (SamplerConfig::Fifo, limiter(1.0, 4.0)),
        (SamplerConfig::Grouped, limiter(1.0, 4.0)),
        (SamplerConfig::Fifo, limiter(0.5, -100.0)),
    ] {
        let err = ReplayBuffer::new(layout(), cfg(sampler, l)).unwrap_err();
        assert!(
            matches!(err, ReplayError::Config { .. }),
            "{sampler:?} {l:?}"
        );
        // The same limiter is fine when writers overwrite instead.
        let overwrite = cfg(sampler, l).with_writer_policy(WriterPolicy::OverwriteOldest);
        assert!(ReplayBuffer::new(layout(), overwrite).is_ok());
    }
    // An unbounded min_diff never refuses, whatever the ratio.
    let min_size = RateLimiterConfig::min_size(4);
    assert!(ReplayBuffer::new(layout(), cfg(SamplerConfig::Fifo, min_size)).is_ok());

    let b = ReplayBuffer::new(layout(), cfg(SamplerConfig::Fifo, limiter(1.0, 3.0))).unwrap();
    for v in 0..4 {
        insert(&b, v as f32, 0);
    }
    let fifth = [
        FieldRef::new(&[3], Values::F32(&[4.0; 3])),
        FieldRef::new(&[], Values::U64(&[0])),
    ];
    assert!(matches!(
        b.insert_ref(&fifth),
        Err(ReplayError::Timeout { .. })
    ));
    let mut batch = b.new_batch(1);
    b.sample_into(&mut batch, 1).unwrap();
    assert_eq!(firsts(&batch), vec![0.0]);
    b.insert_ref(&fifth).unwrap();
}

/// A lag cap reads each item's policy version from the layout's field; a
/// layout without one would read 0 for every item, so it is refused, for
/// eager and lazy buffers alike. A lazy buffer can name the field.
#[test]
fn a_lag_cap_needs_a_policy_version_field() {
    let cap = PolicyLagCap {
        max_lag: 2,
        action: LagAction::Drop,
    };
    let cfg = ReplayConfig::new(4, SamplerConfig::Fifo).with_policy_lag(cap);
    let unversioned = ItemLayout::builder()
        .field("x", DType::F32, &[3])
        .build()
        .unwrap();
    assert!(matches!(
        ReplayBuffer::new(unversioned, cfg.clone()),
        Err(ReplayError::Config { .. })
    ));
    assert!(matches!(
        LazyReplayBuffer::new(cfg.clone()),
        Err(ReplayError::Config { .. })
    ));

    let lazy = LazyReplayBuffer::with_policy_version_field(cfg, "v").unwrap();
    for version in [1u64, 9] {
        lazy.insert(Item::new().with_f32("x", &[1], &[version as f32]).with_u64(
            "v",
            &[],
            &[version],
        ))
        .unwrap();
    }
    let b = lazy.get().unwrap();
    b.set_policy_version(9);
    let mut batch = b.new_batch(2);
    lazy.sample_into(&mut batch, 2).unwrap();
    assert_eq!(
        batch.policy_versions(),
        &[9],
        "version 1 dropped by the cap"
    );
    assert_eq!(b.stats().dropped_policy_lag, 1);
}

/// A group handed out by `sample_group_into` is whole: if the lag cap
/// drops one of its items, the whole group is dropped and the next ready
/// group comes out instead.
#[test]
fn a_group_that_loses_an_item_at_sampling_is_dropped_whole() {
    let cfg = ReplayConfig::new(8, SamplerConfig::Grouped).with_policy_lag(PolicyLagCap {
        max_lag: 2,
        action: LagAction::Drop,
    });
    let b = ReplayBuffer::new(layout(), cfg).unwrap();
    let ins = |v: f32, version: u64, g: u64| {
        b.insert_ref_in_group(
            &[
                FieldRef::new(&[3], Values::F32(&[v, v + 1.0, v + 2.0])),
                FieldRef::new(&[], Values::U64(&[version])),
            ],
            g,
        )
        .unwrap()
    };
    ins(1.0, 1, 5); // stale once the policy is at 9
    ins(2.0, 9, 5);
    ins(3.0, 9, 6);
    ins(4.0, 8, 6);
    assert_eq!(b.complete_group(5), 2);
    assert_eq!(b.complete_group(6), 2);
    b.set_policy_version(9);
    let mut batch = b.new_batch(4);
    assert_eq!(b.sample_group_into(&mut batch, None).unwrap(), 6);
    assert_eq!(firsts(&batch), vec![3.0, 4.0]);
    assert_eq!(batch.groups(), &[6, 6]);
    let s = b.stats();
    assert_eq!((s.dropped_policy_lag, s.dropped_with_group), (1, 1));
    assert_eq!(b.available(), 0);
}
