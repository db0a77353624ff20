//! Preallocated storage: fixed-size rows per field plus one sequence word
//! per slot, all as 64-bit atomic words, in one of two orders, and two
//! cold columns (group ids, retire stamps) beside them.
//!
//! - [`StorageOrder::Records`] (default): slot `s` is one run of whole cache
//!   lines holding its sequence word and then each field's row. Why: a
//!   sample copies every field of a random slot, so what it pays is cache
//!   lines per slot. One metadata word makes a 3x4 f32 item (48 bytes) one
//!   line and three such fields two; the six-word record this replaced made
//!   them two and three (measured in `replay_bench`, README "One metadata
//!   word per slot").
//! - [`StorageOrder::Columns`]: one column of rows per field and one of
//!   sequence words, so each field of consecutive slots is contiguous (a
//!   field can be scanned alone).
//!
//! The sequence word packs the seqlock and the key (`slot.rs`). The item's
//! policy version is not stored twice: it is the layout's policy-version
//! field, read from the row. The group id and the retire stamp live in
//! cold columns (one word per slot each) because uniform and prioritized
//! sampling never read them: a sample reads the group column only once a
//! group id has been stored ([`Slots::groups_recorded`], a flag word after
//! the columns), and only consuming samplers read or write retire stamps.
//! Until then inserts do not write the group column either (a zero word
//! means no group), so a mapped table that never stores a group id never
//! touches that column's pages: at 1B items of 16 bytes that is 8 of the
//! 32 bytes per item a sample-and-insert workload keeps resident.
//!
//! Either way a sample gathers row `slot` of each field into row `i` of a
//! contiguous per-field batch buffer, so a field of `B` items is uploaded
//! to the device in one copy. Why atomic words: readers copy a slot while a
//! writer may be overwriting it (seqlock, see `slot.rs`); doing both through
//! `Relaxed` atomic word accesses makes that race defined behaviour, and on
//! x86-64 and aarch64 those accesses compile to plain loads and stores.
//! Cost: `capacity * ((row bytes rounded up to 8 + 8) rounded up to 64 +
//! 16)` bytes (records) or `capacity * (row bytes rounded up to 8 + 24)`
//! (columns), plus one flag word; in memory allocated and first-touched
//! at construction (about 3 s per GiB on our machines), never afterwards;
//! mapped, a fresh file is sparse and its pages are faulted in as slots
//! are first written.
//!
//! Backings: [`StorageKind::Memory`] (an anonymous map advised to use huge
//! pages, the allocator as a fallback) and [`StorageKind::Mapped`] (a
//! directory with `layout.json` and `storage.bin`, memory-mapped with
//! `memmap2`, reopenable after a restart, also advised to use huge pages:
//! Linux maps a file's page cache with 2 MiB pages where the file system
//! holds large folios, ext4 and xfs on recent kernels; see `Storage::map`).
//! One process maps a directory at a time. A layout with variable-length
//! fields also has a heap (`heap.rs`), in memory or in the directory's
//! `heap/`, whose references the rows hold.
use std::path::{Path, PathBuf};

use crate::error::ReplayError;
use crate::heap::Heap;
use crate::layout::ItemLayout;
use crate::loom::atomic::{AtomicU64, Ordering};

/// Words per cache line.
const LINE_WORDS: usize = 8;

/// Asks the CPU to bring the cache line holding `*r` closer. Unlike a load,
/// a prefetch never blocks retirement, so a whole batch of misses overlaps.
/// Also used by the sum tree (`sampler/sum_tree.rs`). A no-op off x86-64.
#[inline(always)]
pub(crate) fn prefetch<T>(r: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` needs SSE, which every x86-64 CPU has; a
    // prefetch never faults and has no architectural effect, and the pointer
    // comes from a live reference anyway.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>((r as *const T).cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = r;
}

/// How slots are laid out in memory (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum StorageOrder {
    /// Each slot's sequence word and fields together, in whole cache
    /// lines.
    #[default]
    Records,
    /// One column per field and one of sequence words.
    Columns,
}

/// Where the slots live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StorageKind {
    /// Heap memory, lost on exit.
    Memory,
    /// A directory holding `layout.json` and `storage.bin`, memory-mapped.
    Mapped(PathBuf),
}

/// Header of a mapped directory (`layout.json`).
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct MappedHeader {
    format: u32,
    capacity: usize,
    layout: ItemLayout,
    /// Absent in format 1 (read only to refuse it with its format).
    #[serde(default)]
    order: StorageOrder,
}

/// The heap's folder in a mapped directory (variable-length fields).
#[cfg(not(loom))]
const HEAP_DIR: &str = "heap";

/// Format 4: one sequence word per slot, the cold columns (group ids
/// stored complemented, so a zero word is no group) and the flag word
/// (`MetaGeometry::flags`).
/// Older formats are refused with a `Mismatch` that says why: 1 and 2 kept
/// a six-word metadata record per slot, 3 stored group ids as they are and
/// had no flag word. Their contents move over through a checkpoint
/// (`ReplayBuffer::checkpoint`; an older version's format 1 checkpoints
/// are still read).
const MAPPED_FORMAT: u32 = 4;

/// Flag-word bit: some slot stored a group id (see [`MetaGeometry::flags`]).
const FLAG_GROUPS: u64 = 1;
/// Flag-word bit: some slot stored a retire stamp.
const FLAG_RETIRES: u64 = 2;

/// One field's rows in the storage's words.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FieldGeometry {
    /// Word offset of the field's row in slot 0.
    offset: usize,
    /// Words per row.
    words: usize,
    /// Words from one slot's row to the next slot's.
    stride: usize,
    /// Bytes of the field's value (the row's words hold them, zero padded;
    /// a variable-length field's: its heap reference).
    pub(crate) bytes: usize,
}

enum Backing {
    Memory(Box<[AtomicU64]>),
    /// Heap-like anonymous map advised to use transparent huge pages.
    #[cfg(not(loom))]
    Anon(memmap2::MmapMut),
    #[cfg(not(loom))]
    Mapped {
        map: memmap2::MmapMut,
        dir: PathBuf,
    },
}

/// Slots for `capacity` items of one layout.
pub(crate) struct Storage {
    backing: Backing,
    capacity: usize,
    order: StorageOrder,
    /// Where each field's rows are; one entry per field, so a row lookup on
    /// the sampling path is one bounds check.
    fields: Box<[FieldGeometry]>,
    /// Where the words that are not rows are.
    meta: MetaGeometry,
    /// The variable-length fields' values (`heap.rs`); `None` when the
    /// layout has none.
    heap: Option<Heap>,
    /// Per field, the bytes of one element of its last dimension if it is
    /// variable-length.
    variable_units: Box<[Option<usize>]>,
}

/// Word positions of the sequence words, the cold columns and the
/// policy-version word. `Copy`: part of every [`Slots`] view.
#[derive(Debug, Clone, Copy)]
struct MetaGeometry {
    /// Word offset of slot 0's sequence word.
    seq_offset: usize,
    /// Words from one slot's sequence word to the next.
    seq_stride: usize,
    /// Word offset of the group column (one word per slot).
    group_offset: usize,
    /// Word offset of the retire-stamp column (one word per slot).
    retired_offset: usize,
    /// Word offset of the flag word: [`FLAG_GROUPS`] once any slot stored
    /// a group id other than `NO_GROUP`, [`FLAG_RETIRES`] once any retire
    /// stamp was stored. A word of the storage rather than a field of it,
    /// so a mapped table keeps it across a restart: while a bit is clear,
    /// no word of its column was ever written, which is what lets inserts
    /// without a group skip the group column (`slot::write`) and a reopen
    /// skip reading the retire column (`recovery.rs`), so neither column's
    /// pages are faulted in when unused.
    flags: usize,
    /// The policy-version field's geometry (a `U64` scalar: one word).
    policy: Option<FieldGeometry>,
}

impl std::fmt::Debug for Storage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Storage")
            .field("capacity", &self.capacity)
            .field("words", &self.words().len())
            .finish()
    }
}

/// [`Storage`]'s words and geometry with the backing resolved: what the
/// slot protocol reads and writes through. `Copy`, borrowed from the
/// storage for one run of accesses (see [`Storage::slots`]).
#[derive(Clone, Copy)]
pub(crate) struct Slots<'a> {
    words: &'a [AtomicU64],
    fields: &'a [FieldGeometry],
    meta: MetaGeometry,
    order: StorageOrder,
}

impl<'a> Slots<'a> {
    pub(crate) fn num_fields(&self) -> usize {
        self.fields.len()
    }

    /// Where field `field`'s rows are (hoisted out of per-row loops).
    #[inline]
    pub(crate) fn field(&self, field: usize) -> FieldGeometry {
        self.fields[field]
    }

    /// Words of row `slot` of a field whose geometry is `g` (empty if out
    /// of range, which a valid slot never is).
    #[inline(always)]
    pub(crate) fn row_at(&self, g: FieldGeometry, slot: usize) -> &'a [AtomicU64] {
        let start = g.offset + slot * g.stride;
        self.words.get(start..start + g.words).unwrap_or(&[])
    }

    /// Row `slot` of a field of exactly `W` words (`None` if out of range,
    /// which a valid slot never is): one bounds check, and a length the
    /// compiler knows.
    #[inline(always)]
    pub(crate) fn row_words<const W: usize>(
        &self,
        g: FieldGeometry,
        slot: usize,
    ) -> Option<&'a [AtomicU64; W]> {
        let start = g.offset + slot * g.stride;
        self.words.get(start..start + W)?.try_into().ok()
    }

    /// Words of one row of one field.
    #[inline]
    pub(crate) fn row(&self, field: usize, slot: usize) -> &'a [AtomicU64] {
        self.row_at(self.field(field), slot)
    }

    /// The slot's sequence word (`slot.rs`).
    #[inline(always)]
    pub(crate) fn seq(&self, slot: usize) -> &'a AtomicU64 {
        &self.words[self.meta.seq_offset + slot * self.meta.seq_stride]
    }

    /// The slot's policy-version word (in its row), if the layout has one.
    #[inline(always)]
    pub(crate) fn policy(&self, slot: usize) -> Option<&'a AtomicU64> {
        self.meta.policy.and_then(|g| self.row_at(g, slot).first())
    }

    /// The slot's word in the group column: the group id complemented, so
    /// the zero of a column never written (a fresh map, a sparse file's
    /// hole) reads as `NO_GROUP`. Use [`Slots::load_group`] and
    /// [`Slots::store_group`].
    #[inline]
    fn group(&self, slot: usize) -> &'a AtomicU64 {
        &self.words[self.meta.group_offset + slot]
    }

    /// The group id stored in `slot` (`NO_GROUP` if none). Relaxed: read
    /// inside a reader's seqlock window or by the slot's owner.
    #[inline]
    pub(crate) fn load_group(&self, slot: usize) -> u64 {
        !self.group(slot).load(Ordering::Relaxed)
    }

    /// Stores `slot`'s group id. Relaxed: by the slot's owner, before its
    /// `Release` publish.
    #[inline]
    pub(crate) fn store_group(&self, slot: usize, group: u64) {
        self.group(slot).store(!group, Ordering::Relaxed);
    }

    /// The flag word (see [`MetaGeometry::flags`]).
    #[inline(always)]
    fn flags(&self) -> &'a AtomicU64 {
        &self.words[self.meta.flags]
    }

    /// Sets `bit` of the flag word if it is clear (an RMW: the other bit may
    /// be set at the same time). Relaxed: see the callers.
    #[inline]
    fn set_flag(&self, bit: u64) {
        let flags = self.flags();
        if flags.load(Ordering::Relaxed) & bit == 0 {
            flags.fetch_or(bit, Ordering::Relaxed);
        }
    }

    /// Whether a group id was ever stored. Relaxed: a reader loads it after
    /// an `Acquire` sequence load, and a writer after taking its slot with
    /// an `Acquire` exchange; the flag is set before the storing write's
    /// `Release` publish, so either sees `true` if the item it sees (or the
    /// one it replaces, or any earlier one in its slot) was stored with a
    /// group.
    #[inline(always)]
    pub(crate) fn groups_recorded(&self) -> bool {
        self.flags().load(Ordering::Relaxed) & FLAG_GROUPS != 0
    }

    /// Notes that a group id is about to be stored. Relaxed: the storing
    /// write's `Release` publish orders it (see `groups_recorded`).
    #[inline]
    pub(crate) fn record_groups(&self) {
        self.set_flag(FLAG_GROUPS);
    }

    /// Whether a retire stamp was ever stored. Read by the reopen scan
    /// alone, before the storage is shared (so Relaxed).
    #[inline]
    pub(crate) fn retires_recorded(&self) -> bool {
        self.flags().load(Ordering::Relaxed) & FLAG_RETIRES != 0
    }

    /// The slot's word in the retire-stamp column.
    #[inline]
    pub(crate) fn retired(&self, slot: usize) -> &'a AtomicU64 {
        &self.words[self.meta.retired_offset + slot]
    }

    /// Prefetches every line of the slot's record (records order), or its
    /// sequence word and every line of each row (columns), so the cache
    /// misses of a batch overlap instead of queueing behind each seqlock
    /// read. Measured (replay_bench, A/B on the same loaded
    /// machine): sample(128) of 3x4 from 100k best 2.7 us with prefetch vs
    /// 3.8 us with plain touching loads. A 48-byte row straddles two lines
    /// half the time; prefetching only its first word left that second miss
    /// on the copy's critical path (see README, "Benchmarks").
    #[inline]
    pub(crate) fn touch(&self, slot: usize) {
        match self.order {
            StorageOrder::Records => {
                // The record is whole lines from its first word. (An index
                // loop: `step_by`'s setup compiled to several branches per
                // slot.)
                let start = self.meta.seq_offset + slot * self.meta.seq_stride;
                if let Some(record) = self.words.get(start..start + self.meta.seq_stride) {
                    let mut i = 0;
                    while let Some(w) = record.get(i) {
                        prefetch(w);
                        i += LINE_WORDS;
                    }
                }
            }
            StorageOrder::Columns => {
                prefetch(self.seq(slot));
                for field in 0..self.num_fields() {
                    // One word per 64-byte line, plus the last word.
                    let row = self.row(field, slot);
                    for w in row.iter().step_by(LINE_WORDS) {
                        prefetch(w);
                    }
                    if let Some(w) = row.last() {
                        prefetch(w);
                    }
                }
            }
        }
    }
}

struct Geometry {
    field_bytes: Vec<usize>,
    /// Per field, the bytes of one element of its last dimension if it is
    /// variable-length.
    variable_units: Vec<Option<usize>>,
    field_offsets: Vec<usize>,
    field_row_words: Vec<usize>,
    field_strides: Vec<usize>,
    meta: MetaGeometry,
    total_words: usize,
    /// `total_words * 8`, checked: the map or file length.
    total_bytes: usize,
}

fn geometry(
    layout: &ItemLayout,
    capacity: usize,
    order: StorageOrder,
) -> Result<Geometry, ReplayError> {
    let overflow = || ReplayError::config("storage size overflows usize");
    let field_bytes: Vec<usize> = layout.fields().iter().map(|f| f.row_bytes()).collect();
    let variable_units = layout
        .fields()
        .iter()
        .map(|f| f.is_variable().then(|| f.num_bytes()))
        .collect();
    let field_row_words: Vec<usize> = layout.fields().iter().map(|f| f.row_words()).collect();
    let mut field_offsets = Vec::with_capacity(field_row_words.len());
    let (field_strides, seq_offset, seq_stride, rows_end) = match order {
        StorageOrder::Columns => {
            // [sequence words | field 0 column | field 1 column | ...]
            let mut off = capacity;
            for &w in &field_row_words {
                field_offsets.push(off);
                off = w
                    .checked_mul(capacity)
                    .and_then(|w| w.checked_add(off))
                    .ok_or_else(overflow)?;
            }
            (field_row_words.clone(), 0, 1, off)
        }
        StorageOrder::Records => {
            // [sequence word | field 0 | field 1 | ...], padded to whole
            // lines so every record starts a line and spans the fewest.
            let mut off = 1usize;
            for &w in &field_row_words {
                field_offsets.push(off);
                off = off.checked_add(w).ok_or_else(overflow)?;
            }
            let record = off
                .checked_next_multiple_of(LINE_WORDS)
                .ok_or_else(overflow)?;
            let rows_end = record.checked_mul(capacity).ok_or_else(overflow)?;
            (vec![record; field_row_words.len()], 0, record, rows_end)
        }
    };
    // The cold columns after the rows: groups, then retire stamps, then
    // the flag word.
    let retired_offset = rows_end.checked_add(capacity).ok_or_else(overflow)?;
    let flags = retired_offset.checked_add(capacity).ok_or_else(overflow)?;
    let total_words = flags.checked_add(1).ok_or_else(overflow)?;
    let total_bytes = total_words.checked_mul(8).ok_or_else(overflow)?;
    let policy = match layout.policy_version_field() {
        None => None,
        // A layout's index is checked when it is built or read; `get`
        // keeps a bad one an error here rather than a panic regardless.
        Some(f) => Some(FieldGeometry {
            offset: *field_offsets.get(f).ok_or_else(|| {
                ReplayError::config(format!("policy-version field index {f} out of range"))
            })?,
            words: field_row_words[f],
            stride: field_strides[f],
            bytes: field_bytes[f],
        }),
    };
    Ok(Geometry {
        field_bytes,
        variable_units,
        field_offsets,
        field_row_words,
        field_strides,
        meta: MetaGeometry {
            seq_offset,
            seq_stride,
            group_offset: rows_end,
            retired_offset,
            flags,
            policy,
        },
        total_words,
        total_bytes,
    })
}

impl Storage {
    /// Allocates (and first-touches) in-memory storage: an anonymous map
    /// advised `MADV_HUGEPAGE` where that works, else the allocator's memory.
    ///
    /// Why huge pages: random sampling from 100k-1M slots (11-112 MB) takes
    /// a TLB miss per slot with 4 KiB pages, and `perf annotate` showed the
    /// prefetches of a batch stalled on those page walks; 2 MiB pages cover
    /// the storage with a few dozen TLB entries. Where THP is off the advice
    /// is refused and this is plain anonymous memory.
    pub(crate) fn memory(
        layout: &ItemLayout,
        capacity: usize,
        order: StorageOrder,
    ) -> Result<Self, ReplayError> {
        let g = geometry(layout, capacity, order)?;
        let heap = || layout.has_variable().then(|| Heap::memory(capacity));
        #[cfg(not(loom))]
        if let Ok(map) = memmap2::MmapMut::map_anon(g.total_bytes) {
            #[cfg(target_os = "linux")]
            let _ = map.advise(memmap2::Advice::HugePage);
            let storage = Self::from_parts(Backing::Anon(map), capacity, order, g, heap());
            // Zeroed by the kernel; touch one word per 4 KiB page now
            // (first touch costs ~3 s/GiB) rather than on the hot path.
            // Relaxed: nothing else sees the storage yet.
            for w in storage.words().iter().step_by(512) {
                w.store(0, Ordering::Relaxed);
            }
            return Ok(storage);
        }
        // Writing every word first-touches every page now rather than on the
        // hot path. Reserved first: a size the allocator refuses is an
        // error, not an abort.
        let mut words = Vec::new();
        words.try_reserve_exact(g.total_words).map_err(|e| {
            ReplayError::config(format!("cannot allocate {} bytes: {e}", g.total_bytes))
        })?;
        words.extend((0..g.total_words).map(|_| AtomicU64::new(0)));
        let words: Box<[AtomicU64]> = words.into_boxed_slice();
        Ok(Self::from_parts(
            Backing::Memory(words),
            capacity,
            order,
            g,
            heap(),
        ))
    }

    fn from_parts(
        backing: Backing,
        capacity: usize,
        order: StorageOrder,
        g: Geometry,
        heap: Option<Heap>,
    ) -> Self {
        Storage {
            backing,
            capacity,
            order,
            fields: g
                .field_offsets
                .iter()
                .zip(&g.field_row_words)
                .zip(&g.field_strides)
                .zip(&g.field_bytes)
                .map(|(((&offset, &words), &stride), &bytes)| FieldGeometry {
                    offset,
                    words,
                    stride,
                    bytes,
                })
                .collect(),
            meta: g.meta,
            heap,
            variable_units: g.variable_units.into_boxed_slice(),
        }
    }

    /// Creates a fresh mapped directory (replacing an old `storage.bin`).
    #[cfg(not(loom))]
    pub(crate) fn create_mapped(
        dir: &Path,
        layout: &ItemLayout,
        capacity: usize,
        order: StorageOrder,
    ) -> Result<Self, ReplayError> {
        let g = geometry(layout, capacity, order)?;
        std::fs::create_dir_all(dir).map_err(|e| ReplayError::io("create dir", dir, e))?;
        let header = MappedHeader {
            format: MAPPED_FORMAT,
            capacity,
            layout: layout.clone(),
            order,
        };
        let header_path = dir.join("layout.json");
        let json = serde_json::to_vec_pretty(&header).map_err(|e| ReplayError::Corrupt {
            path: header_path.clone(),
            reason: e.to_string(),
        })?;
        crate::atomic_file::write_atomically(&header_path, &json)?;
        let data_path = dir.join("storage.bin");
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&data_path)
            .map_err(|e| ReplayError::io("create", &data_path, e))?;
        file.set_len(g.total_bytes as u64)
            .map_err(|e| ReplayError::io("resize", &data_path, e))?;
        let heap = match layout.has_variable() {
            true => Some(Heap::create_mapped(&dir.join(HEAP_DIR), capacity)?),
            false => None,
        };
        Self::map(file, dir, &data_path, capacity, order, g, heap)
    }

    /// The layout and capacity a mapped directory holds, read from its
    /// `layout.json` alone (nothing is mapped).
    #[cfg(not(loom))]
    pub(crate) fn mapped_layout(dir: &Path) -> Result<(ItemLayout, usize), ReplayError> {
        let header = Self::read_header(dir)?;
        Ok((header.layout, header.capacity))
    }

    /// Reads and checks the header (`layout.json`) of a mapped directory.
    #[cfg(not(loom))]
    fn read_header(dir: &Path) -> Result<MappedHeader, ReplayError> {
        let header_path = dir.join("layout.json");
        let json =
            std::fs::read(&header_path).map_err(|e| ReplayError::io("read", &header_path, e))?;
        let header: MappedHeader =
            serde_json::from_slice(&json).map_err(|e| ReplayError::Corrupt {
                path: header_path.clone(),
                reason: e.to_string(),
            })?;
        if header.format != MAPPED_FORMAT {
            let reason = if header.format < MAPPED_FORMAT {
                let what = match header.format {
                    3 => "group ids stored as they are, no flag word",
                    _ => "six metadata words per slot",
                };
                format!(
                    "format {} was written by an older version ({what}); this version \
                     reads format {MAPPED_FORMAT}. Take a checkpoint with the older \
                     version and restore it, or delete the directory",
                    header.format
                )
            } else {
                format!("format {} (expected {MAPPED_FORMAT})", header.format)
            };
            return Err(ReplayError::Mismatch {
                path: header_path,
                reason,
            });
        }
        Ok(header)
    }

    /// Reopens a mapped directory; the layout and capacity come from it.
    #[cfg(not(loom))]
    pub(crate) fn open_mapped(dir: &Path) -> Result<(Self, ItemLayout), ReplayError> {
        let header_path = dir.join("layout.json");
        let header = Self::read_header(dir)?;
        // The layout was validated as it was parsed; the capacity and the
        // sizes it implies come from the file too, so an overflow here is
        // damage to this file, not a configuration error.
        let g = geometry(&header.layout, header.capacity, header.order).map_err(|e| {
            ReplayError::Corrupt {
                path: header_path.clone(),
                reason: format!("capacity {}: {e}", header.capacity),
            }
        })?;
        let data_path = dir.join("storage.bin");
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&data_path)
            .map_err(|e| ReplayError::io("open", &data_path, e))?;
        let len = file
            .metadata()
            .map_err(|e| ReplayError::io("stat", &data_path, e))?
            .len();
        if len != g.total_bytes as u64 {
            return Err(ReplayError::Corrupt {
                path: data_path,
                reason: format!("{len} bytes, layout needs {}", g.total_bytes),
            });
        }
        let heap = match header.layout.has_variable() {
            true => Some(Heap::open_mapped(&dir.join(HEAP_DIR), header.capacity)?),
            false => None,
        };
        let storage = Self::map(
            file,
            dir,
            &data_path,
            header.capacity,
            header.order,
            g,
            heap,
        )?;
        Ok((storage, header.layout))
    }

    #[cfg(not(loom))]
    fn map(
        file: std::fs::File,
        dir: &Path,
        data_path: &Path,
        capacity: usize,
        order: StorageOrder,
        g: Geometry,
        heap: Option<Heap>,
    ) -> Result<Self, ReplayError> {
        // SAFETY: the file is ours for the map's lifetime (documented: one
        // process per directory); concurrent access goes through atomics.
        let map = unsafe { memmap2::MmapMut::map_mut(&file) }
            .map_err(|e| ReplayError::io("mmap", data_path, e))?;
        // Huge pages, as for memory (see `Storage::memory`): a random slot
        // of a table of gigabytes costs a page walk per sample with 4 KiB
        // pages. Where the file system keeps large folios in the page cache
        // (ext4 and xfs on recent kernels) Linux then maps them with 2 MiB
        // pages; elsewhere, or where THP is off, the advice does nothing
        // (or is refused, ignored here) and the map keeps 4 KiB pages.
        // Cost: the kernel writes a dirty large folio back whole; inserts
        // fill a ring in order, so that is the same bytes.
        #[cfg(target_os = "linux")]
        let _ = map.advise(memmap2::Advice::HugePage);
        if map.len() != g.total_bytes {
            return Err(ReplayError::Corrupt {
                path: data_path.to_owned(),
                reason: "mapped length differs from file length".into(),
            });
        }
        Ok(Self::from_parts(
            Backing::Mapped {
                map,
                dir: dir.to_owned(),
            },
            capacity,
            order,
            g,
            heap,
        ))
    }

    /// Bytes of one element of field `field`'s last dimension, if it is
    /// variable-length.
    pub(crate) fn variable_unit(&self, field: usize) -> Option<usize> {
        self.variable_units.get(field).copied().flatten()
    }

    /// The variable-length fields' values, if the layout has any.
    #[inline]
    pub(crate) fn heap(&self) -> Option<&Heap> {
        self.heap.as_ref()
    }

    /// The mapped directory, if any.
    pub(crate) fn dir(&self) -> Option<&Path> {
        match &self.backing {
            Backing::Memory(_) => None,
            #[cfg(not(loom))]
            Backing::Anon(_) => None,
            #[cfg(not(loom))]
            Backing::Mapped { dir, .. } => Some(dir),
        }
    }

    /// Flushes a mapped storage to its file (no-op in memory).
    pub(crate) fn flush(&self) -> Result<(), ReplayError> {
        match &self.backing {
            Backing::Memory(_) => Ok(()),
            #[cfg(not(loom))]
            Backing::Anon(_) => Ok(()),
            #[cfg(not(loom))]
            Backing::Mapped { map, dir } => {
                map.flush()
                    .map_err(|e| ReplayError::io("flush", dir.join("storage.bin"), e))?;
                match &self.heap {
                    Some(h) => h.flush(),
                    None => Ok(()),
                }
            }
        }
    }

    #[inline]
    fn words(&self) -> &[AtomicU64] {
        match &self.backing {
            Backing::Memory(w) => w,
            #[cfg(not(loom))]
            Backing::Mapped { map, .. } | Backing::Anon(map) => {
                let ptr = map.as_ptr().cast::<AtomicU64>();
                debug_assert_eq!(ptr.align_offset(std::mem::align_of::<AtomicU64>()), 0);
                // SAFETY: the map is page aligned (so 8-byte aligned) and its
                // length is `total_words * 8` (checked in `map`, requested
                // in `memory`); `AtomicU64`
                // has the size and alignment of `u64`; the slice borrows
                // `self`, which owns the map; all access is atomic.
                unsafe { std::slice::from_raw_parts(ptr, map.len() / 8) }
            }
        }
    }

    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    pub(crate) fn order(&self) -> StorageOrder {
        self.order
    }

    /// The words resolved once, for a run of slot accesses (a sample call
    /// or an insert batch): the backing is matched here, not per access.
    /// Always inlined: as a call (which LLVM chose for the insert path once
    /// that grew) it copied the geometry through the stack per insert.
    #[inline(always)]
    pub(crate) fn slots(&self) -> Slots<'_> {
        Slots {
            words: self.words(),
            fields: &self.fields,
            meta: self.meta,
            order: self.order,
        }
    }

    /// `key + 1` published in `slot` (0: never): the sequence word's key
    /// (while a writer is inside, the key it is replacing). Acquire, pairs
    /// with the Release publish in `slot::write`, so the item's words are
    /// visible.
    #[inline]
    pub(crate) fn published(&self, slot: usize) -> u64 {
        self.slots().seq(slot).load(Ordering::Acquire) >> 1
    }

    /// `key + 1` of the last retired item in `slot`. Acquire, pairs with
    /// the Release in `retire`.
    #[inline]
    pub(crate) fn retired(&self, slot: usize) -> u64 {
        self.slots().retired(slot).load(Ordering::Acquire)
    }

    /// Marks the item `key` in `slot` consumed. Release, pairs with the
    /// Acquire in `retired` (a blocked writer may reuse the slot only after
    /// the reader's copy is complete).
    ///
    /// The flag first, so the reopen scan never misses a stamp; Relaxed,
    /// only that scan reads it (after the process that set it is gone).
    #[inline]
    pub(crate) fn retire(&self, slot: usize, key: u64) {
        let slots = self.slots();
        slots.set_flag(FLAG_RETIRES);
        slots.retired(slot).store(key + 1, Ordering::Release);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::dtype::DType;

    /// Word ranges of every row, sequence word and cold-column word, for
    /// both orders: they must tile without overlap inside the storage,
    /// records must start on a cache line, and the policy word must be the
    /// policy-version field's row.
    #[test]
    fn rows_and_metadata_never_overlap_in_either_order() {
        let layout = ItemLayout::builder()
            .field("a", DType::F32, &[3, 4])
            .field("b", DType::F32, &[3, 4])
            .field("c", DType::Bool, &[])
            .field("v", DType::U64, &[])
            .policy_version_field("v")
            .build()
            .expect("layout");
        let capacity = 37;
        for order in [StorageOrder::Records, StorageOrder::Columns] {
            let s = Storage::memory(&layout, capacity, order).expect("storage");
            let base = s.words().as_ptr() as usize;
            let range = |w: &[AtomicU64]| {
                let start = (w.as_ptr() as usize - base) / 8;
                (start, start + w.len())
            };
            let mut ranges = Vec::new();
            let slots = s.slots();
            for slot in 0..capacity {
                let seq = range(std::slice::from_ref(slots.seq(slot)));
                if order == StorageOrder::Records {
                    assert_eq!(seq.0 % LINE_WORDS, 0, "record {slot} starts a line");
                }
                ranges.push(seq);
                ranges.push(range(std::slice::from_ref(slots.group(slot))));
                ranges.push(range(std::slice::from_ref(slots.retired(slot))));
                let policy = slots.policy(slot).expect("layout has a policy field");
                assert!(std::ptr::eq(policy, &slots.row(3, slot)[0]));
                for field in 0..s.slots().num_fields() {
                    let row = range(s.slots().row(field, slot));
                    assert_eq!(row.1 - row.0, layout.fields()[field].row_words());
                    ranges.push(row);
                }
            }
            ranges.push(range(std::slice::from_ref(slots.flags())));
            ranges.sort_unstable();
            for pair in ranges.windows(2) {
                assert!(pair[0].1 <= pair[1].0, "{order:?}: {pair:?} overlap");
            }
            assert!(ranges.last().expect("ranges").1 <= s.words().len());
        }
    }

    /// The point of one metadata word: a 3x4 f32 record is one cache line,
    /// and the dict item {3x4 f32, 3x4 f32, bool} two.
    #[test]
    fn small_records_take_the_fewest_lines() {
        let one = ItemLayout::builder()
            .field("a", DType::F32, &[3, 4])
            .build()
            .expect("layout");
        let g = geometry(&one, 10, StorageOrder::Records).expect("geometry");
        assert_eq!(g.meta.seq_stride, LINE_WORDS);
        let dict = ItemLayout::builder()
            .field("a", DType::F32, &[3, 4])
            .field("b", DType::F32, &[3, 4])
            .field("c", DType::Bool, &[])
            .build()
            .expect("layout");
        let g = geometry(&dict, 10, StorageOrder::Records).expect("geometry");
        assert_eq!(g.meta.seq_stride, 2 * LINE_WORDS);
    }
}
