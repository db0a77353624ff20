//! The torso an [`crate::model::ActorCritic`] puts before its heads,
//! chosen by the observation type: an MLP for vectors, the conv torso for
//! `[C, H, W]` images.
use candle_core::{Module, Result, Tensor};

use crate::model::{conv, mlp};

#[derive(Debug, Clone)]
pub(super) enum Torso {
    Mlp(mlp::Mlp),
    Conv(conv::ConvTorso),
}

impl Torso {
    pub(super) fn out_dim(&self) -> usize {
        match self {
            Torso::Mlp(m) => m.out_dim(),
            Torso::Conv(c) => c.out_dim(),
        }
    }
}

impl Module for Torso {
    /// `xs`: `[N, D]` (the MLP), or `[N, C, H, W]` frames, u8 or of the
    /// weights' dtype (the conv torso).
    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        match self {
            Torso::Mlp(m) => m.forward(xs),
            Torso::Conv(c) => c.forward_obs(xs),
        }
    }
}
