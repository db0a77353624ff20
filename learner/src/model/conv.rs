//! Conv torso for image observations, after the Nature-DQN/IMPALA-shallow
//! family but smaller: `[B, H, W, C]` (channels last, as frames arrive from
//! envs) -> conv 8x8/4 (16) -> ReLU -> conv 4x4/2 (32) -> ReLU -> linear
//! (`features`) -> ReLU. For 84x84x4 that is 20x20x16 then 9x9x32.
use candle_core::{Module, Result, Tensor};
use candle_nn::{Conv2d, Conv2dConfig, Linear, VarBuilder};

#[derive(Debug, Clone)]
pub struct ConvTorso {
    conv1: Conv2d,
    conv2: Conv2d,
    fc: Linear,
    out_dim: usize,
}

fn conv_out(size: usize, kernel: usize, stride: usize) -> usize {
    (size.saturating_sub(kernel)) / stride + 1
}

impl ConvTorso {
    /// `obs_shape` is `[H, W, C]`; both spatial sizes must be at least 20
    /// (conv1 must leave at least 4x4 for conv2's 4x4 kernel).
    pub fn new(obs_shape: &[usize], features: usize, vb: VarBuilder) -> Result<Self> {
        let (h, w, c) = match obs_shape {
            [h, w, c] if *h >= 20 && *w >= 20 => (*h, *w, *c),
            _ => {
                return Err(candle_core::Error::Msg(format!(
                    "conv torso needs [H, W, C] with H, W >= 20, got {obs_shape:?}"
                )))
            }
        };
        let c1 = Conv2dConfig {
            stride: 4,
            ..Default::default()
        };
        let c2 = Conv2dConfig {
            stride: 2,
            ..Default::default()
        };
        let conv1 = candle_nn::conv2d(c, 16, 8, c1, vb.pp("conv1"))?;
        let conv2 = candle_nn::conv2d(16, 32, 4, c2, vb.pp("conv2"))?;
        let (h2, w2) = (
            conv_out(conv_out(h, 8, 4), 4, 2),
            conv_out(conv_out(w, 8, 4), 4, 2),
        );
        let fc = candle_nn::linear(32 * h2 * w2, features, vb.pp("fc"))?;
        Ok(ConvTorso {
            conv1,
            conv2,
            fc,
            out_dim: features,
        })
    }

    pub fn out_dim(&self) -> usize {
        self.out_dim
    }
}

impl Module for ConvTorso {
    /// `xs`: `[B, H, W, C]` f32 in `[0, 1]`.
    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        let x = xs.permute((0, 3, 1, 2))?.contiguous()?;
        let x = self.conv1.forward(&x)?.relu()?;
        let x = self.conv2.forward(&x)?.relu()?;
        self.fc.forward(&x.flatten_from(1)?)?.relu()
    }
}
