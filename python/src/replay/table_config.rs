//! The `table` argument of `ReplayBuffer(table)`: the table object of a
//! replay server's config file, checked by the server's own code.
//!
//! Accepted: a dict (one table object, or a whole config file with a
//! `tables` list, as `learner --print-replay-table-config` prints), the
//! same as JSON text, or the path of such a file. From a whole file the
//! table named `name` is taken (or its only table), and its
//! `checkpoint_dir` unless the caller gives one. The checks and their
//! messages are the server's (`seed_replay_service::config`): an unknown
//! key, a bad sampler or a deadlocking rate limiter is a `ValueError`
//! naming the setting.
//!
//! Cost: one `json.dumps` of a dict and a parse, at construction.
use std::path::PathBuf;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};
use seed_replay_service::config::grouped_table_spec::GroupedTableSpec;
use seed_replay_service::config::{ServiceConfigFile, TableConfigFile, TableSpec};

/// A checked table: fixed-shape items, or steps of grouped trajectories.
pub enum TableKind {
    Plain(TableSpec),
    Grouped(GroupedTableSpec),
}

impl TableKind {
    pub fn name(&self) -> &str {
        match self {
            TableKind::Plain(s) => &s.name,
            TableKind::Grouped(s) => &s.name,
        }
    }
}

/// What `ReplayBuffer(table, ...)` builds from.
pub struct TableConfig {
    pub kind: TableKind,
    pub checkpoint_dir: Option<PathBuf>,
}

/// Parses and checks `table` (module docs).
pub fn parse(
    table: &Bound<'_, PyAny>,
    name: Option<&str>,
    checkpoint_dir: Option<PathBuf>,
) -> PyResult<TableConfig> {
    let py = table.py();
    let text: String = if table.is_instance_of::<PyDict>() {
        py.import("json")?
            .call_method1("dumps", (table,))
            .map_err(|e| PyValueError::new_err(format!("`table`: not JSON-serialisable: {e}")))?
            .extract()?
    } else if let Ok(s) = table.cast::<PyString>() {
        let s = s.to_cow()?;
        if s.trim_start().starts_with('{') {
            s.into_owned()
        } else {
            read(PathBuf::from(s.as_ref()))?
        }
    } else if let Ok(path) = table.extract::<PathBuf>() {
        read(path)?
    } else {
        return Err(PyValueError::new_err(
            "`table`: expected a table object (a dict, as in a replay server's config file), \
             its JSON text, or a config file's path",
        ));
    };
    from_json(&text, name, checkpoint_dir)
}

fn read(path: PathBuf) -> PyResult<String> {
    std::fs::read_to_string(&path)
        .map_err(|e| PyValueError::new_err(format!("`table`: cannot read {}: {e}", path.display())))
}

fn from_json(
    text: &str,
    name: Option<&str>,
    checkpoint_dir: Option<PathBuf>,
) -> PyResult<TableConfig> {
    let bad = |reason: String| PyValueError::new_err(format!("`table`: {reason}"));
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| bad(format!("not JSON: {e}")))?;
    let mut file: ServiceConfigFile = if value.get("tables").is_some() {
        serde_json::from_value(value).map_err(|e| bad(e.to_string()))?
    } else {
        let table: TableConfigFile =
            serde_json::from_value(value).map_err(|e| bad(e.to_string()))?;
        ServiceConfigFile {
            checkpoint_dir: None,
            tables: vec![table],
        }
    };
    let chosen = match name {
        Some(n) => file
            .tables
            .iter()
            .position(|t| t.name == n)
            .ok_or_else(|| {
                bad(format!(
                    "no table `{n}` (tables: {})",
                    file.tables
                        .iter()
                        .map(|t| t.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })?,
        None if file.tables.len() == 1 => 0,
        None => {
            return Err(bad(format!(
                "{} tables: say which with `name=`",
                file.tables.len()
            )))
        }
    };
    let table = file.tables.swap_remove(chosen);
    if !table.load.is_empty() {
        return Err(bad(
            "`load` serves other servers' directories read-only: use a replay server \
             (`ReplayClient(addr).table(name)`)"
                .into(),
        ));
    }
    let file_dir = file.checkpoint_dir.take();
    let checked = ServiceConfigFile {
        checkpoint_dir: None,
        tables: vec![table],
    }
    .check()
    .map_err(|e| PyValueError::new_err(e.to_string()))?;
    let kind = match (
        checked.tables.into_iter().next(),
        checked.grouped.into_iter().next(),
    ) {
        (Some(spec), _) => TableKind::Plain(spec),
        (None, Some(spec)) => TableKind::Grouped(spec),
        (None, None) => return Err(bad("no table".into())),
    };
    Ok(TableConfig {
        kind,
        checkpoint_dir: checkpoint_dir.or(file_dir),
    })
}
