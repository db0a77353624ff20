//! `--print-config`: resolved settings as a TOML file that `--config`
//! reads back into an equal run. Every `--run-dir` keeps one
//! (`config.toml`), so `learner --config RUN/config.toml` reproduces it.
//!
//! Secrets (`serve.token`, `remote_replay.replay_token`) are never
//! written: a comment says one was given and how to pass it again. TLS
//! settings are paths; the files' contents are never copied.
use std::path::Path;

use super::schema::{Settings, SECRET_KEYS, SECTIONS};
use crate::error::LearnerError;

/// The file name a run directory keeps its resolved settings under.
pub const RUN_CONFIG_FILE: &str = "config.toml";

/// `settings` as a TOML file, section by section in the schema's order,
/// unset keys left out, secrets redacted.
pub fn to_toml(settings: &Settings) -> String {
    // `resolve` refuses settings that do not fit TOML, so a resolved run
    // always prints.
    let table = settings.to_table().unwrap_or_default();
    let mut out = String::from(
        "# A learner run, every value resolved (learner --print-config).\n\
         # Run it again with: learner --config THIS_FILE\n",
    );
    for (section, _, keys) in SECTIONS {
        let values = table.get(*section).and_then(|v| v.as_table());
        out.push_str(&format!("\n[{section}]\n"));
        for key in *keys {
            let Some(value) = values.and_then(|v| v.get(*key)) else {
                continue;
            };
            if SECRET_KEYS.contains(&format!("{section}.{key}").as_str()) {
                out.push_str(&format!(
                    "# {key} = \"<redacted>\"  (given; pass it again as --{})\n",
                    key.replace('_', "-")
                ));
            } else {
                out.push_str(&format!("{key} = {value}\n"));
            }
        }
    }
    out
}

/// Writes `settings` into `run_dir/config.toml` (creating the directory).
pub fn write_run_config(run_dir: &Path, settings: &Settings) -> Result<(), LearnerError> {
    let fail = |e: std::io::Error| {
        LearnerError::Config(format!(
            "--run-dir {}: cannot write {RUN_CONFIG_FILE}: {e}",
            run_dir.display()
        ))
    };
    std::fs::create_dir_all(run_dir).map_err(fail)?;
    std::fs::write(run_dir.join(RUN_CONFIG_FILE), to_toml(settings)).map_err(fail)
}
