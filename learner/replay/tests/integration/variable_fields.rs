//! Variable-length fields (token lists) in the ring: what goes in comes out
//! byte for byte without padding, through every sampler path, follow and
//! replica writes, checkpoints and mapped directories; bad offsets are
//! refused naming the field and the row; overwritten items' values are
//! given back; and under concurrent writers and samplers no row is ever
//! mixed with another item's values.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use seed_replay::*;

/// `tag: u64` (fixed), `tokens: i32 [-1]` (at most 64), `pairs: u8 [3, -1]`.
fn layout() -> ItemLayout {
    ItemLayout::builder()
        .field("tag", DType::U64, &[])
        .variable_field("tokens", DType::I32, &[], Some(64))
        .variable_field("pairs", DType::U8, &[3], None)
        .build()
        .unwrap()
}

/// The rows of item `tag`: `tag % 37` tokens of value `tag`, and
/// `(tag * 7) % 11` columns of three bytes `tag as u8`.
fn rows_of(tag: u64) -> (Vec<i32>, Vec<u8>) {
    let tokens = vec![tag as i32; (tag % 37) as usize];
    let pairs = vec![tag as u8; 3 * ((tag * 7) % 11) as usize];
    (tokens, pairs)
}

/// Inserts items `tags` in one batch.
fn insert(b: &ReplayBuffer, tags: &[u64]) -> InsertedKeys {
    let (mut tokens, mut pairs) = (Vec::new(), Vec::new());
    let (mut t_off, mut p_off) = (vec![0u64], vec![0u64]);
    for &t in tags {
        let (tk, pr) = rows_of(t);
        tokens.extend_from_slice(&tk);
        pairs.extend_from_slice(&pr);
        t_off.push(tokens.len() as u64);
        p_off.push((pairs.len() / 3) as u64);
    }
    let n = tags.len();
    b.insert_batch(
        &[
            FieldRef::new(&[n], Values::U64(tags)),
            FieldRef::variable(&[n], Values::I32(&tokens), &t_off),
            FieldRef::variable(&[n, 3], Values::U8(&pairs), &p_off),
        ],
        n,
    )
    .unwrap()
}

/// Every row of `batch` checked against its tag; returns the tags.
fn check(batch: &SampleBatch) -> Vec<u64> {
    let tags = batch.field_u64("tag").unwrap();
    let tokens = batch.field("tokens").unwrap();
    let t_off = batch.offsets("tokens").unwrap();
    let pairs = batch.field("pairs").unwrap();
    let p_off = batch.offsets("pairs").unwrap();
    assert_eq!(t_off.len(), tags.len() + 1);
    assert_eq!(p_off.len(), tags.len() + 1);
    assert_eq!(tokens.len() as u64, t_off[tags.len()] * 4, "no padding");
    assert_eq!(pairs.len() as u64, p_off[tags.len()] * 3);
    for (i, &tag) in tags.iter().enumerate() {
        let (tk, pr) = rows_of(tag);
        let got_tokens: Vec<i32> = tokens[t_off[i] as usize * 4..t_off[i + 1] as usize * 4]
            .chunks_exact(4)
            .map(|c| i32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        assert_eq!(got_tokens, tk, "tokens of tag {tag}");
        assert_eq!(
            &pairs[p_off[i] as usize * 3..p_off[i + 1] as usize * 3],
            &pr[..],
            "pairs of tag {tag}"
        );
    }
    tags
}

fn buffer(capacity: usize, sampler: SamplerConfig) -> ReplayBuffer {
    ReplayBuffer::new(layout(), ReplayConfig::new(capacity, sampler)).unwrap()
}

#[test]
fn rows_of_any_length_come_back_without_padding_through_each_sampler() {
    for sampler in [
        SamplerConfig::Fifo,
        SamplerConfig::Uniform,
        SamplerConfig::UniformWithoutReplacement,
        SamplerConfig::Recent { window: 64 },
        SamplerConfig::Prioritized(PrioritizedConfig::default()),
        SamplerConfig::MaxTimesSampled { max_times: 2 },
    ] {
        let b = buffer(64, sampler);
        // Lengths 0 and 36 (tokens), 0 and 10 (pairs) among them.
        insert(&b, &(0..40).collect::<Vec<_>>());
        let mut batch = b.new_batch(32);
        b.sample_into(&mut batch, 32).unwrap();
        let tags = check(&batch);
        assert_eq!(tags.len(), 32, "{sampler:?}");
        let keys: Vec<u64> = batch.keys().iter().map(|k| k.0).collect();
        assert_eq!(keys, tags, "{sampler:?}: a row's values are its item's");
    }
}

#[test]
fn a_single_item_and_an_empty_row_round_trip() {
    let b = buffer(4, SamplerConfig::Fifo);
    let item = Item::new()
        .with_u64("tag", &[], &[5])
        .with_variable_bytes(
            "tokens",
            DType::I32,
            &[],
            rows_of(5).0.iter().flat_map(|x| x.to_ne_bytes()).collect(),
        )
        .with_variable_bytes("pairs", DType::U8, &[3], rows_of(5).1);
    b.insert(item).unwrap();
    // Tag 0: no tokens, no pairs.
    insert(&b, &[0]);
    let mut batch = b.new_batch(4);
    b.sample_into(&mut batch, 2).unwrap();
    assert_eq!(check(&batch), vec![5, 0]);
    assert_eq!(batch.offsets("tokens").unwrap(), &[0, 5, 5]);
}

#[test]
fn bad_offsets_are_refused_naming_the_field_and_row_and_store_nothing() {
    let b = buffer(8, SamplerConfig::Uniform);
    let tokens = [1i32, 2, 3, 4, 5];
    let pairs = [0u8; 6];
    let p_off = [0u64, 1, 2];
    let try_tokens = |t_off: &[u64], tokens: &[i32]| {
        b.insert_batch(
            &[
                FieldRef::new(&[2], Values::U64(&[1, 2])),
                FieldRef::variable(&[2], Values::I32(tokens), t_off),
                FieldRef::variable(&[2, 3], Values::U8(&pairs), &p_off),
            ],
            2,
        )
        .unwrap_err()
        .to_string()
    };
    let cases: [(&[u64], &[i32], &str); 5] = [
        (&[0, 2], &tokens, "2 offsets for 2 rows"),
        (&[1, 2, 5], &tokens, "row 0: offsets start at 1"),
        (&[0, 4, 3], &tokens, "row 1: offsets go backwards"),
        (&[0, 2, 4], &tokens, "row 1: offsets end at 4 elements"),
        (&[0, 2, 70], &[0; 70], "row 1: 68 elements, max_len is 64"),
    ];
    for (offsets, values, expected) in cases {
        let e = try_tokens(offsets, values);
        assert!(e.contains("`tokens`") && e.contains(expected), "{e}");
    }
    // Offsets on a fixed field, none on a variable one.
    let e = b
        .insert_batch(
            &[
                FieldRef::variable(&[2], Values::U64(&[1, 2]), &[0, 1, 2]),
                FieldRef::variable(&[2], Values::I32(&tokens), &[0, 2, 5]),
                FieldRef::variable(&[2, 3], Values::U8(&pairs), &p_off),
            ],
            2,
        )
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("`tag`: offsets given for a fixed-shape field"),
        "{e}"
    );
    let e = b
        .insert_batch(
            &[
                FieldRef::new(&[2], Values::U64(&[1, 2])),
                FieldRef::new(&[2], Values::I32(&tokens)),
                FieldRef::variable(&[2, 3], Values::U8(&pairs), &p_off),
            ],
            2,
        )
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("`tokens`: a variable-length field needs offsets"),
        "{e}"
    );
    assert_eq!(b.stats().inserted, 0);
    assert_eq!(b.next_key(), 0, "no key was claimed");
}

/// A small ring written many laps over: the heap holds about the last
/// `capacity` items' values, not everything ever written, and every
/// sample still reads each row's own values.
#[test]
fn overwritten_items_values_are_given_back() {
    let capacity = 256;
    let b = buffer(capacity, SamplerConfig::Uniform);
    let mut batch = b.new_batch(64);
    let mut peak = 0;
    // About 0.1 KB per item: 2,000 laps write ~50 MB in all.
    for lap in 0..2_000u64 {
        let tags: Vec<u64> = (lap * 256..lap * 256 + 256).collect();
        insert(&b, &tags);
        b.sample_into(&mut batch, 64).unwrap();
        check(&batch);
        peak = peak.max(b.stats().heap_bytes);
    }
    // The live values are ~26 KB; segments are at least 64 KiB and a
    // couple may wait to retire.
    assert!(peak <= 4 * 64 * 1024, "heap peaked at {peak} bytes");
}

/// Two writers and two samplers, the ring lapped many times while they
/// run: every sampled row carries its own item's values (a row whose
/// values were retired mid-sample is dropped, never mixed).
#[test]
fn concurrent_writers_and_samplers_never_mix_rows() {
    let b = Arc::new(buffer(128, SamplerConfig::Uniform));
    let done = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..2u64)
        .map(|w| {
            let b = Arc::clone(&b);
            std::thread::spawn(move || {
                for i in 0..3_000u64 {
                    let base = (w * 3_000 + i) * 4;
                    insert(&b, &[base, base + 1, base + 2, base + 3]);
                }
            })
        })
        .collect();
    let samplers: Vec<_> = (0..2)
        .map(|_| {
            let (b, done) = (Arc::clone(&b), Arc::clone(&done));
            std::thread::spawn(move || {
                let mut batch = b.new_batch(32);
                let mut rows = 0;
                while !done.load(Ordering::Relaxed) {
                    if b.sample_into(&mut batch, 32).is_ok() {
                        rows += check(&batch).len();
                    }
                }
                rows
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    done.store(true, Ordering::Relaxed);
    for s in samplers {
        s.join().unwrap();
    }
    let mut batch = b.new_batch(128);
    b.sample_into(&mut batch, 128).unwrap();
    check(&batch);
}

#[test]
fn follow_and_replica_writes_carry_the_values() {
    let primary = buffer(16, SamplerConfig::Uniform);
    insert(&primary, &(0..10).collect::<Vec<_>>());
    let replica = buffer(16, SamplerConfig::Uniform);
    let mut batch = primary.new_batch(16);
    assert_eq!(
        primary.read_since(3, &mut batch, 16),
        FollowRead::Items { next: 10 }
    );
    assert_eq!(check(&batch), (3..10).collect::<Vec<_>>());
    let tags = batch.field("tag").unwrap().to_vec();
    let tokens = batch.field("tokens").unwrap().to_vec();
    let pairs = batch.field("pairs").unwrap().to_vec();
    let (t_off, p_off) = (
        batch.offsets("tokens").unwrap().to_vec(),
        batch.offsets("pairs").unwrap().to_vec(),
    );
    let raw = |dtype, bytes| Values::Raw { dtype, bytes };
    let w = replica
        .insert_batch_at(
            ItemKey(3),
            &[
                FieldRef::new(&[7], raw(DType::U64, &tags)),
                FieldRef::variable(&[7], raw(DType::I32, &tokens), &t_off),
                FieldRef::variable(&[7, 3], raw(DType::U8, &pairs), &p_off),
            ],
            7,
        )
        .unwrap();
    assert_eq!(w.written, 7);
    let mut copy = replica.new_batch(16);
    assert_eq!(
        replica.read_since(3, &mut copy, 16),
        FollowRead::Items { next: 10 }
    );
    assert_eq!(check(&copy), (3..10).collect::<Vec<_>>());
    assert_eq!(copy.field("tokens"), batch.field("tokens"));
}

#[test]
fn a_checkpoint_restores_the_values_and_damage_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let b = buffer(32, SamplerConfig::Fifo);
    insert(&b, &(0..25).collect::<Vec<_>>());
    insert(&b, &(25..50).collect::<Vec<_>>());
    let path = dir.path().join("t.seedrpl");
    let info = b.checkpoint(&path).unwrap();
    assert_eq!(info.items, 32);
    let config = ReplayConfig::new(32, SamplerConfig::Fifo);
    let r = ReplayBuffer::restore(&path, layout(), config.clone()).unwrap();
    let mut batch = r.new_batch(32);
    r.sample_into(&mut batch, 32).unwrap();
    assert_eq!(check(&batch), (18..50).collect::<Vec<_>>());
    // A row length past the bytes the file holds, and a cut-off file.
    let bytes = std::fs::read(&path).unwrap();
    for (what, damaged) in [
        ("truncated", bytes[..bytes.len() - 20].to_vec()),
        ("inflated", {
            // The first record's first variable row: its length word sits
            // after the 5 metadata words and the tag's word.
            let header = u64::from_le_bytes(bytes[8..16].try_into().unwrap()) as usize;
            let at = 16 + header + 6 * 8;
            let mut d = bytes.clone();
            d[at..at + 8].copy_from_slice(&60u64.to_le_bytes());
            d
        }),
    ] {
        let p = dir.path().join(format!("{what}.seedrpl"));
        std::fs::write(&p, damaged).unwrap();
        let e = ReplayBuffer::restore(&p, layout(), config.clone()).unwrap_err();
        assert!(matches!(e, ReplayError::Corrupt { .. }), "{what}: {e}");
    }
}

/// A mapped table reopens with every item's values, including after the
/// process stopped without a flush (the pages are the file's); segments of
/// long-overwritten items are gone from the directory.
#[test]
fn a_mapped_table_reopens_with_its_values() {
    let dir = tempfile::tempdir().unwrap();
    let config = ReplayConfig::new(64, SamplerConfig::Fifo);
    {
        let b = ReplayBuffer::create_mapped(dir.path(), layout(), config.clone()).unwrap();
        for lap in 0..100u64 {
            insert(&b, &(lap * 64..lap * 64 + 64).collect::<Vec<_>>());
        }
        let mut batch = b.new_batch(10);
        b.sample_into(&mut batch, 10).unwrap();
        assert!(b.stats().heap_bytes > 0);
    }
    let segments = std::fs::read_dir(dir.path().join("heap")).unwrap().count();
    assert!(segments <= 3, "{segments} segment files for 64 items");
    let b = ReplayBuffer::open_mapped(dir.path(), config).unwrap();
    let mut batch = b.new_batch(64);
    // The ring holds the last 64; the 10 sampled before were consumed.
    b.sample_into(&mut batch, 54).unwrap();
    assert_eq!(check(&batch), (6346..6400).collect::<Vec<_>>());
    // New values after the reopen go on next to the old ones.
    insert(&b, &[7000, 7001]);
    b.sample_into(&mut batch, 2).unwrap();
    assert_eq!(check(&batch), vec![7000, 7001]);
}

#[test]
fn groups_come_out_whole_with_their_values() {
    let b = buffer(32, SamplerConfig::Grouped);
    for tag in 0..6u64 {
        let (tk, pr) = rows_of(tag);
        b.insert_ref_in_group(
            &[
                FieldRef::new(&[], Values::U64(&[tag])),
                FieldRef::variable(&[], Values::I32(&tk), &[0, tk.len() as u64]),
                FieldRef::variable(&[3], Values::U8(&pr), &[0, pr.len() as u64 / 3]),
            ],
            tag % 2,
        )
        .unwrap();
    }
    b.complete_group(1);
    let mut batch = b.new_batch(8);
    assert_eq!(b.sample_group_into(&mut batch, None).unwrap(), 1);
    assert_eq!(check(&batch), vec![1, 3, 5]);
}
