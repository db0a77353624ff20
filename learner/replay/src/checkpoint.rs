//! Checkpoint and restore: contents, keys, priorities, sampler and limiter
//! state, counters and the RNG position, in one file written atomically
//! (temporary file, fsync, rename, fsync of the directory).
//!
//! Why this shape: writers keep running during a checkpoint; each slot is
//! copied with the slot protocol (no lock), so a writer waits at most for
//! one slot copy. A checkpoint taken while writers and samplers run is a
//! fuzzy snapshot (every item intact, counters and sampler state taken a
//! moment apart); taken while idle it is exact, and sampling after restore
//! continues identically.
//! Format (native endianness; same-architecture restore):
//! `b"SEEDRPL1"`, header length (u64), JSON header, then per stored slot
//! `[slot, key, policy_version, group, retired]` and the field rows as u64
//! words, then a 64-bit checksum of everything before it. Format 2 added
//! the sampler's full configuration to the header; format 1 files (the
//! sampler's kind only) are still read.
//! Cost: one sequential pass over the stored items each way.
//!
//! A damaged file is an error, never a panic or a huge allocation: every
//! length it states is checked against the bytes it actually has before
//! anything is allocated for it, and the layout and sampler state in the
//! header are validated as they are read.
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::Path;
use std::sync::atomic::Ordering;

use serde::{Deserialize, Serialize};

use crate::atomic_file::{create_temp, with_temp_file};
use crate::buffer::{ReplayBuffer, ReplayConfig, Resume};
use crate::counters::CounterValues;
use crate::error::ReplayError;
use crate::layout::ItemLayout;
use crate::rate_limiter::RateLimiterCounters;
use crate::sampler::{Sampler, SamplerConfig, SamplerState};
use crate::slot::{self, ReadOutcome};
use crate::storage::Storage;

const MAGIC: &[u8; 8] = b"SEEDRPL1";
/// Written now: the header holds `sampler_config`.
const FORMAT: u32 = 2;
/// Still read: no `sampler_config`, so only the sampler's kind is compared
/// (the sampler state is still validated against this buffer's sampler).
const FORMAT_KIND_ONLY: u32 = 1;
/// Bytes before the JSON header: the magic and the header length.
const PREFIX_BYTES: u64 = 16;
/// Bytes of the trailing checksum.
const CHECKSUM_BYTES: u64 = 8;
/// Words before each record's rows: `[slot, key, policy_version, group,
/// retired]`.
const RECORD_META_WORDS: u64 = 5;
/// Keys must leave the slot's sequence word, `(key + 1) << 1`, room to
/// grow; a checkpoint claiming more is damaged.
const MAX_CLAIMED: u64 = 1 << 62;

#[derive(Debug, Serialize, Deserialize)]
struct Header {
    format: u32,
    layout: ItemLayout,
    capacity: usize,
    /// The sampler's kind (`SamplerConfig::kind`); all format 1 recorded.
    sampler: String,
    /// The sampler's full configuration (format 2): a restore with other
    /// parameters would mix state built under the old ones (e.g. times
    /// sampled above a smaller `max_times`), so it is refused.
    #[serde(default)]
    sampler_config: Option<SamplerConfig>,
    claimed: u64,
    counters: CounterValues,
    rng_seed: u64,
    rng_draws: u64,
    limiter: Option<RateLimiterCounters>,
    current_policy: u64,
    sampler_state: SamplerState,
    records: u64,
}

/// What a checkpoint wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckpointInfo {
    /// Items written.
    pub items: u64,
    /// File size in bytes.
    pub bytes: u64,
}

/// FNV-1a over 64-bit words: fast enough to hash gigabytes, catches
/// truncation and bit flips (not an adversarial checksum).
#[derive(Debug)]
struct Checksum(u64);

impl Checksum {
    fn new() -> Self {
        Checksum(0xcbf2_9ce4_8422_2325)
    }
    fn word(&mut self, w: u64) {
        self.0 = (self.0 ^ w).wrapping_mul(0x0000_0100_0000_01b3);
    }
    fn bytes(&mut self, b: &[u8]) {
        let mut chunks = b.chunks_exact(8);
        for c in &mut chunks {
            let mut a = [0u8; 8];
            a.copy_from_slice(c);
            self.word(u64::from_le_bytes(a));
        }
        for &x in chunks.remainder() {
            self.word(u64::from(x));
        }
    }
}

impl ReplayBuffer {
    /// Writes a checkpoint to `path` (atomically replacing it).
    pub fn checkpoint(&self, path: &Path) -> Result<CheckpointInfo, ReplayError> {
        let s = &self.shared;
        let cap = self.capacity();
        // Snapshot the items first (no lock), then the small state.
        let row_words: usize = self.layout().fields().iter().map(|f| f.row_words()).sum();
        let mut records: Vec<u64> = Vec::new();
        let mut row: Vec<u64> = Vec::with_capacity(row_words);
        let mut count = 0u64;
        for slot_index in 0..cap {
            let outcome = slot::read(s.storage.slots(), slot_index, |field, words| {
                if field == 0 {
                    row.clear();
                }
                row.extend(
                    words
                        .iter()
                        .map(|w| w.load(crate::loom::atomic::Ordering::Relaxed)),
                );
            });
            if let ReadOutcome::Item(meta) = outcome {
                let retired = u64::from(s.storage.retired(slot_index) == meta.key + 1);
                records.extend([
                    slot_index as u64,
                    meta.key,
                    meta.policy_version,
                    meta.group,
                    retired,
                ]);
                records.extend_from_slice(&row);
                count += 1;
            }
        }
        let header = Header {
            format: FORMAT,
            layout: self.layout().clone(),
            capacity: cap,
            sampler: self.config().sampler.kind().to_owned(),
            sampler_config: Some(self.config().sampler),
            claimed: s.claimed(),
            counters: s.counters.values(),
            rng_seed: self.rng.seed(),
            rng_draws: self.rng.draws(),
            limiter: self.limiter.as_ref().map(|l| l.counters()),
            current_policy: s.current_policy.load(Ordering::Relaxed),
            sampler_state: self.sampler_state(),
            records: count,
        };
        let json = serde_json::to_vec(&header).map_err(|e| ReplayError::Corrupt {
            path: path.to_owned(),
            reason: format!("header serialization: {e}"),
        })?;
        with_temp_file(path, |tmp| {
            let mut w = BufWriter::with_capacity(1 << 20, create_temp(tmp)?);
            let mut sum = Checksum::new();
            let io = |e| ReplayError::io("write", tmp, e);
            let len = (json.len() as u64).to_le_bytes();
            for part in [&MAGIC[..], &len[..], &json[..]] {
                sum.bytes(part);
                w.write_all(part).map_err(io)?;
            }
            for &word in &records {
                sum.word(word);
                w.write_all(&word.to_le_bytes()).map_err(io)?;
            }
            w.write_all(&sum.0.to_le_bytes()).map_err(io)?;
            let file = w.into_inner().map_err(|e| io(e.into_error()))?;
            file.sync_all()
                .map_err(|e| ReplayError::io("fsync", tmp, e))
        })?;
        let bytes = 8 + 8 + json.len() as u64 + records.len() as u64 * 8 + 8;
        tracing::info!(path = %path.display(), items = count, bytes, "replay: checkpoint written");
        Ok(CheckpointInfo {
            items: count,
            bytes,
        })
    }

    /// Rebuilds an in-memory buffer from a checkpoint. The file's layout,
    /// capacity and sampler configuration (every parameter; only the kind
    /// for format 1 files) must match `layout` and `config` (`Mismatch`
    /// otherwise, naming what differs); damage gives `Corrupt`. The RNG
    /// continues from the checkpoint's position (its seed, not
    /// `config.seed`).
    pub fn restore(
        path: &Path,
        layout: ItemLayout,
        config: ReplayConfig,
    ) -> Result<ReplayBuffer, ReplayError> {
        config.validate_for(&layout)?;
        let corrupt = |reason: String| ReplayError::Corrupt {
            path: path.to_owned(),
            reason,
        };
        let mismatch = |reason: String| ReplayError::Mismatch {
            path: path.to_owned(),
            reason,
        };
        let file = File::open(path).map_err(|e| ReplayError::io("open", path, e))?;
        let file_len = file
            .metadata()
            .map_err(|e| ReplayError::io("stat", path, e))?
            .len();
        let mut r = BufReader::with_capacity(1 << 20, file);
        let mut sum = Checksum::new();
        let mut word = [0u8; 8];
        let mut read8 = |r: &mut BufReader<File>, what: &str| -> Result<[u8; 8], ReplayError> {
            r.read_exact(&mut word)
                .map_err(|_| corrupt(format!("truncated at {what}")))?;
            Ok(word)
        };
        let magic = read8(&mut r, "magic")?;
        if &magic != MAGIC {
            return Err(corrupt("bad magic (not a replay checkpoint)".into()));
        }
        sum.bytes(&magic);
        let len_bytes = read8(&mut r, "header length")?;
        sum.bytes(&len_bytes);
        let header_len = u64::from_le_bytes(len_bytes);
        // Bounded by what the file holds before anything is allocated for
        // it: a damaged length must not become a many-GiB buffer.
        let header_room = file_len.saturating_sub(PREFIX_BYTES + CHECKSUM_BYTES);
        let header_bytes = usize::try_from(header_len)
            .ok()
            .filter(|_| header_len <= header_room)
            .ok_or_else(|| {
                corrupt(format!(
                    "header length {header_len} exceeds the {header_room} bytes the \
                     {file_len}-byte file has room for"
                ))
            })?;
        let mut json = vec![0u8; header_bytes];
        r.read_exact(&mut json)
            .map_err(|_| corrupt("truncated header".into()))?;
        sum.bytes(&json);
        let header: Header =
            serde_json::from_slice(&json).map_err(|e| corrupt(format!("header: {e}")))?;
        if header.format != FORMAT && header.format != FORMAT_KIND_ONLY {
            return Err(mismatch(format!(
                "format {} (expected {FORMAT_KIND_ONLY} or {FORMAT})",
                header.format
            )));
        }
        if header.layout != layout {
            return Err(mismatch(format!(
                "layout differs: file {:?}, buffer {:?}",
                header.layout, layout
            )));
        }
        if header.capacity != config.capacity {
            return Err(mismatch(format!(
                "capacity {} in file, {} in config",
                header.capacity, config.capacity
            )));
        }
        if header.sampler != config.sampler.kind() {
            return Err(mismatch(format!(
                "sampler {} in file, {} in config",
                header.sampler,
                config.sampler.kind()
            )));
        }
        match (header.format, &header.sampler_config) {
            (FORMAT, None) => return Err(corrupt("header lacks sampler_config".into())),
            (_, Some(saved)) => {
                if let Some(what) = config.sampler.mismatch_with(saved) {
                    return Err(mismatch(what));
                }
            }
            (_, None) => {}
        }
        if header.records > header.capacity as u64 {
            return Err(corrupt("more records than slots".into()));
        }
        if header.claimed > MAX_CLAIMED {
            return Err(corrupt(format!(
                "next key {} exceeds the largest a slot can hold ({MAX_CLAIMED})",
                header.claimed
            )));
        }
        let row_words: Vec<usize> = layout.fields().iter().map(|f| f.row_words()).collect();
        let total_row: usize = row_words.iter().sum();
        // The records fill exactly the bytes between the header and the
        // checksum; checked now, so a damaged count is named as such
        // instead of surfacing as a truncation deep into the records.
        let records_room = header_room - header_len;
        let records_bytes = (total_row as u64)
            .checked_add(RECORD_META_WORDS)
            .and_then(|w| w.checked_mul(header.records))
            .and_then(|w| w.checked_mul(8));
        if records_bytes != Some(records_room) {
            return Err(corrupt(format!(
                "header says {} records of {} words each, the file holds {records_room} \
                 bytes of records",
                header.records,
                total_row as u64 + RECORD_META_WORDS
            )));
        }
        let storage = Storage::memory(&layout, config.capacity, config.storage_order)?;
        let resume = Resume {
            claimed: header.claimed,
            counters: header.counters,
            rng_draws: Some((header.rng_seed, header.rng_draws)),
            limiter: header.limiter,
            current_policy: header.current_policy,
        };
        let buffer = ReplayBuffer::assemble(layout.clone(), config, storage, resume);
        let s = &buffer.shared;
        let mut row = vec![0u64; total_row];
        for _ in 0..header.records {
            let mut rec = [0u64; 5];
            for x in rec.iter_mut() {
                *x = u64::from_le_bytes(read8(&mut r, "record")?);
                sum.word(*x);
            }
            for x in row.iter_mut() {
                *x = u64::from_le_bytes(read8(&mut r, "record data")?);
                sum.word(*x);
            }
            // The policy version is also the policy-version field's word in
            // the row, which is what the storage keeps.
            let [slot, key, _policy_version, group, retired] = rec;
            if slot >= s.capacity || key % s.capacity != slot || key >= header.claimed {
                return Err(corrupt(format!("record for slot {slot} has key {key}")));
            }
            let slot = slot as usize;
            let mut offset = 0;
            slot::write(s.storage.slots(), slot, key, group, |f, words| {
                for (w, &v) in words.iter().zip(&row[offset..offset + row_words[f]]) {
                    w.store(v, crate::loom::atomic::Ordering::Relaxed);
                }
                offset += row_words[f];
            });
            if retired == 1 {
                s.storage.retire(slot, key);
            }
        }
        let expected = sum.0;
        let stored = u64::from_le_bytes(read8(&mut r, "checksum")?);
        if stored != expected {
            return Err(corrupt(format!(
                "checksum {stored:#x}, computed {expected:#x}"
            )));
        }
        if r.read(&mut word)
            .map_err(|e| ReplayError::io("read", path, e))?
            != 0
        {
            return Err(corrupt("trailing bytes after checksum".into()));
        }
        buffer
            .sampler
            .restore(&header.sampler_state, &buffer.shared)
            .map_err(corrupt)?;
        if let Sampler::Fifo(_) = buffer.sampler {
            // Cursor restored above; nothing else to rebuild.
        }
        tracing::info!(path = %path.display(), items = header.records, "replay: restored");
        Ok(buffer)
    }
}
