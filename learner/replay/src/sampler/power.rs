//! [`pow_in_place`]: `x^y` over a slice of priorities or weights, written so
//! the compiler vectorises it.
//!
//! Why not `f32::powf`: prioritized sampling raises 128 weights to `beta`
//! and every priority update raises 128 priorities to `alpha`; libm's
//! `powf` is a call per element with branches inside, about a tenth of the
//! prioritized 1M figure by `perf`. This is `2^(y log2 x)` in `f32` and
//! `i32` lanes, branch-free, so a loop over a slice compiles to packed SSE2
//! (four lanes per instruction even on baseline x86-64). Results are within
//! a few ulps of `powf` (tested), far below what matters for a sampling
//! probability or an importance weight.
//!
//! Domain: `x` and `y` finite and `>= 0` (what the sampler passes:
//! `|priority| + eps` and `alpha`, `p_min / p_i` and `beta`). `0^0 = 1`,
//! `0^y = 0` for `y > 0`, as `powf`.
//!
//! Accuracy comes from keeping the large part of `y log2 x` exact:
//! `log2 x = e + log2 m` with `e` the exponent and `m` in
//! `[sqrt(1/2), sqrt(2))`. `y e` is split as `y_hi e + y_lo e`, where
//! `y_hi` keeps `y`'s top 12 bits, so both products are exact in `f32`;
//! only the small `y log2 m` is rounded. The integer part `n` of the total
//! then scales `2^f`, `|f| <= 1/2`, by exponent arithmetic.

/// `2 / ln 2`, the factor that turns the `atanh` series into `log2`.
const TWO_OVER_LN2: f32 = 2.0 / std::f32::consts::LN_2;

/// Adding and subtracting `1.5 * 2^23` rounds an `f32` of magnitude below
/// `2^22` to the nearest integer (ties to even) without `roundps`, which
/// baseline x86-64 lacks; the integer also sits in the sum's low bits.
const ROUNDER: f32 = 12_582_912.0;

/// `2^n` for `n` in `[-126, 127]`, from its exponent bits.
#[inline(always)]
fn exp2i(n: i32) -> f32 {
    f32::from_bits(((n + 127) as u32) << 23)
}

/// `x^y` (domain in the module docs).
#[inline(always)]
pub(crate) fn pow(x: f32, y: f32) -> f32 {
    // Subnormal `x`: scaled into the normal range first (a select).
    let tiny = x < f32::MIN_POSITIVE;
    let (xs, e_adjust) = if tiny {
        (x * 16_777_216.0, -24)
    } else {
        (x, 0)
    };
    let bits = xs.to_bits();
    // x = 2^e m, m in [1, 2), then centred on 1: [sqrt(1/2), sqrt(2)).
    let m = f32::from_bits((bits & 0x007f_ffff) | 0x3f80_0000);
    let big = m > std::f32::consts::SQRT_2;
    let m = if big { m * 0.5 } else { m };
    let e = ((bits >> 23) as i32 - 127 + e_adjust + i32::from(big)) as f32;
    // log2 m = (2 / ln 2) atanh(s), s = (m - 1) / (m + 1), |s| <= 0.172:
    // the series to s^9 leaves an error under 1e-9.
    let s = (m - 1.0) / (m + 1.0);
    let s2 = s * s;
    let log2m = TWO_OVER_LN2
        * s
        * (1.0 + s2 * (1.0 / 3.0 + s2 * (1.0 / 5.0 + s2 * (1.0 / 7.0 + s2 * (1.0 / 9.0)))));
    // y e exactly, as two products of at most 20 significant bits.
    let y_hi = f32::from_bits(y.to_bits() & 0xffff_f000);
    let y_lo = y - y_hi;
    let (a, b, c) = (y_hi * e, y_lo * e, y * log2m);
    // z = a + b + c = n + f. Clamped: past +-150 every `f32` result has
    // rounded to infinity or 0 already.
    let z = (a + (b + c)).clamp(-160.0, 160.0);
    let n = (z + ROUNDER) - ROUNDER;
    // `a - n` is exact (both are multiples of `a`'s last bit and it is
    // small), so `f` carries only `c`'s rounding.
    let f = ((a.clamp(-160.0, 160.0) - n) + b) + c;
    // 2^f = e^(f ln 2), |f ln 2| <= 0.35: Taylor to the 7th power leaves an
    // error under 1e-8.
    let u = f * std::f32::consts::LN_2;
    let p = 1.0
        + u * (1.0
            + u * (1.0 / 2.0
                + u * (1.0 / 6.0
                    + u * (1.0 / 24.0
                        + u * (1.0 / 120.0 + u * (1.0 / 720.0 + u * (1.0 / 5040.0)))))));
    // 2^n in two halves, each a normal `f32`, so a result that is
    // subnormal or infinite is rounded once, by the last multiply.
    let n = ((z + ROUNDER).to_bits() as i32).wrapping_sub(ROUNDER.to_bits() as i32);
    let half = n >> 1;
    let r = p * exp2i(half) * exp2i(n - half);
    // `0^y` is 0 for `y > 0` (and 1 for `y = 0`, which `r` already is).
    if x == 0.0 && y > 0.0 {
        0.0
    } else {
        r
    }
}

/// Every `x` in `xs` replaced by `x^y`.
pub(crate) fn pow_in_place(xs: &mut [f32], y: f32) {
    for x in xs {
        *x = pow(*x, y);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Distance in ulps between two finite non-negative `f32`s.
    fn ulps(a: f32, b: f32) -> u32 {
        a.to_bits().abs_diff(b.to_bits())
    }

    #[test]
    fn matches_powf_within_a_few_ulps_over_the_samplers_domain() {
        // Exponents the config allows, the defaults among them.
        let ys = [0.0f32, 0.4, 0.5, 0.6, 1.0, 1.7, 2.0, 3.3, 1e-3, 0.123_456_7];
        // Bases from 0 through subnormals to near f32::MAX, dense around 1.
        let mut xs = vec![0.0f32, f32::from_bits(1), 1e-40, f32::MIN_POSITIVE, 1.0];
        let mut x = 1e-38f32;
        while x < 3e38 {
            xs.push(x);
            x *= 1.0173;
        }
        xs.extend((0..20_000).map(|i| 0.5 + i as f32 / 10_000.0));
        for &y in &ys {
            let mut got = xs.clone();
            pow_in_place(&mut got, y);
            for (&x, &g) in xs.iter().zip(&got) {
                let want = x.powf(y);
                if want.is_infinite() || want < f32::MIN_POSITIVE {
                    // Overflow and the subnormal range: the rounding of the
                    // last multiply can differ by the subnormal's ulp.
                    assert!(
                        g == want || (g - want).abs() <= f32::from_bits(2),
                        "{x}^{y}: {g}, powf says {want}"
                    );
                    continue;
                }
                let d = ulps(g, want);
                assert!(d <= 4, "{x}^{y}: {g}, powf says {want} ({d} ulps)");
            }
        }
        // Exact where powf is exact.
        assert_eq!(pow(0.0, 0.0), 1.0);
        assert_eq!(pow(0.0, 0.6), 0.0);
        assert_eq!(pow(0.0, 0.01), 0.0);
        assert_eq!(pow(1.0, 0.6), 1.0);
        assert_eq!(pow(4.0, 0.5), 2.0);
        assert_eq!(pow(0.25, 1.0), 0.25);
        assert_eq!(pow(3.0, 0.0), 1.0);
    }
}
