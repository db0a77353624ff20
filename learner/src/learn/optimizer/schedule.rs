//! [`LrSchedule`]: the learning rate as a function of the step count.
/// Learning rate as a function of the step count.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub enum LrSchedule {
    /// The same rate every step.
    Constant {
        /// Learning rate.
        lr: f64,
    },
    /// `lr_t = last + (initial − last) · max(0, 1 − t / decay_steps)` for the
    /// 0-based step `t`: `initial` at the first step, `last` from step
    /// `decay_steps` on. A floor above 0 keeps a long run learning (a run
    /// decayed to 0 stops learning for good); it still damps the late,
    /// large updates that knock a solved policy back down.
    LinearDecay {
        /// Learning rate at step 0.
        initial: f64,
        /// Steps over which the rate falls to `last`.
        decay_steps: u64,
        /// Learning rate from step `decay_steps` on (0: stop learning).
        last: f64,
    },
}

impl LrSchedule {
    /// The learning rate for the 0-based step `step`.
    pub fn lr_at(&self, step: u64) -> f64 {
        match *self {
            Self::Constant { lr } => lr,
            Self::LinearDecay {
                initial,
                decay_steps,
                last,
            } => {
                if decay_steps == 0 {
                    return last;
                }
                let remaining = 1.0 - step as f64 / decay_steps as f64;
                last + (initial - last) * remaining.max(0.0)
            }
        }
    }
}
