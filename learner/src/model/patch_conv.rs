//! [`PatchConv`]: the conv layer that reads the observations, written as
//! patch extraction plus one matrix product.
//!
//! # Why
//! candle's `Conv2d` backward always computes the gradient of the layer's
//! input with a `conv_transpose2d`, and on the CPU that is a direct loop,
//! not a gemm. For the first layer the input is the observation batch,
//! whose gradient nobody reads: for MinAtar's `[4, 10, 10]` frames it was
//! most of a training step. Here the layer is patches times weights, so
//! its backward is the weight's gradient alone.
//!
//! For f32 on the CPU, [`PatchConv::forward_relu`] is one candle op
//! (`PatchConvRelu`) that gathers each output position's patch, multiplies
//! it by the weights, adds the bias, applies the ReLU and writes the result
//! channel-major, and whose backward is one pass giving the weight's and
//! the bias's gradients. Built from candle ops, the same layer took an
//! `index_select`, a product, a bias add, a transposing copy and a ReLU
//! forward, and in the backward the ReLU's mask (a `zeros_like`, a compare,
//! a cast, a product), a copy back, the bias's row sum and both gradients of
//! the product (candle computes the patches' gradient too, unread), each
//! node's gradient summed into a fresh zero tensor: a dozen passes over
//! `[B·Ho·Wo, 16]`. Patch elements that are zero are skipped, which MinAtar's
//! mostly empty frames make most of them.
//!
//! The weights are the same tensors under the same names as a
//! `candle_nn::Conv2d` (`weight` `[O, C, k, k]`, `bias` `[O]`, the same
//! initialisation), so checkpoints do not change, and the output is that
//! of `Conv2d` (tested against it, values and gradients).
//!
//! # Cost
//! The fused op: `B·Ho·Wo·C·k·k` multiply-adds of `O`-wide rows each way,
//! no patch matrix. The candle-op path ([`Module::forward`], other dtypes
//! and devices) allocates the patch matrix, `B·Ho·Wo x C·k·k` floats: 2.3
//! KiB per MinAtar frame (64 x 36), 400 KiB per Atari frame (400 x 256).
use std::sync::Arc;

use candle_core::{CpuStorage, CustomOp3, DType, Device, Layout, Module, Result, Shape, Tensor};
use candle_nn::VarBuilder;

use super::bias_add::{bias_add, contiguous_f32};

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
    /// The same offsets on the host, for [`PatchConvRelu`].
    patch_offsets: Arc<[u32]>,
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
        let patch_index = Tensor::from_slice(&index, index.len(), vb.device())?;
        Ok(PatchConv {
            weight,
            bias,
            patch_index,
            patch_offsets: index.into(),
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

    /// `relu(conv(xs))` flattened per frame, channel-major: `[B, O·Ho·Wo]`,
    /// what `forward(xs)?.relu()?.flatten_from(1)` gives. One fused op for
    /// f32 on the CPU (see the module docs), candle ops otherwise.
    pub fn forward_relu(&self, xs: &Tensor) -> Result<Tensor> {
        let fused = xs.device().is_cpu()
            && xs.dtype() == DType::F32
            && self.weight.dtype() == DType::F32
            && self.bias.dtype() == DType::F32;
        if !fused {
            return self.forward(xs)?.relu()?.flatten_from(1);
        }
        let [c, h, w] = self.in_shape;
        let op = PatchConvRelu {
            offsets: self.patch_offsets.clone(),
            frame_len: c * h * w,
            positions: self.out_hw.0 * self.out_hw.1,
        };
        xs.reshape((xs.dim(0)?, c * h * w))?
            .contiguous()?
            .apply_op3(&self.weight, &self.bias, op)
    }
}

/// The fused forward of [`PatchConv::forward_relu`]: `(xs [B, C·H·W],
/// weight [O, C, k, k], bias [O])` to `[B, O·Ho·Wo]`, f32 on the CPU.
///
/// Backward: no gradient for `xs` (the observations); the weight's and the
/// bias's from [`PatchConvReluGrad`]. The ReLU passes the gradient where
/// the output is above zero (candle's passes it at exactly zero too, a set
/// of measure zero).
#[derive(Debug, Clone)]
struct PatchConvRelu {
    /// Per output position, the `C·k·k` flat offsets of its patch in a frame.
    offsets: Arc<[u32]>,
    frame_len: usize,
    /// `Ho·Wo`.
    positions: usize,
}

/// A contiguous f32 slice of `storage`, or an error naming `what`.
fn f32_slice<'a>(what: &str, storage: &'a CpuStorage, layout: &Layout) -> Result<&'a [f32]> {
    contiguous_f32("patch conv", what, storage, layout)
}

impl PatchConvRelu {
    /// `C·k·k`.
    fn patch_len(&self) -> usize {
        self.offsets.len() / self.positions
    }

    /// Frames in `xs`, checking that it holds whole frames.
    fn frames(&self, xs: &[f32]) -> Result<usize> {
        if !xs.len().is_multiple_of(self.frame_len) {
            candle_core::bail!(
                "patch conv: input of {} values is not whole frames of {}",
                xs.len(),
                self.frame_len
            );
        }
        Ok(xs.len() / self.frame_len)
    }
}

impl CustomOp3 for PatchConvRelu {
    fn name(&self) -> &'static str {
        "patch-conv-relu"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let xs = f32_slice("the input", s1, l1)?;
        let weight = f32_slice("the weight", s2, l2)?;
        let bias = f32_slice("the bias", s3, l3)?;
        let (k, p, o) = (self.patch_len(), self.positions, bias.len());
        if weight.len() != o * k {
            candle_core::bail!(
                "patch conv: weight of {} values for {o} channels of {k}",
                weight.len()
            );
        }
        let frames = self.frames(xs)?;
        // `[C·k·k, O]`: each patch element scales one contiguous row of
        // `O` weights, a loop the compiler vectorises.
        let mut rows = vec![0f32; k * o];
        for (ch, filter) in weight.chunks_exact(k).enumerate() {
            for (j, w) in filter.iter().enumerate() {
                rows[j * o + ch] = *w;
            }
        }
        let mut out = vec![0f32; frames * o * p];
        let mut acc = vec![0f32; o];
        for (frame, out) in xs
            .chunks_exact(self.frame_len)
            .zip(out.chunks_exact_mut(o * p))
        {
            for (pos, patch) in self.offsets.chunks_exact(k).enumerate() {
                acc.copy_from_slice(bias);
                for (&at, row) in patch.iter().zip(rows.chunks_exact(o)) {
                    let x = frame[at as usize];
                    if x != 0.0 {
                        for (a, w) in acc.iter_mut().zip(row) {
                            *a += x * w;
                        }
                    }
                }
                for (ch, a) in acc.iter().enumerate() {
                    out[ch * p + pos] = a.max(0.0);
                }
            }
        }
        Ok((CpuStorage::F32(out), Shape::from((frames, o * p))))
    }

    fn bwd(
        &self,
        xs: &Tensor,
        weight: &Tensor,
        bias: &Tensor,
        res: &Tensor,
        grad_res: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let k = self.patch_len();
        // `[O, C·k·k + 1]`: the weight's gradient and, last, the bias's.
        let grads = xs.apply_op3_no_bwd(
            res,
            &grad_res.contiguous()?,
            &PatchConvReluGrad(self.clone()),
        )?;
        let grad_weight = grads.narrow(1, 0, k)?.reshape(weight.shape())?;
        let grad_bias = grads.narrow(1, k, 1)?.reshape(bias.shape())?;
        Ok((None, Some(grad_weight), Some(grad_bias)))
    }
}

/// The backward of [`PatchConvRelu`]: `(xs, output, output's gradient)` to
/// `[O, C·k·k + 1]`, the weight's gradient with the bias's as a last column.
#[derive(Debug, Clone)]
struct PatchConvReluGrad(PatchConvRelu);

impl CustomOp3 for PatchConvReluGrad {
    fn name(&self) -> &'static str {
        "patch-conv-relu-grad"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let op = &self.0;
        let xs = f32_slice("the input", s1, l1)?;
        let out = f32_slice("the output", s2, l2)?;
        let grad = f32_slice("the output's gradient", s3, l3)?;
        let frames = op.frames(xs)?;
        let (k, p) = (op.patch_len(), op.positions);
        if frames == 0 || out.len() != grad.len() || !out.len().is_multiple_of(frames * p) {
            candle_core::bail!(
                "patch conv: output of {} and gradient of {} values for {frames} frames",
                out.len(),
                grad.len()
            );
        }
        let o = out.len() / (frames * p);
        // `[C·k·k, O]` accumulators, as in the forward.
        let mut rows = vec![0f32; k * o];
        let mut bias = vec![0f32; o];
        let mut g = vec![0f32; o];
        let per_frame = o * p;
        for ((frame, out), grad) in xs
            .chunks_exact(op.frame_len)
            .zip(out.chunks_exact(per_frame))
            .zip(grad.chunks_exact(per_frame))
        {
            for (pos, patch) in op.offsets.chunks_exact(k).enumerate() {
                for (ch, (g, b)) in g.iter_mut().zip(bias.iter_mut()).enumerate() {
                    let at = ch * p + pos;
                    *g = if out[at] > 0.0 { grad[at] } else { 0.0 };
                    *b += *g;
                }
                for (&at, row) in patch.iter().zip(rows.chunks_exact_mut(o)) {
                    let x = frame[at as usize];
                    if x != 0.0 {
                        for (r, g) in row.iter_mut().zip(&g) {
                            *r += x * g;
                        }
                    }
                }
            }
        }
        let mut packed = Vec::with_capacity(o * (k + 1));
        for ch in 0..o {
            packed.extend((0..k).map(|j| rows[j * o + ch]));
            packed.push(bias[ch]);
        }
        Ok((CpuStorage::F32(packed), Shape::from((o, k + 1))))
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

    /// (frame `[C, H, W]`, output channels, kernel, stride): MinAtar's
    /// small torso, and a strided Atari-like one on a small frame.
    const CASES: [([usize; 3], usize, usize, usize); 2] =
        [([4, 10, 10], 16, 3, 1), ([3, 20, 24], 5, 8, 4)];

    /// Under a loss that weights every output by `mix`, the weight's and
    /// bias's gradients through `ours` and through `theirs` agree.
    fn assert_same_gradients(
        ours: &Tensor,
        theirs: &Tensor,
        mix: &Tensor,
        map: &VarMap,
        case: &str,
    ) -> Result<()> {
        let (ours, theirs) = (
            (ours * mix)?.sum_all()?.backward()?,
            (theirs * mix)?.sum_all()?.backward()?,
        );
        for name in ["conv.weight", "conv.bias"] {
            let var = map.data().lock().unwrap()[name].clone();
            let (a, b) = (ours.get(&var).unwrap(), theirs.get(&var).unwrap());
            assert_eq!(a.dims(), b.dims(), "{case} {name}");
            let scale = b.abs()?.flatten_all()?.max(0)?.to_scalar::<f32>()?;
            assert!(
                max_abs_diff(a, b)? <= 1e-4 * scale.max(1.0),
                "{case} gradient of {name} differs"
            );
        }
        Ok(())
    }

    #[test]
    fn matches_conv2d_values_and_weight_gradients() -> Result<()> {
        // Each case against `Conv2d` on the same weights.
        for (shape, out, kernel, stride) in CASES {
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
            assert_same_gradients(&yp, &yc, &mix, &map, &format!("{shape:?}"))?;
        }
        Ok(())
    }

    /// The fused `forward_relu` against `Conv2d`, ReLU and flatten: values
    /// and the weight's and bias's gradients, on frames half of zeros (the
    /// skipped elements) and with outputs on both sides of the ReLU.
    #[test]
    fn forward_relu_matches_conv2d_relu_flatten() -> Result<()> {
        for (shape, out, kernel, stride) in CASES {
            let (patch, conv, map) = both(shape, out, kernel, stride)?;
            let dense = input(3, shape)?;
            let mask = input(3, shape)?.ge(0.5)?.to_dtype(DType::F32)?;
            let xs = (dense * mask)?;
            let yp = patch.forward_relu(&xs)?;
            let yc = conv.forward(&xs)?.relu()?.flatten_from(1)?;
            assert_eq!(yp.dims(), yc.dims(), "{shape:?}");
            assert!(max_abs_diff(&yp, &yc)? < 1e-4, "{shape:?} forward differs");
            let zeros = yc
                .eq(0f32)?
                .to_dtype(DType::F32)?
                .sum_all()?
                .to_scalar::<f32>()?;
            assert!(
                zeros > 0.0 && zeros < yc.elem_count() as f32,
                "{shape:?}: the ReLU should cut some outputs and keep others"
            );

            let mix = input(1, [3, yp.dim(1)?, 1])?.reshape(yp.dims())?;
            assert_same_gradients(&yp, &yc, &mix, &map, &format!("{shape:?}"))?;
        }
        Ok(())
    }

    /// Other dtypes take the candle-op path, with the same result.
    #[test]
    fn forward_relu_in_bf16_uses_candle_ops() -> Result<()> {
        let (patch, _, _) = both([4, 10, 10], 16, 3, 1)?;
        let xs = input(2, [4, 10, 10])?;
        let f32_out = patch.forward_relu(&xs)?;
        let bf16 = PatchConv {
            weight: patch.weight.to_dtype(DType::BF16)?,
            bias: patch.bias.to_dtype(DType::BF16)?,
            ..patch.clone()
        };
        let bf16_out = bf16.forward_relu(&xs.to_dtype(DType::BF16)?)?;
        assert_eq!(bf16_out.dtype(), DType::BF16);
        let diff = max_abs_diff(&bf16_out.to_dtype(DType::F32)?, &f32_out)?;
        assert!(diff < 0.1, "{diff}");
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
