//! [`EventFile`]: one `events.out.tfevents.*` file, the records TensorBoard
//! reads: each an encoded [`Event`] in TFRecord framing (length, masked
//! CRC-32C of the length, the bytes, masked CRC-32C of the bytes).
//!
//! Every writer (a run, or the same run resumed) starts a file of its own
//! in the directory; TensorBoard reads a directory's files in name order,
//! and the name starts with the creation time, so a resumed run's file
//! follows the one before. Cost: one small `write` per record into a
//! buffer, one `flush` per batch of points.
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use prost::Message;

use super::event::{Event, What};

/// What TensorBoard expects as a file's first record.
const FILE_VERSION: &str = "brain.Event:2";

/// Files created by this process (the last part of their names).
static FILES: AtomicU64 = AtomicU64::new(0);

/// The CRC TFRecord stores: CRC-32C, rotated and offset so that a CRC of
/// bytes that themselves hold CRCs does not come out trivially.
pub fn masked_crc(bytes: &[u8]) -> u32 {
    let crc = crc32c::crc32c(bytes);
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}

/// Seconds since the Unix epoch, as events carry them.
pub fn wall_time_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// An open event file.
pub struct EventFile {
    path: PathBuf,
    out: BufWriter<File>,
    /// Records written, bytes written.
    pub events: u64,
    pub bytes: u64,
}

impl EventFile {
    /// Creates `dir` if needed and a new event file in it, named as
    /// TensorBoard's own writers name theirs, with its version record.
    pub fn create(dir: &Path) -> std::io::Result<EventFile> {
        std::fs::create_dir_all(dir)?;
        let now = wall_time_now();
        // Relaxed: only makes names unique within the process.
        let n = FILES.fetch_add(1, Ordering::Relaxed);
        // TensorBoard reads a directory's files in name order: the time to
        // the microsecond first keeps a resumed run's file after the
        // earlier one's even within one second.
        let micros = (now * 1e6) as u64;
        let name = format!(
            "events.out.tfevents.{:010}.{:06}.{}.{}.{n}",
            micros / 1_000_000,
            micros % 1_000_000,
            host_name(),
            std::process::id()
        );
        let path = dir.join(name);
        let file = std::fs::OpenOptions::new()
            .create_new(true)
            .write(true)
            .open(&path)?;
        let mut f = EventFile {
            path,
            out: BufWriter::new(file),
            events: 0,
            bytes: 0,
        };
        f.write(&Event {
            wall_time: now,
            step: 0,
            what: Some(What::FileVersion(FILE_VERSION.into())),
        })?;
        f.flush()?;
        Ok(f)
    }

    /// An event file writing into `path` as it is (tests: `/dev/full`).
    #[cfg(test)]
    pub fn open_existing(path: &Path) -> std::io::Result<EventFile> {
        let file = std::fs::OpenOptions::new().write(true).open(path)?;
        Ok(EventFile {
            path: path.to_owned(),
            out: BufWriter::new(file),
            events: 0,
            bytes: 0,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one record (buffered).
    pub fn write(&mut self, event: &Event) -> std::io::Result<()> {
        let data = event.encode_to_vec();
        let len = (data.len() as u64).to_le_bytes();
        self.out.write_all(&len)?;
        self.out.write_all(&masked_crc(&len).to_le_bytes())?;
        self.out.write_all(&data)?;
        self.out.write_all(&masked_crc(&data).to_le_bytes())?;
        self.events += 1;
        self.bytes += data.len() as u64 + 16;
        Ok(())
    }

    /// Hands the buffered records to the file.
    pub fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// This machine's name for the file name (`localhost` if unknown).
fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: `buf` is valid for `buf.len()` bytes; gethostname writes at
    // most that many and we read only up to the first NUL inside it.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    match (rc, std::str::from_utf8(&buf[..end])) {
        (0, Ok(name)) if !name.is_empty() => name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                    c
                } else {
                    '_'
                }
            })
            .collect(),
        _ => "localhost".into(),
    }
}

/// Reads back every record of an event file, checking both CRCs of each
/// (for tests: what TensorBoard's reader checks).
#[cfg(test)]
pub fn read_events(path: &Path) -> Vec<Event> {
    let bytes = std::fs::read(path).unwrap();
    let mut events = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let len_bytes = &bytes[at..at + 8];
        let len = u64::from_le_bytes(len_bytes.try_into().unwrap()) as usize;
        let len_crc = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap());
        assert_eq!(
            len_crc,
            masked_crc(len_bytes),
            "length CRC of record at {at}"
        );
        let data = &bytes[at + 12..at + 12 + len];
        let data_crc = u32::from_le_bytes(bytes[at + 12 + len..at + 16 + len].try_into().unwrap());
        assert_eq!(data_crc, masked_crc(data), "data CRC of record at {at}");
        events.push(Event::decode(data).unwrap());
        at += 16 + len;
    }
    events
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masked_crc_matches_tfrecord() {
        // CRC-32C("123456789") is 0xE3069283 (the standard check value);
        // masked as TFRecord does.
        assert_eq!(crc32c::crc32c(b"123456789"), 0xE306_9283);
        let expected = 0xE306_9283u32.rotate_right(15).wrapping_add(0xa282_ead8);
        assert_eq!(masked_crc(b"123456789"), expected);
    }

    #[test]
    fn a_new_file_starts_with_its_version_and_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let mut f = EventFile::create(&dir.path().join("tb")).unwrap();
        f.write(&Event {
            wall_time: 1.0,
            step: 42,
            what: None,
        })
        .unwrap();
        f.flush().unwrap();
        let name = f.path().file_name().unwrap().to_str().unwrap().to_owned();
        assert!(name.starts_with("events.out.tfevents."), "{name}");
        let events = read_events(f.path());
        assert_eq!(events.len(), 2);
        assert_eq!(events[0].what, Some(What::FileVersion(FILE_VERSION.into())));
        assert_eq!(events[1].step, 42);
    }
}
