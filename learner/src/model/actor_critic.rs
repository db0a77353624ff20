//! [`ActorCritic`]: the torso, an optional LSTM core and the two heads
//! (the action distribution's parameters and the value), run one step per
//! batch for inference ([`PolicyStep`]) or over a whole unroll for
//! training ([`PolicyUnroll`]), with R2D2's burn-in.
use candle_core::{DType, Module, Result, Tensor};
use candle_nn::VarBuilder;

use crate::model::config::ModelConfig;
use crate::model::cpu::im2col::ConvGeometry;
use crate::model::dense::Dense;
use crate::model::distribution::ActionDistribution;
use crate::model::lstm::{self, RecurrentState};
use crate::model::torso::Torso;
use crate::model::{conv, distribution, mlp};

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
    pub(super) torso: Torso,
    pub(super) core: Option<lstm::LstmCore>,
    /// Logits `[B, A]`, or the Gaussian's mean `[B, D]`.
    pub(super) policy: Dense,
    /// The Gaussian's log σ, `[D]`, before clamping; `None` for a categorical.
    pub(super) log_std: Option<Tensor>,
    pub(super) value: Dense,
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

    /// The conv torso's layers, first to last (kernel, stride, channels);
    /// empty for the MLP torso. For people rebuilding the network
    /// elsewhere (the Python package's PyTorch module).
    pub fn conv_layers(&self) -> Vec<ConvGeometry> {
        match &self.torso {
            Torso::Mlp(_) => Vec::new(),
            Torso::Conv(c) => c.layers().map(|(g, _, _)| g).collect(),
        }
    }

    /// Hidden size of the recurrent core, `0` for a feed-forward policy.
    pub fn state_size(&self) -> usize {
        self.config.lstm_size.unwrap_or(0)
    }

    /// Converts raw observations `[N, ...obs_shape]` (u8 or f32) into the
    /// torso input of the weights' dtype; u8 vectors are scaled into `[0,
    /// 1]` here, u8 frames by the conv torso, on the observations' device,
    /// so only raw bytes cross to the device.
    fn torso_input(&self, obs: &Tensor) -> Result<Tensor> {
        // The conv torso takes u8 frames as they are (its first layer
        // scales them, on the CPU as it reads them).
        if self.config.obs_is_u8 && obs.dtype() == DType::U8 && matches!(self.torso, Torso::Conv(_))
        {
            return Ok(obs.clone());
        }
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
                let state = core.final_state(
                    &features,
                    &episode_start.narrow(0, 0, burn_in)?,
                    initial_state,
                )?;
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
