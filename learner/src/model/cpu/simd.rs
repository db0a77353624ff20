//! [`wide`]: a loop compiled for AVX2 where the CPU has it, chosen at run
//! time.
//!
//! Why: the crate is built for the x86-64 baseline (SSE2), so the
//! compiler vectorises a plain loop over f32 (the vectorised tanh, the
//! LSTM's gates) four lanes wide. `gemm` picks AVX2 or AVX-512 kernels at
//! run time for the products, and PyTorch does the same for its
//! elementwise kernels; a loop body run through [`wide`] gets eight lanes.
//!
//! Same bits: only `avx2` is enabled, not `fma`. Rust never contracts a
//! multiply and an add into one fused op, and AVX2's lanes round each
//! `+`, `*`, `/` as SSE2's do, so both paths give identical results
//! (tested).
//!
//! Cost: one cached feature check per call.

/// A loop to run through [`wide`]: its `run` must be `#[inline(always)]`,
/// so that its body is compiled inside the AVX2 function (a closure would
/// not be inlined there once it is more than a few lines).
pub trait Kernel {
    type Output;
    fn run(self) -> Self::Output;
}

/// Runs `kernel`, compiled for AVX2 when this CPU has it.
#[inline(always)]
pub fn wide<K: Kernel>(kernel: K) -> K::Output {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: `avx2` is the one feature `with_avx2` is compiled
            // for, and the CPU has it (checked just above; the standard
            // library caches the answer).
            return unsafe { with_avx2(kernel) };
        }
    }
    kernel.run()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
fn with_avx2<K: Kernel>(kernel: K) -> K::Output {
    kernel.run()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::cpu::tanh::tanh_f32;

    /// The same loop through `wide` and as plain code: the same bits, on
    /// inputs across tanh's whole range, including its edge cases.
    #[test]
    fn wide_loops_give_the_plain_loops_bits() {
        let xs: Vec<f32> = (0..4099)
            .map(|i| (i as f32 - 2049.0) * 0.0071)
            .chain([0.0, -0.0, 9.0, -9.0, 1e-30, f32::MAX, f32::NAN])
            .collect();
        struct Body<'a>(&'a [f32]);
        impl Kernel for Body<'_> {
            type Output = Vec<f32>;
            #[inline(always)]
            fn run(self) -> Vec<f32> {
                self.0
                    .iter()
                    .map(|&x| 0.5 + 0.5 * tanh_f32(0.5 * x) * x / (1.0 + x * x))
                    .collect()
            }
        }
        let plain = Body(&xs).run();
        let wide = wide(Body(&xs));
        for (i, (a, b)) in plain.iter().zip(&wide).enumerate() {
            assert!(
                a.to_bits() == b.to_bits(),
                "x = {}: plain {a} vs wide {b}",
                xs[i]
            );
        }
    }
}
