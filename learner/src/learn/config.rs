//! [`TrainConfig`]: the learning side's settings (unrolls, replay, loss and
//! optimizer, checkpoints), their defaults and checks. Part of
//! `crate::app::LearnerConfig`; recorded in each checkpoint's `config.json`.
use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use crate::error::LearnerError;
use crate::learn::algo::{Agent, ImpalaLossConfig, VTraceClip};
use crate::learn::optimizer::{AdamConfig, Algorithm, LrSchedule, OptimizerConfig};
use crate::learn::train::TrainerConfig;
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplayWriter {
    /// Inference waits (up to `--insert-timeout-ms`) until the oldest unroll
    /// was consumed: backpressure slows the actors to the trainer. FIFO only.
    Block,
    /// The oldest unroll is overwritten; the samples-per-insert rate limiter
    /// is the backpressure.
    Overwrite,
}

/// How unrolls are stored, sampled and reused. `None` fields take the
/// defaults [`TrainConfig::replay_plan`] resolves.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplaySettings {
    /// `--replay-sampler`; `None`: V-trace `fifo` when `samples_per_insert`
    /// is 1, else `uniform`; R2D2 `prioritized`.
    pub sampler: Option<ReplaySampler>,
    /// `--replay-writer`; `None`: `block` with `fifo`, else `overwrite`.
    pub writer: Option<ReplayWriter>,
    /// `--samples-per-insert` (alias `--replay-ratio`): times each unroll is
    /// trained on, on average, kept by a rate limiter (Reverb's
    /// `SampleToInsertRatio`). Exactly 1 with `fifo`. `None`: 6 (V-trace),
    /// 2 (R2D2, whose sequences overlap by half: each step is trained on
    /// about 4 times).
    pub samples_per_insert: Option<f64>,
    /// `--replay-capacity` in unrolls; `None`: V-trace one batch with
    /// `fifo`, two batches otherwise; R2D2 4096 sequences. At least one
    /// batch.
    pub capacity: Option<usize>,
    /// `--replay-min-size`: sampling starts once this many unrolls are
    /// stored; `None`: one batch (V-trace), 256 sequences (R2D2), at most
    /// the capacity.
    pub min_size: Option<usize>,
    /// `--priority-exponent` α of the prioritized sampler (R2D2: 0.9).
    pub priority_exponent: f64,
    /// `--importance-exponent` β of the prioritized sampler (R2D2: 0.6).
    pub importance_exponent: f64,
    /// `--replay-window`: the `recent` sampler's window; `None`: one batch.
    pub recent_window: Option<usize>,
    /// `--insert-timeout-ms`: how long inference waits on a full buffer (or
    /// on the rate limiter) before dropping the unroll.
    pub insert_timeout: Duration,
    /// `--max-policy-lag`: drop sampled unrolls older than this many versions.
    pub max_policy_lag: Option<u64>,
    /// `--replay-addr`: a replay server's table to use instead of the
    /// in-process buffer. Its sampler, capacity, rate limiter and lag cap
    /// are the table's (the server's config); the settings above then
    /// only describe the table `--print-replay-table-config` prints.
    pub remote: Option<crate::replay::RemoteReplayConfig>,
}

/// The replay settings with every default resolved: what the buffer is
/// built with.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayPlan {
    pub sampler: ReplaySampler,
    pub writer: ReplayWriter,
    pub samples_per_insert: f64,
    pub capacity: usize,
    pub min_size: usize,
    pub recent_window: usize,
    pub priority_exponent: f64,
    pub importance_exponent: f64,
    pub insert_timeout: Duration,
    pub max_policy_lag: Option<u64>,
}

impl ReplayPlan {
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
}

/// V-trace's default learning-rate schedule: linear decay over this many
/// learner steps, to [`DEFAULT_LR_FINAL_FRACTION`] of the initial rate. On
/// CartPole (2 local actors x 32 envs, about 1,750 learner steps/s on two
/// idle cores) a constant 2e-3 solves in about 3.4 s and then falls back to
/// 74-368 on every seed of five; decaying over 7,000 steps to a tenth solves
/// as fast and kept four of five seeds at 470 or more after solving
/// (`benches/results/README.md`, "Staying solved with a decaying learning
/// rate"). R2D2 keeps a constant rate: it takes about 6,500 learner steps to
/// solve CartPole.
pub const VTRACE_LR_DECAY_STEPS: u64 = 7000;

/// V-trace's default discount γ. On CartPole a horizon of about 50 steps
/// is enough to keep the pole up, and 0.98 (rl-zoo's PPO value) needs well
/// under half the env steps of 0.99 to solve it (`benches/results/README.md`,
/// "Fewer env steps to solve CartPole"). Longer tasks want more: MinAtar and
/// Atari are run with `--discount 0.99`.
pub const VTRACE_DISCOUNT: f32 = 0.98;

/// R2D2's default discount γ (what its CartPole figures were tuned with).
pub const R2D2_DISCOUNT: f32 = 0.99;

/// V-trace's default entropy bonus weight (R2D2 has no entropy term).
pub const VTRACE_ENTROPY_COST: f32 = 0.005;

/// V-trace's default Adam ε. Adam's step is about the learning rate for
/// any gradient well above ε, whatever its size. Once CartPole is solved its
/// gradients shrink to a global norm of about 0.01 (per weight about 1e-4),
/// and at ε 1e-8 that leftover noise still moved every weight at full speed.
/// At 1e-3 the step shrinks in proportion once a weight's gradient is below
/// ε, while the larger gradients of learning (per weight 1e-3 to 1e-2) are
/// barely damped. In 60-s runs, 29 of 30 never fell below a mean of 450
/// after solving, against 18 of 21 at 1e-8 in the same sitting, with as
/// few env steps to the first solve (`benches/results/README.md`, "Adam's
/// ε"). R2D2 keeps Adam's usual 1e-8, and so does V-trace with an LSTM
/// core (`--lstm`), which learned CartPole far slower at 1e-3.
pub const VTRACE_ADAM_EPSILON: f64 = 1e-3;

/// The default samples per insert: V-trace trains each unroll six times on
/// average (with γ 0.98 on CartPole: a median of 147k env steps to solve
/// against 187k at four), R2D2 each sequence twice.
pub const VTRACE_SAMPLES_PER_INSERT: f64 = 6.0;
pub const R2D2_SAMPLES_PER_INSERT: f64 = 2.0;

/// The fraction of the initial learning rate a decaying schedule ends at.
/// With γ 0.98 and six samples per insert, a floor of a tenth let two of
/// five CartPole seeds fall to 256 and 422 after solving; 0.03 kept all five
/// at 461 or more (`benches/results/README.md`, "Fewer env steps to solve
/// CartPole").
pub const DEFAULT_LR_FINAL_FRACTION: f64 = 0.03;

impl Default for TrainConfig {
    fn default() -> Self {
        TrainConfig {
            unroll_length: 16,
            batch_size: 16,
            trainer: TrainerConfig {
                agent: Agent::VTrace,
                loss: ImpalaLossConfig {
                    discount: VTRACE_DISCOUNT,
                    baseline_cost: 0.5,
                    entropy_cost: VTRACE_ENTROPY_COST,
                    reward_scale: 1.0,
                    clip: VTraceClip {
                        rho: 1.0,
                        c: 1.0,
                        pg_rho: 1.0,
                    },
                },
                optimizer: OptimizerConfig {
                    algorithm: Algorithm::Adam(AdamConfig {
                        eps: VTRACE_ADAM_EPSILON,
                        ..AdamConfig::default()
                    }),
                    schedule: LrSchedule::LinearDecay {
                        initial: 2e-3,
                        decay_steps: VTRACE_LR_DECAY_STEPS,
                        last: 2e-3 * DEFAULT_LR_FINAL_FRACTION,
                    },
                },
                max_grad_norm: 40.0,
            },
            replay: ReplaySettings {
                sampler: None,
                writer: None,
                samples_per_insert: None,
                capacity: None,
                min_size: None,
                priority_exponent: 0.9,
                importance_exponent: 0.6,
                recent_window: None,
                insert_timeout: Duration::from_millis(5000),
                max_policy_lag: None,
                remote: None,
            },
            prefetch_threads: 1,
            prefetch_depth: 1,
            checkpoints: CheckpointSettings {
                every: Duration::from_secs(60),
                resume: None,
            },
        }
    }
}

impl TrainConfig {
    /// The replay settings with their defaults resolved, or the flag that
    /// is wrong.
    pub fn replay_plan(&self) -> Result<ReplayPlan, LearnerError> {
        let bad = |m: String| Err(LearnerError::Config(m));
        let r = &self.replay;
        let b = self.batch_size;
        let r2d2 = self.trainer.agent.r2d2().is_some();
        let spi = r.samples_per_insert.unwrap_or(if r2d2 {
            R2D2_SAMPLES_PER_INSERT
        } else {
            VTRACE_SAMPLES_PER_INSERT
        });
        if !(spi.is_finite() && spi > 0.0) {
            return bad(format!("--samples-per-insert must be positive, is {spi}"));
        }
        let sampler = r.sampler.unwrap_or(if r2d2 {
            ReplaySampler::Prioritized
        } else if spi == 1.0 {
            ReplaySampler::Fifo
        } else {
            ReplaySampler::Uniform
        });
        if sampler == ReplaySampler::Prioritized && !r2d2 {
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
        let fifo = sampler == ReplaySampler::Fifo;
        if fifo && spi != 1.0 {
            return bad(format!(
                "--samples-per-insert {spi} needs a sampler that reuses unrolls: \
                 --replay-sampler fifo hands each out once (use uniform or recent)"
            ));
        }
        let writer = r.writer.unwrap_or(if fifo {
            ReplayWriter::Block
        } else {
            ReplayWriter::Overwrite
        });
        if writer == ReplayWriter::Block && !fifo {
            return bad(
                "--replay-writer block needs --replay-sampler fifo (the other samplers never \
                 consume unrolls, so a full buffer would block forever; the rate limiter is \
                 their backpressure)"
                    .into(),
            );
        }
        let capacity = r
            .capacity
            .unwrap_or(if r2d2 {
                4096
            } else if fifo {
                b
            } else {
                2 * b
            })
            .max(b);
        let min_size = r
            .min_size
            .unwrap_or(if r2d2 { 256.max(b) } else { b }.min(capacity));
        if min_size == 0 || min_size > capacity {
            return bad(format!(
                "--replay-min-size {min_size} must be in 1..={capacity} (the replay capacity)"
            ));
        }
        let recent_window = r.recent_window.unwrap_or(b);
        if sampler == ReplaySampler::Recent && (recent_window == 0 || recent_window > capacity) {
            return bad(format!(
                "--replay-window {recent_window} must be in 1..={capacity} (the replay capacity)"
            ));
        }
        Ok(ReplayPlan {
            sampler,
            writer,
            samples_per_insert: spi,
            capacity,
            min_size,
            recent_window,
            priority_exponent: r.priority_exponent,
            importance_exponent: r.importance_exponent,
            insert_timeout: r.insert_timeout,
            max_policy_lag: r.max_policy_lag,
        })
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
        self.replay_plan()?;
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
        if !(0.0..=1.0).contains(&t.loss.discount) {
            return bad("--discount must be in [0, 1]");
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

    fn plan(f: impl FnOnce(&mut ReplaySettings)) -> Result<ReplayPlan, String> {
        let mut t = TrainConfig::default();
        f(&mut t.replay);
        t.replay_plan().map_err(|e| e.to_string())
    }

    #[test]
    fn replay_defaults_follow_the_ratio() {
        let p = plan(|_| {}).unwrap();
        assert_eq!(
            (p.sampler, p.writer, p.samples_per_insert),
            (ReplaySampler::Uniform, ReplayWriter::Overwrite, 6.0)
        );
        assert_eq!((p.capacity, p.min_size), (32, 16));
        let p = plan(|r| r.samples_per_insert = Some(1.0)).unwrap();
        assert_eq!(
            (p.sampler, p.writer, p.capacity),
            (ReplaySampler::Fifo, ReplayWriter::Block, 16)
        );
        // Capacity is at least one batch.
        assert_eq!(plan(|r| r.capacity = Some(1)).unwrap().capacity, 16);
        assert_eq!(plan(|r| r.capacity = Some(100)).unwrap().capacity, 100);
    }

    #[test]
    fn r2d2_replays_prioritized_sequences_and_vtrace_refuses_priorities() {
        let mut t = TrainConfig::default();
        t.trainer.agent = Agent::R2d2(crate::learn::algo::R2d2Config::default());
        let p = t.replay_plan().unwrap();
        assert_eq!(
            (p.sampler, p.writer, p.samples_per_insert),
            (ReplaySampler::Prioritized, ReplayWriter::Overwrite, 2.0)
        );
        assert_eq!((p.capacity, p.min_size), (4096, 256));
        assert_eq!((p.priority_exponent, p.importance_exponent), (0.9, 0.6));
        assert!(t.validate().is_ok());
        let mut short = t.clone();
        short.unroll_length = 5;
        assert!(short
            .validate()
            .unwrap_err()
            .to_string()
            .contains("--burn-in"));
        let e = plan(|r| r.sampler = Some(ReplaySampler::Prioritized)).unwrap_err();
        assert!(e.contains("--algo r2d2"), "{e}");
    }

    #[test]
    fn contradictory_replay_flags_name_the_flag() {
        let e = plan(|r| r.sampler = Some(ReplaySampler::Fifo)).unwrap_err();
        assert!(
            e.contains("--samples-per-insert 6") && e.contains("fifo"),
            "{e}"
        );
        let e = plan(|r| r.writer = Some(ReplayWriter::Block)).unwrap_err();
        assert!(e.contains("--replay-writer block"), "{e}");
        let e = plan(|r| r.min_size = Some(33)).unwrap_err();
        assert!(e.contains("--replay-min-size 33"), "{e}");
        let e = plan(|r| r.samples_per_insert = Some(0.0)).unwrap_err();
        assert!(e.contains("--samples-per-insert"), "{e}");
        let e = plan(|r| {
            r.sampler = Some(ReplaySampler::Recent);
            r.recent_window = Some(64);
        })
        .unwrap_err();
        assert!(e.contains("--replay-window 64"), "{e}");
    }

    /// Every plan the checks accept builds a buffer (the replay crate's own
    /// checks reject deadlocking limiter settings).
    #[test]
    fn accepted_plans_build_a_buffer() {
        let layout = seed_replay::ItemLayout::builder()
            .field("x", seed_replay::DType::F32, &[1])
            .build()
            .unwrap();
        for sampler in [
            None,
            Some(ReplaySampler::Uniform),
            Some(ReplaySampler::Recent),
            Some(ReplaySampler::Prioritized),
        ] {
            for spi in [0.5, 1.0, 2.0, 4.0, 8.0] {
                for batch_size in [1, 4, 16, 64] {
                    let mut t = TrainConfig {
                        batch_size,
                        ..TrainConfig::default()
                    };
                    t.replay.sampler = sampler;
                    if sampler == Some(ReplaySampler::Prioritized) {
                        t.trainer.agent = Agent::R2d2(Default::default());
                    }
                    t.replay.samples_per_insert = Some(spi);
                    let p = t.replay_plan().unwrap();
                    let cfg = p.replay_config(batch_size, 1);
                    seed_replay::ReplayBuffer::new(layout.clone(), cfg).unwrap_or_else(|e| {
                        panic!("{sampler:?} spi {spi} batch {batch_size}: {e}")
                    });
                }
            }
        }
    }
}
