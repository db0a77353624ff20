//! Per-env-slot ε-greedy exploration for value-based agents (R2D2), with
//! the Ape-X schedule over env slots: slot `i` of `N` acts greedily on the
//! Q-values except with probability `ε_i = ε^(1 + α·i/(N−1))` (ε = 0.4,
//! α = 7 in Ape-X and R2D2; the learner's default ε is 0.1, defaults.toml
//! says why), when it takes a uniformly random action.
//!
//! Why here: the learner assigns each env slot its ε, and inference, which
//! picks every action, applies it; the actors stay policy-agnostic. Why per
//! slot rather than per actor: a learner's env slots are its unit of
//! exploration whichever actor process steps them.
//!
//! Cost per row: one uniform draw, plus a second one and an argmax over the
//! `A` values; `ε_i` is computed once per slot at construction.
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// Ape-X's exploration for env slot `i` of `n`: `ε^(1 + α i / (n − 1))`:
/// slot 0 explores most, the last least.
pub fn epsilon_for_slot(i: usize, n: usize, epsilon: f64, alpha: f64) -> f64 {
    if n <= 1 {
        return epsilon;
    }
    epsilon.powf(1.0 + alpha * i as f64 / (n - 1) as f64)
}

/// The schedule's parameters.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct EpsilonSchedule {
    /// `ε` (`--epsilon`).
    pub epsilon: f64,
    /// `α` (`--epsilon-alpha`).
    pub alpha: f64,
    /// `N`: the env slots the schedule spreads over; slots at or above it
    /// get the last slot's ε.
    pub slots: usize,
}

/// ε-greedy action choice with one ε per env slot.
#[derive(Debug)]
pub struct EpsilonGreedy {
    /// `ε_i` of slot `i`, `[N]`.
    epsilons: Vec<f64>,
    rng: SmallRng,
}

impl EpsilonGreedy {
    pub fn new(schedule: EpsilonSchedule, seed: u64) -> Self {
        let n = schedule.slots.max(1);
        EpsilonGreedy {
            epsilons: (0..n)
                .map(|i| epsilon_for_slot(i, n, schedule.epsilon, schedule.alpha))
                .collect(),
            rng: SmallRng::seed_from_u64(seed),
        }
    }

    /// The ε of env slot `slot`.
    pub fn epsilon(&self, slot: usize) -> f64 {
        let last = self.epsilons.len() - 1;
        self.epsilons[slot.min(last)]
    }

    /// The action of one row: greedy on `q` (`[A]`; any per-row shift of
    /// the values, such as a dueling head's advantages, picks the same)
    /// except with probability `ε_slot`.
    pub fn choose(&mut self, q: &[f32], slot: usize) -> u32 {
        if q.is_empty() {
            return 0;
        }
        if self.rng.random::<f64>() < self.epsilon(slot) {
            return self.rng.random_range(0..q.len() as u32);
        }
        greedy(q)
    }
}

/// The index of the largest value (the first on ties).
pub fn greedy(q: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &v) in q.iter().enumerate() {
        if v > q[best] {
            best = i;
        }
    }
    best as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schedule_runs_from_epsilon_down_to_epsilon_to_the_one_plus_alpha() {
        assert_eq!(epsilon_for_slot(0, 8, 0.4, 7.0), 0.4);
        assert!((epsilon_for_slot(7, 8, 0.4, 7.0) - 0.4f64.powi(8)).abs() < 1e-15);
        assert!((epsilon_for_slot(3, 8, 0.4, 7.0) - 0.4f64.powf(4.0)).abs() < 1e-15);
        assert_eq!(epsilon_for_slot(0, 1, 0.4, 7.0), 0.4);
        let e = EpsilonGreedy::new(
            EpsilonSchedule {
                epsilon: 0.4,
                alpha: 7.0,
                slots: 8,
            },
            0,
        );
        assert_eq!(e.epsilon(0), 0.4);
        assert_eq!(e.epsilon(7), e.epsilon(100), "slots past N get the last ε");
    }

    /// Each slot explores at its own rate: counted over many draws, the
    /// share of non-greedy actions is `ε_i · (A − 1) / A`.
    #[test]
    fn each_slot_explores_at_its_own_rate() {
        let schedule = EpsilonSchedule {
            epsilon: 0.4,
            alpha: 7.0,
            slots: 4,
        };
        let mut e = EpsilonGreedy::new(schedule, 7);
        let q = [0.0, 3.0, 1.0, -2.0];
        let draws = 40_000;
        for slot in 0..4 {
            let off = (0..draws).filter(|_| e.choose(&q, slot) != 1).count();
            let want = epsilon_for_slot(slot, 4, 0.4, 7.0) * 0.75;
            let got = off as f64 / draws as f64;
            assert!((got - want).abs() < 0.01, "slot {slot}: {got} vs {want}");
        }
        assert_eq!(greedy(&[1.0, 5.0, 5.0]), 1);
    }
}
