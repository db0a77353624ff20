//! `seed_rs.ReplayBuffer`: a replay table in this process, built from the
//! same table object a replay server's config takes, with the methods of
//! the remote handle (`ReplayClient(addr).table(name)`): both classes'
//! methods are generated from the one list of table methods
//! ([`table_methods!`]), so switching between the two is changing one
//! constructor.
//!
//! This file is the class: its constructors (`ReplayBuffer(table, ...)`,
//! `ReplayBuffer.restore`), the context manager and the refusal to
//! pickle; the methods' bodies are [`LocalTable`]'s. Cost: see there.
use std::path::PathBuf;
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple, PyType};

use crate::replay::local_table::LocalTable;
use crate::replay::process_guard::ProcessGuard;
use crate::replay::table_api::{table_methods, table_pymethods, TableApi};

/// A replay table in this process (module docs).
///
/// `ReplayBuffer(table, *, name=None, checkpoint_dir=None)`: `table` is a
/// table object as a replay server's config file takes it (a dict: fields,
/// capacity, sampler, writer policy, rate limiter, lag cap, `storage_dir`
/// for a memory-mapped table), its JSON text, a whole config file (a dict
/// with `tables`, or its path; `name` picks the table when it has several)
/// such as `learner --print-replay-table-config` prints. `checkpoint_dir`
/// (or the file's `checkpoint_dir`) is where `checkpoint()` writes.
/// A table with `storage_dir` reopens the directory's items when it holds
/// some. The methods are those of `TABLE_METHODS` (`submit_steps`,
/// `complete_trajectory` and `fetch_group` on a grouped table, the others
/// on a plain one; `name`, `set_policy_version`, `info` and `close` on
/// both). A context manager (closes on exit). To share one table across
/// processes, serve it with `replay-server`: a buffer cannot be pickled or
/// used after `fork`.
#[pyclass(module = "seed_rs._native", name = "ReplayBuffer", frozen)]
pub struct PyReplayBuffer {
    table: Arc<LocalTable>,
}

table_methods!(table_pymethods {
    PyReplayBuffer, table, {
        #[new]
        #[pyo3(signature = (table, *, name=None, checkpoint_dir=None))]
        fn new(
            py: Python<'_>,
            table: &Bound<'_, PyAny>,
            name: Option<String>,
            checkpoint_dir: Option<PathBuf>,
        ) -> PyResult<Self> {
            let table = LocalTable::open(py, table, name, checkpoint_dir, false)?;
            Ok(PyReplayBuffer {
                table: Arc::new(table),
            })
        }

        /// `ReplayBuffer.restore(table, *, name=None, checkpoint_dir=None)`:
        /// the buffer of `table` with the items, priorities and counters of
        /// its checkpoint `<checkpoint_dir>/<name>.seedrpl` (as `checkpoint()`
        /// writes it, here or on a replay server).
        #[classmethod]
        #[pyo3(signature = (table, *, name=None, checkpoint_dir=None))]
        fn restore(
            _cls: &Bound<'_, PyType>,
            py: Python<'_>,
            table: &Bound<'_, PyAny>,
            name: Option<String>,
            checkpoint_dir: Option<PathBuf>,
        ) -> PyResult<Self> {
            let table = LocalTable::open(py, table, name, checkpoint_dir, true)?;
            Ok(PyReplayBuffer {
                table: Arc::new(table),
            })
        }

        fn __reduce__(&self) -> PyResult<()> {
            ProcessGuard::refuse_pickle("ReplayBuffer")
        }

        fn __repr__(&self) -> String {
            format!("ReplayBuffer({:?})", self.table.name())
        }
    }
});
