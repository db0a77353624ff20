//! The library's defaults: `defaults.toml` beside this file, compiled in,
//! the one place each default value is written.
//!
//! A default is a plain value, or a table of cases (`{ vtrace = 8, r2d2 =
//! 32 }`) picked once every layer is merged ([`Case`]): so `--algo r2d2`
//! from a flag still gets R2D2's discount when a preset says nothing of
//! it. Help text and `docs/presets.md` render the same table
//! ([`describe`]), so no default is written twice. Cost: the file is parsed
//! once per process.
use std::sync::OnceLock;

use super::schema::{AlgoName, OptimizerName, Settings};
use crate::error::LearnerError;

/// The defaults file, as written (comments included: docs show them).
pub const DEFAULTS_TOML: &str = include_str!("defaults.toml");

/// The parsed defaults file. It is part of the binary and a test reads
/// it, so a parse failure here is a build defect, not bad input.
fn table() -> &'static toml::Table {
    static TABLE: OnceLock<toml::Table> = OnceLock::new();
    TABLE.get_or_init(|| {
        DEFAULTS_TOML
            .parse()
            .expect("defaults.toml is valid TOML (tested)")
    })
}

/// What a table of cases is matched against, in this order: `rmsprop`,
/// `lstm`, the algorithm, the device kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Case {
    pub algo: AlgoName,
    pub cuda: bool,
    pub optimizer: OptimizerName,
    pub lstm: bool,
}

impl Case {
    /// The case names this run matches, first wins.
    fn names(&self) -> Vec<&'static str> {
        let mut names = Vec::with_capacity(4);
        if self.optimizer == OptimizerName::Rmsprop {
            names.push("rmsprop");
        }
        if self.lstm {
            names.push("lstm");
        }
        names.push(self.algo.as_str());
        names.push(if self.cuda { "cuda" } else { "cpu" });
        names
    }

    /// The case of a run whose merged layers say `user` (what they leave
    /// unset takes the plain defaults of `train.algo`, `inference.device`,
    /// `train.optimizer` and `model.lstm`).
    pub fn of(user: &Settings) -> Result<Case, LearnerError> {
        let plain = plain_defaults()?;
        let device = user
            .inference
            .device
            .clone()
            .or(plain.inference.device)
            .unwrap_or_default();
        Ok(Case {
            algo: user
                .train
                .algo
                .or(plain.train.algo)
                .unwrap_or(AlgoName::Vtrace),
            cuda: device.starts_with("cuda"),
            optimizer: user
                .train
                .optimizer
                .or(plain.train.optimizer)
                .unwrap_or(OptimizerName::Adam),
            lstm: user.model.lstm.or(plain.model.lstm).unwrap_or(false),
        })
    }
}

/// The defaults that live with the code sharing them: the wire's message
/// cap and keepalive (the actor uses the same), the state table's idle
/// threshold, the remote replay writer's queue and the evaluator's episodes.
pub fn shared() -> Settings {
    use super::schema::{CheckpointsSection, InferenceSection, RemoteReplaySection, ServeSection};
    Settings {
        serve: ServeSection {
            max_message_bytes: Some(seed_shared::DEFAULT_MAX_MESSAGE_BYTES),
            keepalive_secs: Some(seed_shared::keepalive::DEFAULT_KEEPALIVE_SECS),
            keepalive_timeout_secs: Some(seed_shared::keepalive::DEFAULT_KEEPALIVE_TIMEOUT_SECS),
            ..Default::default()
        },
        inference: InferenceSection {
            actor_idle_ms: Some(
                crate::infer::state_table::DEFAULT_IDLE_THRESHOLD.as_millis() as u64,
            ),
            ..Default::default()
        },
        remote_replay: RemoteReplaySection {
            replay_insert_queue: Some(crate::unroll_store::remote::config::DEFAULT_INSERT_QUEUE),
            ..Default::default()
        },
        checkpoints: CheckpointsSection {
            eval_episodes: Some(crate::app::evaluator::DEFAULT_EVAL_EPISODES),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// The defaults' plain values only (tables of cases left out).
fn plain_defaults() -> Result<Settings, LearnerError> {
    select(|_| None)
}

/// The defaults for a run of `case`: each table of cases replaced by its
/// first matching case; keys with no matching case left unset (their rule
/// applies, see `super::resolve`).
pub fn defaults_for(case: &Case) -> Result<Settings, LearnerError> {
    let names = case.names();
    Ok(shared().merge(select(|cases| {
        names.iter().find_map(|n| cases.get(*n).cloned())
    })?))
}

fn select(pick: impl Fn(&toml::Table) -> Option<toml::Value>) -> Result<Settings, LearnerError> {
    let mut out = toml::Table::new();
    for (section, keys) in table() {
        let Some(keys) = keys.as_table() else {
            continue;
        };
        let mut picked = toml::Table::new();
        for (key, value) in keys {
            let value = match value {
                toml::Value::Table(cases) => pick(cases),
                plain => Some(plain.clone()),
            };
            if let Some(v) = value {
                picked.insert(key.clone(), v);
            }
        }
        out.insert(section.clone(), toml::Value::Table(picked));
    }
    out.try_into()
        .map_err(|e| LearnerError::Config(format!("defaults.toml: {e}")))
}

/// The default of `key` (`section.name`) as help text shows it: `16`, or
/// `cpu: 16, cuda: 64` for a table of cases; `None` where the file does
/// not name the key.
pub fn describe(key: &str) -> Option<String> {
    let (section, name) = key.split_once('.')?;
    let shared = shared().to_table().ok()?;
    let in_file = table()
        .get(section)
        .and_then(|s| s.as_table())
        .and_then(|s| s.get(name));
    let value = match in_file {
        Some(v) => v,
        None => shared.get(section)?.as_table()?.get(name)?,
    };
    Some(match value {
        toml::Value::Table(cases) => cases
            .iter()
            .map(|(case, v)| format!("{case}: {}", flag_text(v)))
            .collect::<Vec<_>>()
            .join(", "),
        plain => flag_text(plain),
    })
}

/// A value as it would be typed after its flag: strings unquoted, arrays
/// comma-separated.
pub fn flag_text(value: &toml::Value) -> String {
    match value {
        toml::Value::String(s) => s.clone(),
        toml::Value::Boolean(on) => if *on { "on" } else { "off" }.to_owned(),
        // 1e-8, not 0.00000001.
        toml::Value::Float(x) if *x != 0.0 && x.abs() < 1e-3 => format!("{x:e}"),
        toml::Value::Array(items) => items.iter().map(flag_text).collect::<Vec<_>>().join(","),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_parses_and_every_key_is_a_setting() {
        // Every case combination deserializes into the schema, which
        // refuses unknown keys and wrong types.
        for algo in [AlgoName::Vtrace, AlgoName::R2d2] {
            for cuda in [false, true] {
                for optimizer in [OptimizerName::Adam, OptimizerName::Rmsprop] {
                    for lstm in [false, true] {
                        let case = Case {
                            algo,
                            cuda,
                            optimizer,
                            lstm,
                        };
                        defaults_for(&case).unwrap_or_else(|e| panic!("{case:?}: {e}"));
                    }
                }
            }
        }
        for (section, keys) in table() {
            for (key, value) in keys.as_table().expect("sections are tables") {
                assert_eq!(
                    super::super::schema::section_of(key),
                    Some(section.as_str()),
                    "{section}.{key}"
                );
                if let toml::Value::Table(cases) = value {
                    for case in cases.keys() {
                        assert!(
                            ["rmsprop", "lstm", "vtrace", "r2d2", "cpu", "cuda"]
                                .contains(&case.as_str()),
                            "{section}.{key}: unknown case {case}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn cases_pick_in_order() {
        let case = |algo, cuda, optimizer, lstm| Case {
            algo,
            cuda,
            optimizer,
            lstm,
        };
        let eps = |c: Case| defaults_for(&c).unwrap().train.optimizer_epsilon;
        use AlgoName::*;
        use OptimizerName::*;
        assert_eq!(eps(case(Vtrace, false, Adam, false)), Some(1e-3));
        assert_eq!(eps(case(Vtrace, false, Adam, true)), Some(1e-8));
        assert_eq!(eps(case(R2d2, false, Adam, false)), Some(1e-8));
        assert_eq!(eps(case(R2d2, true, Rmsprop, true)), Some(0.01));
        let batch = |c: Case| defaults_for(&c).unwrap().train.batch_size;
        assert_eq!(batch(case(R2d2, false, Adam, false)), Some(16));
        assert_eq!(batch(case(Vtrace, true, Adam, false)), Some(64));
        assert_eq!(
            describe("train.batch_size").as_deref(),
            Some("cpu: 16, cuda: 64")
        );
        assert_eq!(describe("model.hidden_sizes").as_deref(), Some("64,64"));
        assert_eq!(describe("train.optimizer").as_deref(), Some("adam"));
        assert_eq!(
            describe("train.optimizer_epsilon").as_deref(),
            Some("rmsprop: 0.01, lstm: 1e-8, vtrace: 0.001, r2d2: 1e-8")
        );
        assert_eq!(describe("run.max_seconds"), None);
        assert_eq!(
            describe("remote_replay.replay_insert_queue").as_deref(),
            Some("8")
        );
    }
}
