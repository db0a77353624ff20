//! [`Heap`]: where a table's variable-length values live (token lists of
//! any length), so a slot keeps a fixed size and a row of 50 tokens costs
//! 50 tokens, not the longest row's.
//!
//! # Shape
//! A heap is a run of *segments*, each a block of 64-bit words (an
//! anonymous map in memory, a file `heap/<id>.seg` in a mapped directory).
//! An insert reserves one region for all its rows' variable values at the
//! end of the newest segment (a `fetch_add` on its cursor), packs the
//! values into it, and stores in each row's slot a [`HeapRef`] (segment,
//! word offset, element count: two words) inside the ordinary slot write.
//! When the newest segment is full, a new one is started (`roll`, under a
//! mutex; rare) and the older one is *sealed*: no region is handed out of
//! it again. Regions are written once and never reused, so a reader that
//! can see a region's segment reads finished, unchanging values.
//!
//! # Why the slot protocol covers it
//! A writer packs its region before its slot's `Release` publish; a reader
//! copies the reference inside the seqlock read (`slot.rs`), and reads the
//! region only after that copy validated, i.e. after an `Acquire` load saw
//! the publish: the region's words happen-before the read. No second
//! version check is needed because a region is never written again.
//!
//! # Retirement: memory of overwritten items goes back
//! Item `key`'s slot is claimed again by `key + capacity`. A sealed segment
//! whose newest key is below `claimed - capacity` holds only values of
//! items whose slots were claimed again, so it is *retired*: dropped from
//! the segment table (and its file deleted); its memory is released when
//! the last reader holding the old table lets go (`arc-swap`). A reader
//! that then looks for it finds nothing and drops the row: the item was
//! overwritten, as a seqlock retry would have found a moment later.
//!
//! A segment must not retire under a writer that has a region in it but
//! has not claimed its keys yet (keys are claimed after the reservation,
//! so that a heap error never leaves an unpublished key behind). Each
//! segment counts such writers (`pending`). A writer increments `pending`
//! before its cursor `fetch_add` (AcqRel), records its newest key
//! (`fetch_max`) after the claim, and decrements `pending` (Release) when
//! its rows are written. `roll` seals a segment with an AcqRel RMW on the
//! cursor, so a writer whose `fetch_add` landed before the seal is seen
//! through `pending`, and retirement (under the same mutex) waits until
//! `pending` reads 0 (Acquire), after which the writer's newest key is
//! visible.
//!
//! # Cost
//! An insert with variable fields: one `fetch_add` and two counter RMWs on
//! the newest segment, plus packing the values (one pass). A sample: one
//! `arc-swap` load per call and a copy per row and field. Memory: the
//! values of the last `capacity` items, plus up to the newest segment's
//! spare room and the sealed segments not yet retired. A segment is about
//! a quarter of the heap's recent live size (at least 64 KiB, at most
//! 64 MiB), so the overhead stays around a quarter to a half; a region
//! larger than that gets a segment of its own.
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use arc_swap::ArcSwap;

use crate::error::ReplayError;
use crate::item::{FieldRef, Values};
use crate::layout::{ItemLayout, VARIABLE_ROW_WORDS};

/// Smallest segment, in words (64 KiB).
const MIN_SEGMENT_WORDS: usize = 8 << 10;
/// Largest segment sized by the heap's live size, in words (64 MiB); a
/// single larger region gets a segment of its own.
const MAX_SEGMENT_WORDS: usize = 8 << 20;
/// Largest region: a [`HeapRef`] keeps word offsets in 32 bits.
const MAX_REGION_WORDS: usize = u32::MAX as usize;
/// The cursor's sealed mark: above any word count a segment reaches
/// (a segment is at most `MAX_REGION_WORDS` words, and a sealed
/// segment's cursor only grows by the failed reservations racing the
/// seal, one per writer).
const SEALED: usize = 1 << 62;
/// A segment file's extension in a mapped directory's `heap/`.
const SEGMENT_EXT: &str = "seg";

/// Where one row's values of one variable-length field are: `len`
/// elements of the field's last dimension at word `offset` of segment
/// `segment`. Stored in the slot as two words: the segment id, then
/// `offset << 32 | len`. A row of 0 elements reads nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HeapRef {
    pub segment: u64,
    pub offset: u32,
    pub len: u32,
}

impl HeapRef {
    pub(crate) fn to_words(self) -> [u64; VARIABLE_ROW_WORDS] {
        [
            self.segment,
            (u64::from(self.offset) << 32) | u64::from(self.len),
        ]
    }

    pub(crate) fn from_words(w: [u64; VARIABLE_ROW_WORDS]) -> Self {
        HeapRef {
            segment: w[0],
            offset: (w[1] >> 32) as u32,
            len: w[1] as u32,
        }
    }

    /// From the bytes of a row as `SampleBatch` gathers it (native endian).
    pub(crate) fn from_row_bytes(b: &[u8]) -> Self {
        let word = |i: usize| {
            let mut w = [0u8; 8];
            if let Some(s) = b.get(i * 8..i * 8 + 8) {
                w.copy_from_slice(s);
            }
            u64::from_ne_bytes(w)
        };
        HeapRef::from_words([word(0), word(1)])
    }
}

/// A segment's words.
enum SegmentMemory {
    /// The heap (loom builds, or where an anonymous map is refused).
    Words(Box<[AtomicU64]>),
    /// Anonymous memory: pages are touched only as values are written.
    #[cfg(not(loom))]
    Anon(memmap2::MmapMut),
    /// A file in a mapped directory's `heap/`.
    #[cfg(not(loom))]
    File(memmap2::MmapMut),
}

/// One block of the heap.
pub(crate) struct Segment {
    id: u64,
    memory: SegmentMemory,
    /// Words handed out; `SEALED` is or-ed in when a newer segment takes
    /// over. May pass the segment's length (a reservation that did not
    /// fit). AcqRel RMWs: see the module docs (the seal acquires every
    /// reservation that landed before it).
    cursor: AtomicUsize,
    /// Writers holding a region here whose rows are not written yet.
    /// Incremented (Relaxed) before the cursor's `fetch_add`, decremented
    /// (Release) when the rows are written; read (Acquire) by retirement.
    pending: AtomicUsize,
    /// `key + 1` of the newest item with values here (0: none). Relaxed
    /// `fetch_max` by writers, ordered for the retiring reader by the
    /// `pending` decrement that follows it.
    newest: AtomicU64,
    /// The segment's file, deleted when it retires (mapped heaps).
    path: Option<PathBuf>,
}

impl std::fmt::Debug for Segment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Segment")
            .field("id", &self.id)
            .field("words", &self.words().len())
            .finish()
    }
}

impl Segment {
    #[inline]
    fn words(&self) -> &[AtomicU64] {
        match &self.memory {
            SegmentMemory::Words(w) => w,
            #[cfg(not(loom))]
            SegmentMemory::Anon(map) | SegmentMemory::File(map) => {
                let ptr = map.as_ptr().cast::<AtomicU64>();
                debug_assert_eq!(ptr.align_offset(std::mem::align_of::<AtomicU64>()), 0);
                // SAFETY: a map is page aligned (so 8-byte aligned) and its
                // length is a whole number of words (`new_memory`,
                // `open_file` check it); `AtomicU64` has the size and
                // alignment of `u64`; the slice borrows `self`, which owns
                // the map; every access is atomic.
                unsafe { std::slice::from_raw_parts(ptr, map.len() / 8) }
            }
        }
    }

    fn sealed(&self) -> bool {
        self.cursor.load(Ordering::Acquire) & SEALED != 0
    }
}

/// Allocates `words` zeroed words, untouched until written.
fn new_memory(words: usize) -> Result<SegmentMemory, ReplayError> {
    #[cfg(not(loom))]
    if let Ok(map) = memmap2::MmapMut::map_anon(words * 8) {
        return Ok(SegmentMemory::Anon(map));
    }
    let mut v = Vec::new();
    v.try_reserve_exact(words).map_err(|e| {
        ReplayError::config(format!(
            "cannot allocate a heap segment of {words} words: {e}"
        ))
    })?;
    v.extend((0..words).map(|_| AtomicU64::new(0)));
    Ok(SegmentMemory::Words(v.into_boxed_slice()))
}

/// The segments that may still hold values, by id.
#[derive(Debug, Default)]
struct SegmentTable {
    /// Id of `segments[0]`.
    first: u64,
    /// Consecutive ids; `None` where a reopened directory lacked one.
    segments: Vec<Option<Arc<Segment>>>,
}

impl SegmentTable {
    fn get(&self, id: u64) -> Option<&Segment> {
        let i = usize::try_from(id.checked_sub(self.first)?).ok()?;
        self.segments.get(i)?.as_deref()
    }

    fn newest(&self) -> Option<&Arc<Segment>> {
        self.segments.last()?.as_ref()
    }

    fn next_id(&self) -> u64 {
        self.first + self.segments.len() as u64
    }
}

/// A table's variable-length values (module docs).
pub(crate) struct Heap {
    table: ArcSwap<SegmentTable>,
    /// Serializes starting segments and retiring them.
    roll: Mutex<()>,
    /// Slots of the table: a key's values may retire once key + capacity
    /// is claimed.
    capacity: u64,
    /// `<mapped dir>/heap`, or `None` in memory.
    dir: Option<PathBuf>,
    /// Words reserved so far, for sizing segments to the live data.
    reserved: AtomicU64,
}

impl std::fmt::Debug for Heap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let t = self.table.load();
        f.debug_struct("Heap")
            .field("segments", &t.segments.len())
            .field("dir", &self.dir)
            .finish()
    }
}

/// One insert's region of the heap, reserved before its keys are claimed.
/// Dropping it ends the writer's hold on the segment (`pending`); call
/// [`keys`](Self::keys) first once keys were claimed and rows will be
/// published.
pub(crate) struct Reservation {
    segment: Arc<Segment>,
    next: usize,
    end: usize,
}

impl Reservation {
    /// Records that rows up to key `last` have values here (module docs:
    /// before the rows are published and before the hold ends).
    pub(crate) fn keys(&self, last: u64) {
        // Relaxed: ordered for retirement by the Release decrement of
        // `pending` in `drop`.
        self.segment.newest.fetch_max(last + 1, Ordering::Relaxed);
    }

    /// Packs bytes `[start, start + bytes)` of `values` (`len` elements of
    /// the last dimension) into the next words of the region.
    pub(crate) fn push(
        &mut self,
        values: &Values<'_>,
        start: usize,
        bytes: usize,
        len: u32,
    ) -> HeapRef {
        let offset = self.next;
        let words = self.segment.words();
        let mut i = offset;
        if bytes > 0 {
            values.for_each_word(start, bytes, |w| {
                if i < self.end {
                    if let Some(word) = words.get(i) {
                        // Relaxed: published by the slot's Release store.
                        word.store(w, Ordering::Relaxed);
                    }
                }
                i += 1;
            });
        }
        self.next = i.min(self.end);
        self.make_ref(offset, len)
    }

    /// Stores `data` (whole words) into the next words of the region.
    pub(crate) fn push_words(&mut self, data: &[u64], len: u32) -> HeapRef {
        let offset = self.next;
        let words = self.segment.words();
        let end = (offset + data.len()).min(self.end);
        for (w, &v) in words[offset..end].iter().zip(data) {
            // Relaxed: published by the slot's Release store.
            w.store(v, Ordering::Relaxed);
        }
        self.next = end;
        self.make_ref(offset, len)
    }

    fn make_ref(&self, offset: usize, len: u32) -> HeapRef {
        HeapRef {
            segment: self.segment.id,
            // A region lies in one segment of at most `MAX_REGION_WORDS`.
            offset: offset as u32,
            len,
        }
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        // Release: the newest key and the rows written before this are
        // visible to the retirement that acquires `pending` at 0.
        self.segment.pending.fetch_sub(1, Ordering::Release);
    }
}

/// One insert's variable-length rows, packed into the heap before its keys
/// are claimed: each row's reference per variable field, for the slot
/// writes. Call [`keys`](Self::keys) once the keys are claimed.
pub(crate) struct StagedValues {
    reservation: Reservation,
    /// Per layout field, its index among the variable fields.
    variable: Vec<Option<usize>>,
    /// Variable fields per row.
    per_row: usize,
    /// `rows x per_row` references, row-major.
    refs: Vec<[u64; VARIABLE_ROW_WORDS]>,
}

impl StagedValues {
    /// Records the claimed keys' newest, `last` (see [`Reservation::keys`]).
    pub(crate) fn keys(&self, last: u64) {
        self.reservation.keys(last);
    }

    /// The heap reference of row `row`'s field `field`, if that field is
    /// variable-length.
    #[inline]
    pub(crate) fn row_ref(&self, row: usize, field: usize) -> Option<[u64; VARIABLE_ROW_WORDS]> {
        let v = (*self.variable.get(field)?)?;
        self.refs.get(row * self.per_row + v).copied()
    }
}

/// Copies a region's words into `dst` (its bytes, unpadded), as
/// `slot::copy_out` copies a row's: the heap's words are `std`'s atomics
/// also in loom builds, where a slot's are loom's.
#[inline]
pub(crate) fn copy_region(words: &[AtomicU64], dst: &mut [u8]) {
    let mut chunks = dst.chunks_exact_mut(8);
    for (c, w) in (&mut chunks).zip(words) {
        // Relaxed: the region is write-once, published before its key
        // (`Reservation`), and checked not retired by `region`.
        c.copy_from_slice(&w.load(Ordering::Relaxed).to_ne_bytes());
    }
    let rest = chunks.into_remainder();
    if let (false, Some(last)) = (rest.is_empty(), words.last()) {
        let b = last.load(Ordering::Relaxed).to_ne_bytes();
        rest.copy_from_slice(&b[..rest.len()]);
    }
}

/// A snapshot of the segment table for one call's reads (cheap to take:
/// an `arc-swap` load).
pub(crate) struct HeapReader<'h> {
    table: arc_swap::Guard<Arc<SegmentTable>>,
    _heap: std::marker::PhantomData<&'h Heap>,
}

impl HeapReader<'_> {
    /// The words of the region `r` refers to, for a row of `bytes` bytes;
    /// `None` if its segment retired (the item was overwritten) or the
    /// reference points outside it (a damaged reopened slot). A row of no
    /// elements is `Some(&[])`.
    #[inline]
    pub(crate) fn region(&self, r: HeapRef, bytes: usize) -> Option<&[AtomicU64]> {
        if r.len == 0 {
            return Some(&[]);
        }
        let seg = self.table.get(r.segment)?;
        let start = r.offset as usize;
        seg.words()
            .get(start..start.checked_add(bytes.div_ceil(8))?)
    }
}

impl Heap {
    /// An empty in-memory heap for a table of `capacity` slots.
    pub(crate) fn memory(capacity: usize) -> Self {
        Heap {
            table: ArcSwap::from_pointee(SegmentTable::default()),
            roll: Mutex::new(()),
            capacity: capacity as u64,
            dir: None,
            reserved: AtomicU64::new(0),
        }
    }

    /// A fresh heap in `dir` (created; old segment files removed).
    #[cfg(not(loom))]
    pub(crate) fn create_mapped(dir: &Path, capacity: usize) -> Result<Self, ReplayError> {
        std::fs::create_dir_all(dir).map_err(|e| ReplayError::io("create dir", dir, e))?;
        for (_, path) in segment_files(dir)? {
            std::fs::remove_file(&path).map_err(|e| ReplayError::io("remove", &path, e))?;
        }
        let mut heap = Heap::memory(capacity);
        heap.dir = Some(dir.to_owned());
        Ok(heap)
    }

    /// Reopens the segments in `dir`, every one sealed (new values go to a
    /// new segment). The caller then checks each stored slot's references
    /// ([`check_reopened`](Self::check_reopened)) and drops the segments
    /// no slot refers to ([`finish_reopen`](Self::finish_reopen)).
    #[cfg(not(loom))]
    pub(crate) fn open_mapped(dir: &Path, capacity: usize) -> Result<Self, ReplayError> {
        std::fs::create_dir_all(dir).map_err(|e| ReplayError::io("create dir", dir, e))?;
        let mut files = segment_files(dir)?;
        files.sort_unstable_by_key(|(id, _)| *id);
        let mut table = SegmentTable::default();
        if let (Some((first, _)), Some((last, _))) = (files.first(), files.last()) {
            table.first = *first;
            let span = usize::try_from(last - first + 1).map_err(|_| ReplayError::Corrupt {
                path: dir.to_owned(),
                reason: format!("segment ids {first}..={last} span too many"),
            })?;
            // Ids are consecutive but for segments a reopen deleted (no
            // item referred to them): a span far beyond the files is a
            // damaged directory, not a table to allocate for.
            if span > files.len().saturating_mul(64).max(1 << 20) {
                return Err(ReplayError::Corrupt {
                    path: dir.to_owned(),
                    reason: format!("segment ids {first}..={last} for {} files", files.len()),
                });
            }
            table.segments = vec![None; span];
        }
        for (id, path) in files {
            let seg = open_file(id, &path)?;
            table.segments[(id - table.first) as usize] = Some(Arc::new(seg));
        }
        let mut heap = Heap::memory(capacity);
        heap.dir = Some(dir.to_owned());
        heap.table = ArcSwap::from_pointee(table);
        Ok(heap)
    }

    /// Whether a reopened slot's reference `r`, for a row of `bytes` bytes,
    /// points into a segment that exists; if so, notes `key` as one of
    /// that segment's items.
    pub(crate) fn check_reopened(&self, r: HeapRef, bytes: usize, key: u64) -> bool {
        let reader = self.reader();
        if reader.region(r, bytes).is_none() {
            return false;
        }
        if r.len > 0 {
            if let Some(seg) = reader.table.get(r.segment) {
                seg.newest.fetch_max(key + 1, Ordering::Relaxed);
            }
        }
        true
    }

    /// After [`check_reopened`](Self::check_reopened) on every stored slot:
    /// deletes the segments no item refers to.
    #[cfg(not(loom))]
    pub(crate) fn finish_reopen(&self) {
        let _g = self.roll.lock().unwrap_or_else(PoisonError::into_inner);
        let old = self.table.load_full();
        let mut table = SegmentTable {
            first: old.first,
            segments: old.segments.clone(),
        };
        for s in table.segments.iter_mut() {
            if let Some(seg) = s {
                // Relaxed: nothing else runs during a reopen.
                if seg.newest.load(Ordering::Relaxed) == 0 {
                    remove_segment_file(seg);
                    *s = None;
                }
            }
        }
        trim_front(&mut table);
        self.table.store(Arc::new(table));
    }

    /// The segment table for one call's reads.
    #[inline]
    pub(crate) fn reader(&self) -> HeapReader<'_> {
        HeapReader {
            table: self.table.load(),
            _heap: std::marker::PhantomData,
        }
    }

    /// Packs rows `skip..rows` of `fields` (checked against `layout`) into
    /// one reserved region; `claimed` as for [`reserve`](Self::reserve).
    /// Rows before `skip` get no reference (a replica write that skips
    /// them).
    pub(crate) fn stage(
        &self,
        layout: &ItemLayout,
        fields: &[FieldRef<'_>],
        skip: usize,
        rows: usize,
        claimed: u64,
    ) -> Result<StagedValues, ReplayError> {
        let mut variable = Vec::with_capacity(fields.len());
        let mut count = 0;
        for spec in layout.fields() {
            variable.push(spec.is_variable().then(|| {
                count += 1;
                count - 1
            }));
        }
        let unit = |f: usize| layout.fields().get(f).map_or(0, |s| s.num_bytes());
        let mut words = 0usize;
        for (f, field) in fields.iter().enumerate() {
            if variable.get(f).copied().flatten().is_some() {
                for row in skip..rows {
                    let bytes = field.row_len(row) as usize * unit(f);
                    words = words.saturating_add(bytes.div_ceil(8));
                }
            }
        }
        let mut reservation = self.reserve(words, claimed)?;
        let mut refs = Vec::with_capacity(rows.saturating_sub(skip) * count);
        refs.resize(skip * count, [0; VARIABLE_ROW_WORDS]);
        for row in skip..rows {
            for (f, field) in fields.iter().enumerate() {
                if variable.get(f).copied().flatten().is_none() {
                    continue;
                }
                let len = field.row_len(row);
                let start = field.row_start(row) as usize * unit(f);
                // `check_fields` bounded `len` by `MAX_VARIABLE_LEN`.
                let r = reservation.push(&field.values, start, len as usize * unit(f), len as u32);
                refs.push(r.to_words());
            }
        }
        Ok(StagedValues {
            reservation,
            variable,
            per_row: count,
            refs,
        })
    }

    /// Reserves `words` words for one insert's values. `claimed` is the
    /// table's key counter as the writer last saw it (for retirement).
    /// Errors: a region over `u32::MAX` words, or a segment that cannot be
    /// allocated or created (nothing was claimed then).
    pub(crate) fn reserve(&self, words: usize, claimed: u64) -> Result<Reservation, ReplayError> {
        if words > MAX_REGION_WORDS {
            return Err(ReplayError::config(format!(
                "one insert's variable-length values take {words} words, at most \
                 {MAX_REGION_WORDS} fit in one heap region (insert fewer rows at a time)"
            )));
        }
        loop {
            let table = self.table.load();
            if let Some(seg) = table.newest() {
                // Relaxed: this increment is sequenced before the AcqRel
                // `fetch_add` below, which a seal acquires (module docs).
                seg.pending.fetch_add(1, Ordering::Relaxed);
                // AcqRel: a seal that comes after this in the cursor's order
                // acquires it, and with it the `pending` increment.
                let at = seg.cursor.fetch_add(words, Ordering::AcqRel);
                if at & SEALED == 0 && at + words <= seg.words().len() {
                    self.reserved.fetch_add(words as u64, Ordering::Relaxed);
                    return Ok(Reservation {
                        segment: Arc::clone(seg),
                        next: at,
                        end: at + words,
                    });
                }
                // Release: pairs with retirement's Acquire of `pending`.
                seg.pending.fetch_sub(1, Ordering::Release);
            }
            self.roll(table.newest().map(|s| s.id), words, claimed)?;
        }
    }

    /// Starts a new segment of at least `words` words, unless one newer
    /// than `full` was started meanwhile, sealing the one before it; then
    /// retires what it can (module docs).
    fn roll(&self, full: Option<u64>, words: usize, claimed: u64) -> Result<(), ReplayError> {
        let _g = self.roll.lock().unwrap_or_else(PoisonError::into_inner);
        let old = self.table.load_full();
        if old.newest().map(|s| s.id) != full {
            return Ok(());
        }
        if let Some(seg) = old.newest() {
            // AcqRel: acquires every reservation that landed before it
            // (module docs).
            seg.cursor.fetch_or(SEALED, Ordering::AcqRel);
        }
        let id = old.next_id();
        let size = words.max(self.segment_words(claimed));
        let segment = match &self.dir {
            None => Segment {
                id,
                memory: new_memory(size)?,
                cursor: AtomicUsize::new(0),
                pending: AtomicUsize::new(0),
                newest: AtomicU64::new(0),
                path: None,
            },
            #[cfg(not(loom))]
            Some(dir) => create_file(id, dir, size)?,
            #[cfg(loom)]
            Some(_) => return Err(ReplayError::config("mapped heaps are not built under loom")),
        };
        let mut table = SegmentTable {
            first: old.first,
            segments: old.segments.clone(),
        };
        if table.segments.is_empty() {
            table.first = id;
        }
        table.segments.push(Some(Arc::new(segment)));
        self.retire(&mut table, claimed);
        self.table.store(Arc::new(table));
        Ok(())
    }

    /// Drops, oldest first, sealed segments whose every item's slot was
    /// claimed again and that no writer still holds. Under `roll`.
    fn retire(&self, table: &mut SegmentTable, claimed: u64) {
        let newest = table.segments.len().saturating_sub(1);
        let mut n = 0;
        for s in &table.segments[..newest] {
            match s {
                None => n += 1,
                Some(seg) => {
                    // Acquire: pairs with the Release decrements, so a 0
                    // here sees every finished writer's `newest`.
                    let idle = seg.pending.load(Ordering::Acquire) == 0;
                    let newest_key = seg.newest.load(Ordering::Relaxed);
                    // Key `newest_key - 1`'s slot was claimed again by
                    // `newest_key - 1 + capacity` iff that is below `claimed`.
                    let lapped =
                        newest_key == 0 || newest_key.saturating_add(self.capacity) <= claimed;
                    if !(seg.sealed() && idle && lapped) {
                        break;
                    }
                    remove_segment_file(seg);
                    n += 1;
                }
            }
        }
        table.segments.drain(..n);
        table.first += n as u64;
        trim_front(table);
    }

    /// Words for a new segment: a quarter of the values the last
    /// `capacity` keys hold at the average so far, within bounds.
    fn segment_words(&self, claimed: u64) -> usize {
        let reserved = self.reserved.load(Ordering::Relaxed);
        let per_key = reserved as f64 / claimed.max(1) as f64;
        let live = per_key * self.capacity as f64;
        ((live / 4.0) as usize).clamp(MIN_SEGMENT_WORDS, MAX_SEGMENT_WORDS)
    }

    /// Flushes a mapped heap's segments to their files.
    #[cfg(not(loom))]
    pub(crate) fn flush(&self) -> Result<(), ReplayError> {
        let t = self.table.load();
        for seg in t.segments.iter().flatten() {
            if let (SegmentMemory::File(map), Some(path)) = (&seg.memory, &seg.path) {
                map.flush().map_err(|e| ReplayError::io("flush", path, e))?;
            }
        }
        Ok(())
    }

    /// Segments held and their words (tests, stats).
    pub(crate) fn segments(&self) -> (usize, usize) {
        let t = self.table.load();
        let segs = t.segments.iter().flatten();
        segs.fold((0, 0), |(n, w), s| (n + 1, w + s.words().len()))
    }
}

/// Drops empty entries at the front of the table.
fn trim_front(table: &mut SegmentTable) {
    let n = table.segments.iter().take_while(|s| s.is_none()).count();
    // Keep the newest entry's position even if empty: ids continue from it.
    let n = n.min(table.segments.len().saturating_sub(1));
    table.segments.drain(..n);
    table.first += n as u64;
}

fn remove_segment_file(seg: &Segment) {
    if let Some(path) = &seg.path {
        if let Err(e) = std::fs::remove_file(path) {
            tracing::warn!(path = %path.display(), error = %e, "replay: could not delete a retired heap segment");
        }
    }
}

/// `(id, path)` of every segment file in `dir`.
#[cfg(not(loom))]
fn segment_files(dir: &Path) -> Result<Vec<(u64, PathBuf)>, ReplayError> {
    let mut out = Vec::new();
    let entries = std::fs::read_dir(dir).map_err(|e| ReplayError::io("list", dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| ReplayError::io("list", dir, e))?;
        let path = entry.path();
        let id = path
            .extension()
            .filter(|e| *e == SEGMENT_EXT)
            .and_then(|_| path.file_stem()?.to_str())
            .and_then(|s| u64::from_str_radix(s, 16).ok());
        match id {
            Some(id) => out.push((id, path)),
            None => {
                tracing::warn!(path = %path.display(), "replay: not a heap segment, left alone")
            }
        }
    }
    Ok(out)
}

#[cfg(not(loom))]
fn segment_path(dir: &Path, id: u64) -> PathBuf {
    dir.join(format!("{id:016x}.{SEGMENT_EXT}"))
}

#[cfg(not(loom))]
fn create_file(id: u64, dir: &Path, words: usize) -> Result<Segment, ReplayError> {
    let path = segment_path(dir, id);
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .map_err(|e| ReplayError::io("create", &path, e))?;
    file.set_len(words as u64 * 8)
        .map_err(|e| ReplayError::io("resize", &path, e))?;
    let segment = map_file(id, &file, path)?;
    // A new segment's room is all free (`map_file` seals reopened ones).
    segment.cursor.store(0, Ordering::Relaxed);
    Ok(segment)
}

#[cfg(not(loom))]
fn open_file(id: u64, path: &Path) -> Result<Segment, ReplayError> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(|e| ReplayError::io("open", path, e))?;
    map_file(id, &file, path.to_owned())
}

#[cfg(not(loom))]
fn map_file(id: u64, file: &std::fs::File, path: PathBuf) -> Result<Segment, ReplayError> {
    let len = file
        .metadata()
        .map_err(|e| ReplayError::io("stat", &path, e))?
        .len();
    if !len.is_multiple_of(8) || len == 0 || len / 8 > MAX_REGION_WORDS as u64 {
        return Err(ReplayError::Corrupt {
            path,
            reason: format!("{len} bytes is not a heap segment's size"),
        });
    }
    // SAFETY: the file is ours for the map's lifetime (one process maps a
    // directory at a time, as for `storage.bin`); access is atomic.
    let map = unsafe { memmap2::MmapMut::map_mut(file) }
        .map_err(|e| ReplayError::io("mmap", &path, e))?;
    Ok(Segment {
        id,
        memory: SegmentMemory::File(map),
        // Reopened segments are sealed: their free room is not known.
        cursor: AtomicUsize::new(SEALED),
        pending: AtomicUsize::new(0),
        newest: AtomicU64::new(0),
        path: Some(path),
    })
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn put(heap: &Heap, vals: &[u64], key: u64, claimed: u64) -> HeapRef {
        let mut r = heap.reserve(vals.len(), claimed).expect("reserve");
        r.keys(key);
        r.push_words(vals, vals.len() as u32)
    }

    fn get(heap: &Heap, r: HeapRef) -> Option<Vec<u64>> {
        let reader = heap.reader();
        let words = reader.region(r, r.len as usize * 8)?;
        Some(words.iter().map(|w| w.load(Ordering::Relaxed)).collect())
    }

    #[test]
    fn references_round_trip_through_two_words() {
        let r = HeapRef {
            segment: 7 << 40,
            offset: u32::MAX - 3,
            len: 12345,
        };
        assert_eq!(HeapRef::from_words(r.to_words()), r);
        let bytes: Vec<u8> = r.to_words().iter().flat_map(|w| w.to_ne_bytes()).collect();
        assert_eq!(HeapRef::from_row_bytes(&bytes), r);
    }

    /// Values come back as stored; a region bigger than a segment gets one
    /// of its own; segments whose keys were all claimed again retire, and
    /// their references then read nothing.
    #[test]
    fn regions_read_back_and_lapped_segments_retire() {
        let capacity = 4;
        let heap = Heap::memory(capacity);
        let small = put(&heap, &[1, 2, 3], 0, 0);
        assert_eq!(get(&heap, small), Some(vec![1, 2, 3]));
        let big: Vec<u64> = (0..MIN_SEGMENT_WORDS as u64 + 5).collect();
        let big_ref = put(&heap, &big, 1, 1);
        assert_ne!(big_ref.segment, small.segment);
        assert_eq!(get(&heap, big_ref).as_deref(), Some(&big[..]));
        // Key 1 is the newest in the big segment; once keys up to 1 + 4
        // are claimed and another segment is started, both older ones go.
        let huge: Vec<u64> = vec![9; MIN_SEGMENT_WORDS * 2];
        let last = put(&heap, &huge, 5, 6);
        assert_eq!(get(&heap, small), None, "lapped values retire");
        assert_eq!(get(&heap, big_ref), None);
        assert_eq!(get(&heap, last).map(|v| v.len()), Some(huge.len()));
        assert_eq!(heap.segments().0, 1);
    }

    /// A writer that holds a region (keys not claimed yet) keeps its
    /// segment from retiring, however far the keys have moved.
    #[test]
    fn a_pending_writer_keeps_its_segment() {
        let heap = Heap::memory(2);
        let mut held = heap.reserve(4, 0).expect("reserve");
        let big = vec![0u64; MIN_SEGMENT_WORDS * 2];
        put(&heap, &big, 100, 100);
        put(&heap, &big, 200, 200);
        held.keys(300);
        let r = held.push_words(&[5, 6, 7, 8], 4);
        drop(held);
        assert_eq!(get(&heap, r), Some(vec![5, 6, 7, 8]));
    }

    #[test]
    fn empty_rows_read_as_empty_without_a_segment() {
        let heap = Heap::memory(2);
        let r = HeapRef {
            segment: 99,
            offset: 0,
            len: 0,
        };
        assert_eq!(get(&heap, r), Some(vec![]));
    }

    /// A mapped heap reopens with its values; segments no slot refers to
    /// are deleted; new values go to a new segment.
    #[test]
    fn a_mapped_heap_reopens_and_drops_what_nothing_refers_to() {
        let dir = tempfile::tempdir().expect("tempdir");
        let heap_dir = dir.path().join("heap");
        let (kept, dropped) = {
            let heap = Heap::create_mapped(&heap_dir, 8).expect("create");
            let kept = put(&heap, &[10, 11], 0, 0);
            let dropped = put(&heap, &vec![1; MIN_SEGMENT_WORDS + 1], 1, 1);
            heap.flush().expect("flush");
            (kept, dropped)
        };
        assert_eq!(segment_files(&heap_dir).expect("list").len(), 2);
        let heap = Heap::open_mapped(&heap_dir, 8).expect("open");
        assert!(heap.check_reopened(kept, 16, 0));
        heap.finish_reopen();
        assert_eq!(get(&heap, kept), Some(vec![10, 11]));
        assert_eq!(get(&heap, dropped), None);
        assert_eq!(segment_files(&heap_dir).expect("list").len(), 1);
        let fresh = put(&heap, &[3], 2, 2);
        assert!(fresh.segment > kept.segment && fresh.segment > dropped.segment);
        // A reference past a segment's end is refused on reopen.
        let bad = HeapRef {
            segment: kept.segment,
            offset: (MIN_SEGMENT_WORDS * 4) as u32,
            len: 1,
        };
        assert!(!heap.check_reopened(bad, 8, 0));
    }
}
