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
//! sampler's kind only) are still read. Format 3, written for layouts with
//! variable-length fields, stores such a field's row as its element count
//! and then its values' words (no heap references: a restored table packs
//! them into its own heap).
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
use crate::heap::{Heap, HeapRef};
use crate::layout::VARIABLE_ROW_WORDS;
use crate::layout::{ItemLayout, MAX_VARIABLE_LEN};
use crate::rate_limiter::RateLimiterCounters;
use crate::sampler::{Sampler, SamplerConfig, SamplerState};
use crate::slot::{self, ReadOutcome};
use crate::storage::Storage;

const MAGIC: &[u8; 8] = b"SEEDRPL1";
/// Written now: the header holds `sampler_config`.
const FORMAT: u32 = 2;
/// Written for layouts with variable-length fields: each such row is its
/// element count and its values, inline.
const FORMAT_VARIABLE: u32 = 3;
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
        let layout = self.layout();
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
                let start = records.len();
                records.extend([
                    slot_index as u64,
                    meta.key,
                    meta.policy_version,
                    meta.group,
                    retired,
                ]);
                match s.storage.heap() {
                    None => records.extend_from_slice(&row),
                    Some(heap) => {
                        if !append_variable_row(heap, layout, &row, &mut records) {
                            // Its values retired since the slot was read:
                            // the item was overwritten meanwhile.
                            records.truncate(start);
                            continue;
                        }
                    }
                }
                count += 1;
            }
        }
        let header = Header {
            format: if layout.has_variable() {
                FORMAT_VARIABLE
            } else {
                FORMAT
            },
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
        let expected_format = if layout.has_variable() {
            FORMAT_VARIABLE
        } else {
            FORMAT
        };
        if header.format != expected_format && header.format != FORMAT_KIND_ONLY {
            return Err(mismatch(format!(
                "format {} (expected {FORMAT_KIND_ONLY} or {expected_format})",
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
            (FORMAT | FORMAT_VARIABLE, None) => {
                return Err(corrupt("header lacks sampler_config".into()))
            }
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
        if layout.has_variable() {
            // Records vary in length: each is bounded as it is read.
            return restore_variable(path, r, sum, &header, layout, config, records_room);
        }
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
            slot::write(s.storage.slots(), slot, key, group, |f, _, words| {
                for (w, &v) in words.iter().zip(&row[offset..offset + row_words[f]]) {
                    w.store(v, crate::loom::atomic::Ordering::Relaxed);
                }
                offset += row_words[f];
            });
            if retired == 1 {
                s.storage.retire(slot, key);
            }
        }
        finish_restore(path, r, sum, buffer, &header)
    }
}

/// The end of a restore, once every record is in: the checksum, nothing
/// after it, and the sampler's state.
fn finish_restore(
    path: &Path,
    mut r: BufReader<File>,
    sum: Checksum,
    buffer: ReplayBuffer,
    header: &Header,
) -> Result<ReplayBuffer, ReplayError> {
    let corrupt = |reason: String| ReplayError::Corrupt {
        path: path.to_owned(),
        reason,
    };
    let mut word = [0u8; 8];
    let expected = sum.0;
    r.read_exact(&mut word)
        .map_err(|_| corrupt("truncated at checksum".into()))?;
    let stored = u64::from_le_bytes(word);
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

/// Appends a slot's row (its words as read, `row`) in the format-3 form:
/// fixed fields' words as they are, each variable-length field as its
/// element count and its values' words. False if a value's segment has
/// retired (the item was overwritten since its slot was read); `records`
/// may then hold part of the row, which the caller cuts off.
fn append_variable_row(
    heap: &Heap,
    layout: &ItemLayout,
    row: &[u64],
    records: &mut Vec<u64>,
) -> bool {
    let reader = heap.reader();
    let mut at = 0;
    for spec in layout.fields() {
        let words = spec.row_words();
        let Some(fixed) = row.get(at..at + words) else {
            return false;
        };
        at += words;
        if !spec.is_variable() {
            records.extend_from_slice(fixed);
            continue;
        }
        let r = HeapRef::from_words([fixed[0], fixed[1]]);
        let Some(values) = reader.region(r, r.len as usize * spec.num_bytes()) else {
            return false;
        };
        records.push(u64::from(r.len));
        records.extend(values.iter().map(|w| w.load(Ordering::Relaxed)));
    }
    true
}

/// Restores a format-3 checkpoint (a layout with variable-length fields)
/// from `r`, positioned at the first record, with `room` bytes of records
/// before the checksum: each record's length is checked against what is
/// left before anything is read or allocated for it.
fn restore_variable(
    path: &Path,
    mut r: BufReader<File>,
    mut sum: Checksum,
    header: &Header,
    layout: ItemLayout,
    config: ReplayConfig,
    room: u64,
) -> Result<ReplayBuffer, ReplayError> {
    let corrupt = |reason: String| ReplayError::Corrupt {
        path: path.to_owned(),
        reason,
    };
    // Words of records not read yet (a `Cell`: the reading closure and the
    // bounds checks below both need it).
    let left = std::cell::Cell::new(room / 8);
    if !room.is_multiple_of(8) {
        return Err(corrupt(format!(
            "{room} bytes of records is not whole words"
        )));
    }
    let next = |r: &mut BufReader<File>, sum: &mut Checksum, what: &str| {
        if left.get() == 0 {
            return Err(corrupt(format!("records end early, in {what}")));
        }
        let mut w = [0u8; 8];
        r.read_exact(&mut w)
            .map_err(|_| corrupt(format!("truncated at {what}")))?;
        left.set(left.get() - 1);
        let w = u64::from_le_bytes(w);
        sum.word(w);
        Ok(w)
    };
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
    let Some(heap) = s.storage.heap() else {
        return Err(ReplayError::config(
            "a variable-length layout without a heap",
        ));
    };
    // Per field: its fixed words, or its element count and values.
    let mut fixed: Vec<Vec<u64>> = layout.fields().iter().map(|_| Vec::new()).collect();
    let mut values: Vec<Vec<u64>> = layout.fields().iter().map(|_| Vec::new()).collect();
    let mut lens = vec![0u32; layout.fields().len()];
    for _ in 0..header.records {
        let mut rec = [0u64; 5];
        for x in rec.iter_mut() {
            *x = next(&mut r, &mut sum, "record")?;
        }
        let [slot, key, _policy_version, group, retired] = rec;
        if slot >= s.capacity || key % s.capacity != slot || key >= header.claimed {
            return Err(corrupt(format!("record for slot {slot} has key {key}")));
        }
        let mut words = 0usize;
        for (f, spec) in layout.fields().iter().enumerate() {
            fixed[f].clear();
            values[f].clear();
            if !spec.is_variable() {
                for _ in 0..spec.row_words() {
                    let w = next(&mut r, &mut sum, "record data")?;
                    fixed[f].push(w);
                }
                continue;
            }
            let len = next(&mut r, &mut sum, "a row's length")?;
            let max = spec
                .variable()
                .and_then(|v| v.max_len)
                .unwrap_or(MAX_VARIABLE_LEN);
            if len > max.min(MAX_VARIABLE_LEN) {
                return Err(corrupt(format!(
                    "field `{}` of key {key}: {len} elements, at most {max}",
                    spec.name()
                )));
            }
            let n = (len as usize)
                .checked_mul(spec.num_bytes())
                .map(|b| b.div_ceil(8))
                .filter(|&n| n as u64 <= left.get())
                .ok_or_else(|| {
                    corrupt(format!(
                        "field `{}` of key {key}: {len} elements, more than the file holds",
                        spec.name()
                    ))
                })?;
            for _ in 0..n {
                let w = next(&mut r, &mut sum, "a row's values")?;
                values[f].push(w);
            }
            lens[f] = len as u32;
            words += n;
        }
        let mut reservation = heap.reserve(words, header.claimed)?;
        reservation.keys(key);
        let mut refs = Vec::with_capacity(layout.fields().len());
        for (f, spec) in layout.fields().iter().enumerate() {
            refs.push(match spec.is_variable() {
                true => reservation.push_words(&values[f], lens[f]).to_words(),
                false => [0; VARIABLE_ROW_WORDS],
            });
        }
        let slot = slot as usize;
        slot::write(s.storage.slots(), slot, key, group, |f, _, words| {
            let src: &[u64] = match layout.fields()[f].is_variable() {
                true => &refs[f],
                false => &fixed[f],
            };
            for (w, &v) in words.iter().zip(src) {
                w.store(v, crate::loom::atomic::Ordering::Relaxed);
            }
        });
        drop(reservation);
        if retired == 1 {
            s.storage.retire(slot, key);
        }
    }
    if left.get() != 0 {
        return Err(corrupt(format!(
            "{} bytes after the header's {} records",
            left.get() * 8,
            header.records
        )));
    }
    finish_restore(path, r, sum, buffer, header)
}
