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
//! On the CPU, with f32 weights, each layer and its ReLU is one op,
//! patches times weights ([`crate::model::cpu::conv_relu`]), that the
//! first layer runs on the raw u8 frames (scaled by 1/255 as it gathers
//! them) and whose backward gives no gradient for the observations;
//! elsewhere (a GPU, a bf16 copy) a layer is candle's `conv2d` and a ReLU.
//! Both keep the same weights under the same names (`conv1.weight`
//! `[16, C, k, k]`, `conv1.bias`, ...).
//!
//! Cost: for 84x84x4 about 6 MFLOP per frame (conv 8x8/4: 3.3, conv 4x4/2:
//! 1.3, linear 2592 -> 256: 1.3); for 10x10x4 about 0.6.
//!
//! A bf16 copy of the torso (`--inference-dtype bf16`) convolves in bf16
//! on a GPU. candle 0.11 has no bf16 convolution on the CPU, so there each
//! layer upcasts its bf16 input and kernel to f32 and rounds the result
//! back to bf16: bf16 products summed in f32, the arithmetic of a GPU's
//! tensor cores, only slower (bf16 is for accelerators).
use candle_core::{DType, Result, Tensor};
use candle_nn::VarBuilder;

use super::cpu::conv_relu::ConvRelu;
use super::cpu::dense_act::Activation;
use super::cpu::im2col::ConvGeometry;
use super::dense::Dense;

/// Frames at least this high and wide get the Atari-sized torso.
pub const LARGE_FRAME: usize = 36;
/// The smallest frame side the small torso takes (its 3x3 kernel).
pub const MIN_FRAME: usize = 3;

/// One conv layer (no padding, no dilation) and its ReLU.
#[derive(Debug, Clone)]
struct ConvLayer {
    /// `[O, C, k, k]`, as `candle_nn::Conv2d` stores it.
    weight: Tensor,
    /// `[O]`.
    bias: Tensor,
    geometry: ConvGeometry,
}

impl ConvLayer {
    /// A `kernel x kernel` / `stride` conv of `[C, H, W]` frames to `out`
    /// channels, its weights created (or read) under `vb` as
    /// `candle_nn::conv2d` does.
    fn new(
        shape: [usize; 3],
        out: usize,
        kernel: usize,
        stride: usize,
        vb: VarBuilder,
    ) -> Result<Self> {
        let geometry =
            ConvGeometry::new(shape, out, kernel, stride).map_err(candle_core::Error::Msg)?;
        let weight = vb.get_with_hints(
            (out, shape[0], kernel, kernel),
            "weight",
            candle_nn::init::DEFAULT_KAIMING_NORMAL,
        )?;
        let bound = 1. / (shape[0] as f64).sqrt();
        let bias = vb.get_with_hints(
            out,
            "bias",
            candle_nn::Init::Uniform {
                lo: -bound,
                up: bound,
            },
        )?;
        Ok(ConvLayer {
            weight,
            bias,
            geometry,
        })
    }

    /// Whether [`ConvLayer::forward_relu`] takes the CPU op for inputs of
    /// `dtype`: f32 weights on the CPU, f32 inputs (or u8 frames).
    fn cpu_op(&self, dtype: DType) -> bool {
        self.weight.device().is_cpu()
            && self.weight.dtype() == DType::F32
            && self.bias.dtype() == DType::F32
            && matches!(dtype, DType::F32 | DType::U8)
    }

    /// `relu(conv(xs))` flattened per frame, channel-major: `[N, O·Ho·Wo]`.
    /// `xs`: `[N, C, H, W]` of the weights' dtype, or u8 frames (the CPU
    /// op only) that are scaled by `u8_scale` first.
    fn forward_relu(&self, xs: &Tensor, u8_scale: f32) -> Result<Tensor> {
        let n = xs.dim(0)?;
        if self.cpu_op(xs.dtype()) {
            let op = ConvRelu {
                geometry: self.geometry,
                u8_scale,
            };
            return xs
                .reshape((n, self.geometry.frame_len()))?
                .contiguous()?
                .apply_op3(&self.weight, &self.bias, op);
        }
        let xs = if xs.dtype() == DType::U8 {
            xs.to_dtype(self.weight.dtype())?
                .affine(f64::from(u8_scale), 0.0)?
        } else {
            xs.clone()
        };
        let g = &self.geometry;
        let xs = xs.reshape((n, g.in_channels, g.height, g.width))?;
        convolve(&self.weight, &self.bias, g.stride, &xs)?
            .relu()?
            .flatten_from(1)
    }
}

/// `conv2d(xs) + bias` (candle's op) over only the rows and columns its
/// windows cover.
///
/// candle 0.11's `conv2d` backward computes the input's gradient with a
/// `conv_transpose2d` that gives `(Ho − 1)·stride + k` rows, so when
/// `(H − k)` is not a multiple of the stride (a 64x64 frame: conv 8/4 gives
/// 15, then conv 4/2 leaves a row over) that gradient is short of the
/// input and the backward fails with a shape mismatch. The rows and
/// columns no window reaches do not change the output, so cropping them
/// first gives the same result, and the backward of the crop pads their
/// gradient with zeros, which it is.
fn convolve(weight: &Tensor, bias: &Tensor, stride: usize, xs: &Tensor) -> Result<Tensor> {
    let k = weight.dim(2)?;
    let covered = |size: usize| (conv_out(size, k, stride) - 1) * stride + k;
    let (h, w) = (xs.dim(2)?, xs.dim(3)?);
    let (ch, cw) = (covered(h), covered(w));
    let xs = if (ch, cw) == (h, w) {
        xs.clone()
    } else {
        xs.narrow(2, 0, ch)?.narrow(3, 0, cw)?
    };
    conv_any_dtype(weight, bias, stride, &xs)
}

#[derive(Debug, Clone)]
pub struct ConvTorso {
    conv1: ConvLayer,
    /// `None` for the small-frame torso.
    conv2: Option<ConvLayer>,
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
            let conv1 = ConvLayer::new([c, h, w], 16, 8, 4, vb.pp("conv1"))?;
            let (h1, w1) = conv1.geometry.out_hw();
            let conv2 = ConvLayer::new([16, h1, w1], 32, 4, 2, vb.pp("conv2"))?;
            let fc = Dense::new(conv2.geometry.out_len(), features, vb.pp("fc"))?;
            Ok(ConvTorso {
                conv1,
                conv2: Some(conv2),
                fc,
                out_dim: features,
            })
        } else {
            let conv1 = ConvLayer::new([c, h, w], 16, 3, 1, vb.pp("conv1"))?;
            let fc = Dense::new(conv1.geometry.out_len(), features, vb.pp("fc"))?;
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

    /// The conv layers, input first: geometry, weight `[O, C, k, k]`,
    /// bias `[O]` (a ReLU follows each).
    pub fn layers(&self) -> impl Iterator<Item = (ConvGeometry, &Tensor, &Tensor)> {
        std::iter::once(&self.conv1)
            .chain(self.conv2.as_ref())
            .map(|l| (l.geometry, &l.weight, &l.bias))
    }

    /// The dense layer after the convs (a ReLU follows it).
    pub fn fc(&self) -> &Dense {
        &self.fc
    }
}

/// `conv2d(x) + bias` for any `x` (see the module docs on bf16 on the
/// CPU, where it goes through f32).
fn conv_any_dtype(weight: &Tensor, bias: &Tensor, stride: usize, x: &Tensor) -> Result<Tensor> {
    let bias = |dtype: DType| -> Result<Tensor> { bias.to_dtype(dtype)?.reshape((1, (), 1, 1)) };
    if !(x.dtype() == DType::BF16 && x.device().is_cpu()) {
        return x
            .conv2d(weight, 0, stride, 1, 1)?
            .broadcast_add(&bias(x.dtype())?);
    }
    let y = x
        .to_dtype(DType::F32)?
        .conv2d(&weight.to_dtype(DType::F32)?, 0, stride, 1, 1)?
        .broadcast_add(&bias(DType::F32)?)?;
    y.to_dtype(DType::BF16)
}

impl ConvTorso {
    /// The torso on observations `xs` `[N, C, H, W]`: u8 frames (scaled
    /// by 1/255 inside, by the CPU op as it reads them, or by one affine
    /// before candle's conv) or values of the weights' dtype.
    pub fn forward_obs(&self, xs: &Tensor) -> Result<Tensor> {
        let mut x = self.conv1.forward_relu(xs, 1.0 / 255.0)?;
        if let Some(conv2) = &self.conv2 {
            x = conv2.forward_relu(&x, 1.0)?;
        }
        self.fc.forward_act(&x, Activation::Relu)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Module};
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
        let y = atari.forward_obs(&Tensor::zeros((2, 4, 84, 84), DType::U8, &Device::Cpu)?)?;
        assert_eq!(y.dims(), [2, 32]);

        let (minatar, map) = torso(&[4, 10, 10])?;
        assert!(minatar.conv2.is_none());
        let fc = map.data().lock().unwrap()["fc.weight"].dims().to_vec();
        assert_eq!(fc, [32, 16 * 8 * 8]);
        let y = minatar.forward_obs(&Tensor::ones((3, 4, 10, 10), DType::F32, &Device::Cpu)?)?;
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
            let grads = torso.forward_obs(&xs)?.sum_all()?.backward()?;
            for (name, var) in map.data().lock().unwrap().iter() {
                assert!(
                    grads.get(var).is_some(),
                    "{shape:?}: no gradient for {name}"
                );
            }
        }
        Ok(())
    }

    /// candle's conv over a frame whose windows leave the last row and
    /// column out: cropped or not, the same output, and (cropped) a
    /// backward that reaches the input (uncropped, candle's fails).
    #[test]
    fn the_crop_keeps_the_convolution_and_its_backward() -> Result<()> {
        let map = VarMap::new();
        let vb = VarBuilder::from_varmap(&map, DType::F32, &Device::Cpu);
        let layer = ConvLayer::new([3, 15, 15], 4, 4, 2, vb)?;
        let v: Vec<f32> = (0..2 * 3 * 15 * 15)
            .map(|i| (i % 13) as f32 / 13.0)
            .collect();
        let xs = candle_core::Var::from_vec(v, (2, 3, 15, 15), &Device::Cpu)?;
        let ours = convolve(&layer.weight, &layer.bias, 2, xs.as_tensor())?;
        let theirs = xs
            .as_tensor()
            .conv2d(&layer.weight, 0, 2, 1, 1)?
            .broadcast_add(&layer.bias.reshape((1, 4, 1, 1))?)?;
        assert_eq!(ours.dims(), [2, 4, 6, 6]);
        let diff = (&ours - theirs)?
            .abs()?
            .flatten_all()?
            .max(0)?
            .to_scalar::<f32>()?;
        assert!(diff < 1e-6, "{diff}");
        let grads = ours.sum_all()?.backward()?;
        let dx = grads.get(xs.as_tensor()).expect("the input's gradient");
        assert_eq!(dx.dims(), [2, 3, 15, 15]);
        Ok(())
    }

    /// The CPU op and candle's conv2d (the GPU's and bf16's path) give the
    /// same torso output on the same weights, u8 frames in.
    #[test]
    fn the_cpu_op_and_candles_conv_give_the_same_torso() -> Result<()> {
        for shape in [[4, 84, 84], [4, 10, 10], [3, 50, 71]] {
            let (torso, _map) = torso(&shape)?;
            let n = 3 * shape.iter().product::<usize>();
            let bytes: Vec<u8> = (0..n).map(|i| ((i * 131) % 256) as u8).collect();
            let frames = Tensor::from_vec(bytes, (3, shape[0], shape[1], shape[2]), &Device::Cpu)?;
            let ours = torso.forward_obs(&frames)?;
            let scaled = frames.to_dtype(DType::F32)?.affine(1.0 / 255.0, 0.0)?;
            let mut x = convolve(
                &torso.conv1.weight,
                &torso.conv1.bias,
                torso.conv1.geometry.stride,
                &scaled,
            )?
            .relu()?;
            if let Some(c2) = &torso.conv2 {
                x = convolve(&c2.weight, &c2.bias, c2.geometry.stride, &x)?.relu()?;
            }
            let theirs = torso.fc.forward(&x.flatten_from(1)?)?.relu()?;
            let scale = theirs.abs()?.flatten_all()?.max(0)?.to_scalar::<f32>()?;
            let diff = (&ours - &theirs)?
                .abs()?
                .flatten_all()?
                .max(0)?
                .to_scalar::<f32>()?;
            assert!(
                diff <= 1e-5 * scale.max(1e-3),
                "{shape:?}: {diff} of {scale}"
            );
        }
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
