//! [`GroupJournal`]: a grouped table on disk (`storage_dir`), as an
//! append-only log of every call that changed it, replayed at start-up.
//!
//! Why a journal and not the ring tables' memory-mapped slots: a grouped
//! table's state is trajectories of any length appended a few steps at a
//! time and groups leaving in completion order, held in growable arrays
//! and maps; laying that out in a mapped file would mean an allocator on
//! disk. The calls that make the state are few and deterministic, so the
//! log of them *is* the state: [`Record::Submit`] (the staged steps,
//! values without padding), [`Record::Complete`], [`Record::Fetch`] (the
//! oldest ready group left), [`Record::Version`] and, at the head of a
//! compacted journal, [`Record::Counters`]. Replaying them through the
//! table's own code rebuilds exactly the groups and trajectories it held,
//! so a writer whose trajectory was half-written goes on where it was.
//!
//! # What is kept
//! A call is appended (one `pwrite`, under the table's lock, so the log's
//! order is the table's) *before* it changes the table and before its
//! reply goes out: whatever a client saw acknowledged is in the file, in
//! the kernel's page cache, and survives the server's SIGKILL. There is no
//! `fsync` per call: a machine crash or power loss may lose the tail that
//! was not yet written back. A record torn by a kill mid-write (its length
//! passes the file's end, or its CRC-32C is wrong) is the end of the log:
//! it was never acknowledged, and reopening cuts it off. A call whose
//! record cannot be written (disk full) is refused and changes nothing.
//! A fetched group is gone from the journal once its `Fetch` is written:
//! delivery is at most once, like the table in memory.
//!
//! # Compaction
//! Consumed steps stay in the log until it is rewritten: when it has grown
//! to twice its size after the last rewrite (and past
//! [`COMPACT_MIN_BYTES`]), the table writes a snapshot (its counters, its
//! version, each ready group in order, each open group, every trajectory as
//! one segment) to `journal.tmp` and renames it over `journal`. So the file
//! stays under twice what the table held at its last rewrite (or the
//! minimum), and each byte written is rewritten a bounded number of times
//! on average.
//! The rewrite runs under the table's lock: it stalls the table for as
//! long as writing what it holds takes (about 1 s per GB into the page
//! cache).
//!
//! # Format
//! `journal`: an 8-byte magic, a `u32` length and the table's fingerprint
//! (field names, dtypes, shapes, `max_len`, id kind, group size; a
//! journal of another layout is refused at start-up, naming both), then
//! records: `u64` length, `u32` CRC-32C, the payload (a kind byte and its
//! body). Little-endian throughout.
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::server::pool_id::PoolId;
use crate::server::step_request::{Segment, StagedSteps};

/// A journal shorter than this is never rewritten.
pub const COMPACT_MIN_BYTES: u64 = 64 << 20;

const MAGIC: &[u8; 8] = b"SEEDGJ01";
const FRAME_BYTES: u64 = 12;
const FILE_NAME: &str = "journal";
const TMP_NAME: &str = "journal.tmp";

const KIND_SUBMIT: u8 = 1;
const KIND_COMPLETE: u8 = 2;
const KIND_FETCH: u8 = 3;
const KIND_VERSION: u8 = 4;
const KIND_COUNTERS: u8 = 5;

/// Counters a compacted journal carries, in `GroupedStats`' order.
pub(crate) const COUNTERS: usize = 7;

/// One logged call.
#[derive(Debug)]
pub(crate) enum Record {
    Submit(StagedSteps),
    Complete(PoolId),
    Fetch,
    Version(u64),
    Counters([u64; COUNTERS]),
}

/// One trajectory's steps, borrowed, as a submit record holds them.
pub(crate) struct SegmentRef<'a> {
    pub(crate) trajectory: &'a PoolId,
    pub(crate) group: &'a PoolId,
    pub(crate) last: bool,
    pub(crate) data: &'a [Vec<u8>],
    pub(crate) lens: &'a [Vec<u64>],
    pub(crate) versions: &'a [u64],
    pub(crate) metadata: &'a [u8],
    pub(crate) metadata_lens: &'a [u32],
}

impl<'a> SegmentRef<'a> {
    pub(crate) fn of(seg: &'a Segment) -> Self {
        SegmentRef {
            trajectory: &seg.trajectory,
            group: &seg.group,
            last: seg.last,
            data: &seg.data,
            lens: &seg.lens,
            versions: &seg.versions,
            metadata: &seg.metadata,
            metadata_lens: &seg.metadata_lens,
        }
    }
}

/// Why a journal could not be opened or replayed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum JournalError {
    #[error("{op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{path} is not a grouped table's journal (its first bytes are not {magic:?})")]
    NotAJournal { path: PathBuf, magic: &'static str },
    #[error(
        "{path} was written for another layout: it has `{found}`, the table is `{expected}` \
         (move the directory away to start empty, or serve the table as it was)"
    )]
    Layout {
        path: PathBuf,
        found: String,
        expected: String,
    },
    #[error("{path}, record at byte {offset}: {reason}")]
    Record {
        path: PathBuf,
        offset: u64,
        reason: String,
    },
}

/// The open journal of one grouped table.
#[derive(Debug)]
pub(crate) struct GroupJournal {
    dir: PathBuf,
    file: File,
    /// Bytes written and acknowledged; the next record goes here.
    len: u64,
    fingerprint: String,
    /// Rewrite once `len` reaches this.
    compact_at: u64,
    compact_min: u64,
    /// The payload being encoded (kept to reuse its allocation).
    buf: Vec<u8>,
}

impl GroupJournal {
    /// Opens (or creates) the journal in `dir`, hands every record in it to
    /// `apply` in order and cuts off a torn tail. `apply`'s error stops the
    /// replay, naming the record's offset.
    pub(crate) fn open(
        dir: &Path,
        fingerprint: String,
        compact_min: u64,
        mut apply: impl FnMut(Record) -> Result<(), String>,
    ) -> Result<(GroupJournal, ReplaySummary), JournalError> {
        let io_err = |op: &'static str, path: &Path| {
            let path = path.to_path_buf();
            move |source| JournalError::Io { op, path, source }
        };
        fs::create_dir_all(dir).map_err(io_err("create", dir))?;
        let tmp = dir.join(TMP_NAME);
        // A rewrite the server did not finish: the journal it was to
        // replace is whole.
        match fs::remove_file(&tmp) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => {
                return Err(io_err("remove", &tmp)(e));
            }
            _ => {}
        }
        let path = dir.join(FILE_NAME);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io_err("open", &path))?;
        let file_len = file.metadata().map_err(io_err("stat", &path))?.len();
        let mut summary = ReplaySummary::default();
        let len = if file_len == 0 {
            let header = header(&fingerprint);
            file.write_all_at(&header, 0)
                .map_err(io_err("write", &path))?;
            header.len() as u64
        } else {
            let mut r = BufReader::with_capacity(1 << 20, &file);
            let mut at = read_header(&mut r, &path, &fingerprint, file_len)?;
            let mut payload = Vec::new();
            while let Some(next) =
                read_frame(&mut r, at, file_len, &mut payload).map_err(io_err("read", &path))?
            {
                let record = decode(&payload).map_err(|reason| JournalError::Record {
                    path: path.clone(),
                    offset: at,
                    reason,
                })?;
                apply(record).map_err(|reason| JournalError::Record {
                    path: path.clone(),
                    offset: at,
                    reason,
                })?;
                summary.records += 1;
                at = next;
            }
            if at < file_len {
                summary.torn_bytes = file_len - at;
                file.set_len(at).map_err(io_err("truncate", &path))?;
            }
            at
        };
        summary.bytes = len;
        let journal = GroupJournal {
            dir: dir.to_path_buf(),
            file,
            len,
            fingerprint,
            compact_at: compact_min.max(len.saturating_mul(2)),
            compact_min,
            buf: Vec::new(),
        };
        Ok((journal, summary))
    }

    pub(crate) fn path(&self) -> PathBuf {
        self.dir.join(FILE_NAME)
    }

    pub(crate) fn submit(&mut self, staged: &StagedSteps) -> io::Result<()> {
        self.buf.clear();
        self.buf.push(KIND_SUBMIT);
        put_submit(&mut self.buf, staged.segments.iter().map(SegmentRef::of));
        self.append()
    }

    pub(crate) fn complete(&mut self, trajectory: &PoolId) -> io::Result<()> {
        self.buf.clear();
        self.buf.push(KIND_COMPLETE);
        put_id(&mut self.buf, trajectory);
        self.append()
    }

    pub(crate) fn fetch(&mut self) -> io::Result<()> {
        self.buf.clear();
        self.buf.push(KIND_FETCH);
        self.append()
    }

    pub(crate) fn version(&mut self, version: u64) -> io::Result<()> {
        self.buf.clear();
        self.buf.push(KIND_VERSION);
        put_u64(&mut self.buf, version);
        self.append()
    }

    /// Appends the payload in `buf` as one record; on failure the file is
    /// cut back to what it held, so the record is not half there.
    fn append(&mut self) -> io::Result<()> {
        let frame = frame(&self.buf);
        let written = self
            .file
            .write_all_at(&frame, self.len)
            .and_then(|()| self.file.write_all_at(&self.buf, self.len + FRAME_BYTES));
        if let Err(e) = written {
            // If this fails too the torn bytes stay, past `len`: the next
            // record overwrites them, and a reopen cuts them off.
            let _ = self.file.set_len(self.len);
            return Err(e);
        }
        self.len += FRAME_BYTES + self.buf.len() as u64;
        Ok(())
    }

    /// Whether the log has grown enough since its last rewrite to be
    /// rewritten now.
    pub(crate) fn wants_compaction(&self) -> bool {
        self.len >= self.compact_at
    }

    /// Rewrites the journal as `snapshot` writes it (to `journal.tmp`,
    /// renamed over `journal`). On failure the old journal stays and the
    /// next rewrite is tried after as much growth again.
    pub(crate) fn compact(
        &mut self,
        snapshot: impl FnOnce(&mut Snapshot) -> io::Result<()>,
    ) -> io::Result<()> {
        let tmp = self.dir.join(TMP_NAME);
        let result = (|| {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(&tmp)?;
            let header = header(&self.fingerprint);
            file.write_all_at(&header, 0)?;
            let mut s = Snapshot {
                file,
                len: header.len() as u64,
                buf: std::mem::take(&mut self.buf),
            };
            let written = snapshot(&mut s);
            self.buf = std::mem::take(&mut s.buf);
            written?;
            fs::rename(&tmp, self.dir.join(FILE_NAME))?;
            // The rename is what makes the new log the journal; make it
            // last past a machine crash as well as a kill.
            if let Ok(d) = File::open(&self.dir) {
                let _ = d.sync_all();
            }
            Ok::<_, io::Error>((s.file, s.len))
        })();
        match result {
            Ok((file, len)) => {
                self.file = file;
                self.len = len;
                self.compact_at = self.compact_min.max(len.saturating_mul(2));
                Ok(())
            }
            Err(e) => {
                let _ = fs::remove_file(&tmp);
                self.compact_at = self.compact_min.max(self.len.saturating_mul(2));
                Err(e)
            }
        }
    }
}

/// What a start-up replay found.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct ReplaySummary {
    pub(crate) records: u64,
    pub(crate) bytes: u64,
    /// Bytes of a record torn by a kill mid-write, cut off.
    pub(crate) torn_bytes: u64,
}

/// A journal being rewritten: the records that rebuild the table.
pub(crate) struct Snapshot {
    file: File,
    len: u64,
    buf: Vec<u8>,
}

impl Snapshot {
    /// One submit of whole trajectories (a group's, in order).
    pub(crate) fn submit<'a>(
        &mut self,
        segments: impl Iterator<Item = SegmentRef<'a>>,
    ) -> io::Result<()> {
        self.buf.clear();
        self.buf.push(KIND_SUBMIT);
        put_submit(&mut self.buf, segments);
        self.write()
    }

    pub(crate) fn version(&mut self, version: u64) -> io::Result<()> {
        self.buf.clear();
        self.buf.push(KIND_VERSION);
        put_u64(&mut self.buf, version);
        self.write()
    }

    pub(crate) fn counters(&mut self, counters: [u64; COUNTERS]) -> io::Result<()> {
        self.buf.clear();
        self.buf.push(KIND_COUNTERS);
        for c in counters {
            put_u64(&mut self.buf, c);
        }
        self.write()
    }

    fn write(&mut self) -> io::Result<()> {
        self.file.write_all_at(&frame(&self.buf), self.len)?;
        self.file.write_all_at(&self.buf, self.len + FRAME_BYTES)?;
        self.len += FRAME_BYTES + self.buf.len() as u64;
        Ok(())
    }
}

fn header(fingerprint: &str) -> Vec<u8> {
    let mut h = Vec::with_capacity(12 + fingerprint.len());
    h.extend_from_slice(MAGIC);
    h.extend_from_slice(&(fingerprint.len() as u32).to_le_bytes());
    h.extend_from_slice(fingerprint.as_bytes());
    h
}

/// Checks the header; returns where the first record starts.
fn read_header(
    r: &mut impl Read,
    path: &Path,
    fingerprint: &str,
    file_len: u64,
) -> Result<u64, JournalError> {
    let not_a_journal = || JournalError::NotAJournal {
        path: path.to_path_buf(),
        magic: "SEEDGJ01",
    };
    let mut head = [0u8; 12];
    r.read_exact(&mut head).map_err(|_| not_a_journal())?;
    if &head[..8] != MAGIC {
        return Err(not_a_journal());
    }
    let n = u32::from_le_bytes([head[8], head[9], head[10], head[11]]) as u64;
    if 12 + n > file_len {
        return Err(not_a_journal());
    }
    let mut found = vec![0u8; n as usize];
    r.read_exact(&mut found).map_err(|_| not_a_journal())?;
    let found = String::from_utf8_lossy(&found);
    if found != fingerprint {
        return Err(JournalError::Layout {
            path: path.to_path_buf(),
            found: found.into_owned(),
            expected: fingerprint.to_string(),
        });
    }
    Ok(12 + n)
}

fn frame(payload: &[u8]) -> [u8; FRAME_BYTES as usize] {
    let mut f = [0u8; FRAME_BYTES as usize];
    f[..8].copy_from_slice(&(payload.len() as u64).to_le_bytes());
    f[8..].copy_from_slice(&crc32c::crc32c(payload).to_le_bytes());
    f
}

/// Reads the record at `at` into `payload`; `None` at the end of the log
/// (the file's end, or a torn or corrupt record). Returns where the next
/// record starts.
fn read_frame(
    r: &mut impl Read,
    at: u64,
    file_len: u64,
    payload: &mut Vec<u8>,
) -> io::Result<Option<u64>> {
    if at + FRAME_BYTES > file_len {
        return Ok(None);
    }
    let mut f = [0u8; FRAME_BYTES as usize];
    r.read_exact(&mut f)?;
    let mut len8 = [0u8; 8];
    len8.copy_from_slice(&f[..8]);
    let len = u64::from_le_bytes(len8);
    let crc = u32::from_le_bytes([f[8], f[9], f[10], f[11]]);
    let Some(end) = (at + FRAME_BYTES).checked_add(len) else {
        return Ok(None);
    };
    if end > file_len || len == 0 {
        return Ok(None);
    }
    payload.clear();
    payload.resize(len as usize, 0);
    r.read_exact(payload)?;
    if crc32c::crc32c(payload) != crc {
        return Ok(None);
    }
    Ok(Some(end))
}

fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_id(out: &mut Vec<u8>, id: &PoolId) {
    match id {
        PoolId::Num(n) => {
            out.push(0);
            put_u64(out, *n);
        }
        PoolId::Uid(s) => {
            out.push(1);
            put_u64(out, s.len() as u64);
            out.extend_from_slice(s.as_bytes());
        }
    }
}

fn put_submit<'a>(out: &mut Vec<u8>, segments: impl Iterator<Item = SegmentRef<'a>>) {
    let count_at = out.len();
    put_u64(out, 0);
    let mut count = 0u64;
    for s in segments {
        count += 1;
        put_id(out, s.trajectory);
        put_id(out, s.group);
        out.push(u8::from(s.last));
        put_u64(out, s.versions.len() as u64);
        put_u64(out, s.data.len() as u64);
        for (data, lens) in s.data.iter().zip(s.lens) {
            put_u64(out, data.len() as u64);
            out.extend_from_slice(data);
            put_u64(out, lens.len() as u64);
            for &l in lens {
                put_u64(out, l);
            }
        }
        for &v in s.versions {
            put_u64(out, v);
        }
        put_u64(out, s.metadata.len() as u64);
        out.extend_from_slice(s.metadata);
        put_u64(out, s.metadata_lens.len() as u64);
        for &l in s.metadata_lens {
            put_u32(out, l);
        }
    }
    out[count_at..count_at + 8].copy_from_slice(&count.to_le_bytes());
}

/// A payload being decoded; every read checks what is left.
struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], String> {
        if n > self.0.len() {
            return Err(format!("ends inside {what}"));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn u8(&mut self, what: &str) -> Result<u8, String> {
        Ok(self.take(1, what)?[0])
    }

    fn u64(&mut self, what: &str) -> Result<u64, String> {
        let b = self.take(8, what)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    fn u32(&mut self, what: &str) -> Result<u32, String> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A count of items of `unit` bytes each, checked against what is left.
    fn count(&mut self, unit: usize, what: &str) -> Result<usize, String> {
        let n = self.u64(what)?;
        match usize::try_from(n) {
            Ok(n) if n.saturating_mul(unit.max(1)) <= self.0.len() => Ok(n),
            _ => Err(format!("{what}: {n} is more than the record holds")),
        }
    }

    fn id(&mut self, what: &str) -> Result<PoolId, String> {
        match self.u8(what)? {
            0 => Ok(PoolId::Num(self.u64(what)?)),
            1 => {
                let n = self.count(1, what)?;
                let s = std::str::from_utf8(self.take(n, what)?)
                    .map_err(|_| format!("{what} is not UTF-8"))?;
                Ok(PoolId::Uid(Arc::from(s)))
            }
            t => Err(format!("{what}: unknown id kind {t}")),
        }
    }
}

fn decode(payload: &[u8]) -> Result<Record, String> {
    let mut c = Cursor(payload);
    let record = match c.u8("the record's kind")? {
        KIND_SUBMIT => {
            let segments = c.count(1, "the segment count")?;
            let mut staged = StagedSteps {
                rows: 0,
                segments: Vec::with_capacity(segments),
            };
            for _ in 0..segments {
                let trajectory = c.id("a trajectory id")?;
                let group = c.id("a group id")?;
                let last = c.u8("is_last")? != 0;
                let steps = c.count(8, "the step count")?;
                let fields = c.count(16, "the field count")?;
                let mut data = Vec::with_capacity(fields);
                let mut lens = Vec::with_capacity(fields);
                for _ in 0..fields {
                    let n = c.count(1, "a field's bytes")?;
                    data.push(c.take(n, "a field's bytes")?.to_vec());
                    let n = c.count(8, "a field's lengths")?;
                    let mut l = Vec::with_capacity(n);
                    for _ in 0..n {
                        l.push(c.u64("a field's lengths")?);
                    }
                    lens.push(l);
                }
                let mut versions = Vec::with_capacity(steps);
                for _ in 0..steps {
                    versions.push(c.u64("the policy versions")?);
                }
                let n = c.count(1, "the metadata")?;
                let metadata = c.take(n, "the metadata")?.to_vec();
                let n = c.count(4, "the metadata lengths")?;
                let mut metadata_lens = Vec::with_capacity(n);
                for _ in 0..n {
                    metadata_lens.push(c.u32("the metadata lengths")?);
                }
                staged.segments.push(Segment {
                    trajectory,
                    group,
                    first_row: staged.rows,
                    data,
                    lens,
                    versions,
                    metadata,
                    metadata_lens,
                    last,
                });
                staged.rows += steps;
            }
            Record::Submit(staged)
        }
        KIND_COMPLETE => Record::Complete(c.id("the trajectory id")?),
        KIND_FETCH => Record::Fetch,
        KIND_VERSION => Record::Version(c.u64("the version")?),
        KIND_COUNTERS => {
            let mut counters = [0u64; COUNTERS];
            for v in &mut counters {
                *v = c.u64("the counters")?;
            }
            Record::Counters(counters)
        }
        k => return Err(format!("unknown record kind {k}")),
    };
    if !c.0.is_empty() {
        return Err(format!("{} bytes past the record's end", c.0.len()));
    }
    Ok(record)
}

#[cfg(test)]
mod tests;
