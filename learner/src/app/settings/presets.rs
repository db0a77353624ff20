//! Presets: env recipes as data files (`learner/presets/NAME.toml`),
//! compiled into the library so `learner --preset NAME` works from an
//! installed binary or wheel with no repository beside it.
//!
//! A preset overrides only what differs from the defaults (PufferLib's
//! per-env files over its `default.ini`), and says in `[about]` what it is
//! and, for envs stepped by the Python actor, the actor command it expects.
use super::layer::{Layer, Origin};
use crate::error::LearnerError;

/// Every preset: its name and its file.
pub const PRESETS: &[(&str, &str)] = &[
    ("cartpole", include_str!("../../../presets/cartpole.toml")),
    (
        "cartpole-masked-r2d2",
        include_str!("../../../presets/cartpole-masked-r2d2.toml"),
    ),
    (
        "cartpole-masked-lstm",
        include_str!("../../../presets/cartpole-masked-lstm.toml"),
    ),
    ("pendulum", include_str!("../../../presets/pendulum.toml")),
    ("minatar", include_str!("../../../presets/minatar.toml")),
    ("atari", include_str!("../../../presets/atari.toml")),
    (
        "lunarlander",
        include_str!("../../../presets/lunarlander.toml"),
    ),
];

/// The preset `name` as a layer, or an error listing the presets.
pub fn preset(name: &str) -> Result<Layer, LearnerError> {
    let Some((name, text)) = PRESETS.iter().find(|(n, _)| *n == name) else {
        let names: Vec<&str> = PRESETS.iter().map(|(n, _)| *n).collect();
        return Err(LearnerError::Config(format!(
            "--preset {name}: no such preset; the presets are {}",
            names.join(", ")
        )));
    };
    Layer::parse(text, Origin::Preset((*name).to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_parses_and_describes_itself() {
        for (name, _) in PRESETS {
            let layer = preset(name).unwrap_or_else(|e| panic!("{name}: {e}"));
            let about = layer.settings.about.as_ref().expect("[about]");
            assert!(!about.description.is_empty(), "{name}");
        }
        let e = preset("cartpol").unwrap_err().to_string();
        assert!(e.contains("cartpol") && e.contains("minatar"), "{e}");
    }
}
