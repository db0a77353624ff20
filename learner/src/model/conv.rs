//! Conv torso for image observations, channels-first `[B, C, H, W]` (as
//! Gymnasium's `FrameStackObservation` over grayscale Atari frames gives
//! `[4, 84, 84]`; channels-last envs are transposed by the actor, see the
//! Python package's `channels_last`).
//!
//! Two sizes, chosen by the frame:
//! - **Atari-sized** (H, W >= 36), after the Nature-DQN/IMPALA-shallow
//!   family but smaller: conv 8x8/4 (16) -> ReLU -> conv 4x4/2 (32) -> ReLU
//!   -> linear (`features`) -> ReLU. For 84x84 that is 20x20x16 then 9x9x32.
//! - **Small frames** (MinAtar's 10x10, anything from 3x3 up to 35): the
//!   MinAtar paper's network: conv 3x3/1 (16) -> ReLU -> linear
//!   (`features`) -> ReLU. Striding a 10x10 frame by 4 would discard most of
//!   it.
//!
//! Cost: for 84x84x4 about 18.7 MFLOP per frame; for 10x10x4 about 0.3.
//!
//! A bf16 copy of the torso (`--inference-dtype bf16`) convolves in bf16
//! on a GPU. candle 0.11 has no bf16 convolution on the CPU, so there each
//! convolution upcasts its bf16 input and kernel to f32 and rounds the
//! result back to bf16: bf16 products summed in f32, the arithmetic of a
//! GPU's tensor cores, only slower (bf16 is for accelerators).
use candle_core::{DType, Module, Result, Tensor};
use candle_nn::{Conv2d, Conv2dConfig, Linear, VarBuilder};

/// Frames at least this high and wide get the Atari-sized torso.
pub const LARGE_FRAME: usize = 36;
/// The smallest frame side the small torso takes (its 3x3 kernel).
pub const MIN_FRAME: usize = 3;

#[derive(Debug, Clone)]
pub struct ConvTorso {
    conv1: Conv2d,
    /// `None` for the small-frame torso.
    conv2: Option<Conv2d>,
    fc: Linear,
    out_dim: usize,
}

fn conv_out(size: usize, kernel: usize, stride: usize) -> usize {
    (size.saturating_sub(kernel)) / stride + 1
}

impl ConvTorso {
    /// Why a `[C, H, W]` shape cannot be served by this torso, if it cannot.
    pub fn check_shape(obs_shape: &[usize]) -> std::result::Result<(), String> {
        match obs_shape {
            // [84, 84, 4] or [64, 64, 3]: many "channels", a sliver of a frame.
            [c, _, w] if *c > 16 && *w <= 4 => Err(format!(
                "image observations must be channels-first [C, H, W]; {obs_shape:?} looks \
                 channels-last (transpose frames in the actor: the Python actor's \
                 `channels_last=True` / `--channels-last`)"
            )),
            [_, h, w] if *h >= MIN_FRAME && *w >= MIN_FRAME => Ok(()),
            _ => Err(format!(
                "image observations must be channels-first [C, H, W] with H, W >= {MIN_FRAME}, \
                 got {obs_shape:?} (for channels-last frames, transpose them in the actor: \
                 the Python actor's `channels_last=True` / `--channels-last`)"
            )),
        }
    }

    /// `obs_shape` is `[C, H, W]` (see [`ConvTorso::check_shape`]).
    pub fn new(obs_shape: &[usize], features: usize, vb: VarBuilder) -> Result<Self> {
        Self::check_shape(obs_shape).map_err(candle_core::Error::Msg)?;
        let (c, h, w) = (obs_shape[0], obs_shape[1], obs_shape[2]);
        if h >= LARGE_FRAME && w >= LARGE_FRAME {
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
                conv2: Some(conv2),
                fc,
                out_dim: features,
            })
        } else {
            let conv1 = candle_nn::conv2d(c, 16, 3, Conv2dConfig::default(), vb.pp("conv1"))?;
            let (h1, w1) = (conv_out(h, 3, 1), conv_out(w, 3, 1));
            let fc = candle_nn::linear(16 * h1 * w1, features, vb.pp("fc"))?;
            Ok(ConvTorso {
                conv1,
                conv2: None,
                fc,
                out_dim: features,
            })
        }
    }

    pub fn out_dim(&self) -> usize {
        self.out_dim
    }
}

/// `conv.forward(x)`, through f32 for bf16 on the CPU (see the module docs).
fn convolve(conv: &Conv2d, x: &Tensor) -> Result<Tensor> {
    if !(x.dtype() == DType::BF16 && x.device().is_cpu()) {
        return conv.forward(x);
    }
    let cfg = conv.config();
    let y = x.to_dtype(DType::F32)?.conv2d(
        &conv.weight().to_dtype(DType::F32)?,
        cfg.padding,
        cfg.stride,
        cfg.dilation,
        cfg.groups,
    )?;
    let y = match conv.bias() {
        Some(b) => y.broadcast_add(&b.to_dtype(DType::F32)?.reshape((1, (), 1, 1))?)?,
        None => y,
    };
    y.to_dtype(DType::BF16)
}

impl Module for ConvTorso {
    /// `xs`: `[B, C, H, W]` in `[0, 1]`, of the weights' dtype.
    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        let mut x = convolve(&self.conv1, xs)?.relu()?;
        if let Some(conv2) = &self.conv2 {
            x = convolve(conv2, &x)?.relu()?;
        }
        self.fc.forward(&x.flatten_from(1)?)?.relu()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{DType, Device};
    use candle_nn::VarMap;

    fn torso(shape: &[usize]) -> Result<(ConvTorso, VarMap)> {
        let map = VarMap::new();
        let vb = VarBuilder::from_varmap(&map, DType::F32, &Device::Cpu);
        Ok((ConvTorso::new(shape, 32, vb)?, map))
    }

    #[test]
    fn atari_and_minatar_frames_get_their_torsos() -> Result<()> {
        let (atari, map) = torso(&[4, 84, 84])?;
        assert!(atari.conv2.is_some());
        let fc = map.data().lock().unwrap()["fc.weight"].dims().to_vec();
        assert_eq!(fc, [32, 32 * 9 * 9]);
        let y = atari.forward(&Tensor::zeros((2, 4, 84, 84), DType::F32, &Device::Cpu)?)?;
        assert_eq!(y.dims(), [2, 32]);

        let (minatar, map) = torso(&[4, 10, 10])?;
        assert!(minatar.conv2.is_none());
        let fc = map.data().lock().unwrap()["fc.weight"].dims().to_vec();
        assert_eq!(fc, [32, 16 * 8 * 8]);
        let y = minatar.forward(&Tensor::ones((3, 4, 10, 10), DType::F32, &Device::Cpu)?)?;
        assert_eq!(y.dims(), [3, 32]);
        Ok(())
    }

    #[test]
    fn channels_last_or_tiny_frames_are_refused_with_the_fix() {
        for bad in [
            &[84, 84][..],
            &[10, 2, 2],
            &[1, 2, 3, 4],
            &[84, 84, 4],
            &[64, 64, 3],
        ] {
            let e = ConvTorso::check_shape(bad).unwrap_err();
            assert!(
                e.contains("[C, H, W]") && e.contains("channels_last"),
                "{e}"
            );
        }
        ConvTorso::check_shape(&[4, 3, 3]).unwrap();
    }
}
