//! Checkpoint and restore of the replay buffer: state that must survive,
//! sampling that must continue identically, damaged or mismatched files
//! that must be errors (never panics or huge allocations), and a
//! checkpoint taken while writers keep inserting.
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;

use seed_replay::*;

use crate::checksummed;
use checksummed::{payload, WORDS as PAYLOAD_WORDS};

/// The system allocator, noting the largest single request made by the
/// current thread (per thread: other tests run in parallel).
struct LargestAllocation;

thread_local! {
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn note(size: usize) {
    // `try_with`: allocations during thread teardown are not ours to note.
    let _ = LARGEST.try_with(|l| l.set(l.get().max(size)));
}

// SAFETY: every call is forwarded unchanged to `System`, which upholds the
// `GlobalAlloc` contract; `note` neither allocates nor unwinds.
unsafe impl GlobalAlloc for LargestAllocation {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: the caller's contract for `alloc`, passed on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: the caller's contract for `alloc_zeroed`, passed on.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract for `dealloc`, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        // SAFETY: the caller's contract for `realloc`, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: LargestAllocation = LargestAllocation;

/// Items of one `x: [3] f32` field holding `[v, v + 1, v + 2]` and a
/// policy-version scalar `v`.
fn layout() -> ItemLayout {
    ItemLayout::builder()
        .field("x", DType::F32, &[3])
        .field("v", DType::U64, &[])
        .policy_version_field("v")
        .build()
        .unwrap()
}

fn fields<'a>(x: &'a [f32; 3], version: &'a [u64; 1]) -> [FieldRef<'a>; 2] {
    [
        FieldRef::new(&[3], Values::F32(x)),
        FieldRef::new(&[], Values::U64(version)),
    ]
}

fn insert(b: &ReplayBuffer, v: f32, version: u64) -> ItemKey {
    b.insert_ref(&fields(&[v, v + 1.0, v + 2.0], &[version]))
        .unwrap()
}

fn insert_in_group(b: &ReplayBuffer, v: f32, group: u64) -> ItemKey {
    b.insert_ref_in_group(&fields(&[v, v + 1.0, v + 2.0], &[0]), group)
        .unwrap()
}

/// Everything a sample hands out for one row (floats as bits, so equal
/// means identical).
#[derive(Debug, PartialEq)]
struct Row {
    key: u64,
    weight: u32,
    policy_version: u64,
    group: u64,
    first_x: u32,
}

fn rows(batch: &SampleBatch) -> Vec<Row> {
    let x = batch.field_f32("x").unwrap();
    (0..batch.len())
        .map(|i| Row {
            key: batch.keys()[i].0,
            weight: batch.weights()[i].to_bits(),
            policy_version: batch.policy_versions()[i],
            group: batch.groups()[i],
            first_x: x[3 * i].to_bits(),
        })
        .collect()
}

/// One sample call: its rows, or the error's text.
type Round = Result<Vec<Row>, String>;

/// `rounds` samples of `n`.
fn sample_rounds(b: &ReplayBuffer, rounds: usize, n: usize) -> Vec<Round> {
    let mut batch = b.new_batch(n);
    (0..rounds)
        .map(|_| {
            b.sample_into(&mut batch, n)
                .map(|()| rows(&batch))
                .map_err(|e| e.to_string())
        })
        .collect()
}

/// The checkpoint's checksum (FNV-1a over 64-bit words, the header's
/// tail bytes one by one), as `checkpoint.rs` computes it.
fn checksum(parts: &[&[u8]], words: &[u8]) -> u64 {
    let mut sum: u64 = 0xcbf2_9ce4_8422_2325;
    let mut word = |w: u64| sum = (sum ^ w).wrapping_mul(0x0000_0100_0000_01b3);
    for part in parts {
        let chunks = part.chunks_exact(8);
        let tail = chunks.remainder();
        for c in chunks {
            word(u64::from_le_bytes(c.try_into().unwrap()));
        }
        for &b in tail {
            word(u64::from(b));
        }
    }
    for c in words.chunks_exact(8) {
        word(u64::from_le_bytes(c.try_into().unwrap()));
    }
    sum
}

/// Rewrites a checkpoint's JSON header with `edit` and fixes the checksum,
/// so the file is damaged (or from another version) yet intact.
fn rewrite_header(path: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let bytes = std::fs::read(path).unwrap();
    let header_len = u64::from_le_bytes(bytes[8..16].try_into().unwrap()) as usize;
    let mut header: serde_json::Value =
        serde_json::from_slice(&bytes[16..16 + header_len]).unwrap();
    edit(&mut header);
    let json = serde_json::to_vec(&header).unwrap();
    let records = &bytes[16 + header_len..bytes.len() - 8];
    let len = (json.len() as u64).to_le_bytes();
    let sum = checksum(&[&bytes[..8], &len, &json], records);
    let mut out = bytes[..8].to_vec();
    out.extend_from_slice(&len);
    out.extend_from_slice(&json);
    out.extend_from_slice(records);
    out.extend_from_slice(&sum.to_le_bytes());
    std::fs::write(path, out).unwrap();
}

fn expect_corrupt(result: Result<ReplayBuffer, ReplayError>, expected: &str) {
    match result {
        Err(ReplayError::Corrupt { reason, .. }) => {
            assert!(reason.contains(expected), "{reason}")
        }
        other => panic!("expected Corrupt ({expected}), got {:?}", other.map(|_| ())),
    }
}

fn expect_mismatch(result: Result<ReplayBuffer, ReplayError>, expected: &[&str]) {
    match result {
        Err(ReplayError::Mismatch { reason, .. }) => {
            for e in expected {
                assert!(reason.contains(e), "{reason} lacks {e}");
            }
        }
        other => panic!(
            "expected Mismatch {expected:?}, got {:?}",
            other.map(|_| ())
        ),
    }
}

#[test]
fn grouped_sampling_continues_identically_after_restore() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = ReplayConfig::new(64, SamplerConfig::Grouped).with_seed(3);
    let b = ReplayBuffer::new(layout(), cfg.clone()).unwrap();
    // Five groups of three, interleaved, and ungrouped items between.
    for i in 0..15 {
        insert_in_group(&b, i as f32, 1 + i % 5);
        if i % 4 == 0 {
            insert(&b, 100.0 + i as f32, 0);
        }
    }
    for group in [2, 4, 1] {
        assert_eq!(b.complete_group(group), 3);
    }
    // Part of the way into the ready groups: one is left half taken.
    let mut batch = b.new_batch(8);
    b.sample_into(&mut batch, 5).unwrap();
    let path = dir.path().join("grouped.ckpt");
    b.checkpoint(&path).unwrap();
    let r = ReplayBuffer::restore(&path, layout(), cfg).unwrap();
    assert_eq!(b.stats(), r.stats());
    assert_eq!(b.available(), r.available());
    for buffer in [&b, &r] {
        assert_eq!(buffer.complete_group(5), 3);
        insert_in_group(buffer, 50.0, 9);
        insert(buffer, 60.0, 0);
    }
    // The rounds, and the id of the group taken whole.
    let run = |buffer: &ReplayBuffer| -> (Vec<Round>, u64) {
        let mut out = sample_rounds(buffer, 2, 3);
        let mut batch = buffer.new_batch(8);
        let group = buffer.sample_group_into(&mut batch, None).unwrap();
        out.push(Ok(rows(&batch)));
        assert_eq!(buffer.complete_group(3), 3);
        assert_eq!(buffer.complete_group(9), 1);
        let left = buffer.available();
        out.extend(sample_rounds(buffer, 1, left));
        (out, group)
    };
    let original = run(&b);
    assert!(original.0.iter().all(Result::is_ok), "{original:?}");
    assert_eq!(original, run(&r));
    assert_eq!(b.stats(), r.stats());
    assert_eq!(r.available(), 0);
}

#[test]
fn recent_window_sampling_continues_identically_after_restore() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = ReplayConfig::new(64, SamplerConfig::Recent { window: 16 }).with_seed(11);
    let b = ReplayBuffer::new(layout(), cfg.clone()).unwrap();
    // More than the capacity: the window sits on a lapped ring.
    for i in 0..100 {
        insert(&b, i as f32, i);
    }
    sample_rounds(&b, 2, 8);
    let path = dir.path().join("recent.ckpt");
    b.checkpoint(&path).unwrap();
    let r = ReplayBuffer::restore(&path, layout(), cfg).unwrap();
    let original = sample_rounds(&b, 5, 8);
    for row in original.iter().flatten().flatten() {
        assert!(row.key >= 100 - 16, "key {} outside the window", row.key);
    }
    assert_eq!(original, sample_rounds(&r, 5, 8));
    for buffer in [&b, &r] {
        for i in 0..10 {
            insert(buffer, 200.0 + i as f32, 0);
        }
    }
    assert_eq!(sample_rounds(&b, 5, 8), sample_rounds(&r, 5, 8));
    assert_eq!(b.stats(), r.stats());
}

/// The limiter's insert and sample counts decide what it allows next; the
/// current policy version decides what the lag cap drops.
#[test]
fn rate_limiter_counters_and_policy_version_survive_restore() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = ReplayConfig::new(32, SamplerConfig::Uniform)
        .with_seed(5)
        .with_rate_limiter(RateLimiterConfig::sample_to_insert_ratio(2.0, 4, 12.0))
        .with_policy_lag(PolicyLagCap {
            max_lag: 2,
            action: LagAction::Drop,
        });
    let b = ReplayBuffer::new(layout(), cfg.clone()).unwrap();
    for i in 0..10 {
        insert(&b, i as f32, i);
    }
    b.set_policy_version(7);
    sample_rounds(&b, 2, 4);
    let before = b.stats();
    let counters = before.rate_limiter.unwrap();
    assert_eq!(counters.inserts, 10);
    assert!(counters.samples > 0, "{counters:?}");
    assert!(before.dropped_policy_lag > 0, "{before:?}");
    let path = dir.path().join("limited.ckpt");
    b.checkpoint(&path).unwrap();
    let r = ReplayBuffer::restore(&path, layout(), cfg).unwrap();
    assert_eq!(r.stats(), before);
    // Identical from here: which items the lag cap drops (version 7 is
    // current, so versions below 5 go) and when the limiter refuses
    // (diff = 2 * inserts - samples must stay >= 8 - 12 for a sample).
    let original = sample_rounds(&b, 16, 4);
    assert!(
        original
            .iter()
            .any(|r| matches!(r, Err(e) if e.contains("rate limited"))),
        "the limiter refused at some point: {original:?}"
    );
    for row in original.iter().flatten().flatten() {
        assert!(row.policy_version >= 5, "lagging item handed out: {row:?}");
    }
    assert_eq!(original, sample_rounds(&r, 16, 4));
    assert_eq!(b.stats(), r.stats());
}

#[test]
fn restore_refuses_other_sampler_parameters_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("params.ckpt");
    let prioritized = PrioritizedConfig {
        alpha: 0.6,
        beta: 0.4,
        eps: 1e-6,
    };
    let cases = [
        (
            SamplerConfig::MaxTimesSampled { max_times: 4 },
            SamplerConfig::MaxTimesSampled { max_times: 2 },
            vec!["max_times", "4", "2"],
        ),
        (
            SamplerConfig::Prioritized(prioritized),
            SamplerConfig::Prioritized(PrioritizedConfig {
                alpha: 0.7,
                ..prioritized
            }),
            vec!["alpha", "0.6", "0.7"],
        ),
        (
            SamplerConfig::Prioritized(prioritized),
            SamplerConfig::Prioritized(PrioritizedConfig {
                eps: 0.01,
                ..prioritized
            }),
            vec!["eps", "0.000001", "0.01"],
        ),
        (
            SamplerConfig::Prioritized(prioritized),
            SamplerConfig::Prioritized(PrioritizedConfig {
                beta: 1.0,
                ..prioritized
            }),
            vec!["beta", "0.4", "1"],
        ),
        (
            SamplerConfig::Recent { window: 16 },
            SamplerConfig::Recent { window: 8 },
            vec!["window", "16", "8"],
        ),
    ];
    for (saved, other, expected) in cases {
        let b = ReplayBuffer::new(layout(), ReplayConfig::new(16, saved)).unwrap();
        for i in 0..16 {
            insert(&b, i as f32, 0);
        }
        sample_rounds(&b, 3, 4);
        b.checkpoint(&path).unwrap();
        expect_mismatch(
            ReplayBuffer::restore(&path, layout(), ReplayConfig::new(16, other)),
            &expected,
        );
        ReplayBuffer::restore(&path, layout(), ReplayConfig::new(16, saved)).unwrap();
    }
}

/// A format 1 file records only the sampler's kind, so a smaller
/// `max_times` is caught by the state: a live item sampled 3 times cannot
/// come from `max_times: 2` (restoring it left `times > max_times`, and
/// the next insert into its slot underflowed `max_times - times`).
#[test]
fn format_1_max_times_state_beyond_the_configured_max_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v1.ckpt");
    let saved = ReplayConfig::new(8, SamplerConfig::MaxTimesSampled { max_times: 4 });
    let b = ReplayBuffer::new(layout(), saved).unwrap();
    for i in 0..8 {
        insert(&b, i as f32, 0);
    }
    b.checkpoint(&path).unwrap();
    rewrite_header(&path, |h| {
        h["format"] = 1.into();
        h.as_object_mut().unwrap().remove("sampler_config");
        h["sampler_state"]["times_sampled"][3] = 3.into();
    });
    let smaller = ReplayConfig::new(8, SamplerConfig::MaxTimesSampled { max_times: 2 });
    expect_corrupt(
        ReplayBuffer::restore(&path, layout(), smaller),
        "sampled 3 times, max_times is 2",
    );
    // The same file restores under the parameters it was written with.
    let r = ReplayBuffer::restore(
        &path,
        layout(),
        ReplayConfig::new(8, SamplerConfig::MaxTimesSampled { max_times: 4 }),
    )
    .unwrap();
    assert_eq!(r.available(), 7 * 4 + 1);
}

/// New items get `max_priority^alpha`: a negative one read from a file
/// made every new leaf NaN.
#[test]
fn restore_refuses_a_max_priority_that_is_not_positive() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("prio.ckpt");
    let cfg = ReplayConfig::new(8, SamplerConfig::Prioritized(PrioritizedConfig::default()));
    let b = ReplayBuffer::new(layout(), cfg.clone()).unwrap();
    for i in 0..8 {
        insert(&b, i as f32, 0);
    }
    for bad in [-1.0, 0.0] {
        b.checkpoint(&path).unwrap();
        rewrite_header(&path, |h| h["sampler_state"]["max_priority"] = bad.into());
        expect_corrupt(
            ReplayBuffer::restore(&path, layout(), cfg.clone()),
            "max_priority",
        );
    }
}

/// A damaged header length is refused from the file's size before any
/// buffer is allocated for it (before: up to 16 GiB were allocated).
#[test]
fn lengths_beyond_the_file_are_refused_before_allocating() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("len.ckpt");
    let cfg = ReplayConfig::new(8, SamplerConfig::Uniform);
    let b = ReplayBuffer::new(layout(), cfg.clone()).unwrap();
    for i in 0..8 {
        insert(&b, i as f32, 0);
    }
    b.checkpoint(&path).unwrap();
    let good = std::fs::read(&path).unwrap();
    let mut bad = good.clone();
    bad[8..16].copy_from_slice(&(8u64 << 30).to_le_bytes());
    std::fs::write(&path, &bad).unwrap();
    LARGEST.with(|l| l.set(0));
    let result = ReplayBuffer::restore(&path, layout(), cfg.clone());
    let largest = LARGEST.with(Cell::get);
    assert!(
        largest < 64 << 20,
        "restore allocated {largest} bytes at once"
    );
    expect_corrupt(result, "header length 8589934592 exceeds");

    // A record count the file cannot hold is named as such.
    std::fs::write(&path, &good).unwrap();
    rewrite_header(&path, |h| h["records"] = 7.into());
    expect_corrupt(
        ReplayBuffer::restore(&path, layout(), cfg),
        "header says 7 records",
    );
}

/// Keys live in the slot word as `(key + 1) << 1`: a next key near
/// `u64::MAX` read from a file would wrap on the next insert.
#[test]
fn a_next_key_beyond_what_a_slot_can_hold_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("claimed.ckpt");
    let cfg = ReplayConfig::new(4, SamplerConfig::Uniform);
    let b = ReplayBuffer::new(layout(), cfg.clone()).unwrap();
    insert(&b, 1.0, 0);
    b.checkpoint(&path).unwrap();
    rewrite_header(&path, |h| h["claimed"] = u64::MAX.into());
    expect_corrupt(ReplayBuffer::restore(&path, layout(), cfg), "next key");
}

/// A checkpoint's layout is checked as it is read, like a built one.
#[test]
fn an_invalid_layout_in_a_checkpoint_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("layout.ckpt");
    let cfg = ReplayConfig::new(4, SamplerConfig::Uniform);
    let b = ReplayBuffer::new(layout(), cfg.clone()).unwrap();
    insert(&b, 1.0, 0);
    for (edit, expected) in [
        (
            ("policy_version_field", serde_json::json!(9)),
            "policy-version field index 9",
        ),
        (
            (
                "fields",
                serde_json::json!([{"name": "x", "dtype": "F32", "shape": [3]},
                                           {"name": "x", "dtype": "U64", "shape": []}]),
            ),
            "declared twice",
        ),
    ] {
        b.checkpoint(&path).unwrap();
        rewrite_header(&path, |h| h["layout"][edit.0] = edit.1.clone());
        expect_corrupt(
            ReplayBuffer::restore(&path, layout(), cfg.clone()),
            expected,
        );
    }
}

/// Damage to a mapped directory's `layout.json` is a `Corrupt` error that
/// names that file. Before: an out-of-range policy-version index and a
/// storage size that wrapped past `usize::MAX` panicked; duplicate names,
/// a zero-size field and a shape whose product wrapped to 0 opened.
#[test]
fn a_damaged_mapped_layout_is_an_error_naming_the_file() {
    let cfg = ReplayConfig::new(8, SamplerConfig::Uniform);
    let x = serde_json::json!({"name": "x", "dtype": "F32", "shape": [3]});
    let v = serde_json::json!({"name": "v", "dtype": "U64", "shape": []});
    // 2^61 one-byte elements: a record of 2^58 + 8 words, so 8 slots and
    // the two cold columns are 2^61 + 80 words, whose byte count wraps
    // to 640.
    let huge = serde_json::json!({"name": "x", "dtype": "U8", "shape": [1u64 << 61]});
    let cases = [
        (
            "index 7",
            serde_json::json!([x, v]),
            serde_json::json!(7),
            None,
        ),
        (
            "declared twice",
            serde_json::json!([x, {"name": "x", "dtype": "U64", "shape": []}]),
            serde_json::json!(1),
            None,
        ),
        (
            "zero elements",
            serde_json::json!([x, v, {"name": "z", "dtype": "U8", "shape": [0]}]),
            serde_json::json!(1),
            None,
        ),
        (
            "overflows",
            serde_json::json!([x, {"name": "v", "dtype": "U64", "shape": [1u64 << 32, 1u64 << 32]}]),
            serde_json::json!(null),
            None,
        ),
        (
            "overflows",
            serde_json::json!([huge]),
            serde_json::json!(null),
            Some(640),
        ),
    ];
    for (expected, fields, policy_version_field, storage_len) in cases {
        let dir = tempfile::tempdir().unwrap();
        {
            let b = ReplayBuffer::create_mapped(dir.path(), layout(), cfg.clone()).unwrap();
            insert(&b, 1.0, 0);
            b.flush().unwrap();
        }
        let header_path = dir.path().join("layout.json");
        let mut header: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&header_path).unwrap()).unwrap();
        header["layout"]["fields"] = fields;
        header["layout"]["policy_version_field"] = policy_version_field;
        std::fs::write(&header_path, serde_json::to_vec(&header).unwrap()).unwrap();
        if let Some(len) = storage_len {
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(dir.path().join("storage.bin"))
                .unwrap();
            f.set_len(len).unwrap();
        }
        match ReplayBuffer::open_mapped(dir.path(), cfg.clone()) {
            Err(ReplayError::Corrupt { path, reason }) => {
                assert_eq!(path, header_path, "{reason}");
                assert!(reason.contains(expected), "{reason} lacks {expected}");
            }
            other => panic!("{expected}: got {:?}", other.map(|_| ())),
        }
    }
}

/// A checkpoint that fails (here: its path is a directory, so the final
/// rename fails) removes its temporary file.
#[test]
fn a_failed_checkpoint_leaves_no_temporary_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("taken.ckpt");
    std::fs::create_dir(&path).unwrap();
    std::fs::write(path.join("keep"), b"a directory that is not empty").unwrap();
    let b = ReplayBuffer::new(layout(), ReplayConfig::new(4, SamplerConfig::Uniform)).unwrap();
    insert(&b, 1.0, 0);
    assert!(matches!(
        b.checkpoint(&path),
        Err(ReplayError::Io { op: "rename", .. })
    ));
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, vec![std::ffi::OsString::from("taken.ckpt")]);
}

/// Checkpoints to one path from two threads at once each write their own
/// temporary file, so every one succeeds and the file left is whole.
#[test]
fn concurrent_checkpoints_to_one_path_all_succeed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.ckpt");
    let cfg = ReplayConfig::new(256, SamplerConfig::Uniform);
    let b = Arc::new(ReplayBuffer::new(layout(), cfg.clone()).unwrap());
    for i in 0..256 {
        insert(&b, i as f32, 0);
    }
    let start = Arc::new(Barrier::new(2));
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let (b, path, start) = (Arc::clone(&b), path.clone(), Arc::clone(&start));
            thread::spawn(move || {
                start.wait();
                for _ in 0..20 {
                    b.checkpoint(&path).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let r = ReplayBuffer::restore(&path, layout(), cfg).unwrap();
    assert_eq!(r.stats(), b.stats());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

/// A checkpoint taken while writers keep inserting is a fuzzy snapshot:
/// every restored item must still be whole (its payload matches its own
/// checksum), keys unique, one per slot and below the restored next key,
/// and each writer's items must carry keys in the order it inserted them.
/// Capacity above 4096 so the sampler state is saved in several chunks.
#[test]
fn a_checkpoint_taken_while_writers_insert_restores_whole_items() {
    const CAPACITY: usize = 10_000;
    const WRITERS: u64 = 2;
    /// Bound on each writer's loop; they normally stop at the flag.
    const MAX_PER_WRITER: u64 = 2_000_000;
    let layout = ItemLayout::builder()
        .field("payload", DType::U64, &[PAYLOAD_WORDS])
        .build()
        .unwrap();
    let cfg = ReplayConfig::new(CAPACITY, SamplerConfig::MaxTimesSampled { max_times: 1 });
    let b = Arc::new(ReplayBuffer::new(layout.clone(), cfg.clone()).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let running = Arc::new(Barrier::new(WRITERS as usize + 1));
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (b, stop, running) = (Arc::clone(&b), Arc::clone(&stop), Arc::clone(&running));
            thread::spawn(move || {
                for seq in 0..MAX_PER_WRITER {
                    let p = payload(w << 32 | seq);
                    b.insert_ref(&[FieldRef::new(&[PAYLOAD_WORDS], Values::U64(&p))])
                        .unwrap();
                    if seq == 0 {
                        running.wait();
                    }
                    // Relaxed: the flag only ends the loop; join orders the rest.
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                }
            })
        })
        .collect();
    // Every writer has inserted and keeps going while the checkpoint runs.
    running.wait();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("live.ckpt");
    let info = b.checkpoint(&path).unwrap();
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }
    assert!(info.items > 0);

    let r = ReplayBuffer::restore(&path, layout, cfg).unwrap();
    // max_times 1: taking everything available hands out each live item
    // exactly once.
    let mut batch = r.new_batch(512);
    let mut items: Vec<(u64, u64)> = Vec::new();
    while r.available() > 0 {
        let n = r.available().min(512);
        r.sample_into(&mut batch, n).unwrap();
        let words = batch.field_u64("payload").unwrap();
        for (row, key) in words.chunks(PAYLOAD_WORDS).zip(batch.keys()) {
            assert_eq!(row, &payload(row[0])[..], "torn item under key {key:?}");
            items.push((key.0, row[0]));
        }
    }
    assert!(!items.is_empty());
    assert!(items.len() as u64 <= info.items);
    let next_key = r
        .insert_ref(&[FieldRef::new(
            &[PAYLOAD_WORDS],
            Values::U64(&payload(u64::MAX)),
        )])
        .unwrap()
        .0;
    let keys: HashSet<u64> = items.iter().map(|&(k, _)| k).collect();
    assert_eq!(keys.len(), items.len(), "a key handed out twice");
    let slots: HashSet<u64> = items.iter().map(|&(k, _)| k % CAPACITY as u64).collect();
    assert_eq!(slots.len(), items.len(), "two keys in one slot");
    for &(key, _) in &items {
        assert!(
            key < next_key,
            "key {key} not below the next key {next_key}"
        );
    }
    let mut by_writer: HashMap<u64, Vec<(u64, u64)>> = HashMap::new();
    for &(key, id) in &items {
        by_writer.entry(id >> 32).or_default().push((key, id));
    }
    for (writer, mut rows) in by_writer {
        assert!(writer < WRITERS);
        rows.sort_unstable();
        assert!(
            rows.windows(2).all(|p| p[0].1 < p[1].1),
            "writer {writer}'s items out of key order"
        );
    }
}
