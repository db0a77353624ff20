//! Atomic file replacement: write a temporary file beside the target,
//! fsync it, rename it over the target, fsync the directory.
//!
//! Why: a crash mid-write must leave the old file or the new one, never a
//! torn one; checkpoints (`checkpoint.rs`) and a mapped directory's
//! `layout.json` (`storage.rs`) are written this way. Temporary names are
//! unique per call, so concurrent writers to one path never share one.
//! Cost: the write, an fsync of the file and one of its directory.
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::ReplayError;

/// Writes `bytes` to `path` atomically: temp file, fsync, rename.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), ReplayError> {
    with_temp_file(path, |tmp| {
        let mut f = create_temp(tmp)?;
        f.write_all(bytes)
            .map_err(|e| ReplayError::io("write", tmp, e))?;
        f.sync_all().map_err(|e| ReplayError::io("fsync", tmp, e))
    })
}

/// Runs `write` on a fresh temporary file beside `path`, then renames it
/// over `path`. On any failure the temporary file is removed, so failed
/// writes do not pile up beside the real file.
pub(crate) fn with_temp_file(
    path: &Path,
    write: impl FnOnce(&Path) -> Result<(), ReplayError>,
) -> Result<(), ReplayError> {
    let tmp = temp_path(path);
    let result = write(&tmp).and_then(|()| finish_rename(&tmp, path));
    if result.is_err() {
        // Best effort: the write's own error is the one to report.
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Creates `tmp`, refusing to reuse an existing file: a name that exists
/// belongs to another writer (or a crashed one), never to us.
pub(crate) fn create_temp(tmp: &Path) -> Result<File, ReplayError> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(tmp)
        .map_err(|e| ReplayError::io("create", tmp, e))
}

/// `path` with `.<pid>.<n>.tmp` appended, `n` counting this process's
/// temp files: two checkpoints to the same path at once (threads or
/// processes) each write their own file, and the last rename wins whole.
fn temp_path(path: &Path) -> PathBuf {
    // Relaxed: only the counter's own atomicity matters (distinct values).
    static NEXT_TEMP: AtomicU64 = AtomicU64::new(0);
    let n = NEXT_TEMP.fetch_add(1, Ordering::Relaxed);
    let mut name = path
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(format!(".{}.{n}.tmp", std::process::id()));
    path.with_file_name(name)
}

fn finish_rename(tmp: &Path, path: &Path) -> Result<(), ReplayError> {
    std::fs::rename(tmp, path).map_err(|e| ReplayError::io("rename", path, e))?;
    // Make the rename durable; failing to open a directory is not fatal on
    // platforms that do not allow it.
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two checkpoints to one path at once must not share a temporary
    /// file (the second `create` would truncate the first's half-written
    /// bytes, and one rename would find its file gone).
    #[test]
    fn temp_paths_are_unique_per_call() {
        let path = Path::new("/some/dir/replay.ckpt");
        let a = temp_path(path);
        let b = temp_path(path);
        assert_ne!(a, b);
        for t in [&a, &b] {
            assert_eq!(t.parent(), path.parent());
            let name = t.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            assert!(name.starts_with("replay.ckpt."), "{name}");
            assert!(name.ends_with(".tmp"), "{name}");
        }
    }
}
