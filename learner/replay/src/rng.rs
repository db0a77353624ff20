//! Sampling randomness: a seed plus a draw counter, so sampling needs no
//! lock and its state is two integers to checkpoint.
//!
//! Why: samplers run on several threads; a shared generator would need a
//! lock or CAS loop per draw. Instead every sample call takes the next draw
//! index (one `fetch_add`) and runs its own wyrand stream seeded from
//! `(seed, draw)`. The sequence of calls from one thread is reproducible
//! from the seed, and a restored buffer continues it exactly.
//! Cost: one atomic add per sample call, about 1 ns per random number.
use std::sync::atomic::{AtomicU64, Ordering};

/// Buffer-wide source of per-call generators.
#[derive(Debug)]
pub(crate) struct SampleRng {
    seed: u64,
    /// Number of generators handed out. Relaxed: only uniqueness matters,
    /// which the RMW gives; it orders no other memory.
    draws: AtomicU64,
}

impl SampleRng {
    pub(crate) fn new(seed: u64, draws: u64) -> Self {
        SampleRng {
            seed,
            draws: AtomicU64::new(draws),
        }
    }
    pub(crate) fn seed(&self) -> u64 {
        self.seed
    }
    pub(crate) fn draws(&self) -> u64 {
        self.draws.load(Ordering::Relaxed)
    }
    /// A generator for one sample call.
    pub(crate) fn next_stream(&self) -> WyRand {
        let d = self.draws.fetch_add(1, Ordering::Relaxed);
        WyRand::new(splitmix(self.seed ^ splitmix(d)))
    }
}

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// wyrand (Wang Yi): tiny, fast, passes BigCrush; not cryptographic.
#[derive(Debug, Clone)]
pub(crate) struct WyRand {
    state: u64,
}

impl WyRand {
    pub(crate) fn new(seed: u64) -> Self {
        WyRand { state: seed }
    }
    #[inline]
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0xa076_1d64_78bd_642f);
        let t = u128::from(self.state) * u128::from(self.state ^ 0xe703_7ed1_a0b4_28db);
        ((t >> 64) as u64) ^ (t as u64)
    }
    /// Uniform in `[0, n)` by multiply-shift (Lemire); the bias is below
    /// `n / 2^64`, negligible for buffer sizes.
    #[inline]
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
    /// Uniform in `[0, 1)` with 53 random bits.
    #[inline]
    pub(crate) fn unit_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_streams_and_range() {
        let a = SampleRng::new(7, 0);
        let b = SampleRng::new(7, 0);
        for _ in 0..3 {
            let (mut x, mut y) = (a.next_stream(), b.next_stream());
            assert_eq!(x.next_u64(), y.next_u64());
        }
        let resumed = SampleRng::new(7, 2);
        let c = SampleRng::new(7, 0);
        c.next_stream();
        c.next_stream();
        assert_eq!(resumed.next_stream().next_u64(), c.next_stream().next_u64());
        let mut r = WyRand::new(1);
        let mut seen = [false; 5];
        for _ in 0..1000 {
            let v = r.below(5) as usize;
            seen[v] = true;
            let u = r.unit_f64();
            assert!((0.0..1.0).contains(&u));
        }
        assert!(seen.iter().all(|&s| s));
    }
}
