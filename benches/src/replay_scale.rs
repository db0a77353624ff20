//! `replay_bench --scale`: a memory-mapped table from a million items to
//! as many as the disk holds, and what each figure costs as it grows.
//!
//! For each (items, item bytes): a fresh mapped directory of exactly that
//! capacity, filled in batches of 1,000 with the fill timed throughout
//! (sustained rate, and the first and last tenth apart, so a rate that
//! sags as the table grows shows); `sample(128)` uniform; the process's
//! resident memory and the mapped file's pages in it; then the directory
//! reopened with a prioritized sampler (timed: the reopen scans the slots
//! and rebuilds the sampler), every item given a spread priority, and
//! `sample(128)` + `update_priorities(128)` timed. One row per (items,
//! item bytes, sampler), the fields `scale.json` keeps.
//!
//! Why mapped: a table past RAM lives in a file, and its reopen is the
//! other half of the question. Cost: the disk of the largest table
//! (`capacity * ((item bytes rounded up to 8 + 8) rounded up to 64 + 16)`
//! in the records order, `capacity * (item bytes rounded up to 8 + 24)`
//! in columns) and a fill at the table's insert rate.
use std::path::{Path, PathBuf};
use std::time::Instant;

use seed_replay::{
    DType, FieldRef, ItemKey, ItemLayout, PrioritizedConfig, ReplayBuffer, ReplayConfig,
    ReplayError, SamplerConfig, StorageOrder, Values,
};
use serde::Serialize;

use crate::proc_stats::{file_huge_mib, ProcStats};

/// Why a scale run stopped.
#[derive(Debug, thiserror::Error)]
pub enum ScaleError {
    #[error(transparent)]
    Replay(#[from] ReplayError),
    #[error("scale directory {}: {source}", path.display())]
    Dir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("reopened {found} items of the {stored} stored in {}", path.display())]
    Lost {
        found: usize,
        stored: usize,
        path: PathBuf,
    },
}

/// Rows per insert call while filling.
const FILL_ROWS: usize = 1000;
/// A timed run ends after this many seconds once it has made
/// [`MIN_ITERS`] calls.
const RUN_SECONDS: f64 = 3.0;
const MIN_ITERS: usize = 20;
/// Keys per `update_priorities` call while spreading the priorities.
const SPREAD_KEYS: usize = 1 << 16;

/// What to run.
#[derive(Debug, Clone)]
pub struct ScalePlan {
    /// Table sizes, ascending.
    pub items: Vec<usize>,
    /// Item sizes in bytes (one `u8` field of that length).
    pub item_bytes: Vec<usize>,
    /// Where the mapped directories are made (one at a time, removed
    /// after).
    pub dir: PathBuf,
    pub order: StorageOrder,
    /// Timed runs per figure; the median is kept.
    pub runs: usize,
    /// `sample(128)` calls per run.
    pub sample_iters: usize,
    /// `sample(128)` + `update_priorities(128)` per run.
    pub prio_iters: usize,
    /// Skip the prioritized half (reopen, spread, sample + update).
    pub uniform_only: bool,
}

/// One row of `scale.json`.
#[derive(Debug, Clone, Serialize)]
pub struct ScaleRow {
    pub items: usize,
    pub item_bytes: usize,
    /// `uniform` (`sample(128)`) or `prioritized` (`sample(128)` and
    /// `update_priorities(128)`).
    pub sampler: &'static str,
    pub storage_order: String,
    /// Median microseconds per call.
    pub sample128_us: f64,
    /// The whole fill: items over seconds.
    pub insert_items_per_s: f64,
    /// The fill's first and last tenth.
    pub insert_first_tenth_per_s: f64,
    pub insert_last_tenth_per_s: f64,
    /// A tenth of the table more, once full: each insert overwrites the
    /// oldest item in a page that exists (what a long run sees; the fill
    /// also pays for the file's pages as it first touches them).
    pub insert_overwrite_per_s: f64,
    /// The process's resident memory after the fill (`VmRSS`), MiB.
    pub rss_mb: f64,
    /// Of it, the mapped file's pages (`RssFile`) and the rest (`RssAnon`).
    pub rss_file_mb: f64,
    pub rss_anon_mb: f64,
    /// Of the file's pages, those mapped with 2 MiB pages
    /// (`FilePmdMapped` in `/proc/self/smaps_rollup`), MiB; `None` where
    /// the kernel does not say.
    pub rss_file_huge_mb: Option<f64>,
    /// The directory's blocks on disk, MiB.
    pub disk_mb: f64,
    /// Reopening the directory (slot scan and sampler rebuild), seconds;
    /// prioritized rows only.
    pub reopen_s: Option<f64>,
}

/// Runs the plan; rows in order, progress on stderr.
pub fn run(plan: &ScalePlan) -> Result<Vec<ScaleRow>, ScaleError> {
    let mut rows = Vec::new();
    for &bytes in &plan.item_bytes {
        for &items in &plan.items {
            rows.extend(one_size(plan, items, bytes)?);
        }
    }
    Ok(rows)
}

/// Items of one `u8[bytes]` field `x` (also `replay_kill`'s).
pub fn item_layout(bytes: usize) -> Result<ItemLayout, ReplayError> {
    ItemLayout::builder()
        .field("x", DType::U8, &[bytes])
        .build()
}

fn one_size(plan: &ScalePlan, items: usize, bytes: usize) -> Result<Vec<ScaleRow>, ScaleError> {
    let dir = plan.dir.join(format!("scale_{items}x{bytes}"));
    remove(&dir)?;
    let order = format!("{:?}", plan.order);
    eprintln!(
        "scale: {items} items of {bytes} bytes ({order}) in {}",
        dir.display()
    );
    let b = ReplayBuffer::create_mapped(
        &dir,
        item_layout(bytes)?,
        ReplayConfig::new(items, SamplerConfig::Uniform).with_storage_order(plan.order),
    )?;
    let fill = fill(&b, items, bytes)?;
    let overwrite = overwrite(&b, items, bytes)?;
    let mem = ProcStats::read(std::process::id() as libc::pid_t);
    let huge_mb = file_huge_mib(std::process::id() as libc::pid_t);
    let disk_mb = dir_bytes(&dir) as f64 / (1 << 20) as f64;
    let mut batch = b.new_batch(128);
    let uniform = median_us(plan.runs, plan.sample_iters, || {
        b.sample_into(&mut batch, 128)
    })?;
    eprintln!(
        "scale:   uniform sample(128) {uniform:.1} us, RSS {:.0} MiB (file {:.0}, of it on 2 MiB pages {})",
        mem.rss_mib,
        mem.rss_file_mib,
        huge_mb.map_or("unknown".to_string(), |m| format!("{m:.0}"))
    );
    let row = |sampler, sample128_us, reopen_s| ScaleRow {
        items,
        item_bytes: bytes,
        sampler,
        storage_order: order.clone(),
        sample128_us,
        insert_items_per_s: fill.overall,
        insert_first_tenth_per_s: fill.first_tenth,
        insert_last_tenth_per_s: fill.last_tenth,
        insert_overwrite_per_s: overwrite,
        rss_mb: mem.rss_mib,
        rss_file_mb: mem.rss_file_mib,
        rss_anon_mb: mem.rss_anon_mib,
        rss_file_huge_mb: huge_mb,
        disk_mb,
        reopen_s,
    };
    let mut out = vec![row("uniform", uniform, None)];
    drop(b);
    if !plan.uniform_only {
        let t = Instant::now();
        let b = ReplayBuffer::open_mapped(
            &dir,
            ReplayConfig::new(
                items,
                SamplerConfig::Prioritized(PrioritizedConfig::default()),
            ),
        )?;
        let reopen_s = t.elapsed().as_secs_f64();
        if b.len() != items {
            return Err(ScaleError::Lost {
                found: b.len(),
                stored: items,
                path: dir,
            });
        }
        spread_priorities(&b, items, overwrite_keys(items))?;
        let mut batch = b.new_batch(128);
        let (mut i, mut prios) = (0usize, [0f32; 128]);
        let prio = median_us(plan.runs, plan.prio_iters, || {
            b.sample_into(&mut batch, 128)?;
            for (j, p) in prios.iter_mut().enumerate() {
                *p = ((i + j) % 97) as f32 * 0.1 + 0.01;
            }
            i += 1;
            b.update_priorities(batch.keys(), &prios).map(|_| ())
        })?;
        eprintln!("scale:   reopen {reopen_s:.2} s, prioritized sample + update {prio:.1} us");
        out.push(row("prioritized", prio, Some(reopen_s)));
    }
    remove(&dir)?;
    Ok(out)
}

/// Rates of one fill, items per second.
struct FillRates {
    overall: f64,
    first_tenth: f64,
    last_tenth: f64,
}

/// Inserts `n` items of `bytes` in batches of [`FILL_ROWS`], calling
/// `after(done)` after each batch.
fn insert_items(
    b: &ReplayBuffer,
    n: usize,
    bytes: usize,
    mut after: impl FnMut(usize),
) -> Result<(), ReplayError> {
    let data: Vec<u8> = (0..FILL_ROWS * bytes).map(|i| i as u8).collect();
    let mut done = 0usize;
    while done < n {
        let r = (n - done).min(FILL_ROWS);
        let shape = [r, bytes];
        b.insert_batch(&[FieldRef::new(&shape, Values::U8(&data[..r * bytes]))], r)?;
        done += r;
        after(done);
    }
    Ok(())
}

fn fill(b: &ReplayBuffer, n: usize, bytes: usize) -> Result<FillRates, ReplayError> {
    let tenth = (n / 10).max(1);
    let start = Instant::now();
    let (mut first_tenth, mut last_tenth_start) = (f64::NAN, None);
    let mut next_report = tenth;
    insert_items(b, n, bytes, |done| {
        if done >= next_report || done == n {
            let s = start.elapsed().as_secs_f64();
            if first_tenth.is_nan() {
                first_tenth = done as f64 / s;
            }
            eprintln!("scale:   filled {done} of {n} in {s:.1} s");
            next_report += tenth;
        }
        if last_tenth_start.is_none() && done >= n - tenth {
            last_tenth_start = Some((done, start.elapsed().as_secs_f64()));
        }
    })?;
    let total = start.elapsed().as_secs_f64();
    let (from, at) = last_tenth_start.unwrap_or((0, 0.0));
    Ok(FillRates {
        overall: n as f64 / total,
        first_tenth,
        last_tenth: (n - from) as f64 / (total - at).max(f64::MIN_POSITIVE),
    })
}

/// Keys `overwrite` adds past the fill: the oldest stored key after it.
fn overwrite_keys(n: usize) -> usize {
    (n / 10).max(FILL_ROWS)
}

/// Items per second inserting a tenth of the table more into a full one.
fn overwrite(b: &ReplayBuffer, n: usize, bytes: usize) -> Result<f64, ReplayError> {
    let more = overwrite_keys(n);
    let start = Instant::now();
    insert_items(b, more, bytes, |_| {})?;
    let rate = more as f64 / start.elapsed().as_secs_f64();
    eprintln!("scale:   overwrote {more} at {:.2}M items/s", rate / 1e6);
    Ok(rate)
}

/// Every item a priority in 0.01..10, spread over the keys.
fn spread_priorities(b: &ReplayBuffer, n: usize, first: usize) -> Result<(), ReplayError> {
    let t = Instant::now();
    let mut keys = Vec::with_capacity(SPREAD_KEYS);
    let mut prios = Vec::with_capacity(SPREAD_KEYS);
    let mut from = 0usize;
    while from < n {
        let to = (from + SPREAD_KEYS).min(n);
        keys.clear();
        prios.clear();
        keys.extend((from as u64..to as u64).map(|k| ItemKey(k + first as u64)));
        prios.extend((from..to).map(|i| ((i * 7919) % 1000) as f32 / 100.0 + 0.01));
        b.update_priorities(&keys, &prios)?;
        from = to;
    }
    eprintln!(
        "scale:   priorities spread in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Median over `runs` of microseconds per call of `op`.
fn median_us(
    runs: usize,
    iters: usize,
    mut op: impl FnMut() -> Result<(), ReplayError>,
) -> Result<f64, ReplayError> {
    op()?; // warm
    let mut us = Vec::with_capacity(runs);
    for _ in 0..runs.max(1) {
        let t = Instant::now();
        let mut done = 0usize;
        // A table past RAM pays disk reads per call: a run also ends at
        // `RUN_SECONDS` (after at least `MIN_ITERS` calls).
        while done < iters.max(1) && (done < MIN_ITERS || t.elapsed().as_secs_f64() < RUN_SECONDS) {
            op()?;
            done += 1;
        }
        us.push(t.elapsed().as_secs_f64() * 1e6 / done as f64);
    }
    us.sort_by(f64::total_cmp);
    Ok(us[us.len() / 2])
}

fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter_map(|e| e.metadata().ok())
                .filter(|m| m.is_file())
                .map(|m| std::os::unix::fs::MetadataExt::blocks(&m) * 512)
                .sum()
        })
        .unwrap_or(0)
}

fn remove(dir: &Path) -> Result<(), ScaleError> {
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(ScaleError::Dir {
            path: dir.to_owned(),
            source: e,
        }),
        _ => Ok(()),
    }
}
