//! [`PatchConv`]: the conv layer that reads the observations, written as
//! patch extraction plus one matrix product.
//!
//! # Why
//! candle's `Conv2d` backward always computes the gradient of the layer's
//! input with a `conv_transpose2d`, and on the CPU that is a direct loop,
//! not a gemm. For the first layer the input is the observation batch,
//! whose gradient nobody reads: for MinAtar's `[4, 10, 10]` frames it was
//! most of a training step. Here the observations are gathered into patch
//! rows once (`index_select` with a precomputed index: they carry no
//! gradient), and the layer is `patches x weightᵀ`, so its backward is the
//! weight's gradient alone, one gemm.
//!
//! The weights are the same tensors under the same names as a
//! `candle_nn::Conv2d` (`weight` `[O, C, k, k]`, `bias` `[O]`, the same
//! initialisation), so checkpoints do not change, and the output is the
//! same `[B, O, Ho, Wo]` (tested against `Conv2d`, values and gradients).
//!
//! # Cost
//! The patch matrix is `B·Ho·Wo x C·k·k` floats: 2.3 KiB per MinAtar frame
//! (64 x 36), 400 KiB per Atari frame (400 x 256), 4x the Atari frame
//! itself, allocated per forward.
use candle_core::{Device, Module, Result, Tensor};
use candle_nn::VarBuilder;

use super::bias_add::bias_add;

/// A convolution (no padding, no dilation) over `[B, C, H, W]` inputs that
/// need no gradient: the network's first layer.
#[derive(Debug, Clone)]
pub struct PatchConv {
    /// `[O, C, k, k]`, as `candle_nn::Conv2d` stores it.
    weight: Tensor,
    /// `[O]`.
    bias: Tensor,
    /// `[Ho·Wo·C·k·k]` u32: for each output position (row-major), the flat
    /// input offsets of its patch in `(c, ky, kx)` order, the order of the
    /// weight's flattened `[C, k, k]`.
    patch_index: Tensor,
    in_shape: [usize; 3],
    out_hw: (usize, usize),
}

impl PatchConv {
    /// A `kernel x kernel` convolution with `stride` from `in_shape`
    /// `[C, H, W]` (H, W >= kernel) to `out_channels`; weights `weight` and
    /// `bias` under `vb`, initialised as `candle_nn::conv2d` does.
    pub fn new(
        in_shape: [usize; 3],
        out_channels: usize,
        kernel: usize,
        stride: usize,
        vb: VarBuilder,
    ) -> Result<Self> {
        let [c, h, w] = in_shape;
        if kernel == 0 || stride == 0 || h < kernel || w < kernel {
            candle_core::bail!(
                "patch conv: kernel {kernel} stride {stride} does not fit a {in_shape:?} frame"
            );
        }
        let weight = vb.get_with_hints(
            (out_channels, c, kernel, kernel),
            "weight",
            candle_nn::init::DEFAULT_KAIMING_NORMAL,
        )?;
        let bound = 1. / (c as f64).sqrt();
        let bias = vb.get_with_hints(
            out_channels,
            "bias",
            candle_nn::Init::Uniform {
                lo: -bound,
                up: bound,
            },
        )?;
        let (ho, wo) = ((h - kernel) / stride + 1, (w - kernel) / stride + 1);
        let mut index = Vec::with_capacity(ho * wo * c * kernel * kernel);
        for oy in 0..ho {
            for ox in 0..wo {
                for ch in 0..c {
                    for ky in 0..kernel {
                        for kx in 0..kernel {
                            let (y, x) = (oy * stride + ky, ox * stride + kx);
                            index.push(((ch * h + y) * w + x) as u32);
                        }
                    }
                }
            }
        }
        let patch_index = Tensor::from_vec(index, ho * wo * c * kernel * kernel, vb.device())?;
        Ok(PatchConv {
            weight,
            bias,
            patch_index,
            in_shape,
            out_hw: (ho, wo),
        })
    }

    /// `(Ho, Wo)`.
    pub fn out_hw(&self) -> (usize, usize) {
        self.out_hw
    }

    /// Whether this layer should be used on `device`: the CPU, where
    /// candle's input gradient is the slow part. Other devices run their
    /// own conv kernels and keep `Conv2d`.
    pub fn pays_on(device: &Device) -> bool {
        matches!(device, Device::Cpu)
    }
}

impl Module for PatchConv {
    /// `xs`: `[B, C, H, W]` f32, carrying no gradient; `[B, O, Ho, Wo]` out.
    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        let b = xs.dim(0)?;
        let [c, h, w] = self.in_shape;
        let (o, ck2) = (
            self.weight.dim(0)?,
            self.weight.elem_count() / self.weight.dim(0)?,
        );
        let (ho, wo) = self.out_hw;
        // `[B, C·H·W]` -> `[B, Ho·Wo·C·k·k]` -> `[B·Ho·Wo, C·k·k]`.
        let patches = xs
            .reshape((b, c * h * w))?
            .index_select(&self.patch_index, 1)?
            .reshape((b * ho * wo, ck2))?;
        let weight = self.weight.reshape((o, ck2))?.t()?;
        // `[B·Ho·Wo, O]` -> `[B, O, Ho, Wo]`.
        bias_add(&patches.matmul(&weight)?, &self.bias)?
            .reshape((b, ho * wo, o))?
            .transpose(1, 2)?
            .contiguous()?
            .reshape((b, o, ho, wo))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::DType;
    use candle_nn::{Conv2dConfig, VarMap};

    /// `PatchConv` and `candle_nn::Conv2d` built on the same weights.
    fn both(
        shape: [usize; 3],
        out: usize,
        kernel: usize,
        stride: usize,
    ) -> Result<(PatchConv, candle_nn::Conv2d, VarMap)> {
        let map = VarMap::new();
        let vb = VarBuilder::from_varmap(&map, DType::F32, &Device::Cpu);
        let patch = PatchConv::new(shape, out, kernel, stride, vb.pp("conv"))?;
        // Same names: the conv reads the tensors the patch conv created.
        let cfg = Conv2dConfig {
            stride,
            ..Default::default()
        };
        let conv = candle_nn::conv2d(shape[0], out, kernel, cfg, vb.pp("conv"))?;
        Ok((patch, conv, map))
    }

    fn input(b: usize, shape: [usize; 3]) -> Result<Tensor> {
        let n = b * shape.iter().product::<usize>();
        // Distinct values, so a misplaced patch element shows.
        let v: Vec<f32> = (0..n).map(|i| ((i * 37) % 101) as f32 / 101.0).collect();
        Tensor::from_vec(v, (b, shape[0], shape[1], shape[2]), &Device::Cpu)
    }

    fn max_abs_diff(a: &Tensor, b: &Tensor) -> Result<f32> {
        (a - b)?.abs()?.flatten_all()?.max(0)?.to_scalar::<f32>()
    }

    #[test]
    fn matches_conv2d_values_and_weight_gradients() -> Result<()> {
        // MinAtar's small torso, and a strided Atari-like one on a small
        // frame; each against `Conv2d` on the same weights.
        for (shape, out, kernel, stride) in [([4, 10, 10], 16, 3, 1), ([3, 20, 24], 5, 8, 4)] {
            let (patch, conv, map) = both(shape, out, kernel, stride)?;
            let xs = input(3, shape)?;
            let (yp, yc) = (patch.forward(&xs)?, conv.forward(&xs)?);
            assert_eq!(yp.dims(), yc.dims());
            assert_eq!(
                (yp.dim(2)?, yp.dim(3)?),
                patch.out_hw(),
                "{shape:?} output size"
            );
            assert!(max_abs_diff(&yp, &yc)? < 1e-4, "{shape:?} forward differs");

            // A loss that weights every output differently.
            let mix = input(3, [out, yp.dim(2)?, yp.dim(3)?])?;
            let (gp, gc) = (
                (&yp * &mix)?.sum_all()?.backward()?,
                (&yc * &mix)?.sum_all()?.backward()?,
            );
            for name in ["conv.weight", "conv.bias"] {
                let var = map.data().lock().unwrap()[name].clone();
                let (a, b) = (gp.get(&var).unwrap(), gc.get(&var).unwrap());
                let scale = b.abs()?.flatten_all()?.max(0)?.to_scalar::<f32>()?;
                assert!(
                    max_abs_diff(a, b)? <= 1e-4 * scale.max(1.0),
                    "{shape:?} gradient of {name} differs"
                );
            }
        }
        Ok(())
    }

    #[test]
    fn a_kernel_larger_than_the_frame_is_refused() {
        let map = VarMap::new();
        let vb = VarBuilder::from_varmap(&map, DType::F32, &Device::Cpu);
        let e = PatchConv::new([1, 2, 5], 4, 3, 1, vb).unwrap_err();
        assert!(e.to_string().contains("does not fit"), "{e}");
    }
}
