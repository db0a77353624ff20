//! [`Layer`]: one source of settings (a preset, a config file, the flags)
//! and where it came from, so an error can name the file and the key.
use std::fmt;
use std::path::{Path, PathBuf};

use super::schema::Settings;
use crate::error::LearnerError;

/// Where a layer's values came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// `--preset NAME`.
    Preset(String),
    /// `--config FILE`.
    File(PathBuf),
    /// Flags on the command line (and their environment variables).
    Flags,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Preset(name) => write!(f, "preset {name}"),
            Origin::File(path) => write!(f, "config file {}", path.display()),
            Origin::Flags => f.write_str("flags"),
        }
    }
}

/// Settings from one source. Layers are merged in order, later ones
/// winning: defaults < preset < config file < flags.
#[derive(Debug, Clone, PartialEq)]
pub struct Layer {
    pub origin: Origin,
    pub settings: Settings,
}

impl Layer {
    /// Settings given as values (the flags).
    pub fn new(origin: Origin, settings: Settings) -> Layer {
        Layer { origin, settings }
    }

    /// A layer from TOML text. An unknown section or key, or a value of
    /// the wrong type, is an error naming `origin`, the key and what was
    /// expected.
    pub fn parse(text: &str, origin: Origin) -> Result<Layer, LearnerError> {
        let settings = toml::from_str::<Settings>(text).map_err(|e| {
            let at = e
                .span()
                .map(|span| key_at(text, span.start))
                .unwrap_or_default();
            LearnerError::Config(format!("{origin}{at}: {}", e.message()))
        })?;
        Ok(Layer { origin, settings })
    }

    /// A layer read from the TOML file at `path` (`--config`).
    pub fn read(path: &Path) -> Result<Layer, LearnerError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            LearnerError::Config(format!("--config {}: cannot read it: {e}", path.display()))
        })?;
        Layer::parse(&text, Origin::File(path.to_owned()))
    }
}

/// ` line N, key SECTION.KEY` for the byte offset `at` of `text`: the
/// line's own key under the section header above it (what a user looks
/// for; toml's own message names only the problem).
fn key_at(text: &str, at: usize) -> String {
    let before = &text[..at.min(text.len())];
    let line_no = before.matches('\n').count() + 1;
    let line = text.lines().nth(line_no - 1).unwrap_or_default();
    let section = before
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| l.starts_with('[') && !l.starts_with("[["))
        .map(|l| l.trim_matches(|c| c == '[' || c == ']').trim().to_owned());
    let key = line
        .split_once('=')
        .map(|(k, _)| k.trim().to_owned())
        .filter(|k| !k.is_empty() && !k.starts_with('['));
    match (section, key) {
        (Some(s), Some(k)) => format!(", line {line_no}, key {s}.{k}"),
        (None, Some(k)) => format!(", line {line_no}, key {k}"),
        (Some(s), None) => format!(", line {line_no}, section [{s}]"),
        (None, None) => format!(", line {line_no}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(text: &str) -> String {
        Layer::parse(text, Origin::File("r.toml".into()))
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn errors_name_the_file_the_key_and_what_was_expected() {
        let e = refusal("[train]\nbatch_sise = 4\n");
        assert!(
            e.contains("r.toml") && e.contains("train.batch_sise") && e.contains("batch_size"),
            "{e}"
        );
        let e = refusal("[train]\nlearning_rate = 1e-3\nbatch_size = \"big\"\n");
        assert!(
            e.contains("r.toml") && e.contains("line 3") && e.contains("train.batch_size"),
            "{e}"
        );
        assert!(e.contains("usize") || e.contains("integer"), "{e}");
        let e = refusal("[trian]\nbatch_size = 4\n");
        assert!(e.contains("trian") && e.contains("train"), "{e}");
        let e = refusal("[train]\nalgo = \"ppo\"\n");
        assert!(e.contains("train.algo") && e.contains("vtrace"), "{e}");
    }

    #[test]
    fn a_layer_holds_only_what_it_names() {
        let l = Layer::parse("[train]\nbatch_size = 4\n", Origin::Flags).unwrap();
        assert_eq!(l.settings.train.batch_size, Some(4));
        assert!(l.settings.sets("train.batch_size"));
        assert!(!l.settings.sets("train.unroll_length"));
        assert_eq!(l.settings.train.unroll_length, None);
    }
}
