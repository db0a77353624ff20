//! Loom: a `Block` writer replacing a consumed item while a FIFO sampler
//! consumes the new one. Whatever the interleaving, the replaced item was
//! consumed, so it must not be counted in `evicted_unconsumed` (the writer
//! once read the slot's retire stamp after its publish, when a sampler could
//! already have stamped the new item's: one eviction too many under load in
//! `replay_stress::fifo_block_queue_loses_and_duplicates_nothing`).
//!
//! The whole buffer runs here: the slot words and retire stamps are loom's
//! atomics (`crate::loom`), the FIFO cursor, key counter and counters are
//! `std`'s (loom interleaves at the loom operations only, which are the ones
//! this race is between). Nothing in the model blocks: the slot is free for
//! the writer, and the sampler does not wait.
use std::sync::Arc;
use std::time::Duration;

use loom::thread;

use crate::buffer::{ReplayBuffer, ReplayConfig};
use crate::dtype::DType;
use crate::error::ReplayError;
use crate::item::{FieldRef, Values};
use crate::item_key::ItemKey;
use crate::layout::ItemLayout;
use crate::sampler::SamplerConfig;
use crate::writer_policy::WriterPolicy;

fn insert(b: &ReplayBuffer, value: u64) -> ItemKey {
    b.insert_ref(&[FieldRef::new(&[], Values::U64(&[value]))])
        .expect("the slot is free")
}

#[test]
fn a_block_writer_never_counts_a_consumed_item_evicted() {
    loom::model(|| {
        let layout = ItemLayout::builder()
            .field("x", DType::U64, &[])
            .build()
            .expect("valid layout");
        let config =
            ReplayConfig::new(1, SamplerConfig::Fifo).with_writer_policy(WriterPolicy::Block {
                timeout: Duration::from_secs(1),
            });
        let b = Arc::new(ReplayBuffer::new(layout, config).expect("buffer"));
        // Key 0 inserted and consumed: its slot is free for key 1.
        assert_eq!(insert(&b, 1), ItemKey(0));
        let mut batch = b.new_batch(1);
        b.sample_into(&mut batch, 1).expect("key 0");
        // The sampler on a spawned thread, the writer on this one: the
        // other way round loom never had the sampler see the new item (as
        // in `loom_slot::race_first_grouped_write`).
        let sampler = {
            let b = Arc::clone(&b);
            thread::spawn(move || match b.sample_into(&mut batch, 1) {
                Ok(()) => batch.keys().to_vec(),
                Err(ReplayError::NotEnoughItems { .. }) => Vec::new(),
                Err(e) => panic!("sampler: {e}"),
            })
        };
        assert_eq!(insert(&b, 2), ItemKey(1));
        let got = sampler.join().expect("sampler");
        assert!(got.is_empty() || got == [ItemKey(1)], "{got:?}");
        let s = b.stats();
        assert_eq!((s.evicted_unconsumed, s.superseded_inserts), (0, 0));
    });
}
