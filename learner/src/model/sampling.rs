//! Action sampling from the policy's distribution parameters on the host.
//!
//! Inference downloads the `[B, P]` distribution parameters once per batch
//! anyway (they are the behaviour policy stored with each unroll), so
//! sampling them on the host costs no extra transfer and no per-row device
//! work; a small, seeded RNG keeps runs reproducible.
//!
//! - categorical: one index per row from the softmax of its logits;
//! - Gaussian: `a = μ + σ ε`, `ε ~ N(0, I)`, per row from its `D` means and
//!   `D` log-stds (see [`super::distribution`]); the samples are not
//!   clipped (actors clip them to the env's bounds).
//!
//! Cost: `O(P)` per row, one exp per logit or per float.
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;

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

    /// Samples one Gaussian action per row of `params` (`[B, 2D]`
    /// row-major: `D` means, then `D` log-stds) into `out` (`[B, D]`):
    /// `a = μ + exp(log σ) ε`, `ε ~ N(0, 1)` per float, unclipped.
    pub fn sample_gaussian(&mut self, params: &[f32], dim: usize, out: &mut [f32]) {
        debug_assert_eq!(params.len(), 2 * out.len());
        for (row, action) in params.chunks_exact(2 * dim).zip(out.chunks_exact_mut(dim)) {
            let (mean, log_std) = row.split_at(dim);
            for ((a, &m), &s) in action.iter_mut().zip(mean).zip(log_std) {
                let eps: f32 = self.rng.sample(StandardNormal);
                *a = m + s.exp() * eps;
            }
        }
    }

    /// The Gaussian's mean of each row of `params` (`[B, 2D]`) into `out`
    /// (`[B, D]`): its most likely action (greedy evaluation).
    pub fn gaussian_mean(params: &[f32], dim: usize, out: &mut [f32]) {
        for (row, action) in params.chunks_exact(2 * dim).zip(out.chunks_exact_mut(dim)) {
            action.copy_from_slice(&row[..dim]);
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
    fn gaussian_samples_have_the_rows_mean_and_std() {
        let mut s = ActionSampler::new(3);
        // Row 0: N(1, e^-1) and N(-2, 1); row 1: N(0, e^0.5) and N(5, e^-3).
        let n = 20_000;
        let rows = [[1.0f32, -2.0, -1.0, 0.0], [0.0, 5.0, 0.5, -3.0]];
        let params: Vec<f32> = (0..n).flat_map(|i| rows[i % 2]).collect();
        let mut out = vec![0f32; n * 2];
        s.sample_gaussian(&params, 2, &mut out);
        for (r, row) in rows.iter().enumerate() {
            for i in 0..2 {
                let xs: Vec<f64> = out
                    .chunks_exact(2)
                    .skip(r)
                    .step_by(2)
                    .map(|a| f64::from(a[i]))
                    .collect();
                let mean = xs.iter().sum::<f64>() / xs.len() as f64;
                let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / xs.len() as f64;
                let (m, sd) = (f64::from(row[i]), f64::from(row[2 + i]).exp());
                // 10_000 draws: the mean's standard error is sd / 100.
                assert!(
                    (mean - m).abs() < 5.0 * sd / 100.0,
                    "row {r} float {i}: {mean}"
                );
                assert!(
                    (var.sqrt() / sd - 1.0).abs() < 0.05,
                    "row {r} float {i}: {var}"
                );
            }
        }
        let mut greedy = [0f32; 4];
        ActionSampler::gaussian_mean(&[rows[0], rows[1]].concat(), 2, &mut greedy);
        assert_eq!(greedy, [1.0, -2.0, 0.0, 5.0]);
    }

    #[test]
    fn gaussian_samples_follow_the_seed() {
        let params = [0.5f32, 0.0, 0.5, 0.0];
        let draw = |seed| {
            let mut out = [0f32; 2];
            ActionSampler::new(seed).sample_gaussian(&params, 1, &mut out);
            out
        };
        assert_eq!(draw(4), draw(4));
        assert_ne!(draw(4), draw(5));
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
