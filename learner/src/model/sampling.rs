//! Action sampling from logits on the host.
//!
//! Inference downloads the `[B, A]` logits once per batch anyway (they are
//! the behaviour policy stored with each unroll), so sampling them on the host
//! costs no extra transfer and no per-row device work; a small, seeded RNG
//! keeps runs reproducible.
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

pub struct ActionSampler {
    rng: SmallRng,
    probs: Vec<f32>,
}

impl ActionSampler {
    pub fn new(seed: u64) -> Self {
        ActionSampler {
            rng: SmallRng::seed_from_u64(seed),
            probs: Vec::new(),
        }
    }

    /// Samples one action per row of `logits` (`[B, A]` row-major) into `out` (`[B]`).
    pub fn sample(&mut self, logits: &[f32], num_actions: usize, out: &mut [u32]) {
        debug_assert_eq!(logits.len(), out.len() * num_actions);
        self.probs.resize(num_actions, 0.0);
        for (row, action) in logits.chunks_exact(num_actions).zip(out.iter_mut()) {
            let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let mut total = 0.0;
            for (p, &l) in self.probs.iter_mut().zip(row) {
                *p = (l - max).exp();
                total += *p;
            }
            let mut u = self.rng.random::<f32>() * total;
            let mut chosen = num_actions - 1;
            for (i, &p) in self.probs.iter().enumerate() {
                if u < p {
                    chosen = i;
                    break;
                }
                u -= p;
            }
            *action = chosen as u32;
        }
    }

    /// The most likely action of each row (greedy evaluation).
    pub fn greedy(logits: &[f32], num_actions: usize, out: &mut [u32]) {
        for (row, action) in logits.chunks_exact(num_actions).zip(out.iter_mut()) {
            let mut best = 0;
            for (i, &l) in row.iter().enumerate() {
                if l > row[best] {
                    best = i;
                }
            }
            *action = best as u32;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frequencies_follow_softmax() {
        let mut s = ActionSampler::new(1);
        // softmax([0, ln 3]) = [0.25, 0.75]
        let logits: Vec<f32> = (0..20_000).flat_map(|_| [0.0, 3f32.ln()]).collect();
        let mut out = vec![0u32; 20_000];
        s.sample(&logits, 2, &mut out);
        let ones = out.iter().filter(|&&a| a == 1).count() as f64 / 20_000.0;
        assert!((ones - 0.75).abs() < 0.02, "{ones}");
    }

    #[test]
    fn extreme_logits_stay_in_range() {
        let mut s = ActionSampler::new(2);
        let logits = [1e30f32, -1e30, 0.0, -1e30, -1e30, 1e30];
        let mut out = [9u32; 2];
        s.sample(&logits, 3, &mut out);
        assert_eq!(out, [0, 2]);
        ActionSampler::greedy(&logits, 3, &mut out);
        assert_eq!(out, [0, 2]);
    }
}
