//! [`Policy`]: a checkpoint's network, run in process on the CPU, without
//! a server or actors: what `learner eval` plays and what the Python
//! package's `seed_rs.Policy` wraps, so a trained policy can be used
//! wherever the package is installed.
//!
//! A policy is loaded from a run directory (its newest checkpoint, by
//! `LATEST`) or from one checkpoint's directory (`checkpoints/step-*`,
//! `best/`). It answers batches of observations as the learner saw them
//! (`[B, ...obs_shape]`, f32 or u8, channels-first frames): the action
//! distribution's parameters, the values and, for a recurrent policy, the
//! next LSTM state, which the caller carries ([`Policy::forward`]); and
//! actions from those ([`Policy::actions`]), greedy or sampled as the
//! actors' inference samples them.
//!
//! What "sampled" means depends on what the run trained
//! ([`PolicyHead`]): an actor-critic (V-trace) samples its softmax or its
//! Gaussian; an R2D2 run's head holds Q-value advantages, whose softmax is
//! no policy, so it acts ε-greedily with [`SAMPLED_Q_EPSILON`].
//!
//! Errors name the file (a missing, corrupt or foreign checkpoint) or the
//! input (observations or state of the wrong size), never panic.
//!
//! The forward is the learner's own inference step on the CPU
//! ([`HostForward`], what inference runs for an f32 CPU model), so a
//! policy here answers as the learner's inference answered its actors.
//!
//! Cost: one forward per call, on the calling thread (about a microsecond
//! for one row of the CartPole MLP), plus its output vectors.
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use seed_shared::{EnvSpec, ObsDType};

use crate::infer::exploration::{EpsilonGreedy, EpsilonSchedule};
use crate::learn::checkpoint::{
    CheckpointError, CheckpointState, EnvDescription, LoadedCheckpoint,
};
use crate::model::host_forward::{BatchOutputs, HostBatch, HostForward, HostObs};
use crate::model::{ActionDistribution, ActionSampler, ActorCritic, ModelConfig};

/// ε of an R2D2 policy's sampled actions: a uniformly random action with
/// this probability, else the greedy one (the Ape-X and R2D2 papers'
/// evaluation ε is 0.01 and 0.001; the larger keeps a policy stuck in a
/// loop moving).
pub const SAMPLED_Q_EPSILON: f64 = 0.01;

/// Why a policy could not be loaded or run.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The checkpoint is missing, unreadable, or not one this version
    /// reads (the message names the file).
    #[error("{0}")]
    Checkpoint(#[from] CheckpointError),
    /// The checkpoint's weights do not build its model.
    #[error(
        "{path}: the weights do not fit the model config.json describes ({reason}); was the \
         checkpoint written by another version?"
    )]
    Weights { path: PathBuf, reason: String },
    /// Observations or state that do not fit the model.
    #[error("{field}: {reason}")]
    Input { field: &'static str, reason: String },
    /// The forward pass failed.
    #[error("model: {0}")]
    Model(#[from] candle_core::Error),
}

fn input(field: &'static str, reason: String) -> PolicyError {
    PolicyError::Input { field, reason }
}

/// What the policy head of a checkpoint's model holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyHead {
    /// An actor-critic's action distribution (V-trace runs).
    Distribution,
    /// A dueling Q-network's advantages (R2D2 runs): greedy is their
    /// argmax; sampled is ε-greedy.
    QValues,
}

/// A batch of observations as the learner takes them, row-major
/// `[B, ...obs_shape]`.
#[derive(Debug, Clone, Copy)]
pub enum Observations<'a> {
    F32(&'a [f32]),
    U8(&'a [u8]),
}

impl Observations<'_> {
    fn len(&self) -> usize {
        match self {
            Observations::F32(x) => x.len(),
            Observations::U8(x) => x.len(),
        }
    }
}

/// A recurrent state `[B, H]` each, row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct LstmState {
    pub h: Vec<f32>,
    pub c: Vec<f32>,
}

/// One forward pass over a batch.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyOutput {
    /// Rows in the batch.
    pub rows: usize,
    /// `[B, P]` the policy head: logits, a Gaussian's means then log-stds,
    /// or R2D2's advantages.
    pub params: Vec<f32>,
    /// `[B]` the value head.
    pub values: Vec<f32>,
    /// The next state of a recurrent policy; `None` for a feed-forward one.
    pub state: Option<LstmState>,
}

/// Actions of a batch: `[B]` discrete, or `[B, D]` floats within the
/// env's bounds.
#[derive(Debug, Clone, PartialEq)]
pub enum Actions {
    Discrete(Vec<u32>),
    Continuous(Vec<f32>),
}

/// One weight tensor: its shape and row-major values.
pub type NamedWeight = (Vec<usize>, Vec<f32>);

/// A checkpoint's policy (see the module docs).
pub struct Policy {
    model: ActorCritic,
    /// The learner's inference code for `model` (its CPU step).
    host: HostForward,
    checkpoint: LoadedCheckpoint,
    spec: EnvSpec,
    head: PolicyHead,
    sampler: ActionSampler,
    epsilon_greedy: EpsilonGreedy,
}

impl std::fmt::Debug for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Policy")
            .field("dir", &self.checkpoint.dir)
            .field("spec", &self.spec)
            .field("head", &self.head)
            .finish_non_exhaustive()
    }
}

impl Policy {
    /// Loads the policy at `path`: a run directory or a checkpoint
    /// directory (see the module docs); sampling is seeded with 0.
    pub fn load(path: &Path) -> Result<Self, PolicyError> {
        let checkpoint = LoadedCheckpoint::resolve(path)?;
        let weights = checkpoint.weights(&Device::Cpu)?;
        Self::from_parts(checkpoint, weights)
    }

    /// The policy of `weights` (by name, any dtype and device: copied to
    /// f32 on the CPU) with `checkpoint`'s config and counters; the
    /// learner's evaluator builds one from the trainer's weights without
    /// writing them first (`checkpoint.dir` names where errors point).
    pub fn from_parts(
        checkpoint: LoadedCheckpoint,
        weights: HashMap<String, Tensor>,
    ) -> Result<Self, PolicyError> {
        let config_path = checkpoint.dir.join("config.json");
        let corrupt = |reason: String| CheckpointError::Corrupt {
            path: config_path.clone(),
            reason,
        };
        let spec = checkpoint.config.env.spec().map_err(corrupt)?;
        checkpoint.config.check_env(&spec)?;
        ModelConfig::check_spec(&spec).map_err(corrupt)?;
        let device = Device::Cpu;
        let weights = weights
            .into_iter()
            .map(|(name, t)| Ok((name, t.to_device(&device)?.to_dtype(DType::F32)?)))
            .collect::<candle_core::Result<HashMap<_, _>>>()?;
        let weights_error = |e: candle_core::Error| PolicyError::Weights {
            path: checkpoint.dir.join("weights.safetensors"),
            reason: e.to_string(),
        };
        let model = ActorCritic::new(
            &checkpoint.config.model,
            candle_nn::VarBuilder::from_tensors(weights, DType::F32, &device),
        )
        .map_err(weights_error)?;
        let host = HostForward::from_model(&model)?.ok_or_else(|| {
            PolicyError::Model(candle_core::Error::Msg(
                "an f32 CPU model has no host forward".into(),
            ))
        })?;
        let head = if checkpoint.config.trains_q_values() {
            PolicyHead::QValues
        } else {
            PolicyHead::Distribution
        };
        Ok(Policy {
            model,
            host,
            spec,
            head,
            sampler: ActionSampler::new(0),
            epsilon_greedy: Self::epsilon_greedy(0),
            checkpoint,
        })
    }

    fn epsilon_greedy(seed: u64) -> EpsilonGreedy {
        let schedule = EpsilonSchedule {
            epsilon: SAMPLED_Q_EPSILON,
            alpha: 0.0,
            slots: 1,
        };
        EpsilonGreedy::new(schedule, seed)
    }

    /// Restarts the sampler of [`Policy::actions`] from `seed`.
    pub fn seed(&mut self, seed: u64) {
        self.sampler = ActionSampler::new(seed);
        self.epsilon_greedy = Self::epsilon_greedy(seed);
    }

    /// The env spec the policy was trained on (observations as the learner
    /// took them: channels-first frames, f32 or u8).
    pub fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    /// The checkpoint's model architecture.
    pub fn model_config(&self) -> &ModelConfig {
        &self.checkpoint.config.model
    }

    /// The checkpoint's counters (policy version, learner and env steps).
    pub fn state(&self) -> &CheckpointState {
        &self.checkpoint.state
    }

    /// The env the checkpoint records (its kind and name, the spaces).
    pub fn env(&self) -> &EnvDescription {
        &self.checkpoint.config.env
    }

    /// Refuses an env whose observations or action space differ from the
    /// policy's (the error names which).
    pub fn check_env(&self, spec: &EnvSpec) -> Result<(), PolicyError> {
        Ok(self.checkpoint.config.check_env(spec)?)
    }

    /// The checkpoint's directory.
    pub fn dir(&self) -> &Path {
        &self.checkpoint.dir
    }

    /// The training flags the run recorded (`config.json`'s `flags`).
    pub fn flags(&self) -> &serde_json::Value {
        &self.checkpoint.config.flags
    }

    /// What the policy head holds.
    pub fn head(&self) -> PolicyHead {
        self.head
    }

    /// The checkpoint's weights by name (read from its file again): shape
    /// and row-major `f32` values, named like the code (`torso.0.weight`,
    /// `core.weight_ih_l0`, `policy.bias`, `log_std`, ...).
    pub fn weights(&self) -> Result<BTreeMap<String, NamedWeight>, PolicyError> {
        let mut out = BTreeMap::new();
        for (name, t) in self.checkpoint.weights(&Device::Cpu)? {
            let values = t.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()?;
            out.insert(name, (t.dims().to_vec(), values));
        }
        Ok(out)
    }

    /// The conv torso's layers as `(kernel, stride)`, first to last; empty
    /// for an MLP torso.
    pub fn conv_layers(&self) -> Vec<(usize, usize)> {
        self.model
            .conv_layers()
            .iter()
            .map(|g| (g.kernel, g.stride))
            .collect()
    }

    /// Hidden size of the LSTM core, `0` for a feed-forward policy.
    pub fn state_size(&self) -> usize {
        self.model.state_size()
    }

    /// One forward pass over `obs` (`[B, ...obs_shape]` of the spec's
    /// dtype). `state`: a recurrent policy's state before the step, `None`
    /// for zeros (an episode's start); refused for a feed-forward policy.
    pub fn forward(
        &self,
        obs: Observations<'_>,
        state: Option<&LstmState>,
    ) -> Result<PolicyOutput, PolicyError> {
        let obs_len = self.spec.obs_len();
        let dtype_ok = matches!(
            (&obs, self.spec.obs_dtype),
            (Observations::F32(_), ObsDType::F32) | (Observations::U8(_), ObsDType::U8)
        );
        if !dtype_ok {
            return Err(input(
                "observations",
                format!("the policy takes {} observations", self.spec.obs_dtype),
            ));
        }
        if obs.len() == 0 || !obs.len().is_multiple_of(obs_len) {
            return Err(input(
                "observations",
                format!(
                    "{} values are not a whole number of observations of shape {:?} ({obs_len} \
                     values each)",
                    obs.len(),
                    self.spec.obs_shape
                ),
            ));
        }
        let rows = obs.len() / obs_len;
        let hsize = self.state_size();
        let zeros;
        let (h, c) = match (state, hsize) {
            (None, 0) => (&[][..], &[][..]),
            (None, h) => {
                zeros = vec![0f32; rows * h];
                (&zeros[..], &zeros[..])
            }
            (Some(_), 0) => {
                return Err(input(
                    "state",
                    "the policy is feed-forward: it has no recurrent state".into(),
                ))
            }
            (Some(s), h) => {
                for (field, v) in [("state.h", &s.h), ("state.c", &s.c)] {
                    if v.len() != rows * h {
                        return Err(input(
                            field,
                            format!("{} values; {rows} observations need [{rows}, {h}]", v.len()),
                        ));
                    }
                }
                (&s.h[..], &s.c[..])
            }
        };
        let batch = HostBatch {
            obs: match obs {
                Observations::F32(v) => HostObs::F32(v),
                Observations::U8(v) => HostObs::U8(v),
            },
            rows,
            h,
            c,
        };
        let mut out = BatchOutputs::default();
        self.host.step(&batch, &mut out, 1)?;
        Ok(PolicyOutput {
            rows,
            params: out.params,
            values: out.values,
            state: (hsize > 0).then_some(LstmState { h: out.h, c: out.c }),
        })
    }

    /// Actions from a forward pass: `greedy` takes the most likely action
    /// (the logits' or Q-values' argmax, a Gaussian's mean); otherwise as
    /// the module docs say. Continuous actions are clipped to the env's
    /// bounds, as actors clip them.
    pub fn actions(&mut self, out: &PolicyOutput, greedy: bool) -> Actions {
        let k = out.rows;
        match self.model.config().action {
            ActionDistribution::Categorical { num_actions } => {
                let mut actions = vec![0u32; k];
                match (self.head, greedy) {
                    (_, true) => ActionSampler::greedy(&out.params, num_actions, &mut actions),
                    (PolicyHead::Distribution, false) => {
                        self.sampler.sample(&out.params, num_actions, &mut actions)
                    }
                    (PolicyHead::QValues, false) => {
                        for (a, q) in actions.iter_mut().zip(out.params.chunks_exact(num_actions)) {
                            *a = self.epsilon_greedy.choose(q, 0);
                        }
                    }
                }
                Actions::Discrete(actions)
            }
            ActionDistribution::Gaussian { dim } => {
                let mut actions = vec![0f32; k * dim];
                if greedy {
                    ActionSampler::gaussian_mean(&out.params, dim, &mut actions);
                } else {
                    self.sampler.sample_gaussian(&out.params, dim, &mut actions);
                }
                for action in actions.chunks_exact_mut(dim) {
                    self.spec.action.clip(action);
                }
                Actions::Continuous(actions)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::learn::checkpoint::{save, CheckpointConfig, CheckpointState, EnvDescription};
    use crate::learn::optimizer::{Optimizer, OptimizerConfig};
    use crate::model::{ModelShape, TrainableModel};
    use seed_shared::ActionSpace;

    /// A checkpoint of a freshly initialised model for `spec`, in `dir`.
    fn checkpoint_for(
        dir: &Path,
        spec: &EnvSpec,
        lstm: Option<usize>,
        flags: serde_json::Value,
    ) -> TrainableModel {
        let shape = ModelShape {
            hidden_sizes: vec![8],
            conv_features: 16,
            lstm_size: lstm,
        };
        let config = ModelConfig::new(spec, &shape);
        let model = TrainableModel::new(&config, &Device::Cpu, 3).unwrap();
        let optimizer =
            Optimizer::new(&model.varmap, OptimizerConfig::constant_adam(6e-4)).unwrap();
        let config = CheckpointConfig {
            model: config,
            env: EnvDescription::of(None, spec),
            flags,
        };
        let state = CheckpointState {
            policy_version: 5,
            ..CheckpointState::default()
        };
        save(dir, &model, &optimizer, &state, &config).unwrap();
        model
    }

    fn checkpoint(dir: &Path, lstm: Option<usize>, flags: serde_json::Value) -> TrainableModel {
        checkpoint_for(dir, &EnvSpec::cartpole(), lstm, flags)
    }

    const OBS: [f32; 8] = [0.1, -0.2, 0.05, 0.3, -0.1, 0.4, -0.02, -0.5];

    fn max_diff(a: &[f32], b: &[f32]) -> f32 {
        assert_eq!(a.len(), b.len());
        a.iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0, f32::max)
    }

    /// The policy's answers (the learner's inference code) against the
    /// candle model's step on the same weights, for each torso and head.
    #[test]
    fn answers_as_the_model_does_for_every_torso_and_head() {
        let minatar = EnvSpec::synthetic(vec![4, 10, 10], ObsDType::U8, 6);
        let atari = EnvSpec::synthetic(vec![4, 84, 84], ObsDType::U8, 6);
        let pendulum = EnvSpec {
            env_name: "Pendulum-v1".into(),
            obs_shape: vec![3],
            obs_dtype: ObsDType::F32,
            action: ActionSpace::Box {
                shape: vec![1],
                low: vec![-2.0],
                high: vec![2.0],
            },
        };
        let cases = [
            (EnvSpec::cartpole(), None),
            (EnvSpec::cartpole(), Some(6)),
            (minatar.clone(), None),
            (minatar, Some(5)),
            (atari, None),
            (pendulum, None),
        ];
        for (spec, lstm) in cases {
            let dir = tempfile::tempdir().unwrap();
            let model = checkpoint_for(dir.path(), &spec, lstm, serde_json::Value::Null);
            let policy = Policy::load(dir.path()).unwrap();
            let rows = 3;
            let n = rows * spec.obs_len();
            let mut dims = vec![rows];
            dims.extend(&spec.obs_shape);
            let (out, x) = match spec.obs_dtype {
                ObsDType::U8 => {
                    let v: Vec<u8> = (0..n).map(|i| ((i * 53) % 256) as u8).collect();
                    let x = Tensor::from_slice(&v, dims.as_slice(), &Device::Cpu).unwrap();
                    (policy.forward(Observations::U8(&v), None).unwrap(), x)
                }
                ObsDType::F32 => {
                    let v: Vec<f32> = (0..n).map(|i| OBS[i % OBS.len()]).collect();
                    let x = Tensor::from_slice(&v, dims.as_slice(), &Device::Cpu).unwrap();
                    (policy.forward(Observations::F32(&v), None).unwrap(), x)
                }
            };
            let want = model.model.step(&x, None).unwrap();
            let params = want
                .policy_params
                .flatten_all()
                .unwrap()
                .to_vec1::<f32>()
                .unwrap();
            let what = format!("{:?} lstm {lstm:?}", spec.obs_shape);
            assert!(
                max_diff(&out.params, &params) < 1e-5,
                "{what}: {:?} {params:?}",
                out.params
            );
            let values = want.values.to_vec1::<f32>().unwrap();
            assert!(max_diff(&out.values, &values) < 1e-5, "{what}");
            match (out.state, want.state) {
                (None, None) => {}
                (Some(ours), Some(theirs)) => {
                    let h = theirs.h.flatten_all().unwrap().to_vec1::<f32>().unwrap();
                    assert!(max_diff(&ours.h, &h) < 1e-5, "{what}");
                }
                _ => panic!("{what}: one has a state, the other not"),
            }
            assert_eq!(out.rows, rows);
        }
    }

    #[test]
    fn loads_a_run_dir_or_a_checkpoint_dir() {
        let dir = tempfile::tempdir().unwrap();
        checkpoint(dir.path(), None, serde_json::Value::Null);
        let policy = Policy::load(dir.path()).unwrap();
        assert_eq!(policy.spec().env_name, "CartPole-v1");
        assert_eq!(
            (policy.state().policy_version, policy.head()),
            (5, PolicyHead::Distribution)
        );
        let out = policy.forward(Observations::F32(&OBS), None).unwrap();
        assert_eq!((out.rows, out.state.as_ref()), (2, None));
        let step_dir = std::fs::read_dir(dir.path().join("checkpoints"))
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        let again = Policy::load(&step_dir).unwrap();
        assert_eq!(again.forward(Observations::F32(&OBS), None).unwrap(), out);
        let weights = policy.weights().unwrap();
        assert_eq!(weights["torso.0.weight"].0, [8, 4]);
        assert_eq!(weights["policy.weight"].0, [2, 8]);
    }

    #[test]
    fn greedy_is_the_argmax_and_sampling_follows_the_seed() {
        let dir = tempfile::tempdir().unwrap();
        checkpoint(dir.path(), None, serde_json::Value::Null);
        let mut policy = Policy::load(dir.path()).unwrap();
        let obs: Vec<f32> = (0..400)
            .map(|i| ((i * 37) % 11) as f32 / 5.0 - 1.0)
            .collect();
        let out = policy.forward(Observations::F32(&obs), None).unwrap();
        let Actions::Discrete(greedy) = policy.actions(&out, true) else {
            panic!("CartPole's actions are discrete")
        };
        for (row, &a) in out.params.chunks_exact(2).zip(&greedy) {
            assert_eq!(a, u32::from(row[1] > row[0]));
        }
        policy.seed(9);
        let first = policy.actions(&out, false);
        policy.seed(9);
        assert_eq!(policy.actions(&out, false), first);
        assert_ne!(first, Actions::Discrete(greedy));
    }

    #[test]
    fn a_recurrent_policy_carries_its_state_and_r2d2_is_read_as_q_values() {
        let dir = tempfile::tempdir().unwrap();
        let flags = serde_json::json!({"trainer": {"agent": {"r2d2": {"n_step": 5}}}});
        checkpoint(dir.path(), Some(6), flags);
        let mut policy = Policy::load(dir.path()).unwrap();
        assert_eq!(
            (policy.state_size(), policy.head()),
            (6, PolicyHead::QValues)
        );
        let first = policy.forward(Observations::F32(&OBS), None).unwrap();
        let state = first.state.clone().unwrap();
        assert_eq!((state.h.len(), state.c.len()), (12, 12));
        let second = policy
            .forward(Observations::F32(&OBS), Some(&state))
            .unwrap();
        assert_ne!(second.params, first.params, "the state moved the output");
        let zeros = LstmState {
            h: vec![0.0; 12],
            c: vec![0.0; 12],
        };
        assert_eq!(
            policy
                .forward(Observations::F32(&OBS), Some(&zeros))
                .unwrap(),
            first
        );
        // ε-greedy: nearly every sampled action is the greedy one.
        let obs = OBS.repeat(500);
        let out = policy.forward(Observations::F32(&obs), None).unwrap();
        let (Actions::Discrete(g), Actions::Discrete(s)) =
            (policy.actions(&out, true), policy.actions(&out, false))
        else {
            panic!("discrete")
        };
        let differ = g.iter().zip(&s).filter(|(a, b)| a != b).count();
        assert!(differ < 50, "{differ} of 1000 differ at ε = 0.01");
    }

    #[test]
    fn bad_inputs_and_bad_checkpoints_are_named() {
        let dir = tempfile::tempdir().unwrap();
        checkpoint(dir.path(), Some(6), serde_json::Value::Null);
        let policy = Policy::load(dir.path()).unwrap();
        let err = |r: Result<PolicyOutput, PolicyError>| r.unwrap_err().to_string();
        assert!(err(policy.forward(Observations::F32(&OBS[..5]), None)).contains("shape [4]"));
        assert!(err(policy.forward(Observations::U8(&[0; 8]), None)).contains("f32 observations"));
        let short = LstmState {
            h: vec![0.0; 6],
            c: vec![0.0; 12],
        };
        let e = err(policy.forward(Observations::F32(&OBS), Some(&short)));
        assert!(
            e.starts_with("state.h: 6 values") && e.contains("[2, 6]"),
            "{e}"
        );

        let empty = tempfile::tempdir().unwrap();
        let e = Policy::load(empty.path()).unwrap_err().to_string();
        assert!(e.contains("no LATEST file"), "{e}");
        let step = dir.path().join(
            std::fs::read_to_string(dir.path().join("LATEST"))
                .unwrap()
                .trim(),
        );
        let step = dir
            .path()
            .join("checkpoints")
            .join(step.file_name().unwrap());
        let weights = step.join("weights.safetensors");
        std::fs::write(&weights, b"not safetensors").unwrap();
        let e = Policy::load(dir.path()).unwrap_err().to_string();
        assert!(e.contains("weights.safetensors"), "{e}");
        std::fs::write(step.join("config.json"), b"{\"model\": 3}").unwrap();
        let e = Policy::load(dir.path()).unwrap_err().to_string();
        assert!(e.contains("config.json"), "{e}");
    }
}
