//! Settings as data: every default declared once, env recipes as preset
//! files, config files that reproduce a run.
//!
//! # The model
//! - **Defaults** live in `defaults.toml` beside this file (compiled in),
//!   by section; a value may depend on the algorithm, the device, the
//!   optimizer or `--lstm` through a table of cases ([`defaults`]). What
//!   depends on other values (replay sizes follow `--batch-size`) is a rule
//!   in [`resolve`], documented by [`resolve::rule`].
//! - **Layers** override them, later ones winning: a preset
//!   (`--preset NAME`, [`presets`]), a config file (`--config FILE`), the
//!   flags. Each is a [`Settings`]: the same keys as the flags.
//! - **Resolution** ([`resolve::resolve`]) merges the layers, then picks
//!   the defaults for the case the merged layers end up with, then applies
//!   the rules, and builds the [`crate::app::LearnerConfig`]. The resolved
//!   settings print as TOML ([`print::to_toml`], `--print-config`) that
//!   reads back into an equal config.
//!
//! The CLI declares no default: its help reads them from [`describe`].
//! Why: a default written in two places drifts (the flags, the library
//! types' `Default`s and the docs used to disagree).
pub mod defaults;
pub mod layer;
pub mod presets;
pub mod print;
pub mod resolve;
pub mod schema;

pub use layer::{Layer, Origin};
pub use resolve::{resolve, resolve_toml, resolve_with, ResolveOptions, Resolved};
pub use schema::Settings;

/// The default of `key` (`section.name`) as help and docs show it: the
/// value from `defaults.toml` (with its cases), then any rule; for the
/// synthetic env's keys, the env library's default. `None`: the key is
/// unset by default (its flag's doc says what that means).
pub fn describe(key: &str) -> Option<String> {
    if let Some(text) = synthetic_default(key) {
        return Some(text);
    }
    match (defaults::describe(key), resolve::rule(key)) {
        (Some(value), Some(rule)) => Some(format!("{value}; otherwise {rule}")),
        (Some(value), None) => Some(value),
        (None, Some(rule)) => Some(rule.to_owned()),
        (None, None) => None,
    }
}

/// The synthetic env's defaults, from `seed_env` (their one home).
fn synthetic_default(key: &str) -> Option<String> {
    let d = seed_env::SyntheticConfig::default();
    Some(match key {
        "actors.obs_shape" => d
            .obs_shape
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(","),
        "actors.obs_dtype" => d.obs_dtype.to_string(),
        "actors.num_actions" => d.num_actions.to_string(),
        "actors.step_cost_us" => d.step_cost_us.to_string(),
        "actors.episode_len" => d.episode_len.to_string(),
        _ => return None,
    })
}
