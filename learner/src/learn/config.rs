//! [`TrainConfig`]: the learning side's settings (unrolls, replay, loss and
//! optimizer, checkpoints) and their checks; the defaults are
//! `crate::app::settings`'s. Part of
//! `crate::app::LearnerConfig`; recorded in each checkpoint's `config.json`.
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::LearnerError;
use crate::learn::optimizer::LrSchedule;
use crate::learn::trainer::TrainerConfig;
use seed_replay::{
    LagAction, PolicyLagCap, PrioritizedConfig, RateLimiterConfig, ReplayConfig, SamplerConfig,
    WriterPolicy,
};

/// The learning side: unrolls, replay, model, loss and optimizer, checkpoints.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrainConfig {
    /// T: transitions per unroll (`--unroll-length`).
    pub unroll_length: usize,
    /// B: unrolls per batch (`--batch-size`).
    pub batch_size: usize,
    /// Loss, optimizer and gradient clip.
    pub trainer: TrainerConfig,
    /// Replay capacity, reuse and backpressure.
    pub replay: ReplaySettings,
    /// `--prefetch-threads`.
    pub prefetch_threads: usize,
    /// `--prefetch-depth`.
    pub prefetch_depth: usize,
    /// `--checkpoint-secs`, `--resume`.
    pub checkpoints: CheckpointSettings,
}

/// Which replay sampler feeds the trainer (`--replay-sampler`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplaySampler {
    /// Each unroll handed out once, oldest first (consume-once queue).
    Fifo,
    /// Uniform with replacement over every stored unroll.
    Uniform,
    /// Uniform over the `--replay-window` most recently inserted unrolls.
    Recent,
    /// Proportional to priority^`--priority-exponent`, with importance
    /// weights (R2D2, which writes the priorities back).
    Prioritized,
}

/// What an insert into a full buffer does (`--replay-writer`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplayWriter {
    /// Inference waits (up to `--insert-timeout-ms`) until the oldest unroll
    /// was consumed: backpressure slows the actors to the trainer. FIFO only.
    Block,
    /// The oldest unroll is overwritten; the samples-per-insert rate limiter
    /// is the backpressure.
    Overwrite,
}

/// How unrolls are stored, sampled and reused; every value resolved
/// (`crate::app::settings` holds the defaults and the rules that size the
/// buffer from `--batch-size`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplaySettings {
    /// `--replay-sampler`.
    pub sampler: ReplaySampler,
    /// `--replay-writer`.
    pub writer: ReplayWriter,
    /// `--samples-per-insert` (alias `--replay-ratio`): times each unroll is
    /// trained on, on average, kept by a rate limiter (Reverb's
    /// `SampleToInsertRatio`). Exactly 1 with `fifo`.
    pub samples_per_insert: f64,
    /// `--replay-capacity` in unrolls; at least one batch.
    pub capacity: usize,
    /// `--replay-min-size`: sampling starts once this many unrolls are
    /// stored; at most the capacity.
    pub min_size: usize,
    /// `--priority-exponent` α of the prioritized sampler.
    pub priority_exponent: f64,
    /// `--importance-exponent` β of the prioritized sampler.
    pub importance_exponent: f64,
    /// `--replay-window`: the `recent` sampler's window.
    pub recent_window: usize,
    /// `--insert-timeout-ms`: how long inference waits on a full buffer (or
    /// on the rate limiter) before dropping the unroll.
    pub insert_timeout: Duration,
    /// `--max-policy-lag`: drop sampled unrolls older than this many versions.
    pub max_policy_lag: Option<u64>,
    /// `--replay-addr`: a replay server's table to use instead of the
    /// in-process buffer. Its sampler, capacity, rate limiter and lag cap
    /// are the table's (the server's config); the settings above then
    /// only describe the table `--print-replay-table-config` prints.
    pub remote: Option<crate::unroll_store::RemoteReplayConfig>,
}

impl ReplaySettings {
    /// The buffer's configuration. FIFO with `Block` needs no ratio (each
    /// unroll is consumed once and a full buffer holds the writers), so it
    /// gets only the min-size limiter; the reusing samplers get Reverb's
    /// `SampleToInsertRatio` with an error buffer of one batch's worth of
    /// inserts on either side (`batch_size * spi`, at least `batch_size`
    /// and `spi + 1`): the actors may run one batch ahead of the trainer
    /// and the trainer one batch ahead of the ratio, no further.
    pub fn replay_config(&self, batch_size: usize, seed: u64) -> ReplayConfig {
        let sampler = match self.sampler {
            ReplaySampler::Fifo => SamplerConfig::Fifo,
            ReplaySampler::Uniform => SamplerConfig::Uniform,
            ReplaySampler::Recent => SamplerConfig::Recent {
                window: self.recent_window,
            },
            ReplaySampler::Prioritized => SamplerConfig::Prioritized(PrioritizedConfig {
                alpha: self.priority_exponent,
                beta: self.importance_exponent,
                eps: 1e-6,
            }),
        };
        let limiter = match self.sampler {
            ReplaySampler::Fifo => RateLimiterConfig::min_size(self.min_size),
            _ => {
                let spi = self.samples_per_insert;
                let b = batch_size as f64;
                let error_buffer = (b * spi).max(b).max(spi + 1.0);
                RateLimiterConfig::sample_to_insert_ratio(spi, self.min_size, error_buffer)
            }
        };
        let writer = match self.writer {
            ReplayWriter::Block => WriterPolicy::Block {
                timeout: self.insert_timeout,
            },
            ReplayWriter::Overwrite => WriterPolicy::OverwriteOldest,
        };
        let mut config = ReplayConfig::new(self.capacity, sampler)
            .with_writer_policy(writer)
            .with_rate_limiter(limiter)
            .with_seed(seed);
        if let Some(max_lag) = self.max_policy_lag {
            config = config.with_policy_lag(PolicyLagCap {
                max_lag,
                action: LagAction::Drop,
            });
        }
        config
    }
}

/// How often the run is saved, and where it resumes from (the directory
/// saved into is the run directory, `crate::app::LearnerConfig::run_dir`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckpointSettings {
    /// `--checkpoint-secs`.
    pub every: Duration,
    /// `--resume`: continue from the newest checkpoint here.
    pub resume: Option<PathBuf>,
    /// `--eval-every`: learner steps between evaluations; 0: none.
    pub eval_every: u64,
    /// `--eval-episodes`: episodes per evaluation.
    pub eval_episodes: usize,
}

impl TrainConfig {
    /// Refuses replay settings that cannot run together, naming the flag.
    fn validate_replay(&self) -> Result<(), LearnerError> {
        let bad = |m: String| Err(LearnerError::Config(m));
        let r = &self.replay;
        let r2d2 = self.trainer.agent.r2d2().is_some();
        let spi = r.samples_per_insert;
        if !(spi.is_finite() && spi > 0.0) {
            return bad(format!("--samples-per-insert must be positive, is {spi}"));
        }
        if r.sampler == ReplaySampler::Prioritized && !r2d2 {
            return bad(
                "--replay-sampler prioritized needs --algo r2d2 (V-trace writes no priorities \
                 back, so every unroll would keep its initial priority)"
                    .into(),
            );
        }
        for (flag, x) in [
            ("--priority-exponent", r.priority_exponent),
            ("--importance-exponent", r.importance_exponent),
        ] {
            if !(x.is_finite() && x >= 0.0) {
                return bad(format!("{flag} must be finite and >= 0, is {x}"));
            }
        }
        let fifo = r.sampler == ReplaySampler::Fifo;
        if fifo && spi != 1.0 {
            return bad(format!(
                "--samples-per-insert {spi} needs a sampler that reuses unrolls: \
                 --replay-sampler fifo hands each out once (use uniform or recent)"
            ));
        }
        if r.writer == ReplayWriter::Block && !fifo {
            return bad(
                "--replay-writer block needs --replay-sampler fifo (the other samplers never \
                 consume unrolls, so a full buffer would block forever; the rate limiter is \
                 their backpressure)"
                    .into(),
            );
        }
        let capacity = r.capacity;
        if capacity < self.batch_size {
            return bad(format!(
                "--replay-capacity {capacity} must hold at least one batch (--batch-size {})",
                self.batch_size
            ));
        }
        if r.min_size == 0 || r.min_size > capacity {
            return bad(format!(
                "--replay-min-size {} must be in 1..={capacity} (the replay capacity)",
                r.min_size
            ));
        }
        if r.sampler == ReplaySampler::Recent
            && (r.recent_window == 0 || r.recent_window > capacity)
        {
            return bad(format!(
                "--replay-window {} must be in 1..={capacity} (the replay capacity)",
                r.recent_window
            ));
        }
        Ok(())
    }

    /// The initial learning rate.
    pub fn learning_rate(&self) -> f64 {
        self.trainer.optimizer.schedule.lr_at(0)
    }

    /// Refuses settings that cannot train, naming the flag.
    pub fn validate(&self) -> Result<(), LearnerError> {
        let bad = |m: &str| Err(LearnerError::Config(m.into()));
        let t = &self.trainer;
        if self.unroll_length == 0 {
            return bad("--unroll-length must be at least 1");
        }
        if self.batch_size == 0 {
            return bad("--batch-size must be at least 1");
        }
        self.validate_replay()?;
        if let Some(r) = self.trainer.agent.r2d2() {
            if r.burn_in + 1 >= self.unroll_length {
                return bad("--burn-in must leave at least 2 steps of each sequence: \
                     below --unroll-length - 1");
            }
            if r.n_step == 0 {
                return bad("--n-step must be at least 1");
            }
            if r.target_update_period == 0 {
                return bad("--target-update-period must be at least 1");
            }
            if !(0.0..=1.0).contains(&r.priority_eta) {
                return bad("--priority-eta must be in [0, 1]");
            }
            let e = &r.exploration;
            if !((0.0..=1.0).contains(&e.epsilon) && e.alpha.is_finite() && e.alpha >= 0.0) {
                return bad("--epsilon must be in [0, 1] and --epsilon-alpha >= 0");
            }
            if !(0.0..=1.0).contains(&r.discount) {
                return bad("--discount must be in [0, 1]");
            }
            if !(r.reward_scale.is_finite() && r.reward_scale > 0.0) {
                return bad("--reward-scale must be positive");
            }
        }
        let lr = match t.optimizer.schedule {
            LrSchedule::Constant { lr } => lr,
            LrSchedule::LinearDecay { initial, .. } => initial,
        };
        if !(lr.is_finite() && lr > 0.0) {
            return bad("--learning-rate must be positive");
        }
        if let LrSchedule::LinearDecay { initial, last, .. } = t.optimizer.schedule {
            if !(last.is_finite() && (0.0..=initial).contains(&last)) {
                return bad("--lr-final-fraction must be in [0, 1]");
            }
        }
        let eps = t.optimizer.algorithm.epsilon();
        if !(eps.is_finite() && eps > 0.0) {
            return bad("--optimizer-epsilon must be positive");
        }
        if !(t.max_grad_norm.is_finite() && t.max_grad_norm > 0.0) {
            return bad("--max-grad-norm must be positive");
        }
        if !(0.0..1.0).contains(&t.acting_average) {
            return bad("--acting-average must be in [0, 1) (0 turns it off)");
        }
        if !(0.0..=1.0).contains(&t.loss.discount) {
            return bad("--discount must be in [0, 1]");
        }
        if !(0.0..=1.0).contains(&t.loss.clip.lambda) {
            return bad("--vtrace-lambda must be in [0, 1]");
        }
        if !(0.0..1.0).contains(&t.loss.ratio_clip) {
            return bad("--ratio-clip must be in [0, 1) (0 turns it off)");
        }
        if !(t.loss.reward_scale.is_finite() && t.loss.reward_scale > 0.0) {
            return bad("--reward-scale must be positive");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::settings::resolve_toml;

    /// The training side of the run a config file `toml` describes.
    fn train(toml: &str) -> TrainConfig {
        resolve_toml(toml).unwrap().train.expect("a training run")
    }

    fn refusal(f: impl FnOnce(&mut ReplaySettings)) -> String {
        let mut t = train("");
        f(&mut t.replay);
        t.validate().unwrap_err().to_string()
    }

    #[test]
    fn replay_defaults_follow_the_ratio() {
        let r = train("").replay;
        assert_eq!(
            (r.sampler, r.writer, r.samples_per_insert),
            (ReplaySampler::Uniform, ReplayWriter::Overwrite, 6.0)
        );
        assert_eq!((r.capacity, r.min_size), (32, 16));
        let r = train("[replay]\nsamples_per_insert = 1.0").replay;
        assert_eq!(
            (r.sampler, r.writer, r.capacity),
            (ReplaySampler::Fifo, ReplayWriter::Block, 16)
        );
        // Capacity is at least one batch.
        assert_eq!(train("[replay]\nreplay_capacity = 1").replay.capacity, 16);
        assert_eq!(
            train("[replay]\nreplay_capacity = 100").replay.capacity,
            100
        );
    }

    #[test]
    fn r2d2_replays_prioritized_sequences_and_vtrace_refuses_priorities() {
        let t = train("[train]\nalgo = \"r2d2\"");
        let r = &t.replay;
        assert_eq!(
            (r.sampler, r.writer, r.samples_per_insert),
            (ReplaySampler::Prioritized, ReplayWriter::Overwrite, 2.0)
        );
        assert_eq!((r.capacity, r.min_size), (4096, 256));
        assert_eq!((r.priority_exponent, r.importance_exponent), (0.9, 0.6));
        assert!(t.validate().is_ok());
        let mut short = t.clone();
        short.unroll_length = 5;
        assert!(short
            .validate()
            .unwrap_err()
            .to_string()
            .contains("--burn-in"));
        let e = refusal(|r| r.sampler = ReplaySampler::Prioritized);
        assert!(e.contains("--algo r2d2"), "{e}");
    }

    #[test]
    fn contradictory_replay_flags_name_the_flag() {
        let e = refusal(|r| r.sampler = ReplaySampler::Fifo);
        assert!(
            e.contains("--samples-per-insert 6") && e.contains("fifo"),
            "{e}"
        );
        let e = refusal(|r| r.writer = ReplayWriter::Block);
        assert!(e.contains("--replay-writer block"), "{e}");
        let e = refusal(|r| r.min_size = 33);
        assert!(e.contains("--replay-min-size 33"), "{e}");
        let e = refusal(|r| r.samples_per_insert = 0.0);
        assert!(e.contains("--samples-per-insert"), "{e}");
        let e = refusal(|r| {
            r.sampler = ReplaySampler::Recent;
            r.recent_window = 64;
        });
        assert!(e.contains("--replay-window 64"), "{e}");
    }

    /// Every set of replay settings the checks accept builds a buffer (the
    /// replay crate's own checks reject deadlocking limiter settings).
    #[test]
    fn accepted_settings_build_a_buffer() {
        let layout = seed_replay::ItemLayout::builder()
            .field("x", seed_replay::DType::F32, &[1])
            .build()
            .unwrap();
        for (algo, sampler) in [
            ("vtrace", None),
            ("vtrace", Some("uniform")),
            ("vtrace", Some("recent")),
            ("r2d2", Some("prioritized")),
        ] {
            for spi in [0.5, 1.0, 2.0, 4.0, 8.0] {
                for batch_size in [1, 4, 16, 64] {
                    let sampler = sampler
                        .map(|s| format!("replay_sampler = \"{s}\"\n"))
                        .unwrap_or_default();
                    let t = train(&format!(
                        "[train]\nalgo = \"{algo}\"\nbatch_size = {batch_size}\n\
                         [replay]\nsamples_per_insert = {spi:?}\n{sampler}"
                    ));
                    let cfg = t.replay.replay_config(batch_size, 1);
                    seed_replay::ReplayBuffer::new(layout.clone(), cfg).unwrap_or_else(|e| {
                        panic!("{algo} {sampler} spi {spi} batch {batch_size}: {e}")
                    });
                }
            }
        }
    }
}
