//! `ReplayClient(addr).table(name)`: a handle bound to one table of a
//! replay server, with exactly the methods of the in-process
//! `ReplayBuffer` (both generated from the one list of table methods,
//! [`table_methods!`]), so that moving a table out of the process (to
//! share it between processes or machines) is changing one constructor.
//!
//! Each method is its [`RemoteTable`]'s: the checks on the arrays are the
//! same functions as the buffer's (`arrays`), so both refuse the same
//! input with the same error. `close()` ends this handle only (the
//! connection is the client's, shared with its other handles); after it
//! every call raises. Cost: the remote table's.
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::replay::client::PyReplayClient;
use crate::replay::process_guard::ProcessGuard;
use crate::replay::remote_table::RemoteTable;
use crate::replay::table_api::{table_methods, table_pymethods, TableApi};

/// A table of a replay server (module docs): `ReplayTable(client, name)`,
/// the same as `client.table(name)`. The methods are those of
/// `TABLE_METHODS`, as `ReplayBuffer` has them.
#[pyclass(module = "seed_rs._native", name = "ReplayTable", frozen)]
pub struct PyReplayTable {
    table: RemoteTable,
}

table_methods!(table_pymethods {
    PyReplayTable, table, {
        /// `ReplayTable(client, name)`, the same as `client.table(name)`.
        #[new]
        fn new(client: &Bound<'_, PyReplayClient>, name: String) -> Self {
            PyReplayTable {
                table: RemoteTable::new(client.get().connection().clone(), name),
            }
        }

        fn __reduce__(&self) -> PyResult<()> {
            ProcessGuard::refuse_pickle("ReplayTable")
        }

        fn __repr__(&self) -> String {
            format!("ReplayTable({:?}, {:?})", self.table.addr(), self.table.name())
        }
    }
});
