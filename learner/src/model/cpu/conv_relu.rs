//! [`conv_relu`]: `relu(conv(x) + b)` for f32 weights on the CPU, as
//! patches times weights ([`super::im2col`], [`super::gemm`]), with its
//! backward: the op behind every conv layer of the CPU's conv torso.
//!
//! # Why
//! candle 0.11's CPU `conv2d` is a tiled direct loop over a generic `T`,
//! and its backward computes the input's gradient with a
//! `conv_transpose2d`, another direct loop. Measured against PyTorch on
//! the Atari-sized torso (`benches/cpu_math.py`), ours ran 3-7x behind.
//! As a matrix product the same convolution runs in the kernels candle
//! uses for `matmul` (the `gemm` crate: 80-110 GFLOP/s on one core of the
//! 2-core VMs, against the torso's 6 MFLOP a frame).
//!
//! # What it computes
//! `xs` `[N, C·H·W]` (f32, or the u8 observations with a scale: the
//! first layer reads the raw frames), `weight` `[O, C, k, k]`, `bias`
//! `[O]`; out `[N, O·Ho·Wo]`, each frame channel-major (what
//! `conv2d(xs)?.relu()?.flatten_from(1)` gives). Per chunk of frames:
//! 1. the patch matrix `[F·P, C·k·k]` ([`super::im2col::im2col`]);
//! 2. `[F·P, O] = patches · weightᵀ` (one gemm);
//! 3. bias, ReLU and the transpose to channel-major in one pass.
//!
//! Backward, per chunk: the patches again (recomputed: keeping them would
//! cost 400 KiB a frame), the ReLU's mask applied to the output's gradient
//! (position-major `G` `[F·P, O]`, its column sums the bias's gradient),
//! `dW += Gᵀ · patches`, and, when the input needs one (a second layer),
//! `dpatches = G · W` added back into the input's gradient
//! ([`super::im2col::col2im_add`]). The ReLU passes the gradient where the
//! output is above zero (candle's passes it at exactly zero too, a set of
//! measure zero).
//!
//! # Threads
//! Chunks of output lines (and, for the passes over outputs, frames) go
//! to candle's pool (`RAYON_NUM_THREADS`), each with its own buffers and
//! gradient partials, summed at the end in chunk order; a batch that is
//! one chunk runs its gemm on the pool instead. With one thread nothing
//! leaves the calling thread.
//!
//! # Cost
//! Per frame: `P·C·k·k` values gathered (twice for a backward), the
//! products' `2·P·C·k·k·O` flops (forward; twice that backward with an
//! input gradient), one pass over the `O·P` outputs. Buffers per thread:
//! about [`COLS_BYTES`] of patches and the chunk's `[F·P, O]`.
use std::sync::Arc;

use candle_core::{CpuStorage, CustomOp3, DType, Layout, Result, Shape, Tensor};
use rayon::prelude::*;

use super::gemm::{matmul, MatMut, MatRef, Threads};
use super::im2col::{col2im_add, im2col, ConvGeometry, Frames};
use super::pool_threads;

/// Patch-matrix bytes a chunk aims at: a quarter of a core's L2 (1 MiB
/// on the EPYC VMs), so the patches are still there when the gemm reads
/// them (a frame of the Atari torso's first layer is 400 KiB).
pub const COLS_BYTES: usize = 256 << 10;

/// Output lines (rows of `Wo` positions, [`im2col`]'s unit) per chunk for
/// `frames` frames over `threads` threads: about [`COLS_BYTES`] of
/// patches, at least one chunk per thread, and whole frames when
/// `whole_frames` (chunks that add into the input's gradient must not
/// share a frame).
fn chunk_lines(g: &ConvGeometry, frames: usize, threads: usize, whole_frames: bool) -> usize {
    let (ho, wo) = g.out_hw();
    let line_bytes = (wo * g.patch_len() * 4).max(1);
    let lines = (COLS_BYTES / line_bytes)
        .max(1)
        .min((frames * ho).div_ceil(threads).max(1));
    if whole_frames {
        (lines / ho).max(1) * ho
    } else {
        lines
    }
}

/// One worker's buffers, reused over its chunks.
#[derive(Debug, Default)]
struct Scratch {
    /// `[L·Wo, C·k·k]` patches.
    cols: Vec<f32>,
    /// `[L·Wo, C·k·k]`: the patches' gradient (backward with an input gradient).
    grad_cols: Vec<f32>,
    /// One u8 frame scaled to f32, on its way to the patches.
    frame: Vec<f32>,
}

/// Runs `work(item, accumulator, scratch, gemm threads)` over `items`
/// and returns the accumulators. With several items and threads, item `i`
/// goes to slot `i % slots` (one slot per thread), each slot a task on
/// the pool that runs its items in order into its own accumulator: the
/// same split, and so the same sums, on every run with as many threads.
/// Otherwise one accumulator on the calling thread, the gemm on the pool.
fn for_each_slot<T: Send, A: Send>(
    threads: usize,
    items: Vec<T>,
    make: impl Fn() -> A + Sync,
    work: impl Fn(T, &mut A, &mut Scratch, Threads) -> Result<()> + Sync,
) -> Result<Vec<A>> {
    if items.len() > 1 && threads > 1 {
        let slots = threads.min(items.len());
        let mut lists: Vec<Vec<T>> = (0..slots).map(|_| Vec::new()).collect();
        for (i, item) in items.into_iter().enumerate() {
            lists[i % slots].push(item);
        }
        lists
            .into_par_iter()
            .map(|list| {
                let (mut acc, mut scratch) = (make(), Scratch::default());
                for item in list {
                    work(item, &mut acc, &mut scratch, Threads::Serial)?;
                }
                Ok(acc)
            })
            .collect()
    } else {
        let (mut acc, mut scratch) = (make(), Scratch::default());
        for item in items {
            work(item, &mut acc, &mut scratch, Threads::Pool(threads))?;
        }
        Ok(vec![acc])
    }
}

/// The forward (see the module docs): `out` `[N, O·P]` from `xs`, over
/// `threads` of the pool.
pub fn forward(
    g: &ConvGeometry,
    xs: Frames<'_>,
    weight: &[f32],
    bias: &[f32],
    out: &mut [f32],
    threads: usize,
) -> Result<()> {
    check(g, &xs, weight, bias)?;
    let frames = xs.len() / g.frame_len();
    if out.len() != frames * g.out_len() {
        candle_core::bail!(
            "conv: output of {} values for {frames} frames of {}",
            out.len(),
            g.out_len()
        );
    }
    let threads = threads.max(1);
    let (p, o, ck) = (g.positions(), g.out_channels, g.patch_len());
    let wo = g.out_hw().1;
    let lines = chunk_lines(g, frames, threads, false);
    let weight_t = MatRef::row_major(weight, o, ck)?.t();
    // 1-2. Per chunk of lines: patches, then `[L·Wo, O]` products, into
    // one position-major `[N·P, O]` (each chunk its own rows).
    let mut rows = vec![0f32; frames * p * o];
    let chunks: Vec<(usize, &mut [f32])> = rows
        .chunks_mut(lines * wo * o)
        .enumerate()
        .map(|(i, r)| (i * lines, r))
        .collect();
    for_each_slot(
        threads,
        chunks,
        || (),
        |(first, rows), _, scratch, gemm_threads| {
            let n = rows.len() / (wo * o);
            scratch.cols.resize(n * wo * ck, 0.0);
            im2col(g, xs, first, n, &mut scratch.cols, &mut scratch.frame);
            matmul(
                MatMut::row_major(rows, n * wo, o)?,
                MatRef::row_major(&scratch.cols, n * wo, ck)?,
                weight_t,
                false,
                gemm_threads,
            )?;
            Ok(())
        },
    )?;
    // 3. Bias, ReLU and the transpose to channel-major, per frame.
    let per_frame = |(frame, rows): (&mut [f32], &[f32])| {
        for (ch, (plane, &b)) in frame.chunks_exact_mut(p).zip(bias).enumerate() {
            for (pos, y) in plane.iter_mut().enumerate() {
                *y = (rows[pos * o + ch] + b).max(0.0);
            }
        }
    };
    if threads > 1 && frames > 1 {
        out.par_chunks_exact_mut(g.out_len())
            .zip(rows.par_chunks_exact(p * o))
            .for_each(per_frame);
    } else {
        out.chunks_exact_mut(g.out_len())
            .zip(rows.chunks_exact(p * o))
            .for_each(per_frame);
    }
    Ok(())
}

/// One frame's output gradient `grad` masked by its ReLU (where `out` is
/// above zero), position-major into `rows` (`[P, O]`), and its channel
/// sums added into `sums` (`[O]`).
fn mask_frame(p: usize, o: usize, rows: &mut [f32], sums: &mut [f32], out: &[f32], grad: &[f32]) {
    for (ch, sum) in sums.iter_mut().enumerate() {
        let plane = ch * p..(ch + 1) * p;
        for (pos, (&y, &dy)) in out[plane.clone()].iter().zip(&grad[plane]).enumerate() {
            let m = if y > 0.0 { dy } else { 0.0 };
            rows[pos * o + ch] = m;
            *sum += m;
        }
    }
}

/// The weight's and bias's gradients, and the input's when asked.
#[derive(Debug)]
pub struct Gradients {
    /// `[O, C·k·k]`.
    pub weight: Vec<f32>,
    /// `[O]`.
    pub bias: Vec<f32>,
    /// `[N, C·H·W]`, when asked for.
    pub input: Option<Vec<f32>>,
}

/// The backward (see the module docs), from the forward's inputs, its
/// output `out` and the output's gradient `grad` (both `[N, O·P]`), over
/// `threads` of the pool.
pub fn backward(
    g: &ConvGeometry,
    xs: Frames<'_>,
    weight: &[f32],
    out: &[f32],
    grad: &[f32],
    input_grad: bool,
    threads: usize,
) -> Result<Gradients> {
    let (p, o, ck) = (g.positions(), g.out_channels, g.patch_len());
    let wo = g.out_hw().1;
    if weight.len() != o * ck || !xs.len().is_multiple_of(g.frame_len()) {
        candle_core::bail!("conv backward: weight or input of the wrong size");
    }
    let frames = xs.len() / g.frame_len();
    if out.len() != frames * g.out_len() || grad.len() != out.len() {
        candle_core::bail!(
            "conv backward: output of {} and gradient of {} values for {frames} frames of {}",
            out.len(),
            grad.len(),
            g.out_len()
        );
    }
    let threads = threads.max(1);
    // 1. The masked gradient, position-major `[N·P, O]`, and per frame its
    // column sums (the bias's gradient), summed after in frame order.
    let mut masked = vec![0f32; frames * p * o];
    let mut bias_parts = vec![0f32; frames * o];
    let per_frame = |((rows, sums), (out, grad))| mask_frame(p, o, rows, sums, out, grad);
    if threads > 1 && frames > 1 {
        masked
            .par_chunks_exact_mut(p * o)
            .zip(bias_parts.par_chunks_exact_mut(o))
            .zip(
                out.par_chunks_exact(g.out_len())
                    .zip(grad.par_chunks_exact(g.out_len())),
            )
            .for_each(per_frame);
    } else {
        masked
            .chunks_exact_mut(p * o)
            .zip(bias_parts.chunks_exact_mut(o))
            .zip(
                out.chunks_exact(g.out_len())
                    .zip(grad.chunks_exact(g.out_len())),
            )
            .for_each(per_frame);
    }
    let mut bias = vec![0f32; o];
    for part in bias_parts.chunks_exact(o) {
        for (b, v) in bias.iter_mut().zip(part) {
            *b += v;
        }
    }
    // 2-3. Per chunk of lines: the patches, `dW += Gᵀ · patches` into the
    // chunk's partial, and `dpatches = G · W` added into the input's
    // gradient (whole frames per chunk then).
    let lines = chunk_lines(g, frames, threads, input_grad);
    let chunks = (frames * g.out_hw().0).div_ceil(lines);
    let mut input = input_grad.then(|| vec![0f32; frames * g.frame_len()]);
    let frames_per_chunk = lines / g.out_hw().0;
    let grad_x: Vec<Option<&mut [f32]>> = match input.as_mut() {
        Some(gx) => gx
            .chunks_mut(frames_per_chunk.max(1) * g.frame_len())
            .map(Some)
            .collect(),
        None => (0..chunks).map(|_| None).collect(),
    };
    let w = MatRef::row_major(weight, o, ck)?;
    let items: Vec<_> = grad_x
        .into_iter()
        .enumerate()
        .map(|(i, gx)| (i * lines, gx))
        .collect();
    let masked = &masked;
    let parts = for_each_slot(
        threads,
        items,
        || vec![0f32; o * ck],
        |(first, grad_x), dw, scratch, gemm_threads| {
            let n = lines.min(frames * g.out_hw().0 - first);
            scratch.cols.resize(n * wo * ck, 0.0);
            im2col(g, xs, first, n, &mut scratch.cols, &mut scratch.frame);
            let g_rows =
                MatRef::row_major(&masked[first * wo * o..(first + n) * wo * o], n * wo, o)?;
            matmul(
                MatMut::row_major(dw, o, ck)?,
                g_rows.t(),
                MatRef::row_major(&scratch.cols, n * wo, ck)?,
                true,
                gemm_threads,
            )?;
            if let Some(grad_x) = grad_x {
                scratch.grad_cols.resize(n * wo * ck, 0.0);
                matmul(
                    MatMut::row_major(&mut scratch.grad_cols, n * wo, ck)?,
                    g_rows,
                    w,
                    false,
                    gemm_threads,
                )?;
                col2im_add(g, &scratch.grad_cols, grad_x);
            }
            Ok(())
        },
    )?;
    let mut parts = parts.into_iter();
    let mut weight_grad = parts.next().unwrap_or_else(|| vec![0f32; o * ck]);
    for part in parts {
        for (s, v) in weight_grad.iter_mut().zip(&part) {
            *s += v;
        }
    }
    Ok(Gradients {
        weight: weight_grad,
        bias,
        input,
    })
}

/// The sizes [`forward`] needs, each mismatch named.
fn check(g: &ConvGeometry, xs: &Frames<'_>, weight: &[f32], bias: &[f32]) -> Result<()> {
    if !xs.len().is_multiple_of(g.frame_len()) {
        candle_core::bail!(
            "conv: input of {} values is not whole frames of {}",
            xs.len(),
            g.frame_len()
        );
    }
    if weight.len() != g.out_channels * g.patch_len() || bias.len() != g.out_channels {
        candle_core::bail!(
            "conv: weight of {} and bias of {} values for {} channels of {}",
            weight.len(),
            bias.len(),
            g.out_channels,
            g.patch_len()
        );
    }
    Ok(())
}

/// The candle op: `(xs [N, C·H·W], weight [O, C, k, k], bias [O])` to
/// `[N, O·Ho·Wo]`, f32 weights on the CPU; `xs` f32, or u8 scaled by
/// `u8_scale`. The backward computes the input's gradient only for an f32
/// input that is part of the graph (`Tensor::track_op`: a layer's input
/// that comes from the network, not the observations).
#[derive(Debug, Clone, Copy)]
pub struct ConvRelu {
    pub geometry: ConvGeometry,
    /// The factor u8 inputs are scaled by (the observations' 1/255).
    pub u8_scale: f32,
}

/// `storage` as [`Frames`], or an error naming `what`.
fn frames<'a>(
    what: &str,
    storage: &'a CpuStorage,
    layout: &Layout,
    scale: f32,
) -> Result<Frames<'a>> {
    let Some((start, end)) = layout.contiguous_offsets() else {
        candle_core::bail!("conv: {what} must be contiguous");
    };
    match storage {
        CpuStorage::F32(v) => Ok(Frames::F32(&v[start..end])),
        CpuStorage::U8(v) => Ok(Frames::U8(&v[start..end], scale)),
        _ => candle_core::bail!("conv: {what} must be f32 or u8"),
    }
}

fn f32s<'a>(what: &str, storage: &'a CpuStorage, layout: &Layout) -> Result<&'a [f32]> {
    super::contiguous_f32("conv", what, storage, layout)
}

impl CustomOp3 for ConvRelu {
    fn name(&self) -> &'static str {
        "conv-relu"
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
        let xs = frames("the input", s1, l1, self.u8_scale)?;
        let weight = f32s("the weight", s2, l2)?;
        let bias = f32s("the bias", s3, l3)?;
        let n = xs.len() / self.geometry.frame_len().max(1);
        let mut out = vec![0f32; n * self.geometry.out_len()];
        forward(&self.geometry, xs, weight, bias, &mut out, pool_threads())?;
        Ok((
            CpuStorage::F32(out),
            Shape::from((n, self.geometry.out_len())),
        ))
    }

    fn bwd(
        &self,
        xs: &Tensor,
        weight: &Tensor,
        bias: &Tensor,
        res: &Tensor,
        grad_res: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let input_grad = xs.track_op() && xs.dtype() == DType::F32;
        let op = ConvReluGrad {
            op: *self,
            input_grad,
            // A copy of the weight (a few thousand values) rides in the
            // op: the backward reads four tensors, a custom op takes three.
            weight: weight.flatten_all()?.to_vec1::<f32>()?.into(),
        };
        // `[O·C·k·k + O (+ N·C·H·W)]`: the weight's, the bias's and the
        // input's gradients.
        let grads = xs.apply_op3_no_bwd(res, &grad_res.contiguous()?, &op)?;
        super::split_layer_grads(&grads, weight, bias, input_grad.then_some(xs))
    }
}

/// The backward of [`ConvRelu`]: `(xs, output, output's gradient)` to one
/// flat vector of the weight's, the bias's and (when asked) the input's
/// gradients.
#[derive(Debug, Clone)]
struct ConvReluGrad {
    op: ConvRelu,
    input_grad: bool,
    /// `[O, C·k·k]`.
    weight: Arc<[f32]>,
}

impl CustomOp3 for ConvReluGrad {
    fn name(&self) -> &'static str {
        "conv-relu-grad"
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
        let xs = frames("the input", s1, l1, self.op.u8_scale)?;
        let out = f32s("the output", s2, l2)?;
        let grad = f32s("the output's gradient", s3, l3)?;
        let grads = backward(
            &self.op.geometry,
            xs,
            &self.weight,
            out,
            grad,
            self.input_grad,
            pool_threads(),
        )?;
        let mut flat = grads.weight;
        flat.extend(grads.bias);
        if let Some(input) = grads.input {
            flat.extend(input);
        }
        let n = flat.len();
        Ok((CpuStorage::F32(flat), Shape::from(n)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Var};

    /// `(frame [C, H, W], out channels, kernel, stride, input gradient)`:
    /// MinAtar's layer, the Atari torso's two, and odd frames.
    const LAYERS: [([usize; 3], usize, usize, usize, bool); 5] = [
        ([4, 10, 10], 16, 3, 1, false),
        ([4, 84, 84], 16, 8, 4, false),
        ([16, 20, 20], 32, 4, 2, true),
        ([3, 7, 9], 5, 3, 2, true),
        ([2, 7, 9], 4, 3, 1, true),
    ];

    fn values(n: usize, seed: usize) -> Vec<f32> {
        (0..n)
            .map(|i| (((i + seed) * 7919) % 2003) as f32 / 2003.0 - 0.5)
            .collect()
    }

    /// `max |a − b| <= 1e-5 · max |b|`: within 1e-5 of the reference's scale.
    fn assert_close(ours: &Tensor, theirs: &Tensor, what: &str) -> Result<()> {
        assert_eq!(ours.dims(), theirs.dims(), "{what}: shapes");
        let scale = theirs.abs()?.flatten_all()?.max(0)?.to_scalar::<f32>()?;
        let diff = (ours - theirs)?
            .abs()?
            .flatten_all()?
            .max(0)?
            .to_scalar::<f32>()?;
        assert!(
            diff <= 1e-5 * scale,
            "{what}: {diff} apart at a scale of {scale}"
        );
        Ok(())
    }

    /// The op against candle's `conv2d`, bias and ReLU on the same
    /// weights: values, and the gradients of the weight, the bias and
    /// (where the layer takes one) the input under a loss that weights
    /// every output differently; batches of 1, 3 and 17 frames.
    #[test]
    fn matches_candles_conv_values_and_gradients() -> Result<()> {
        for (shape, out, kernel, stride, input_grad) in LAYERS {
            let g =
                ConvGeometry::new(shape, out, kernel, stride).map_err(candle_core::Error::Msg)?;
            let (ho, wo) = g.out_hw();
            let dev = Device::Cpu;
            let weight = Var::from_vec(
                values(g.out_len() / g.positions() * g.patch_len(), 1),
                (out, shape[0], kernel, kernel),
                &dev,
            )?;
            let bias = Var::from_vec(values(out, 2), out, &dev)?;
            for n in [1, 3, 17] {
                let case = format!("{shape:?} k{kernel} s{stride}, {n} frames");
                // A layer reading observations gets a plain tensor: no graph, no gradient.
                let data = Tensor::from_vec(
                    values(n * g.frame_len(), 3),
                    (n, shape[0], shape[1], shape[2]),
                    &dev,
                )?;
                let xs = Var::from_tensor(&data)?;
                let xs_in = if input_grad {
                    xs.as_tensor().clone()
                } else {
                    data
                };
                let op = ConvRelu {
                    geometry: g,
                    u8_scale: 1.0,
                };
                let ours = xs_in.reshape((n, g.frame_len()))?.apply_op3(
                    weight.as_tensor(),
                    bias.as_tensor(),
                    op,
                )?;
                let theirs = xs_in
                    .conv2d(weight.as_tensor(), 0, stride, 1, 1)?
                    .broadcast_add(&bias.as_tensor().reshape((1, out, 1, 1))?)?
                    .relu()?
                    .flatten_from(1)?;
                assert_close(&ours, &theirs, &format!("{case}: values"))?;
                let zeros = theirs
                    .eq(0f32)?
                    .to_dtype(DType::F32)?
                    .sum_all()?
                    .to_scalar::<f32>()?;
                assert!(
                    zeros > 0.0 && zeros < theirs.elem_count() as f32,
                    "{case}: the ReLU should cut some outputs"
                );

                let mix = Tensor::from_vec(values(n * out * ho * wo, 4), ours.shape(), &dev)?;
                let g_ours = (&ours * &mix)?.sum_all()?.backward()?;
                let g_theirs = (&theirs * &mix)?.sum_all()?.backward()?;
                for (name, var) in [("weight", &weight), ("bias", &bias)] {
                    let (a, b) = (
                        g_ours.get(var).expect("ours"),
                        g_theirs.get(var).expect("candle's"),
                    );
                    assert_close(a, b, &format!("{case}: gradient of the {name}"))?;
                }
                match g_ours.get(xs.as_tensor()) {
                    Some(dx) if input_grad => {
                        let theirs = g_theirs
                            .get(xs.as_tensor())
                            .expect("candle's input gradient");
                        assert_close(
                            &dx.reshape(theirs.shape())?,
                            theirs,
                            &format!("{case}: input gradient"),
                        )?;
                    }
                    None if !input_grad => {}
                    _ => panic!(
                        "{case}: an input gradient where none was asked, or none where one was"
                    ),
                }
            }
        }
        Ok(())
    }

    /// u8 frames are scaled as they are read: the same values and weight
    /// gradients as f32 frames scaled beforehand, and no input gradient.
    #[test]
    fn u8_frames_match_scaled_f32_frames() -> Result<()> {
        let g = ConvGeometry::new([4, 10, 10], 16, 3, 1).map_err(candle_core::Error::Msg)?;
        let dev = Device::Cpu;
        let weight = Var::from_vec(values(16 * 36, 5), (16, 4, 3, 3), &dev)?;
        let bias = Var::from_vec(values(16, 6), 16, &dev)?;
        let bytes: Vec<u8> = (0..3 * g.frame_len())
            .map(|i| ((i * 97) % 256) as u8)
            .collect();
        let u8s = Tensor::from_vec(bytes, (3, g.frame_len()), &dev)?;
        let f32s = u8s.to_dtype(DType::F32)?.affine(1.0 / 255.0, 0.0)?;
        let run =
            |xs: &Tensor, u8_scale: f32| -> Result<(Tensor, candle_core::backprop::GradStore)> {
                let op = ConvRelu {
                    geometry: g,
                    u8_scale,
                };
                let y = xs.apply_op3(weight.as_tensor(), bias.as_tensor(), op)?;
                let grads = y.sqr()?.sum_all()?.backward()?;
                Ok((y, grads))
            };
        let (y8, g8) = run(&u8s, 1.0 / 255.0)?;
        let (y32, g32) = run(&f32s, 1.0)?;
        assert_close(&y8, &y32, "values")?;
        assert_close(
            g8.get(&weight).unwrap(),
            g32.get(&weight).unwrap(),
            "weight gradient",
        )?;
        assert!(g8.get(&u8s).is_none());
        Ok(())
    }

    /// Spread over two threads (chunks on the pool) or one (one chunk, or
    /// chunks in turn), the same results within rounding: the chunking
    /// only reorders the gradient's sums.
    #[test]
    fn threads_change_only_the_order_of_sums() -> Result<()> {
        let g = ConvGeometry::new([4, 84, 84], 16, 8, 4).map_err(candle_core::Error::Msg)?;
        let n = 9;
        let (w, b) = (values(16 * g.patch_len(), 7), values(16, 8));
        let xs = values(n * g.frame_len(), 9);
        let mix = values(n * g.out_len(), 10);
        let mut results = Vec::new();
        for threads in [1, 2, 3] {
            let mut out = vec![0f32; n * g.out_len()];
            forward(&g, Frames::F32(&xs), &w, &b, &mut out, threads)?;
            let grads = backward(&g, Frames::F32(&xs), &w, &out, &mix, true, threads)?;
            results.push((out, grads));
        }
        let close = |a: &[f32], b: &[f32], what: &str| {
            let scale = b.iter().fold(0f32, |m, v| m.max(v.abs()));
            for (x, y) in a.iter().zip(b) {
                assert!((x - y).abs() <= 1e-5 * scale, "{what}: {x} vs {y}");
            }
        };
        let (out1, g1) = &results[0];
        for (out, grads) in &results[1..] {
            assert_eq!(out, out1, "the forward sums each output in the same order");
            close(&grads.weight, &g1.weight, "weight");
            close(&grads.bias, &g1.bias, "bias");
            close(
                grads.input.as_ref().unwrap(),
                g1.input.as_ref().unwrap(),
                "input",
            );
        }
        Ok(())
    }

    #[test]
    fn inputs_of_the_wrong_size_are_refused() {
        let g = ConvGeometry::new([1, 4, 4], 2, 3, 1).unwrap();
        let (w, b) = (vec![0f32; 18], vec![0f32; 2]);
        let mut out = vec![0f32; 8];
        let e = forward(&g, Frames::F32(&[0.0; 15]), &w, &b, &mut out, 1).unwrap_err();
        assert!(e.to_string().contains("not whole frames"), "{e}");
        let e = forward(&g, Frames::F32(&[0.0; 16]), &w[..17], &b, &mut out[..4], 1).unwrap_err();
        assert!(e.to_string().contains("weight of 17"), "{e}");
        let e = forward(&g, Frames::F32(&[0.0; 16]), &w, &b, &mut out[..3], 1).unwrap_err();
        assert!(e.to_string().contains("output of 3"), "{e}");
    }
}
