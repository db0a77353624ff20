//! Training checkpoints in a run directory (`--run-dir`, `--resume`).
//!
//! Layout:
//! ```text
//! RUN_DIR/
//!   LATEST                       name of the newest complete checkpoint
//!   checkpoints/step-0000001234/
//!     weights.safetensors        model variables, named like the code
//!     optimizer.safetensors      optimizer moments and step count
//!     state.json                 counters (learner steps, policy version, ...)
//!     config.json                model, env and training flags
//!     replay.seedrpl             the replay buffer (contents, keys, priorities,
//!                                sampler and rate-limiter state, RNG position)
//! ```
//!
//! The replay file is the buffer's own non-blocking checkpoint
//! (`seed_replay::ReplayBuffer::checkpoint`): each slot is copied with the
//! slot protocol, so inference inserting meanwhile waits at most for one
//! slot copy. A periodic checkpoint taken while training runs is a fuzzy
//! snapshot (every item intact, counters a moment apart); the final one is
//! taken after the buffer closed and the trainer stopped, so `--resume`
//! continues sampling exactly where the run stopped. R2D2's target network
//! and the acting average (`--acting-average`) are not saved: a resumed run
//! starts them from the restored weights.
//!
//! A checkpoint belongs to its env's observation shape and action space: the
//! model records its action distribution (categorical over `A` actions or a
//! Gaussian over `D` floats), and [`CheckpointConfig::check_env`] refuses an
//! env that does not match it (`--resume`, `learner eval`).
//!
//! Atomicity: a checkpoint is written into a temporary directory, flushed,
//! and renamed into place; then `LATEST` is replaced by writing a temporary
//! file and renaming it. A crash at any point leaves `LATEST` naming a
//! complete checkpoint (or no `LATEST` at all). The two newest checkpoints
//! are kept.
//!
//! Cost: one copy of the weights and optimizer moments to disk; for the
//! CartPole MLP that is a few hundred KiB.
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use candle_core::{Device, Tensor};
use seed_env::{EnvConfig, SyntheticConfig};
use seed_shared::{ActionSpace, EnvSpec, ObsDType};
use serde::{Deserialize, Serialize};

use crate::learn::optimizer::Optimizer;
use crate::model::{ActionDistribution, ModelConfig, TrainableModel};
use seed_replay::{ItemLayout, ReplayBuffer, ReplayConfig, ReplayError};

/// The replay buffer's file in a checkpoint directory.
const REPLAY_FILE: &str = "replay.seedrpl";

/// Checkpoints kept in `checkpoints/`.
const KEEP: usize = 2;

/// Why a checkpoint could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {reason}")]
    Corrupt { path: PathBuf, reason: String },
    #[error(
        "no checkpoint in {0} (no LATEST file: not a run directory, and no config.json: not \
         a checkpoint directory)"
    )]
    Missing(PathBuf),
    #[error("tensors: {0}")]
    Tensor(#[from] candle_core::Error),
    #[error("optimizer state: {0}")]
    Optimizer(#[from] crate::learn::optimizer::OptimizerError),
    #[error("replay buffer: {0}")]
    Replay(#[from] ReplayError),
    #[error(
        "the checkpoint's model is for {field} {checkpoint}, but the env has {env}: a \
         checkpoint only runs on the observations and action space it was trained for"
    )]
    EnvMismatch {
        /// `observations` or `actions`.
        field: &'static str,
        checkpoint: String,
        env: String,
    },
}

fn io(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> CheckpointError {
    let path = path.to_path_buf();
    move |source| CheckpointError::Io { what, path, source }
}

/// Counters a resumed run continues from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CheckpointState {
    pub learner_steps: u64,
    pub policy_version: u64,
    pub env_steps: u64,
    pub episodes: u64,
    /// Wall seconds of training before this checkpoint (all sessions).
    pub wall_seconds: f64,
}

/// The environment a run trained on, enough to rebuild it for `eval`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnvDescription {
    /// `cartpole`, `cartpole-masked`, `pendulum`, `synthetic`, or `remote`
    /// (an env only actors ran, such as a Gymnasium one).
    pub kind: String,
    /// The env's name as its actors announced it (a Gymnasium id such as
    /// `MinAtar/Breakout-v1` for the Python actor); absent in checkpoints
    /// written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env_name: Option<String>,
    pub obs_shape: Vec<usize>,
    /// `f32` or `u8`.
    pub obs_dtype: String,
    /// Discrete actions: their number; 0 when `action_box` is set.
    pub num_actions: u32,
    /// Continuous actions: the box (absent in checkpoints of discrete
    /// envs, and in all written before continuous actions existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action_box: Option<ActionBox>,
    pub episode_len: u32,
    pub step_cost_us: u64,
}

/// A continuous action space as `config.json` records it: one action is
/// `prod(shape)` floats, element `i` within `[low[i], high[i]]`. An infinite
/// bound is written as the string `"inf"` or `"-inf"` (JSON has no
/// infinity).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActionBox {
    pub shape: Vec<usize>,
    #[serde(with = "bounds")]
    pub low: Vec<f32>,
    #[serde(with = "bounds")]
    pub high: Vec<f32>,
}

impl EnvDescription {
    /// What a checkpoint records of an env of `spec`: `env`, the learner's
    /// own, so `learner eval` can rebuild it, or `None` for an env only
    /// actors run (kind `remote`).
    pub fn of(env: Option<&EnvConfig>, spec: &EnvSpec) -> Self {
        let (kind, synthetic) = match env {
            Some(EnvConfig::CartPole) => ("cartpole", SyntheticConfig::default()),
            Some(EnvConfig::CartPoleMasked) => ("cartpole-masked", SyntheticConfig::default()),
            Some(EnvConfig::Pendulum) => ("pendulum", SyntheticConfig::default()),
            Some(EnvConfig::Synthetic(s)) => ("synthetic", s.clone()),
            None => ("remote", SyntheticConfig::default()),
        };
        EnvDescription {
            env_name: Some(spec.env_name.clone()),
            kind: kind.into(),
            obs_shape: spec.obs_shape.clone(),
            obs_dtype: spec.obs_dtype.to_string(),
            num_actions: spec.num_actions().unwrap_or(0),
            action_box: EnvDescription::action_box_of(&spec.action),
            episode_len: synthetic.episode_len,
            step_cost_us: synthetic.step_cost_us,
        }
    }

    /// The observation and action spaces the run trained on.
    pub fn spec(&self) -> Result<EnvSpec, String> {
        let obs_dtype = self
            .obs_dtype
            .parse::<ObsDType>()
            .map_err(|e| format!("env.obs_dtype: {e}"))?;
        let action = match &self.action_box {
            Some(b) => {
                let n: usize = b.shape.iter().product();
                if b.low.len() != n || b.high.len() != n {
                    return Err(format!(
                        "env.action_box: {} low and {} high bounds for shape {:?}",
                        b.low.len(),
                        b.high.len(),
                        b.shape
                    ));
                }
                ActionSpace::Box {
                    shape: b.shape.clone(),
                    low: b.low.clone(),
                    high: b.high.clone(),
                }
            }
            None if self.num_actions > 0 => ActionSpace::Discrete(self.num_actions),
            None => return Err("env: neither num_actions nor action_box is set".into()),
        };
        Ok(EnvSpec {
            env_name: self.env_name.clone().unwrap_or_else(|| self.kind.clone()),
            obs_shape: self.obs_shape.clone(),
            obs_dtype,
            action,
        })
    }

    /// The box of `action`, for [`EnvDescription::action_box`]; `None` for
    /// a discrete space.
    pub fn action_box_of(action: &ActionSpace) -> Option<ActionBox> {
        match action {
            ActionSpace::Discrete(_) => None,
            ActionSpace::Box { shape, low, high } => Some(ActionBox {
                shape: shape.clone(),
                low: low.clone(),
                high: high.clone(),
            }),
        }
    }
}

/// Box bounds in JSON: finite floats as numbers, infinities as strings.
mod bounds {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    #[serde(untagged)]
    enum Bound {
        Finite(f32),
        Infinite(String),
    }

    pub fn serialize<S: Serializer>(values: &[f32], s: S) -> Result<S::Ok, S::Error> {
        let bounds: Vec<Bound> = values
            .iter()
            .map(|&v| match v {
                f32::INFINITY => Bound::Infinite("inf".into()),
                f32::NEG_INFINITY => Bound::Infinite("-inf".into()),
                v => Bound::Finite(v),
            })
            .collect();
        bounds.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f32>, D::Error> {
        Vec::<Bound>::deserialize(d)?
            .into_iter()
            .map(|b| match b {
                Bound::Finite(v) => Ok(v),
                Bound::Infinite(s) => match s.as_str() {
                    "inf" => Ok(f32::INFINITY),
                    "-inf" => Ok(f32::NEG_INFINITY),
                    other => Err(serde::de::Error::custom(format!(
                        "action bound {other:?} is neither a number nor \"inf\" or \"-inf\""
                    ))),
                },
            })
            .collect()
    }
}

/// `config.json`: the model, the env and the flags of the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckpointConfig {
    pub model: ModelConfig,
    pub env: EnvDescription,
    /// The training flags, for the record (hyperparameters).
    pub flags: serde_json::Value,
}

impl CheckpointConfig {
    /// Whether the run trained Q-values (`--algo r2d2`: the policy head
    /// holds a dueling head's advantages) rather than an actor-critic's
    /// action distribution; read from the recorded flags.
    pub fn trains_q_values(&self) -> bool {
        self.flags
            .pointer("/trainer/agent")
            .and_then(serde_json::Value::as_object)
            .is_some_and(|agent| agent.contains_key("r2d2"))
    }

    /// Refuses an env whose observations or action space differ from what
    /// the checkpoint's model was built for (a categorical model on a
    /// continuous env, a different number of actions, ...).
    pub fn check_env(&self, spec: &EnvSpec) -> Result<(), CheckpointError> {
        let model = &self.model;
        if model.obs_shape != spec.obs_shape {
            return Err(CheckpointError::EnvMismatch {
                field: "observations",
                checkpoint: format!("{:?}", model.obs_shape),
                env: format!("{:?}", spec.obs_shape),
            });
        }
        if model.action != ActionDistribution::for_space(&spec.action) {
            return Err(CheckpointError::EnvMismatch {
                field: "actions",
                checkpoint: format!("a {} policy", model.action),
                env: format!("actions {}", spec.action),
            });
        }
        Ok(())
    }
}

/// A checkpoint read from disk.
#[derive(Debug, Clone)]
pub struct LoadedCheckpoint {
    pub dir: PathBuf,
    pub state: CheckpointState,
    pub config: CheckpointConfig,
}

impl LoadedCheckpoint {
    /// Reads the checkpoint at `path`: a run directory (its newest
    /// checkpoint, by `LATEST`) or one checkpoint's own directory (with its
    /// `config.json`, such as `checkpoints/step-*` or `best/`).
    pub fn resolve(path: &Path) -> Result<Self, CheckpointError> {
        if path.join("LATEST").exists() || !path.join("config.json").exists() {
            return Self::latest(path);
        }
        Self::open(path)
    }

    /// Reads the checkpoint directory `dir` itself.
    pub fn open(dir: &Path) -> Result<Self, CheckpointError> {
        Ok(LoadedCheckpoint {
            state: read_json(&dir.join("state.json"))?,
            config: read_json(&dir.join("config.json"))?,
            dir: dir.to_path_buf(),
        })
    }

    /// Reads the newest checkpoint of `run_dir`.
    pub fn latest(run_dir: &Path) -> Result<Self, CheckpointError> {
        let latest = run_dir.join("LATEST");
        let name = match std::fs::read_to_string(&latest) {
            Ok(s) => s.trim().to_string(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(CheckpointError::Missing(run_dir.to_path_buf()))
            }
            Err(e) => return Err(io("reading", &latest)(e)),
        };
        if name.is_empty() || name.contains('/') || name.contains("..") {
            return Err(CheckpointError::Corrupt {
                path: latest,
                reason: format!("not a checkpoint name: {name:?}"),
            });
        }
        Self::open(&run_dir.join("checkpoints").join(name))
    }

    /// The model weights, by name, on `device`.
    pub fn weights(&self, device: &Device) -> Result<HashMap<String, Tensor>, CheckpointError> {
        let path = self.dir.join("weights.safetensors");
        candle_core::safetensors::load(&path, device).map_err(|e| CheckpointError::Corrupt {
            path,
            reason: e.to_string(),
        })
    }

    /// Loads the weights into `model` (same architecture).
    pub fn restore_weights(&self, model: &mut TrainableModel) -> Result<(), CheckpointError> {
        Ok(model.varmap.load(self.dir.join("weights.safetensors"))?)
    }

    /// Loads the optimizer state (moments, step count) into `optimizer`.
    pub fn restore_optimizer(
        &self,
        optimizer: &mut Optimizer,
        device: &Device,
    ) -> Result<(), CheckpointError> {
        let state = candle_core::safetensors::load(self.dir.join("optimizer.safetensors"), device)?;
        optimizer.load_state(&state)?;
        Ok(())
    }

    /// Whether the checkpoint holds an in-process replay buffer.
    pub fn has_replay(&self) -> bool {
        self.dir.join(REPLAY_FILE).exists()
    }

    /// The replay buffer the checkpoint holds, rebuilt for `layout` and
    /// `config` (which must match the saved ones: the error names what
    /// differs); `None` for a checkpoint written without one.
    pub fn restore_replay(
        &self,
        layout: ItemLayout,
        config: ReplayConfig,
    ) -> Result<Option<ReplayBuffer>, CheckpointError> {
        let path = self.dir.join(REPLAY_FILE);
        if !path.exists() {
            return Ok(None);
        }
        Ok(Some(ReplayBuffer::restore(&path, layout, config)?))
    }
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T, CheckpointError> {
    let text = std::fs::read_to_string(path).map_err(io("reading", path))?;
    serde_json::from_str(&text).map_err(|e| CheckpointError::Corrupt {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), CheckpointError> {
    let mut f = std::fs::File::create(path).map_err(io("creating", path))?;
    f.write_all(bytes).map_err(io("writing", path))?;
    f.sync_all().map_err(io("syncing", path))
}

/// Writes a checkpoint of `model` and `optimizer` with the run's counters
/// `state` into `run_dir` (see the module docs); returns its directory.
pub fn save(
    run_dir: &Path,
    model: &TrainableModel,
    optimizer: &Optimizer,
    state: &CheckpointState,
    config: &CheckpointConfig,
) -> Result<PathBuf, CheckpointError> {
    save_with_replay(run_dir, model, optimizer, state, config, None)
}

/// [`save`], with the replay buffer's contents when `replay` is given.
pub fn save_with_replay(
    run_dir: &Path,
    model: &TrainableModel,
    optimizer: &Optimizer,
    state: &CheckpointState,
    config: &CheckpointConfig,
    replay: Option<&ReplayBuffer>,
) -> Result<PathBuf, CheckpointError> {
    let root = run_dir.join("checkpoints");
    std::fs::create_dir_all(&root).map_err(io("creating", &root))?;
    let name = format!("step-{:010}", state.learner_steps);
    let tmp = root.join(format!(".tmp-{name}-{}", std::process::id()));
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).map_err(io("removing", &tmp))?;
    }
    std::fs::create_dir_all(&tmp).map_err(io("creating", &tmp))?;

    let weights = model.named_tensors()?;
    candle_core::safetensors::save(&weights, tmp.join("weights.safetensors"))?;
    let opt = optimizer.state()?;
    candle_core::safetensors::save(&opt, tmp.join("optimizer.safetensors"))?;
    for (file, text) in [
        ("state.json", to_json(state, &tmp)?),
        ("config.json", to_json(config, &tmp)?),
    ] {
        write_file(&tmp.join(file), text.as_bytes())?;
    }
    if let Some(replay) = replay {
        replay.checkpoint(&tmp.join(REPLAY_FILE))?;
    }

    let dir = root.join(&name);
    if dir.exists() {
        // Same step saved again (e.g. at exit right after a periodic save).
        std::fs::remove_dir_all(&dir).map_err(io("removing", &dir))?;
    }
    std::fs::rename(&tmp, &dir).map_err(io("renaming into", &dir))?;
    let latest_tmp = run_dir.join(format!(".LATEST.tmp-{}", std::process::id()));
    write_file(&latest_tmp, format!("{name}\n").as_bytes())?;
    let latest = run_dir.join("LATEST");
    std::fs::rename(&latest_tmp, &latest).map_err(io("renaming into", &latest))?;
    prune(&root, &name);
    Ok(dir)
}

/// Writes a policy-only checkpoint into `dir` (weights, counters, config,
/// and each `(name, text)` of `extra`), replacing what was there: the
/// new directory is written whole beside it, then the old one is renamed
/// away and the new one into place (a crash between the two renames leaves
/// the previous policy as `.old-NAME-PID`, never a half-written one). What
/// `--eval-every` keeps in `RUN_DIR/best/`: it loads as a policy
/// (`seed_rs.Policy`, `learner eval --checkpoint`), but holds no optimizer
/// state or replay buffer to resume from.
pub fn save_policy(
    dir: &Path,
    weights: &HashMap<String, Tensor>,
    state: &CheckpointState,
    config: &CheckpointConfig,
    extra: &[(&str, String)],
) -> Result<(), CheckpointError> {
    let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("policy");
    let parent = dir.parent().unwrap_or(Path::new("."));
    let tmp = parent.join(format!(".tmp-{name}-{}", std::process::id()));
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).map_err(io("removing", &tmp))?;
    }
    std::fs::create_dir_all(&tmp).map_err(io("creating", &tmp))?;
    candle_core::safetensors::save(weights, tmp.join("weights.safetensors"))?;
    let mut files = vec![
        ("state.json", to_json(state, &tmp)?),
        ("config.json", to_json(config, &tmp)?),
    ];
    files.extend(extra.iter().map(|(n, t)| (*n, t.clone())));
    for (file, text) in files {
        write_file(&tmp.join(file), text.as_bytes())?;
    }
    let old = parent.join(format!(".old-{name}-{}", std::process::id()));
    if dir.exists() {
        std::fs::rename(dir, &old).map_err(io("renaming", dir))?;
    }
    std::fs::rename(&tmp, dir).map_err(io("renaming into", dir))?;
    if old.exists() {
        let _ = std::fs::remove_dir_all(&old);
    }
    Ok(())
}

/// Removes all but the newest [`KEEP`] checkpoints (best effort).
fn prune(root: &Path, newest: &str) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("step-") && n.as_str() <= newest)
        .collect();
    names.sort();
    let excess = names.len().saturating_sub(KEEP);
    for n in &names[..excess] {
        let _ = std::fs::remove_dir_all(root.join(n));
    }
}

fn to_json<T: Serialize>(value: &T, path: &Path) -> Result<String, CheckpointError> {
    serde_json::to_string_pretty(value)
        .map(|s| s + "\n")
        .map_err(|e| CheckpointError::Corrupt {
            path: path.to_path_buf(),
            reason: format!("cannot serialise: {e}"),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::learn::optimizer::OptimizerConfig;
    use crate::learn::trainer::{Trainer, TrainerConfig};
    use crate::learn::vtrace::ImpalaLossConfig;
    use crate::model::weights::{PolicyVersion, WeightsHandle};
    use seed_shared::EnvSpec;
    use std::sync::Arc;

    fn trainer(seed: u64) -> Trainer {
        let cfg = ModelConfig::for_spec(&EnvSpec::cartpole());
        let model = TrainableModel::new(&cfg, &Device::Cpu, seed).unwrap();
        let w = Arc::new(WeightsHandle::new(
            model.snapshot().unwrap(),
            PolicyVersion(0),
        ));
        Trainer::new(
            model,
            TrainerConfig {
                agent: crate::learn::agent::Agent::VTrace,
                loss: ImpalaLossConfig::impala_paper(),
                optimizer: OptimizerConfig::constant_adam(6e-4),
                max_grad_norm: 1.0,
                acting_average: 0.0,
            },
            w,
            None,
        )
        .unwrap()
    }

    fn config() -> CheckpointConfig {
        CheckpointConfig {
            model: ModelConfig::for_spec(&EnvSpec::cartpole()),
            env: EnvDescription {
                env_name: None,
                kind: "cartpole".into(),
                obs_shape: vec![4],
                obs_dtype: "f32".into(),
                num_actions: 2,
                action_box: None,
                episode_len: 500,
                step_cost_us: 0,
            },
            flags: serde_json::json!({"lr": 0.001}),
        }
    }

    #[test]
    fn save_then_restore_round_trips_weights_and_counters() {
        let dir = tempfile::tempdir().unwrap();
        let a = trainer(1);
        for steps in [10, 20, 30] {
            let state = CheckpointState {
                learner_steps: steps,
                policy_version: steps + 5,
                env_steps: 1000 * steps,
                episodes: 7,
                wall_seconds: 1.5,
            };
            save(dir.path(), &a.model, &a.optimizer, &state, &config()).unwrap();
        }
        let loaded = LoadedCheckpoint::latest(dir.path()).unwrap();
        assert_eq!(loaded.state.learner_steps, 30);
        assert_eq!(loaded.state.policy_version, 35);
        assert_eq!(loaded.config, config());
        let kept = std::fs::read_dir(dir.path().join("checkpoints"))
            .unwrap()
            .count();
        assert_eq!(kept, KEEP, "older checkpoints pruned, no temp dirs left");

        let mut b = trainer(2);
        loaded.restore_weights(&mut b.model).unwrap();
        loaded
            .restore_optimizer(&mut b.optimizer, &Device::Cpu)
            .unwrap();
        let (wa, wb) = (
            a.model.named_tensors().unwrap(),
            b.model.named_tensors().unwrap(),
        );
        for (name, t) in &wa {
            let diff = (t - &wb[name]).unwrap().abs().unwrap().max_all().unwrap();
            assert_eq!(diff.to_scalar::<f32>().unwrap(), 0.0, "{name}");
        }
    }

    #[test]
    fn a_checkpoint_refuses_an_env_of_another_action_space() {
        let c = config();
        assert!(c.check_env(&EnvSpec::cartpole()).is_ok());
        let mut box_env = EnvSpec::cartpole();
        box_env.action = ActionSpace::uniform_box(2, -1.0, 1.0);
        let err = c.check_env(&box_env).unwrap_err();
        assert!(
            matches!(
                err,
                CheckpointError::EnvMismatch {
                    field: "actions",
                    ..
                }
            ),
            "{err}"
        );
        let text = err.to_string();
        assert!(
            text.contains("categorical over 2 actions") && text.contains("Box([2], -1..1)"),
            "{text}"
        );
        let mut three = EnvSpec::cartpole();
        three.action = ActionSpace::Discrete(3);
        assert!(c.check_env(&three).is_err());
        let mut wider = EnvSpec::cartpole();
        wider.obs_shape = vec![5];
        assert!(matches!(
            c.check_env(&wider),
            Err(CheckpointError::EnvMismatch {
                field: "observations",
                ..
            })
        ));
    }

    #[test]
    fn config_json_round_trips_a_gaussian_model_and_infinite_bounds() {
        let spec = EnvSpec {
            env_name: "Box".into(),
            obs_shape: vec![3],
            obs_dtype: seed_shared::ObsDType::F32,
            action: ActionSpace::Box {
                shape: vec![2],
                low: vec![-2.0, f32::NEG_INFINITY],
                high: vec![2.0, f32::INFINITY],
            },
        };
        let c = CheckpointConfig {
            model: ModelConfig::for_spec(&spec),
            env: EnvDescription {
                env_name: None,
                kind: "box".into(),
                obs_shape: vec![3],
                obs_dtype: "f32".into(),
                num_actions: 0,
                action_box: EnvDescription::action_box_of(&spec.action),
                episode_len: 0,
                step_cost_us: 0,
            },
            flags: serde_json::Value::Null,
        };
        let text = serde_json::to_string(&c).unwrap();
        assert!(
            text.contains("\"-inf\"") && text.contains("\"gaussian\""),
            "{text}"
        );
        let back: CheckpointConfig = serde_json::from_str(&text).unwrap();
        assert_eq!(back, c);
        assert!(back.check_env(&spec).is_ok());
        assert!(back.check_env(&EnvSpec::cartpole()).is_err());
    }

    #[test]
    fn config_json_of_a_discrete_model_from_before_action_kinds_still_reads() {
        // What checkpoints recorded before the action distribution existed.
        let old = r#"{
            "model": {"obs_shape": [4], "obs_is_u8": false, "num_actions": 2,
                      "hidden_sizes": [64, 64], "conv_features": 256, "lstm_size": null},
            "env": {"kind": "cartpole", "obs_shape": [4], "obs_dtype": "f32",
                    "num_actions": 2, "episode_len": 500, "step_cost_us": 0},
            "flags": {"lr": 0.001}
        }"#;
        let c: CheckpointConfig = serde_json::from_str(old).unwrap();
        assert_eq!(c, config());
    }

    #[test]
    fn missing_or_corrupt_checkpoints_are_errors_not_panics() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            LoadedCheckpoint::latest(dir.path()),
            Err(CheckpointError::Missing(_))
        ));
        std::fs::write(dir.path().join("LATEST"), "../etc\n").unwrap();
        assert!(matches!(
            LoadedCheckpoint::latest(dir.path()),
            Err(CheckpointError::Corrupt { .. })
        ));
        let t = trainer(1);
        save(
            dir.path(),
            &t.model,
            &t.optimizer,
            &CheckpointState::default(),
            &config(),
        )
        .unwrap();
        let loaded = LoadedCheckpoint::latest(dir.path()).unwrap();
        std::fs::write(loaded.dir.join("state.json"), "{not json").unwrap();
        assert!(matches!(
            LoadedCheckpoint::latest(dir.path()),
            Err(CheckpointError::Corrupt { .. })
        ));
    }
}
