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
//! On the CPU the first layer is a [`PatchConv`] (patches times weights,
//! whose backward skips the gradient of the observations; in f32 one fused
//! op with its ReLU); elsewhere it is candle's `Conv2d`. Both keep the same
//! weights under the same names.
//!
//! Cost: for 84x84x4 about 18.7 MFLOP per frame; for 10x10x4 about 0.3.
//!
//! A bf16 copy of the torso (`--inference-dtype bf16`) convolves in bf16
//! on a GPU. candle 0.11 has no bf16 convolution on the CPU, so there each
//! `Conv2d` (the second layer; the first is a `PatchConv`, a bf16 matrix
//! product) upcasts its bf16 input and kernel to f32 and rounds the result
//! back to bf16: bf16 products summed in f32, the arithmetic of a GPU's
//! tensor cores, only slower (bf16 is for accelerators).
use candle_core::{DType, Module, Result, Tensor};
use candle_nn::{Conv2d, Conv2dConfig, VarBuilder};

use super::dense::Dense;
use super::patch_conv::PatchConv;

/// Frames at least this high and wide get the Atari-sized torso.
pub const LARGE_FRAME: usize = 36;
/// The smallest frame side the small torso takes (its 3x3 kernel).
pub const MIN_FRAME: usize = 3;

/// The layer that reads the observations: no gradient flows into its
/// input, which [`PatchConv`] exploits on the CPU.
#[derive(Debug, Clone)]
enum FirstConv {
    Patch(PatchConv),
    Conv(Conv2d),
}

impl FirstConv {
    /// A `kernel x kernel` / `stride` conv of `[C, H, W]` frames to `out` channels.
    fn new(
        shape: [usize; 3],
        out: usize,
        kernel: usize,
        stride: usize,
        vb: VarBuilder,
    ) -> Result<Self> {
        if PatchConv::pays_on(vb.device()) {
            return Ok(FirstConv::Patch(PatchConv::new(
                shape, out, kernel, stride, vb,
            )?));
        }
        let cfg = Conv2dConfig {
            stride,
            ..Default::default()
        };
        Ok(FirstConv::Conv(candle_nn::conv2d(
            shape[0], out, kernel, cfg, vb,
        )?))
    }

    /// `relu(conv(xs))` flattened per frame, channel-major: `[B, O·Ho·Wo]`.
    fn forward_relu(&self, xs: &Tensor) -> Result<Tensor> {
        match self {
            FirstConv::Patch(conv) => conv.forward_relu(xs),
            FirstConv::Conv(conv) => convolve(conv, xs)?.relu()?.flatten_from(1),
        }
    }
}

/// `conv.forward(xs)` over only the rows and columns its windows cover.
///
/// candle 0.11's `Conv2d` backward computes the input's gradient with a
/// `conv_transpose2d` that gives `(Ho − 1)·stride + k` rows, so when
/// `(H − k)` is not a multiple of the stride (a 64x64 frame: conv 8/4 gives
/// 15, then conv 4/2 leaves a row over) that gradient is short of the
/// input and the backward fails with a shape mismatch. The rows and
/// columns no window reaches do not change the output, so cropping them
/// first gives the same result, and the backward of the crop pads their
/// gradient with zeros, which it is.
fn convolve(conv: &Conv2d, xs: &Tensor) -> Result<Tensor> {
    let (k, stride) = (conv.weight().dim(2)?, conv.config().stride);
    let covered = |size: usize| (conv_out(size, k, stride) - 1) * stride + k;
    let (h, w) = (xs.dim(2)?, xs.dim(3)?);
    let (ch, cw) = (covered(h), covered(w));
    if (ch, cw) == (h, w) {
        return forward_any_dtype(conv, xs);
    }
    forward_any_dtype(conv, &xs.narrow(2, 0, ch)?.narrow(3, 0, cw)?)
}

#[derive(Debug, Clone)]
pub struct ConvTorso {
    conv1: FirstConv,
    /// `[O, Ho, Wo]` of `conv1`.
    conv1_out: [usize; 3],
    /// `None` for the small-frame torso.
    conv2: Option<Conv2d>,
    fc: Dense,
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
            let c2 = Conv2dConfig {
                stride: 2,
                ..Default::default()
            };
            let conv1 = FirstConv::new([c, h, w], 16, 8, 4, vb.pp("conv1"))?;
            let conv2 = candle_nn::conv2d(16, 32, 4, c2, vb.pp("conv2"))?;
            let (h1, w1) = (conv_out(h, 8, 4), conv_out(w, 8, 4));
            let (h2, w2) = (conv_out(h1, 4, 2), conv_out(w1, 4, 2));
            let fc = Dense::new(32 * h2 * w2, features, vb.pp("fc"))?;
            Ok(ConvTorso {
                conv1,
                conv1_out: [16, h1, w1],
                conv2: Some(conv2),
                fc,
                out_dim: features,
            })
        } else {
            let conv1 = FirstConv::new([c, h, w], 16, 3, 1, vb.pp("conv1"))?;
            let (h1, w1) = (conv_out(h, 3, 1), conv_out(w, 3, 1));
            let fc = Dense::new(16 * h1 * w1, features, vb.pp("fc"))?;
            Ok(ConvTorso {
                conv1,
                conv1_out: [16, h1, w1],
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

/// `conv.forward(x)` for a bf16 `x` on the CPU, through f32 (see the
/// module docs); other dtypes and devices run `conv.forward(x)`.
fn forward_any_dtype(conv: &Conv2d, x: &Tensor) -> Result<Tensor> {
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
        let mut x = self.conv1.forward_relu(xs)?;
        if let Some(conv2) = &self.conv2 {
            let [o, h, w] = self.conv1_out;
            let frames = x.reshape((xs.dim(0)?, o, h, w))?;
            x = convolve(conv2, &frames)?.relu()?.flatten_from(1)?;
        }
        self.fc.forward(&x)?.relu()
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

    /// Frames whose sides leave rows over after a stride (64x64: 15 rows
    /// after conv 8/4, one left over by conv 4/2; the small torso's stride
    /// of 1 leaves none) train: the backward reaches every weight.
    #[test]
    fn frames_with_rows_left_over_by_a_stride_train() -> Result<()> {
        for shape in [[4, 64, 64], [3, 50, 71], [2, 11, 13]] {
            let (torso, map) = torso(&shape)?;
            let xs = Tensor::ones((2, shape[0], shape[1], shape[2]), DType::F32, &Device::Cpu)?;
            let grads = torso.forward(&xs)?.sum_all()?.backward()?;
            for (name, var) in map.data().lock().unwrap().iter() {
                assert!(
                    grads.get(var).is_some(),
                    "{shape:?}: no gradient for {name}"
                );
            }
        }
        Ok(())
    }

    #[test]
    fn the_crop_keeps_the_convolution() -> Result<()> {
        // A conv whose windows leave the last row and column out: cropped
        // or not, the same output.
        let map = VarMap::new();
        let vb = VarBuilder::from_varmap(&map, DType::F32, &Device::Cpu);
        let cfg = Conv2dConfig {
            stride: 2,
            ..Default::default()
        };
        let conv = candle_nn::conv2d(3, 4, 4, cfg, vb)?;
        let v: Vec<f32> = (0..2 * 3 * 15 * 15)
            .map(|i| (i % 13) as f32 / 13.0)
            .collect();
        let xs = Tensor::from_vec(v, (2, 3, 15, 15), &Device::Cpu)?;
        let (a, b) = (convolve(&conv, &xs)?, conv.forward(&xs)?);
        assert_eq!(a.dims(), [2, 4, 6, 6]);
        let diff = (a - b)?.abs()?.flatten_all()?.max(0)?.to_scalar::<f32>()?;
        assert!(diff < 1e-6, "{diff}");
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
