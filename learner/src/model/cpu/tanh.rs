//! `tanh` for f32 tensors on the CPU, vectorised.
//!
//! Why: candle 0.11 computes `Tensor::tanh` on the CPU with one libm call
//! per element. In the CartPole MLP at inference batch 1024 that was about
//! half of the learner's CPU time (`perf`), more than both matmuls. This op
//! evaluates the same function with straight-line f32 arithmetic that the
//! compiler turns into SIMD code (measured in `benches/benches/model.rs`,
//! `tanh_1024x64`: see docs/performance.md).
//!
//! Accuracy: within 2.5e-7 absolute of `f32::tanh` over the whole line
//! (tested), odd, saturating to exactly ±1, NaN in gives NaN out. The
//! gradient is `1 - tanh(x)^2` from the result, as for candle's own op.
//! On other devices and dtypes [`tanh`] calls candle's `Tensor::tanh`.
use candle_core::{CpuStorage, CustomOp1, DType, Layout, Result, Shape, Tensor};

/// `tanh(xs)`: the vectorised op for f32 on the CPU, candle's elsewhere.
pub fn tanh(xs: &Tensor) -> Result<Tensor> {
    if xs.device().is_cpu() && xs.dtype() == DType::F32 {
        // The op reads one contiguous slice; `contiguous` is free when the
        // input already is (a linear layer's output always is).
        xs.contiguous()?.apply_op1(VectorTanh)
    } else {
        xs.tanh()
    }
}

/// The candle custom op behind [`tanh`].
#[derive(Debug, Clone, Copy)]
struct VectorTanh;

impl CustomOp1 for VectorTanh {
    fn name(&self) -> &'static str {
        "vector-tanh"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> Result<(CpuStorage, Shape)> {
        let CpuStorage::F32(src) = storage else {
            candle_core::bail!("vector-tanh: expected f32 storage");
        };
        let Some((start, end)) = layout.contiguous_offsets() else {
            candle_core::bail!("vector-tanh: input must be contiguous (see `tanh`)");
        };
        let out = tanh_slice(&src[start..end]);
        Ok((CpuStorage::F32(out), layout.shape().clone()))
    }

    fn bwd(&self, _arg: &Tensor, res: &Tensor, grad_res: &Tensor) -> Result<Option<Tensor>> {
        // d tanh(x) / dx = 1 - tanh(x)^2.
        let local = res.sqr()?.affine(-1.0, 1.0)?;
        Ok(Some(grad_res.mul(&local)?))
    }
}

/// A plain loop over a slice, so the compiler vectorises `tanh_f32`.
fn tanh_slice(xs: &[f32]) -> Vec<f32> {
    xs.iter().map(|&x| tanh_f32(x)).collect()
}

/// Above this |x|, tanh(x) rounds to 1 in f32 (1 - tanh(9) = 3e-8).
const SATURATE: f32 = 9.0;
/// Below this |x|, the odd Taylor series to x^7 is used (its first omitted
/// term, 62 x^9 / 2835, is under 1e-12 here); above, the exp form, whose
/// `1 - e` would lose relative precision near 0.
const SMALL: f32 = 0.0625;
/// Adding and subtracting 1.5 * 2^23 rounds an f32 below 2^22 to the nearest
/// integer using only an add (SSE2 has no vector `round`).
const ROUND_MAGIC: f32 = 12_582_912.0;

/// tanh(x) = sign(x) (1 - e) / (1 + e) with e = exp(-2|x|) = 2^t,
/// t = -2|x| log2(e) split as k + f (k integer, |f| <= 1/2); 2^k is built in
/// the exponent bits, 2^f = exp(f ln 2) from its Taylor series to degree 7
/// (relative error under 1e-8 for |f| <= 1/2). Branch-free: both sides of
/// each `if` are plain values, which the compiler turns into selects.
#[inline(always)]
pub(crate) fn tanh_f32(x: f32) -> f32 {
    let a = x.abs();
    let a = if a < SATURATE { a } else { SATURATE };
    let t = -2.0 * std::f32::consts::LOG2_E * a; // in [-26, 0]
    let shifted = t + ROUND_MAGIC;
    let k = shifted - ROUND_MAGIC;
    // The integer k sits in the low mantissa bits of `shifted` (no
    // float-to-int conversion, which would not vectorise as well).
    let k_int = shifted.to_bits() as i32 - ROUND_MAGIC.to_bits() as i32;
    let f = (t - k) * std::f32::consts::LN_2; // |f| <= ln2 / 2
    let p = 1.0
        + f * (1.0
            + f * (1.0 / 2.0
                + f * (1.0 / 6.0
                    + f * (1.0 / 24.0
                        + f * (1.0 / 120.0 + f * (1.0 / 720.0 + f * (1.0 / 5040.0)))))));
    // k in [-26, 0], so the biased exponent 127 + k is a normal number.
    let two_k = f32::from_bits(((k_int + 127) as u32) << 23);
    let e = p * two_k;
    let large = (1.0 - e) / (1.0 + e);
    let a2 = a * a;
    let small = a * (1.0 + a2 * (-1.0 / 3.0 + a2 * (2.0 / 15.0 + a2 * (-17.0 / 315.0))));
    let r = if a < SMALL { small } else { large };
    let r = r.copysign(x);
    // NaN compares false above and would come out as ±1.
    if x.is_nan() {
        x
    } else {
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Var};

    /// Every 1/4096 over [-12, 12] plus the special values.
    fn sweep() -> Vec<f32> {
        let mut xs: Vec<f32> = (-12 * 4096..=12 * 4096)
            .map(|i| i as f32 / 4096.0)
            .collect();
        xs.extend([
            1e-30, -1e-30, 1e-8, 0.0624, 0.0625, 0.0626, 8.99, 9.0, 9.01, 40.0, -40.0, 1e30,
        ]);
        xs
    }

    #[test]
    fn matches_libm_tanh_within_2_5e_7() {
        let mut worst = (0.0f64, 0.0f32);
        for x in sweep() {
            let err = (tanh_f32(x) as f64 - (x as f64).tanh()).abs();
            if err > worst.0 {
                worst = (err, x);
            }
        }
        assert!(
            worst.0 <= 2.5e-7,
            "max error {} at x = {}",
            worst.0,
            worst.1
        );
    }

    #[test]
    fn is_odd_and_keeps_tiny_inputs() {
        for x in sweep() {
            assert_eq!(tanh_f32(-x).to_bits(), (-tanh_f32(x)).to_bits(), "x = {x}");
        }
        assert_eq!(tanh_f32(1e-30), 1e-30);
        assert_eq!(tanh_f32(0.0).to_bits(), 0.0f32.to_bits());
        assert_eq!(tanh_f32(-0.0).to_bits(), (-0.0f32).to_bits());
    }

    #[test]
    fn saturates_and_passes_nan() {
        assert_eq!(tanh_f32(f32::INFINITY), 1.0);
        assert_eq!(tanh_f32(f32::NEG_INFINITY), -1.0);
        assert_eq!(tanh_f32(1e30), 1.0);
        assert!(tanh_f32(f32::NAN).is_nan());
    }

    #[test]
    fn tensor_op_matches_candle_for_contiguous_and_strided_inputs() -> Result<()> {
        let xs: Vec<f32> = (0..96).map(|i| (i as f32 - 48.0) / 8.0).collect();
        let t = Tensor::from_vec(xs, (8, 12), &Device::Cpu)?;
        for input in [t.clone(), t.t()?] {
            let ours = tanh(&input)?.flatten_all()?.to_vec1::<f32>()?;
            let theirs = input.tanh()?.flatten_all()?.to_vec1::<f32>()?;
            for (a, b) in ours.iter().zip(&theirs) {
                assert!((a - b).abs() <= 2.5e-7, "{a} vs {b}");
            }
        }
        Ok(())
    }

    #[test]
    fn gradient_matches_candle_tanh() -> Result<()> {
        let x = Var::from_vec(vec![-3.0f32, -0.5, 0.0, 0.01, 0.7, 2.5], 6, &Device::Cpu)?;
        let ours = tanh(x.as_tensor())?.sum_all()?.backward()?;
        let theirs = x.as_tensor().tanh()?.sum_all()?.backward()?;
        let g1 = ours.get(&x).expect("grad").to_vec1::<f32>()?;
        let g2 = theirs.get(&x).expect("grad").to_vec1::<f32>()?;
        for (a, b) in g1.iter().zip(&g2) {
            assert!((a - b).abs() <= 1e-6, "{a} vs {b}");
        }
        Ok(())
    }
}
