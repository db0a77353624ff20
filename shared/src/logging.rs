//! Logging setup for the binaries and the Python package's Rust actor
//! (`seed_rs.enable_logging`): `tracing` to stderr, as text or JSON lines
//! (`--log-format`), filtered by `RUST_LOG` (default `info`) or a filter
//! given.
//!
//! Colour codes only where a person reads them: when stderr is a terminal
//! and `NO_COLOR` (<https://no-color.org>) is unset or empty. A log file
//! (`learner > run.log 2>&1`) or a log shipper gets plain text.
use std::ffi::OsStr;
use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// `--log-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// One human-readable line per event.
    #[default]
    Text,
    /// One JSON object per line (for log shippers).
    Json,
}

/// Whether to write ANSI colour codes: only to a terminal, and only when
/// `NO_COLOR` is unset or empty.
pub fn use_color(stderr_is_terminal: bool, no_color: Option<&OsStr>) -> bool {
    stderr_is_terminal && no_color.is_none_or(|v| v.is_empty())
}

/// Installs the global subscriber (once, before anything logs), filtered
/// by `RUST_LOG` (default `info`).
pub fn init_logging(format: LogFormat) {
    // A process that already has a subscriber (a second command run in
    // the same Python process) keeps it; without a filter given nothing
    // else can fail.
    let _ = init_logging_with(format, None);
}

/// [`init_logging`] with a filter (`RUST_LOG` syntax) instead of
/// `RUST_LOG`'s when `filter` is given: what the Python package's
/// `seed_rs.enable_logging(filter)` runs. `Ok(false)` when the process
/// already has a subscriber (it is kept); `Err` names a filter that does
/// not parse.
pub fn init_logging_with(format: LogFormat, filter: Option<&str>) -> Result<bool, String> {
    let filter = match filter {
        Some(f) => EnvFilter::try_new(f).map_err(|e| format!("log filter `{f}`: {e}"))?,
        None => EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
    };
    let ansi = use_color(
        std::io::stderr().is_terminal(),
        std::env::var_os("NO_COLOR").as_deref(),
    );
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi);
    let installed = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
    Ok(installed.is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(use_color(true, None));
        assert!(use_color(true, Some(OsStr::new(""))));
        assert!(!use_color(true, Some(OsStr::new("1"))));
        assert!(!use_color(false, None));
    }

    #[test]
    fn a_filter_that_does_not_parse_is_named() {
        let err = init_logging_with(LogFormat::Text, Some("seed=notalevel")).unwrap_err();
        assert!(err.contains("`seed=notalevel`"), "{err}");
    }
}
