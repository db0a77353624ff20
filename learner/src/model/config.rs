//! [`ModelConfig`]: a network's architecture, derived from the env spec
//! and [`ModelShape`] (the flags), and its `config.json` file format (which
//! still reads files written before continuous actions existed).
use seed_shared::{EnvSpec, ObsDType};

use crate::model::conv;
use crate::model::distribution::ActionDistribution;

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
