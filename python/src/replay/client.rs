//! `seed_rs.ReplayClient`: one connection to a `replay-server` and the
//! table methods over it, each taking the table's name first
//! (`client.insert("experience", fields)`), generated from the one list
//! of table methods ([`table_methods!`]) and run by a [`RemoteTable`];
//! `table(name)` is the handle bound to one table (`ReplayTable`), and
//! `info()` describes every table at once.
//!
//! Cost: see [`Connection`] (the runtime, the layouts) and
//! [`RemoteTable`] (each call); a method here adds one `Arc` clone.
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use seed_replay_service::client::ClientOptions;

use crate::replay::connection::Connection;
use crate::replay::layout::info_dict;
use crate::replay::process_guard::ProcessGuard;
use crate::replay::remote_table::RemoteTable;
use crate::replay::table_api::{client_pymethods, table_methods, TableApi};

/// A client of a seed-rs replay server (`replay-server`).
///
/// `ReplayClient(addr, token=None, *, tls_ca=None, tls_domain=None,
/// tls_cert=None, tls_key=None, max_message_bytes=None,
/// connect_timeout=10.0)` connects to `addr` (`HOST:PORT`,
/// `http://HOST:PORT`, or `https://HOST:PORT` with `tls_ca`), sending
/// `token` with every call. Raises `ReplayError` when the server cannot be
/// reached, `ValueError` for an unusable address or TLS file.
///
/// `table(name)` is a handle bound to one table with exactly the methods
/// of the in-process `ReplayBuffer` (switching between the two is changing
/// one constructor). The client's own methods are the table methods of
/// `CLIENT_TABLE_METHODS` with the table's name first, and `info(table=None)`
/// (every table's info when `table` is `None`). Item data travels as numpy
/// arrays shaped `[rows, *field_shape]` of the table's dtypes. The
/// server's refusals raise `ReplayError` with the gRPC `code` and the
/// server's `message`. One client may be used from several threads; the
/// network waits release the GIL.
#[pyclass(module = "seed_rs._native", name = "ReplayClient", frozen)]
pub struct PyReplayClient {
    connection: Arc<Connection>,
}

impl PyReplayClient {
    /// The connection, shared with the client's table handles.
    pub fn connection(&self) -> &Arc<Connection> {
        &self.connection
    }

    /// `table` of this client's server, for one call.
    fn remote(&self, table: String) -> RemoteTable {
        RemoteTable::new(Arc::clone(&self.connection), table)
    }
}

table_methods!(client_pymethods {
    PyReplayClient, remote, {
        #[new]
        #[pyo3(signature = (
            addr, token=None, *, tls_ca=None, tls_domain=None, tls_cert=None, tls_key=None,
            max_message_bytes=None, connect_timeout=10.0,
        ))]
        // One parameter per Python keyword argument (pyo3 matches them by name).
        #[allow(clippy::too_many_arguments)]
        fn new(
            py: Python<'_>,
            addr: String,
            token: Option<String>,
            tls_ca: Option<PathBuf>,
            tls_domain: Option<String>,
            tls_cert: Option<PathBuf>,
            tls_key: Option<PathBuf>,
            max_message_bytes: Option<usize>,
            connect_timeout: f64,
        ) -> PyResult<Self> {
            let mut options = ClientOptions {
                token: seed_shared::Token::from_option(token.as_deref()),
                tls_domain,
                ..ClientOptions::default()
            };
            if let Some(n) = max_message_bytes {
                if n < 1024 {
                    return Err(PyValueError::new_err(format!(
                        "max_message_bytes {n} is below 1024"
                    )));
                }
                options.max_message_bytes = n;
            }
            if !(connect_timeout.is_finite() && connect_timeout > 0.0) {
                return Err(PyValueError::new_err(format!(
                    "connect_timeout must be a positive number of seconds, is {connect_timeout}"
                )));
            }
            options.connect_timeout = Duration::from_secs_f64(connect_timeout);
            let tls_given = tls_ca.is_some() || tls_cert.is_some() || tls_key.is_some();
            if tls_given && !addr.starts_with("https://") {
                return Err(PyValueError::new_err(format!(
                    "TLS options need an https:// address, got `{addr}`"
                )));
            }
            let tls_err = |e: seed_shared::TlsFileError| PyValueError::new_err(e.to_string());
            if let Some(ca) = &tls_ca {
                options.tls_ca =
                    Some(seed_shared::tls::read_certificates("tls_ca", ca).map_err(tls_err)?);
            }
            options.tls_identity = match (&tls_cert, &tls_key) {
                (Some(cert), Some(key)) => Some((
                    seed_shared::tls::read_certificates("tls_cert", cert).map_err(tls_err)?,
                    seed_shared::tls::read_private_key("tls_key", key).map_err(tls_err)?,
                )),
                (None, None) => None,
                _ => {
                    return Err(PyValueError::new_err(
                        "tls_cert and tls_key go together (a client certificate and its key)",
                    ))
                }
            };
            let connection = Connection::connect(py, addr, options)?;
            Ok(PyReplayClient {
                connection: Arc::new(connection),
            })
        }

        /// The address this client connected to.
        #[getter]
        fn addr(&self) -> &str {
            self.connection.addr()
        }

        /// A handle bound to `table` (it shares this client's connection):
        /// the methods of `ReplayBuffer`, run by the server.
        ///
        /// Made through the `ReplayTable` class (`ReplayTable(client, name)`),
        /// which imports this file; this file does not import it.
        fn table<'py>(slf: &Bound<'py, Self>, name: String) -> PyResult<Bound<'py, PyAny>> {
            slf.py()
                .import("seed_rs._native")?
                .getattr("ReplayTable")?
                .call1((slf, name))
        }

        /// The server's tables: `info()` returns `{name: info}` for every
        /// table, `info(table)` that table's info dict (as the table's own
        /// `info()`: its fields, sampler, capacity, sizes, counters, rate
        /// limiter and storage).
        #[pyo3(signature = (table=None))]
        fn info<'py>(
            &self,
            py: Python<'py>,
            table: Option<String>,
        ) -> PyResult<Bound<'py, PyDict>> {
            if let Some(name) = table {
                return self.remote(name).info(py);
            }
            let all = PyDict::new(py);
            for info in &self.connection.info(py, None)? {
                all.set_item(&info.name, info_dict(py, info)?)?;
            }
            Ok(all)
        }

        fn __reduce__(&self) -> PyResult<()> {
            ProcessGuard::refuse_pickle("ReplayClient")
        }

        fn __repr__(&self) -> String {
            format!("ReplayClient({:?})", self.connection.addr())
        }
    }
});
