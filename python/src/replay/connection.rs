//! [`Connection`]: one client's connection to a `replay-server`, the
//! runtime that drives it, and the tables' layouts it has asked for;
//! shared (`Arc`) by the `ReplayClient`, its table handles and their
//! streams.
//!
//! Each call runs the Rust [`RustClient`] call on the connection's own
//! runtime with the GIL released ([`Connection::call`]). While a call waits
//! on the network other Python threads run, and Ctrl-C ends the wait (the
//! call is dropped, `KeyboardInterrupt` raised).
//!
//! # The runtime
//! A current-thread tokio runtime: the calling Python thread drives the
//! connection itself inside `block_on`, so a round trip costs no wake-up
//! of another thread (27-42 us p50 across cores on a 2-core VM). Between
//! calls nothing runs the connection; HTTP/2 needs nothing meanwhile.
//! Several Python threads may call one connection at once: tokio lets them
//! take turns driving the runtime, and their calls share the connection
//! (each clones the cheap [`RustClient`] handle).
//!
//! # Layouts
//! `insert` and `submit_steps` check a dict of arrays against the table
//! before sending ([`TableLayout`]); the connection asks the server for a
//! table's layout once (one `Info` call) and keeps it.
//!
//! Cost per call, beyond the Rust client's: one GIL release and
//! re-acquisition and a 50 ms interrupt check timer armed for the call.
use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

use pyo3::exceptions::{PyKeyboardInterrupt, PyRuntimeError};
use pyo3::prelude::*;
use seed_replay_service::client::ClientOptions;
use seed_replay_service::pb::TableInfo;
use seed_replay_service::{ClientError, ReplayClient as RustClient};

use crate::interrupt::InterruptWatch;
use crate::replay::error::{protocol_error, to_py_err};
use crate::replay::layout::TableLayout;
use crate::replay::process_guard::ProcessGuard;

/// The runtime, the connection and the layouts (module docs).
pub struct Connection {
    addr: String,
    runtime: tokio::runtime::Runtime,
    client: RustClient,
    /// The runtime and connection do not survive `fork`.
    guard: ProcessGuard,
    layouts: Mutex<HashMap<String, Arc<TableLayout>>>,
}

impl Connection {
    /// Connects to `addr` with `options`, the GIL released.
    pub fn connect(py: Python<'_>, addr: String, options: ClientOptions) -> PyResult<Self> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| PyRuntimeError::new_err(format!("cannot start a tokio runtime: {e}")))?;
        let client = py
            .detach(|| runtime.block_on(RustClient::connect(&addr, options)))
            .map_err(|e| to_py_err(py, e))?;
        Ok(Connection {
            addr,
            runtime,
            client,
            guard: ProcessGuard::new(),
            layouts: Mutex::new(HashMap::new()),
        })
    }

    /// The address connected to.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Runs `call` with a clone of the client on the runtime, the GIL
    /// released; Ctrl-C (a Python signal handler raising) drops the call
    /// and raises.
    pub fn call<T, F, Fut>(&self, py: Python<'_>, call: F) -> PyResult<T>
    where
        T: Send,
        F: FnOnce(RustClient) -> Fut + Send,
        Fut: Future<Output = Result<T, ClientError>> + Send,
    {
        self.guard.check("ReplayClient")?;
        let client = self.client.clone();
        self.run(py, call(client))
    }

    /// Runs `work` (a call on a stream the caller holds) as [`call`] does:
    /// the GIL released, Ctrl-C honoured.
    ///
    /// [`call`]: Connection::call
    pub fn run<T, Fut>(&self, py: Python<'_>, work: Fut) -> PyResult<T>
    where
        T: Send,
        Fut: Future<Output = Result<T, ClientError>> + Send,
    {
        self.guard.check("ReplayClient")?;
        let watch = InterruptWatch::default();
        let triggered = watch.clone().triggered();
        let result = py.detach(|| {
            self.runtime.block_on(async move {
                tokio::select! {
                    r = work => Some(r),
                    () = triggered => None,
                }
            })
        });
        match result {
            Some(r) => r.map_err(|e| to_py_err(py, e)),
            None => Err(watch
                .take()
                .unwrap_or_else(|| PyKeyboardInterrupt::new_err("interrupted"))),
        }
    }

    /// The server's `Info` of `table` (`None`: of every table).
    pub fn info(&self, py: Python<'_>, table: Option<&str>) -> PyResult<Vec<TableInfo>> {
        self.call(py, move |mut c| async move { c.info(table).await })
    }

    /// The `Info` of `table` alone; a reply without it is a protocol error.
    pub fn table_info(&self, py: Python<'_>, table: &str) -> PyResult<TableInfo> {
        self.info(py, Some(table))?
            .into_iter()
            .find(|t| t.name == table)
            .ok_or_else(|| protocol_error(py, format!("no info on table `{table}`")))
    }

    /// `table`'s layout: kept, else asked of the server once.
    pub fn layout(&self, py: Python<'_>, table: &str) -> PyResult<Arc<TableLayout>> {
        if let Some(l) = self.kept_layout(table) {
            return Ok(l);
        }
        let info = self.table_info(py, table)?;
        let layout = Arc::new(TableLayout::from_info(&info).map_err(|r| protocol_error(py, r))?);
        if let Ok(mut layouts) = self.layouts.lock() {
            layouts.insert(table.to_owned(), layout.clone());
        }
        Ok(layout)
    }

    fn kept_layout(&self, table: &str) -> Option<Arc<TableLayout>> {
        self.layouts.lock().ok()?.get(table).cloned()
    }
}
