//! `replay_bench --scale-kill`: a memory-mapped table SIGKILLed while a
//! writer overwrites it, reopened (timed), and every acknowledged item that
//! the ring still holds read back and checked.
//!
//! A child (`replay_bench --scale-child`, [`child_main`]) fills the table
//! and goes on overwriting it, printing `acked K` after each batch once
//! keys below `K` are acknowledged (`insert_batch` returned); each item's
//! bytes are its key's, so a read-back can check them. The parent waits
//! for the fill and a twentieth more, SIGKILLs the child, reopens the
//! directory with the FIFO sampler and drains it: the keys must run
//! without a gap from the oldest the ring holds to past the last
//! acknowledged one, each item's bytes must be its key's, and at most the
//! one slot the kill caught mid-write may be missing.
//!
//! Why FIFO for the check: it hands out every stored item once, oldest
//! first, so the drain is a scan in key order through the public API.
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use seed_replay::{
    FieldRef, ReplayBuffer, ReplayConfig, ReplayError, SamplerConfig, StorageOrder, Values,
};
use serde::Serialize;

use crate::replay_scale::item_layout;

/// Rows per insert call of the child.
const ROWS: usize = 1000;
/// Items per drain call of the check.
const DRAIN: usize = 8192;

/// Why the kill-and-reopen run failed.
#[derive(Debug, thiserror::Error)]
pub enum KillError {
    #[error(transparent)]
    Replay(#[from] ReplayError),
    #[error("the writer child: {0}")]
    Child(String),
    #[error("{} after the SIGKILL: {reason}", dir.display())]
    Lost { dir: PathBuf, reason: String },
}

/// What the run measured.
#[derive(Debug, Clone, Serialize)]
pub struct KillRow {
    pub items: usize,
    pub item_bytes: usize,
    pub storage_order: String,
    /// Keys acknowledged to the child before the kill (the last `acked`).
    pub acked_before_kill: u64,
    /// `open_mapped` after the kill, seconds (slot scan, sampler rebuild).
    pub reopen_s: f64,
    /// Items the reopened table holds.
    pub stored: usize,
    /// Acknowledged items the ring still held, each read back and checked.
    pub acked_items_checked: u64,
    /// The drain of every stored item, seconds.
    pub check_s: f64,
}

/// The table's directory under `--scale-dir`.
pub fn table_dir(scale_dir: &Path, items: usize, bytes: usize) -> PathBuf {
    scale_dir.join(format!("kill_{items}x{bytes}"))
}

/// The bytes of item `key`: its little-endian key, repeated.
fn fill_item(key: u64, out: &mut [u8]) {
    let k = key.to_le_bytes();
    for (i, b) in out.iter_mut().enumerate() {
        *b = k[i % 8];
    }
}

/// The child: fill `dir`'s table of `items` and overwrite it until killed.
pub fn child_main(
    dir: &Path,
    items: usize,
    bytes: usize,
    order: StorageOrder,
) -> Result<(), KillError> {
    if bytes < 8 {
        return Err(KillError::Child(format!(
            "--item-bytes {bytes}: at least 8 (a key)"
        )));
    }
    let _ = std::fs::remove_dir_all(dir);
    let b = ReplayBuffer::create_mapped(
        dir,
        item_layout(bytes)?,
        ReplayConfig::new(items, SamplerConfig::Uniform).with_storage_order(order),
    )?;
    let mut data = vec![0u8; ROWS * bytes];
    let mut next = 0u64;
    let out = std::io::stdout();
    loop {
        for (r, row) in data.chunks_exact_mut(bytes).enumerate() {
            fill_item(next + r as u64, row);
        }
        let shape = [ROWS, bytes];
        b.insert_batch(&[FieldRef::new(&shape, Values::U8(&data))], ROWS)?;
        next += ROWS as u64;
        let mut o = out.lock();
        // The parent reading it is what makes these keys "acknowledged".
        writeln!(o, "acked {next}")
            .and_then(|_| o.flush())
            .map_err(|e| KillError::Child(e.to_string()))?;
    }
}

/// The parent: runs the child on `table_dir(scale_dir, ..)`, kills it,
/// reopens and checks.
pub fn run(
    exe: &Path,
    scale_dir: &Path,
    items: usize,
    bytes: usize,
    order: StorageOrder,
) -> Result<KillRow, KillError> {
    let dir = &table_dir(scale_dir, items, bytes);
    let order_name = match order {
        StorageOrder::Records => "records",
        StorageOrder::Columns => "columns",
    };
    let mut child = Command::new(exe)
        .args([
            "--scale-child",
            "--scale",
            &items.to_string(),
            "--item-bytes",
            &bytes.to_string(),
        ])
        .arg("--scale-dir")
        .arg(scale_dir)
        .args(["--scale-order", order_name])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| KillError::Child(format!("cannot start {}: {e}", exe.display())))?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| KillError::Child("no stdout".into()))?;
    let target = items as u64 + (items as u64 / 20).max(ROWS as u64);
    let mut acked = 0u64;
    let mut next_report = items as u64 / 10;
    for line in BufReader::new(stdout).lines() {
        let line = line.map_err(|e| KillError::Child(e.to_string()))?;
        acked = line
            .strip_prefix("acked ")
            .and_then(|k| k.parse().ok())
            .ok_or_else(|| KillError::Child(format!("unexpected line `{line}`")))?;
        if acked >= next_report {
            eprintln!("scale-kill: {acked} acknowledged");
            next_report += items as u64 / 10;
        }
        if acked >= target {
            break;
        }
    }
    // SIGKILL, mid-overwrite.
    child
        .kill()
        .map_err(|e| KillError::Child(format!("kill: {e}")))?;
    let status = child.wait().map_err(|e| KillError::Child(e.to_string()))?;
    if acked < target {
        return Err(KillError::Child(format!(
            "ended early ({status}) at {acked} acknowledged"
        )));
    }
    eprintln!("scale-kill: killed at {acked} acknowledged ({status}); reopening");
    let t = Instant::now();
    let b = ReplayBuffer::open_mapped(dir, ReplayConfig::new(items, SamplerConfig::Fifo))?;
    let reopen_s = t.elapsed().as_secs_f64();
    let stored = b.len();
    let t = Instant::now();
    let (checked, first, last) = drain_and_check(&b, bytes, dir)?;
    let check_s = t.elapsed().as_secs_f64();
    let lost = |reason: String| KillError::Lost {
        dir: dir.to_owned(),
        reason,
    };
    // The ring holds the newest `items` keys but for one slot the kill may
    // have caught mid-write (it held `last + 1 - items`, or the key being
    // written): every acknowledged key from there on must be back.
    if last + 1 < acked {
        return Err(lost(format!(
            "the newest key back is {last}, but {acked} were acknowledged"
        )));
    }
    if first > last + 2 - items as u64 {
        return Err(lost(format!(
            "the oldest key back is {first}, the ring should hold from {}",
            last + 2 - items as u64
        )));
    }
    let acked_items_checked = acked.saturating_sub(first).min(checked);
    eprintln!("scale-kill: reopened in {reopen_s:.2} s, {stored} stored, keys {first}..={last} checked in {check_s:.1} s");
    Ok(KillRow {
        items,
        item_bytes: bytes,
        storage_order: order_name.into(),
        acked_before_kill: acked,
        reopen_s,
        stored,
        acked_items_checked,
        check_s,
    })
}

/// Drains `b` (FIFO): keys consecutive, each item its key's bytes. Returns
/// (items, first key, last key).
fn drain_and_check(
    b: &ReplayBuffer,
    bytes: usize,
    dir: &Path,
) -> Result<(u64, u64, u64), KillError> {
    let lost = |reason: String| KillError::Lost {
        dir: dir.to_owned(),
        reason,
    };
    let mut batch = b.new_batch(DRAIN);
    let mut want = vec![0u8; bytes];
    let (mut n, mut first, mut prev) = (0u64, None, None::<u64>);
    let mut left = b.len();
    while left > 0 {
        let take = DRAIN.min(left);
        left -= take;
        b.sample_into(&mut batch, take)?;
        let rows = batch
            .field("x")
            .ok_or_else(|| lost("no field x in a sample".into()))?;
        for (i, key) in batch.keys().iter().enumerate() {
            let k = key.0;
            if let Some(p) = prev {
                if k != p + 1 {
                    return Err(lost(format!("key {k} follows {p}: a gap")));
                }
            }
            fill_item(k, &mut want);
            if rows[i * bytes..(i + 1) * bytes] != want[..] {
                return Err(lost(format!("item {k} does not hold its bytes")));
            }
            first.get_or_insert(k);
            prev = Some(k);
            n += 1;
        }
    }
    match (first, prev) {
        (Some(f), Some(l)) => Ok((n, f, l)),
        _ => Err(lost("nothing stored".into())),
    }
}
