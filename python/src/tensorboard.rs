//! `TensorBoardWriter`: scalars into a TensorBoard event file, with the
//! learner's own writer (`seed_learner::report::tensorboard`), so Python
//! code of the package (`python -m seed_rs.actor --eval`) writes curves
//! beside the learner's without the `tensorboard` package.
//!
//! Each writer creates one new event file in its directory (named as
//! TensorBoard's writers name theirs); give it a directory of its own (a
//! run of its own in TensorBoard's list), since TensorBoard reads a
//! directory's files one after the other, not side by side.
//!
//! Cost: one buffered record per scalar; `flush` writes them.
use std::path::PathBuf;

use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use seed_learner::report::tensorboard::event_file::{wall_time_now, EventFile};
use seed_learner::report::tensorboard::{Point, PointKind};

fn os_error(what: &str, e: std::io::Error) -> PyErr {
    PyOSError::new_err(format!("{what}: {e}"))
}

/// An event file in `dir` (created if needed); `scalar(tag, step, value)`
/// appends one point, `flush()` writes the buffered ones.
#[pyclass(name = "TensorBoardWriter", module = "seed_rs._native")]
pub struct TensorBoardWriter {
    file: EventFile,
}

#[pymethods]
impl TensorBoardWriter {
    #[new]
    fn new(dir: PathBuf) -> PyResult<Self> {
        let file = EventFile::create(&dir)
            .map_err(|e| os_error(&format!("TensorBoard event file in {}", dir.display()), e))?;
        Ok(TensorBoardWriter { file })
    }

    /// The event file's path.
    #[getter]
    fn path(&self) -> PathBuf {
        self.file.path().to_path_buf()
    }

    /// Appends the scalar `value` of `tag` at `step`.
    fn scalar(&mut self, tag: String, step: u64, value: f64) -> PyResult<()> {
        let point = Point {
            step,
            wall_time: wall_time_now(),
            kind: PointKind::Scalar { tag, value },
        };
        if let Some(event) = point.to_event() {
            self.file
                .write(&event)
                .map_err(|e| os_error("TensorBoard event file", e))?;
        }
        Ok(())
    }

    /// Writes what is buffered.
    fn flush(&mut self) -> PyResult<()> {
        self.file
            .flush()
            .map_err(|e| os_error("TensorBoard event file", e))
    }
}
