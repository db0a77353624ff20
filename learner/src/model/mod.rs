//! Policy and value networks: one actor-critic whose torso is chosen by the
//! observation type.
//!
//! - vector observations (`[D]`, f32): an MLP torso ([`mlp`]);
//! - image observations (`[C, H, W]`, channels-first, u8 or f32): a small conv
//!   torso ([`conv`]);
//! - optionally an LSTM core ([`lstm`]) whose state lives per env slot at
//!   inference and is stored at the start of each unroll for training.
//!
//! Heads: `policy` gives the parameters of the action distribution
//! ([`distribution`]), `[B, P]`: the logits `[B, A]` for discrete actions, or
//! for continuous ones the Gaussian's mean `[B, D]` followed by its log-std,
//! a learned state-independent `log_std` `[D]` (clamped to
//! `[LOG_STD_MIN, LOG_STD_MAX]`, broadcast over the batch); `value` gives
//! `[B]`. Weight names mirror the struct fields (`torso.*`, `core.*`,
//! `policy.*`, `log_std`, `value.*`) so safetensors checkpoints read like
//! the code; a discrete model has no `log_std`.
//!
//! The weights are `f32` for training; an inference copy may be `bf16`
//! ([`precision`]): it takes the same raw observations and returns `f32`
//! parameters, values and state.
pub mod bias_add;
pub mod conv;
pub mod dense;
pub mod distribution;
pub mod graph_ops;
pub mod init;
pub mod lstm;
pub mod mlp;
pub mod patch_conv;
pub mod precision;
pub mod sampling;
pub mod tanh;
pub mod weights;

use candle_core::{DType, Device, Module, Result, Tensor};
use candle_nn::{VarBuilder, VarMap};
use seed_shared::{EnvSpec, ObsDType};

use dense::Dense;

pub use distribution::{ActionDistribution, Distribution};
pub use lstm::RecurrentState;
pub use precision::InferenceDType;
pub use sampling::ActionSampler;

/// Architecture of an [`ActorCritic`], derived from the env spec plus flags.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "ModelConfigFile")]
pub struct ModelConfig {
    /// Shape of one observation, without batch dimension.
    pub obs_shape: Vec<usize>,
    /// `true` for u8 observations (scaled by 1/255 inside the model).
    pub obs_is_u8: bool,
    /// What the policy head parameterises: a categorical over the env's
    /// discrete actions, or a Gaussian over its box's floats.
    pub action: ActionDistribution,
    /// Widths of the MLP torso's hidden layers (vector observations).
    pub hidden_sizes: Vec<usize>,
    /// Output width of the conv torso (image observations).
    pub conv_features: usize,
    /// Hidden size of the LSTM core; `None` for a feed-forward policy.
    pub lstm_size: Option<usize>,
}

/// The network's shape beyond what the env spec fixes (`--hidden-sizes`,
/// `--conv-features`, `--lstm`, `--lstm-size`; defaults:
/// `crate::app::settings`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ModelShape {
    /// MLP torso widths (vector observations).
    pub hidden_sizes: Vec<usize>,
    /// Conv torso output width (image observations).
    pub conv_features: usize,
    /// LSTM core size; `None`: feed-forward.
    pub lstm_size: Option<usize>,
}

impl ModelConfig {
    /// The architecture for envs of `spec` with `shape`.
    pub fn new(spec: &EnvSpec, shape: &ModelShape) -> Self {
        ModelConfig {
            hidden_sizes: shape.hidden_sizes.clone(),
            conv_features: shape.conv_features,
            lstm_size: shape.lstm_size,
            ..ModelConfig::for_spec(spec)
        }
    }

    /// The default architecture for an env: MLP 64x64 for vectors, conv for images.
    pub fn for_spec(spec: &EnvSpec) -> Self {
        ModelConfig {
            obs_shape: spec.obs_shape.clone(),
            obs_is_u8: spec.obs_dtype == ObsDType::U8,
            action: ActionDistribution::for_space(&spec.action),
            hidden_sizes: vec![64, 64],
            conv_features: 256,
            lstm_size: None,
        }
    }

    /// Why no network can be built for `spec`, if none can: observations of
    /// rank 1 or 2 go through the MLP (flattened), rank 3 must be images the
    /// conv torso takes, higher ranks are refused.
    pub fn check_spec(spec: &EnvSpec) -> std::result::Result<(), String> {
        match spec.obs_shape.len() {
            1 | 2 => Ok(()),
            3 => conv::ConvTorso::check_shape(&spec.obs_shape),
            _ => Err(format!(
                "observations of shape {:?}: rank {} is not supported (rank 1-2 vectors go \
                 to the MLP, rank 3 must be channels-first images [C, H, W]; stack frames \
                 into channels)",
                spec.obs_shape,
                spec.obs_shape.len()
            )),
        }
    }

    /// Image observations (`[C, H, W]`) get the conv torso; everything else is flattened.
    pub fn is_image(&self) -> bool {
        self.obs_shape.len() == 3
    }

    /// Elements in one observation.
    pub fn obs_len(&self) -> usize {
        self.obs_shape.iter().product()
    }
}

/// A `config.json` model as any version wrote it: with `action`, or, before
/// continuous actions existed, with `num_actions` (a categorical policy).
#[derive(serde::Deserialize)]
struct ModelConfigFile {
    obs_shape: Vec<usize>,
    obs_is_u8: bool,
    #[serde(default)]
    action: Option<ActionDistribution>,
    #[serde(default)]
    num_actions: Option<usize>,
    hidden_sizes: Vec<usize>,
    conv_features: usize,
    #[serde(default)]
    lstm_size: Option<usize>,
}

impl TryFrom<ModelConfigFile> for ModelConfig {
    type Error = String;

    fn try_from(f: ModelConfigFile) -> std::result::Result<Self, String> {
        let action = match (f.action, f.num_actions) {
            (Some(action), _) => action,
            (None, Some(num_actions)) => ActionDistribution::Categorical { num_actions },
            (None, None) => return Err("model: neither `action` nor `num_actions` is set".into()),
        };
        Ok(ModelConfig {
            obs_shape: f.obs_shape,
            obs_is_u8: f.obs_is_u8,
            action,
            hidden_sizes: f.hidden_sizes,
            conv_features: f.conv_features,
            lstm_size: f.lstm_size,
        })
    }
}

#[derive(Debug, Clone)]
enum Torso {
    Mlp(mlp::Mlp),
    Conv(conv::ConvTorso),
}

impl Torso {
    fn out_dim(&self) -> usize {
        match self {
            Torso::Mlp(m) => m.out_dim(),
            Torso::Conv(c) => c.out_dim(),
        }
    }
}

impl Module for Torso {
    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        match self {
            Torso::Mlp(m) => m.forward(xs),
            Torso::Conv(c) => c.forward(xs),
        }
    }
}

/// Output of one inference step over a batch of envs.
#[derive(Debug, Clone)]
pub struct PolicyStep {
    /// `[B, P]` parameters of the action distribution (see
    /// [`distribution`]): logits, or Gaussian means then log-stds.
    pub policy_params: Tensor,
    /// `[B]` state values.
    pub values: Tensor,
    /// Next recurrent state `[B, H]` each, when the model has an LSTM core.
    pub state: Option<RecurrentState>,
}

/// Output of the model run over a whole unroll (training).
#[derive(Debug, Clone)]
pub struct PolicyUnroll {
    /// `[T+1, B, P]` parameters of the action distribution.
    pub policy_params: Tensor,
    /// `[T+1, B]` state values.
    pub values: Tensor,
}

/// The actor-critic network.
#[derive(Debug, Clone)]
pub struct ActorCritic {
    config: ModelConfig,
    torso: Torso,
    core: Option<lstm::LstmCore>,
    /// Logits `[B, A]`, or the Gaussian's mean `[B, D]`.
    policy: Dense,
    /// The Gaussian's log σ, `[D]`, before clamping; `None` for a categorical.
    log_std: Option<Tensor>,
    value: Dense,
    /// The weights' dtype: `f32`, or `bf16` for a reduced-precision
    /// inference copy.
    dtype: DType,
}

impl ActorCritic {
    /// Builds the network, reading (or creating) its weights through `vb`.
    pub fn new(config: &ModelConfig, vb: VarBuilder) -> Result<Self> {
        let torso = if config.is_image() {
            Torso::Conv(conv::ConvTorso::new(
                &config.obs_shape,
                config.conv_features,
                vb.pp("torso"),
            )?)
        } else {
            Torso::Mlp(mlp::Mlp::new(
                config.obs_len(),
                &config.hidden_sizes,
                vb.pp("torso"),
            )?)
        };
        let mut features = torso.out_dim();
        let core = match config.lstm_size {
            Some(h) => {
                let core = lstm::LstmCore::new(features, h, vb.pp("core"))?;
                features = h;
                Some(core)
            }
            None => None,
        };
        let (policy_width, log_std) = match config.action {
            ActionDistribution::Categorical { num_actions } => (num_actions, None),
            ActionDistribution::Gaussian { dim } => {
                let init = candle_nn::Init::Const(f64::from(distribution::LOG_STD_INIT));
                (dim, Some(vb.get_with_hints(dim, "log_std", init)?))
            }
        };
        let policy = Dense::new(features, policy_width, vb.pp("policy"))?;
        let value = Dense::new(features, 1, vb.pp("value"))?;
        Ok(ActorCritic {
            config: config.clone(),
            torso,
            core,
            policy,
            log_std,
            value,
            dtype: vb.dtype(),
        })
    }

    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// The weights' dtype.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Hidden size of the recurrent core, `0` for a feed-forward policy.
    pub fn state_size(&self) -> usize {
        self.config.lstm_size.unwrap_or(0)
    }

    /// Converts raw observations `[N, ...obs_shape]` (u8 or f32) into the
    /// torso input of the weights' dtype; u8 frames are scaled into `[0, 1]`
    /// here, on the observations' device, so only raw bytes cross to the
    /// device.
    fn torso_input(&self, obs: &Tensor) -> Result<Tensor> {
        let obs = if obs.dtype() == self.dtype {
            obs.clone()
        } else {
            obs.to_dtype(self.dtype)?
        };
        if self.config.obs_is_u8 {
            obs.affine(1.0 / 255.0, 0.0)
        } else {
            Ok(obs)
        }
    }

    /// `[N, P]` distribution parameters and `[N]` values from `[N, F]` features.
    fn heads(&self, features: &Tensor) -> Result<(Tensor, Tensor)> {
        let head = self.policy.forward(features)?;
        let params = match &self.log_std {
            None => head,
            Some(log_std) => {
                // The clamp passes no gradient outside the range (see
                // `distribution::LOG_STD_MIN`).
                let log_std = log_std
                    .clamp(distribution::LOG_STD_MIN, distribution::LOG_STD_MAX)?
                    .unsqueeze(0)?
                    .broadcast_as(head.shape())?;
                Tensor::cat(&[&head, &log_std], 1)?
            }
        };
        let values = self
            .value
            .forward(features)?
            .squeeze(candle_core::D::Minus1)?;
        Ok((params, values))
    }

    /// One inference step. `obs`: `[B, ...obs_shape]`; `state`: the envs'
    /// recurrent state, `f32` (`None` means zeros, or a feed-forward
    /// model). The outputs are `f32` whatever the weights' dtype.
    pub fn step(&self, obs: &Tensor, state: Option<&RecurrentState>) -> Result<PolicyStep> {
        let features = self.torso.forward(&self.torso_input(obs)?)?;
        let (features, next) = match &self.core {
            None => (features, None),
            Some(core) => {
                let state = match state {
                    Some(s) => RecurrentState {
                        h: s.h.to_dtype(self.dtype)?,
                        c: s.c.to_dtype(self.dtype)?,
                    },
                    None => core.zero_state_as(features.dim(0)?, self.dtype, features.device())?,
                };
                let next = core.step(&features, &state)?;
                (next.h.clone(), Some(next))
            }
        };
        let (policy_params, values) = self.heads(&features)?;
        // `to_dtype` to the same dtype is free (no copy, no kernel).
        Ok(PolicyStep {
            policy_params: policy_params.to_dtype(DType::F32)?,
            values: values.to_dtype(DType::F32)?,
            state: match next {
                Some(s) => Some(RecurrentState {
                    h: s.h.to_dtype(DType::F32)?,
                    c: s.c.to_dtype(DType::F32)?,
                }),
                None => None,
            },
        })
    }

    /// Runs the model over an unroll for training.
    ///
    /// `obs`: `[T+1, B, ...obs_shape]`. `episode_start`: `[T+1, B]` f32, 1.0
    /// where the recurrent state must be zeroed before that step (a new
    /// episode begins). `initial_state`: the state before step 0, `[B, H]`.
    pub fn unroll(
        &self,
        obs: &Tensor,
        episode_start: &Tensor,
        initial_state: Option<&RecurrentState>,
    ) -> Result<PolicyUnroll> {
        let dims = obs.dims();
        let (t1, b) = (dims[0], dims[1]);
        let flat = obs.flatten(0, 1)?;
        let features = self.torso.forward(&self.torso_input(&flat)?)?;
        let features = match &self.core {
            None => features,
            Some(core) => {
                let f = features.reshape((t1, b, ()))?;
                core.unroll(&f, episode_start, initial_state)?
                    .flatten(0, 1)?
            }
        };
        let (policy_params, values) = self.heads(&features)?;
        Ok(PolicyUnroll {
            policy_params: policy_params.reshape((t1, b, self.config.action.param_width()))?,
            values: values.reshape((t1, b))?,
        })
    }
}

impl ActorCritic {
    /// Runs the model over a sequence whose first `burn_in` steps only
    /// refresh the recurrent state (R2D2's burn-in): the state after them
    /// is detached, so no gradient reaches the network through those steps,
    /// and the outputs cover steps `burn_in..=T` only (`[T+1−burn_in, B, ..]`).
    /// A feed-forward model simply skips them.
    pub fn unroll_after_burn_in(
        &self,
        obs: &Tensor,
        episode_start: &Tensor,
        initial_state: Option<&RecurrentState>,
        burn_in: usize,
    ) -> Result<PolicyUnroll> {
        let t1 = obs.dim(0)?;
        if burn_in == 0 {
            return self.unroll(obs, episode_start, initial_state);
        }
        if burn_in >= t1 {
            candle_core::bail!("burn-in {burn_in} leaves no step of a {t1}-step sequence");
        }
        let rest = t1 - burn_in;
        let state = match &self.core {
            None => None,
            Some(core) => {
                let b = obs.dim(1)?;
                let warm = obs.narrow(0, 0, burn_in)?.flatten(0, 1)?;
                let features =
                    self.torso
                        .forward(&self.torso_input(&warm)?)?
                        .reshape((burn_in, b, ()))?;
                let keep = episode_start.narrow(0, 0, burn_in)?.affine(-1.0, 1.0)?;
                let mut state = match initial_state {
                    Some(s) => s.clone(),
                    None => core.zero_state(b, obs.device())?,
                };
                for t in 0..burn_in {
                    let k = keep.get(t)?.unsqueeze(1)?;
                    state = RecurrentState {
                        h: state.h.broadcast_mul(&k)?,
                        c: state.c.broadcast_mul(&k)?,
                    };
                    state = core.step(&features.get(t)?, &state)?;
                }
                Some(RecurrentState {
                    h: state.h.detach(),
                    c: state.c.detach(),
                })
            }
        };
        self.unroll(
            &obs.narrow(0, burn_in, rest)?,
            &episode_start.narrow(0, burn_in, rest)?,
            state.as_ref(),
        )
    }
}

/// Dueling Q-values (Wang et al., 2016) from a model's two heads:
/// `Q(x, a) = V(x) + A(x, a) − mean_a A(x, a)`, with the policy head's
/// outputs as the advantages `A` (`[..., A]`) and the value head's as `V`
/// (`[...]`). The mean makes `V` and `A` identifiable; the greedy action is
/// the advantages' argmax.
pub fn dueling_q(advantages: &Tensor, values: &Tensor) -> Result<Tensor> {
    let centred = advantages.broadcast_sub(&advantages.mean_keepdim(candle_core::D::Minus1)?)?;
    centred.broadcast_add(&values.unsqueeze(candle_core::D::Minus1)?)
}

/// A model together with the variables that training updates in place.
pub struct TrainableModel {
    pub varmap: VarMap,
    pub model: ActorCritic,
}

impl TrainableModel {
    /// Creates a model with weights drawn from a seeded RNG (candle's CPU
    /// RNG cannot be seeded), so runs with the same seed start identically.
    pub fn new(config: &ModelConfig, device: &Device, seed: u64) -> Result<Self> {
        let varmap = VarMap::new();
        let vb = VarBuilder::from_varmap(&varmap, DType::F32, device);
        let model = ActorCritic::new(config, vb)?;
        init::reinitialise(&varmap, seed)?;
        Ok(TrainableModel { varmap, model })
    }

    /// A frozen deep copy of the current weights, for inference to use while
    /// training keeps updating the variables.
    pub fn snapshot(&self) -> Result<ActorCritic> {
        self.snapshot_as(DType::F32)
    }

    /// [`TrainableModel::snapshot`] with the weights converted to `dtype`
    /// (one conversion per weight, on their device): the reduced-precision
    /// copy `--inference-dtype bf16` runs.
    pub fn snapshot_as(&self, dtype: DType) -> Result<ActorCritic> {
        let tensors = self.named_tensors()?;
        let device = self.device();
        ActorCritic::new(
            self.model.config(),
            VarBuilder::from_tensors(tensors, dtype, &device),
        )
    }

    /// Deep copies of every variable, keyed by weight name.
    pub fn named_tensors(&self) -> Result<std::collections::HashMap<String, Tensor>> {
        let data = self
            .varmap
            .data()
            .lock()
            .map_err(|_| candle_core::Error::Msg("variable map lock poisoned".into()))?;
        data.iter()
            .map(|(name, var)| Ok((name.clone(), var.as_tensor().copy()?)))
            .collect()
    }

    fn device(&self) -> Device {
        self.model.policy.weight().device().clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cartpole_config() -> ModelConfig {
        ModelConfig::for_spec(&EnvSpec::cartpole())
    }

    #[test]
    fn mlp_step_shapes() -> Result<()> {
        let m = TrainableModel::new(&cartpole_config(), &Device::Cpu, 1)?;
        let obs = Tensor::zeros((5, 4), DType::F32, &Device::Cpu)?;
        let out = m.model.step(&obs, None)?;
        assert_eq!(out.policy_params.dims(), &[5, 2]);
        assert_eq!(out.values.dims(), &[5]);
        assert!(out.state.is_none());
        Ok(())
    }

    #[test]
    fn unroll_matches_step_for_feed_forward() -> Result<()> {
        let m = TrainableModel::new(&cartpole_config(), &Device::Cpu, 2)?;
        let obs = Tensor::randn(0f32, 1.0, (3, 2, 4), &Device::Cpu)?;
        let starts = Tensor::zeros((3, 2), DType::F32, &Device::Cpu)?;
        let u = m.model.unroll(&obs, &starts, None)?;
        assert_eq!(u.policy_params.dims(), &[3, 2, 2]);
        let s = m.model.step(&obs.get(1)?, None)?;
        let diff = (u.policy_params.get(1)? - s.policy_params)?
            .abs()?
            .max_all()?
            .to_scalar::<f32>()?;
        assert!(diff < 1e-6, "{diff}");
        Ok(())
    }

    /// Burn-in steps give the same Q-values as a plain unroll, but no
    /// gradient: the loss on the later steps reaches the burn-in
    /// observations only through a plain unroll.
    #[test]
    fn burn_in_steps_get_no_gradient() -> Result<()> {
        let cfg = ModelConfig {
            lstm_size: Some(8),
            ..cartpole_config()
        };
        let m = TrainableModel::new(&cfg, &Device::Cpu, 3)?;
        let d = Device::Cpu;
        let (t1, b, burn_in) = (6, 3, 2);
        let obs = candle_core::Var::from_tensor(&Tensor::randn(0f32, 1.0, (t1, b, 4), &d)?)?;
        let starts = Tensor::zeros((t1, b), DType::F32, &d)?;
        let q_sum = |u: &PolicyUnroll| dueling_q(&u.policy_params, &u.values)?.sum_all();
        let after = m
            .model
            .unroll_after_burn_in(obs.as_tensor(), &starts, None, burn_in)?;
        assert_eq!(after.values.dims(), &[t1 - burn_in, b]);
        let plain = m.model.unroll(obs.as_tensor(), &starts, None)?;
        let plain_tail = PolicyUnroll {
            policy_params: plain.policy_params.narrow(0, burn_in, t1 - burn_in)?,
            values: plain.values.narrow(0, burn_in, t1 - burn_in)?,
        };
        let diff = (&after.values - &plain_tail.values)?
            .abs()?
            .max_all()?
            .to_scalar::<f32>()?;
        assert!(diff < 1e-6, "burn-in must not change the values: {diff}");
        let per_step =
            |grad: &Tensor| -> Result<Vec<f32>> { grad.abs()?.sum((1, 2))?.to_vec1::<f32>() };
        let g = q_sum(&after)?.backward()?;
        let g = per_step(g.get(&obs).expect("observations reach the loss"))?;
        assert!(g[..burn_in].iter().all(|&v| v == 0.0), "{g:?}");
        assert!(g[burn_in..].iter().all(|&v| v > 0.0), "{g:?}");
        let g = q_sum(&plain_tail)?.backward()?;
        let g = per_step(g.get(&obs).expect("observations reach the loss"))?;
        assert!(
            g[..burn_in].iter().all(|&v| v > 0.0),
            "without burn-in: {g:?}"
        );
        Ok(())
    }

    #[test]
    fn dueling_q_centres_the_advantages() -> Result<()> {
        let d = Device::Cpu;
        let a = Tensor::new(&[[1f32, 3.0], [0.0, 0.0]], &d)?;
        let v = Tensor::new(&[10f32, -1.0], &d)?;
        let q = dueling_q(&a, &v)?.to_vec2::<f32>()?;
        assert_eq!(q, vec![vec![9.0, 11.0], vec![-1.0, -1.0]]);
        Ok(())
    }

    #[test]
    fn same_seed_same_weights_and_snapshot_is_frozen() -> Result<()> {
        let cfg = cartpole_config();
        let a = TrainableModel::new(&cfg, &Device::Cpu, 7)?;
        let b = TrainableModel::new(&cfg, &Device::Cpu, 7)?;
        let c = TrainableModel::new(&cfg, &Device::Cpu, 8)?;
        let obs = Tensor::ones((1, 4), DType::F32, &Device::Cpu)?;
        let la = a
            .model
            .step(&obs, None)?
            .policy_params
            .flatten_all()?
            .to_vec1::<f32>()?;
        let lb = b
            .model
            .step(&obs, None)?
            .policy_params
            .flatten_all()?
            .to_vec1::<f32>()?;
        let lc = c
            .model
            .step(&obs, None)?
            .policy_params
            .flatten_all()?
            .to_vec1::<f32>()?;
        assert_eq!(la, lb);
        assert_ne!(la, lc);

        let snap = a.snapshot()?;
        for var in a.varmap.all_vars() {
            var.set(&var.as_tensor().zeros_like()?)?;
        }
        let ls = snap
            .step(&obs, None)?
            .policy_params
            .flatten_all()?
            .to_vec1::<f32>()?;
        assert_eq!(ls, la, "snapshot must not see later updates");
        Ok(())
    }

    fn pendulum_like_config() -> ModelConfig {
        ModelConfig::for_spec(&EnvSpec {
            env_name: "Pendulum-v1".into(),
            obs_shape: vec![3],
            obs_dtype: ObsDType::F32,
            action: seed_shared::ActionSpace::uniform_box(2, -2.0, 2.0),
        })
    }

    #[test]
    fn weight_names_follow_the_action_kind() -> Result<()> {
        let names = |cfg: &ModelConfig| -> Result<Vec<(String, Vec<usize>)>> {
            let m = TrainableModel::new(cfg, &Device::Cpu, 1)?;
            let mut v: Vec<_> = m
                .named_tensors()?
                .into_iter()
                .map(|(n, t)| (n, t.dims().to_vec()))
                .collect();
            v.sort();
            Ok(v)
        };
        let discrete = names(&cartpole_config())?;
        let want = [
            ("policy.bias", vec![2]),
            ("policy.weight", vec![2, 64]),
            ("torso.0.bias", vec![64]),
            ("torso.0.weight", vec![64, 4]),
            ("torso.1.bias", vec![64]),
            ("torso.1.weight", vec![64, 64]),
            ("value.bias", vec![1]),
            ("value.weight", vec![1, 64]),
        ];
        let want: Vec<(String, Vec<usize>)> =
            want.into_iter().map(|(n, d)| (n.to_string(), d)).collect();
        assert_eq!(discrete, want, "discrete checkpoints keep their names");
        let gaussian = names(&pendulum_like_config())?;
        assert_eq!(gaussian[0], ("log_std".to_string(), vec![2]));
        assert_eq!(gaussian[2], ("policy.weight".to_string(), vec![2, 64]));
        Ok(())
    }

    #[test]
    fn gaussian_head_gives_mean_then_clamped_log_std() -> Result<()> {
        let m = TrainableModel::new(&pendulum_like_config(), &Device::Cpu, 2)?;
        let obs = Tensor::randn(0f32, 1.0, (3, 2, 3), &Device::Cpu)?;
        let starts = Tensor::zeros((3, 2), DType::F32, &Device::Cpu)?;
        let u = m.model.unroll(&obs, &starts, None)?;
        assert_eq!(u.policy_params.dims(), &[3, 2, 4]);
        let s = m.model.step(&obs.get(1)?, None)?;
        assert_eq!(s.policy_params.dims(), &[2, 4]);
        let diff = (u.policy_params.get(1)? - &s.policy_params)?
            .abs()?
            .max_all()?
            .to_scalar::<f32>()?;
        assert!(diff < 1e-6, "{diff}");
        let p = s.policy_params.to_vec2::<f32>()?;
        assert_eq!(&p[0][2..], &[0.0, 0.0], "log σ starts at LOG_STD_INIT");
        assert_eq!(&p[1][2..], &[0.0, 0.0], "and does not depend on the state");
        assert!(p[0][0].abs() < 0.1, "policy gain 0.01: mean near 0");

        let var = |name: &str| -> Result<candle_core::Var> {
            let data = m
                .varmap
                .data()
                .lock()
                .map_err(|_| candle_core::Error::Msg("variable map lock poisoned".into()))?;
            data.get(name)
                .cloned()
                .ok_or_else(|| candle_core::Error::Msg(format!("no variable {name}")))
        };
        let log_std = var("log_std")?;
        log_std.set(&Tensor::new(&[9f32, -9.0], &Device::Cpu)?)?;
        let p = m
            .model
            .step(&obs.get(0)?, None)?
            .policy_params
            .to_vec2::<f32>()?;
        assert_eq!(
            &p[0][2..],
            &[distribution::LOG_STD_MAX, distribution::LOG_STD_MIN]
        );

        // Gradient of a log-probability reaches both heads' variables.
        log_std.set(&Tensor::new(&[0.3f32, -0.2], &Device::Cpu)?)?;
        let params = m.model.step(&obs.get(0)?, None)?.policy_params;
        let actions = Tensor::new(&[[1f32, -1.0], [0.5, 0.5]], &Device::Cpu)?;
        let lp = ActionDistribution::Gaussian { dim: 2 }
            .over(&params)?
            .log_prob(&actions)?;
        let grads = lp.sum_all()?.backward()?;
        for name in ["log_std", "policy.weight", "policy.bias", "torso.0.weight"] {
            let g = grads
                .get(var(name)?.as_tensor())
                .ok_or_else(|| candle_core::Error::Msg(format!("no gradient for {name}")))?;
            let norm = g.sqr()?.sum_all()?.to_scalar::<f32>()?;
            assert!(norm > 0.0 && norm.is_finite(), "{name}: {norm}");
        }
        Ok(())
    }

    /// Largest `|a - b|` over `max |b|`: the error relative to the
    /// output's scale (the policy head's gain of 0.01 makes logits small).
    fn relative_error(a: &Tensor, b: &Tensor) -> Result<f32> {
        let diff = (a - b)?.abs()?.flatten_all()?.max(0)?.to_scalar::<f32>()?;
        let scale = b.abs()?.flatten_all()?.max(0)?.to_scalar::<f32>()?;
        Ok(diff / scale.max(f32::MIN_POSITIVE))
    }

    /// bf16 keeps 8 significant bits: each rounding of a weight, an input
    /// or a layer's output is off by at most 2^-9 (0.2%) relative. A
    /// layer rounds about four times (input, weight, output, activation),
    /// so 3 to 5 layers (torso, LSTM gates and cell, head) make 12 to 20
    /// roundings, 2.5-4% of the terms' scale in the worst case; where a
    /// head's terms cancel, the error is relative to the terms rather
    /// than to the smaller sum (the LSTM's values: 3.5% of their largest
    /// value). 5% bounds that; a real bug (a wrong or missing weight, a
    /// lost input scale) is off by the output's whole scale.
    const BF16_TOLERANCE: f32 = 0.05;

    /// Runs `cfg` in f32 and through a bf16 snapshot of the same weights;
    /// returns the relative errors of the policy parameters and values.
    fn bf16_against_f32(cfg: &ModelConfig, obs: &Tensor) -> Result<(f32, f32)> {
        let m = TrainableModel::new(cfg, &Device::Cpu, 5)?;
        let full = m.snapshot()?;
        let half = m.snapshot_as(DType::BF16)?;
        assert_eq!(half.dtype(), DType::BF16);
        let (a, b) = (half.step(obs, None)?, full.step(obs, None)?);
        assert_eq!(a.policy_params.dtype(), DType::F32, "outputs are f32");
        assert_eq!(a.values.dtype(), DType::F32);
        if let (Some(sa), Some(sb)) = (&a.state, &b.state) {
            assert_eq!(sa.h.dtype(), DType::F32);
            assert!(relative_error(&sa.h, &sb.h)? < BF16_TOLERANCE);
            assert!(relative_error(&sa.c, &sb.c)? < BF16_TOLERANCE);
        }
        Ok((
            relative_error(&a.policy_params, &b.policy_params)?,
            relative_error(&a.values, &b.values)?,
        ))
    }

    #[test]
    fn bf16_inference_stays_close_to_f32_mlp_and_lstm() -> Result<()> {
        let obs = Tensor::randn(0f32, 1.0, (64, 4), &Device::Cpu)?;
        let (p, v) = bf16_against_f32(&cartpole_config(), &obs)?;
        assert!(p < BF16_TOLERANCE && v < BF16_TOLERANCE, "mlp: {p} {v}");
        assert!(p > 0.0, "the bf16 copy really is bf16");
        let mut lstm = cartpole_config();
        lstm.lstm_size = Some(32);
        let (p, v) = bf16_against_f32(&lstm, &obs)?;
        assert!(p < BF16_TOLERANCE && v < BF16_TOLERANCE, "lstm: {p} {v}");
        Ok(())
    }

    #[test]
    fn bf16_inference_stays_close_to_f32_conv_torso() -> Result<()> {
        let spec = EnvSpec::synthetic(vec![4, 84, 84], ObsDType::U8, 6);
        let frames: Vec<u8> = (0..8 * 4 * 84 * 84)
            .map(|i| ((i * 2_654_435_761usize) >> 7) as u8)
            .collect();
        let obs = Tensor::from_vec(frames, (8, 4, 84, 84), &Device::Cpu)?;
        let (p, v) = bf16_against_f32(&ModelConfig::for_spec(&spec), &obs)?;
        assert!(p < BF16_TOLERANCE && v < BF16_TOLERANCE, "conv: {p} {v}");
        let small = EnvSpec::synthetic(vec![4, 10, 10], ObsDType::U8, 3);
        let obs = Tensor::from_vec(
            (0..16 * 400).map(|i| (i % 2) as u8).collect::<Vec<u8>>(),
            (16, 4, 10, 10),
            &Device::Cpu,
        )?;
        let (p, v) = bf16_against_f32(&ModelConfig::for_spec(&small), &obs)?;
        assert!(
            p < BF16_TOLERANCE && v < BF16_TOLERANCE,
            "minatar conv: {p} {v}"
        );
        Ok(())
    }

    #[test]
    fn conv_torso_takes_u8_frames() -> Result<()> {
        let spec = EnvSpec::synthetic(vec![4, 84, 84], ObsDType::U8, 6);
        let m = TrainableModel::new(&ModelConfig::for_spec(&spec), &Device::Cpu, 3)?;
        let obs = Tensor::zeros((2, 4, 84, 84), DType::U8, &Device::Cpu)?;
        let out = m.model.step(&obs, None)?;
        assert_eq!(out.policy_params.dims(), &[2, 6]);
        Ok(())
    }

    #[test]
    fn lstm_unroll_matches_stepping_with_resets() -> Result<()> {
        let mut cfg = cartpole_config();
        cfg.lstm_size = Some(8);
        let m = TrainableModel::new(&cfg, &Device::Cpu, 4)?;
        let dev = Device::Cpu;
        let obs = Tensor::randn(0f32, 1.0, (4, 2, 4), &dev)?;
        // Env 1 starts a new episode at step 2.
        let starts = Tensor::new(&[[0f32, 0.], [0., 0.], [0., 1.], [0., 0.]], &dev)?;
        let init = RecurrentState {
            h: Tensor::randn(0f32, 1.0, (2, 8), &dev)?,
            c: Tensor::randn(0f32, 1.0, (2, 8), &dev)?,
        };
        let u = m.model.unroll(&obs, &starts, Some(&init))?;

        // Step env 1 alone, zeroing its state at step 2 by hand.
        let mut state = RecurrentState {
            h: init.h.get(1)?.unsqueeze(0)?,
            c: init.c.get(1)?.unsqueeze(0)?,
        };
        for t in 0..4 {
            if t == 2 {
                state = RecurrentState {
                    h: state.h.zeros_like()?,
                    c: state.c.zeros_like()?,
                };
            }
            let o = obs.get(t)?.get(1)?.unsqueeze(0)?;
            let s = m.model.step(&o, Some(&state))?;
            let want = u.policy_params.get(t)?.get(1)?;
            let diff = (s.policy_params.squeeze(0)? - want)?
                .abs()?
                .max_all()?
                .to_scalar::<f32>()?;
            assert!(diff < 1e-5, "step {t}: {diff}");
            state = s
                .state
                .ok_or_else(|| candle_core::Error::Msg("no state".into()))?;
        }
        Ok(())
    }
}
