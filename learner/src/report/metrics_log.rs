//! `metrics.jsonl` in the run directory: one JSON object per reporting
//! interval, keys `area/name` (`train/pg_loss`, `replay/stored`), so a user
//! can plot any figure with a few lines of pandas or jq.
//!
//! Cost: one small formatted line and one `write` per interval.
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::error::LearnerError;

/// An append-only JSONL file.
pub struct MetricsLog {
    path: PathBuf,
    out: BufWriter<File>,
}

impl MetricsLog {
    /// Opens (appending: a resumed run continues the file) `dir/metrics.jsonl`.
    pub fn open(dir: &Path) -> Result<Self, LearnerError> {
        let io = |what: &str, source| LearnerError::Io {
            what: format!("{what} {}", dir.display()),
            source,
        };
        std::fs::create_dir_all(dir).map_err(|e| io("creating", e))?;
        let path = dir.join("metrics.jsonl");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| io("opening metrics.jsonl in", e))?;
        Ok(MetricsLog {
            path,
            out: BufWriter::new(file),
        })
    }

    /// Appends one object as a line and flushes it.
    pub fn append(&mut self, record: &serde_json::Value) -> Result<(), LearnerError> {
        let err = |source| LearnerError::Io {
            what: format!("writing {}", self.path.display()),
            source,
        };
        serde_json::to_writer(&mut self.out, record).map_err(|e| err(e.into()))?;
        self.out.write_all(b"\n").map_err(err)?;
        self.out.flush().map_err(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_one_parseable_object_per_line_across_reopens() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = MetricsLog::open(dir.path()).unwrap();
        log.append(&serde_json::json!({"train/pg_loss": 0.5}))
            .unwrap();
        drop(log);
        let mut log = MetricsLog::open(dir.path()).unwrap();
        log.append(&serde_json::json!({"train/pg_loss": 0.25}))
            .unwrap();
        let text = std::fs::read_to_string(dir.path().join("metrics.jsonl")).unwrap();
        let losses: Vec<f64> = text
            .lines()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["train/pg_loss"]
                    .as_f64()
                    .unwrap()
            })
            .collect();
        assert_eq!(losses, [0.5, 0.25]);
    }
}
