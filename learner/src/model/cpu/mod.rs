//! The CPU's f32 math where candle's generic kernels lose: each file one
//! op, with its backward when training needs one, and a test against
//! candle's own op (or the definition) for values and gradients.
//!
//! - [`gemm`]: matrix products on slices (the `gemm` crate that candle's
//!   `matmul` calls), bounds-checked views, the one `unsafe` call;
//! - [`im2col`]: patches of a frame as matrix rows, and back;
//! - [`conv_relu`]: a conv layer and its ReLU as patches times weights,
//!   forward and backward (every conv layer of the CPU's conv torso);
//! - [`dense_act`]: a dense layer and its activation as one op, forward
//!   and backward (every dense layer on the CPU);
//! - [`bias_add`]: a bias whose gradient is one pass over the rows (the
//!   LSTM core's, and dense layers off the CPU);
//! - [`lstm_unroll`]: the LSTM core over a whole unroll, forward and
//!   backward through time;
//! - [`tanh`]: a vectorised tanh;
//! - [`simd`]: loops compiled for AVX2 where the CPU has it.
//!
//! Each op is taken on `Device::Cpu` with f32 tensors only; other devices
//! and dtypes keep candle's kernels (CUDA, cuDNN, bf16), so a GPU build
//! runs exactly what it ran before. Threads: candle's pool
//! (`RAYON_NUM_THREADS`), as candle's own CPU kernels use it.
use std::sync::OnceLock;

use candle_core::{CpuStorage, Layout, Result, Tensor};

pub mod bias_add;
pub mod conv_relu;
pub mod dense_act;
pub mod gemm;
pub mod im2col;
pub mod lstm_unroll;
pub mod simd;
pub mod tanh;

/// The pool's thread count (candle's, `RAYON_NUM_THREADS`), read once:
/// the learner sets it before any thread starts
/// (`app::threads::configure_candle_threads`), and rayon's pool, also
/// sized once, would not follow a later change. candle's own
/// `get_num_threads` parses the variable on every call, 50-100 ns that a
/// one-row inference step (under a microsecond) would pay each time.
pub fn pool_threads() -> usize {
    static THREADS: OnceLock<usize> = OnceLock::new();
    *THREADS.get_or_init(|| candle_core::utils::get_num_threads().max(1))
}

/// A custom op's input as a contiguous f32 slice, or an error naming the
/// op and `what` the input is.
pub(crate) fn contiguous_f32<'a>(
    op: &str,
    what: &str,
    storage: &'a CpuStorage,
    layout: &Layout,
) -> Result<&'a [f32]> {
    let CpuStorage::F32(src) = storage else {
        candle_core::bail!("{op}: {what} must be f32");
    };
    let Some((start, end)) = layout.contiguous_offsets() else {
        candle_core::bail!("{op}: {what} must be contiguous");
    };
    Ok(&src[start..end])
}

/// A layer's backward, from the one flat vector its gradient op writes
/// (`[weight's, bias's (, input's)]`, in that order) to the three
/// gradients a `CustomOp3`'s `bwd` returns, as views shaped like the
/// tensors they belong to. `input` is the layer's input when its gradient
/// was asked for.
pub(crate) fn split_layer_grads(
    flat: &Tensor,
    weight: &Tensor,
    bias: &Tensor,
    input: Option<&Tensor>,
) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
    let (wn, bn) = (weight.elem_count(), bias.elem_count());
    let grad_weight = flat.narrow(0, 0, wn)?.reshape(weight.shape())?;
    let grad_bias = flat.narrow(0, wn, bn)?.reshape(bias.shape())?;
    let grad_input = match input {
        Some(x) => Some(
            flat.narrow(0, wn + bn, x.elem_count())?
                .reshape(x.shape())?,
        ),
        None => None,
    };
    Ok((grad_input, Some(grad_weight), Some(grad_bias)))
}
