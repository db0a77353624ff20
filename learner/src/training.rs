//! The learning side of a learner run, assembled from the flags: model and
//! weights handle, replay buffer, unroll assembly (the inference sink),
//! prefetch threads, the training thread, periodic checkpoints.
//!
//! Order of life: [`TrainingSetup::new`] builds the model (restoring a
//! checkpoint with `--resume`), the weights handle and the replay buffer,
//! and gives the server its model, weights and sink; once the server runs,
//! [`TrainingSetup::start`] starts prefetch and training; [`Training::stop`]
//! closes the buffer (inference inserts blocked on backpressure return at
//! once), joins the threads and writes the final checkpoint.
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use candle_core::Device;
use seed_env::EnvKind;
use seed_shared::EnvSpec;
use serde::Serialize;
use tracing::{info, warn};

use crate::algo::{ImpalaLossConfig, VTraceClip};
use crate::checkpoint::{
    self, CheckpointConfig, CheckpointState, EnvDescription, LoadedCheckpoint,
};
use crate::cli::{OptimizerKind, TrainArgs};
use crate::error::LearnerError;
use crate::inference::SinkFactory;
use crate::metrics::Metrics;
use crate::model::{ModelConfig, TrainableModel};
use crate::optimizer::{AdamConfig, Algorithm, LrSchedule, OptimizerConfig, RmsPropConfig};
use crate::prefetch::{PrefetchConfig, Prefetcher};
use crate::replay::{
    LagAction, PolicyLagCap, ReplayBuffer, ReplayConfig, SamplerConfig, WriterPolicy,
};
use crate::train::{spawn_training_thread, TrainError, Trainer, TrainerConfig, TrainerStats};
use crate::unroll::{UnrollAssembler, UnrollSpec};
use crate::weights::{PolicyVersion, WeightsHandle};

/// The model architecture the flags ask for.
pub fn model_config(args: &TrainArgs, spec: &EnvSpec) -> ModelConfig {
    let mut cfg = ModelConfig::for_spec(spec);
    cfg.hidden_sizes = args.hidden_sizes.clone();
    cfg.conv_features = args.conv_features;
    cfg.lstm_size = args.lstm.then_some(args.lstm_size);
    cfg
}

/// What `eval` needs to rebuild the env.
pub fn env_description(args: &TrainArgs, spec: &EnvSpec) -> EnvDescription {
    EnvDescription {
        kind: match args.environment.env {
            EnvKind::Cartpole => "cartpole".into(),
            EnvKind::Synthetic => "synthetic".into(),
        },
        obs_shape: spec.obs_shape.clone(),
        obs_dtype: spec.obs_dtype.to_string(),
        num_actions: spec.num_actions,
        episode_len: args.environment.episode_len,
        step_cost_us: args.environment.step_cost_us,
    }
}

/// The training hyperparameters, as recorded in `config.json`.
#[derive(Debug, Clone, Serialize)]
struct Hyperparameters {
    unroll_length: usize,
    batch_size: usize,
    optimizer: OptimizerKind,
    learning_rate: f64,
    lr_decay_steps: u64,
    discount: f32,
    entropy_cost: f32,
    baseline_cost: f32,
    max_grad_norm: f32,
    vtrace_clip: f32,
    replay_ratio: u32,
    replay_capacity: usize,
    max_policy_lag: Option<u64>,
    seed: u64,
    local_actors: usize,
    envs_per_actor: usize,
}

fn validate(args: &TrainArgs) -> Result<(), LearnerError> {
    let bad = |m: &str| Err(LearnerError::Config(m.into()));
    if args.unroll_length == 0 {
        return bad("--unroll-length must be at least 1");
    }
    if args.batch_size == 0 {
        return bad("--batch-size must be at least 1");
    }
    if args.replay_ratio == 0 {
        return bad("--replay-ratio must be at least 1");
    }
    if !(args.learning_rate.is_finite() && args.learning_rate > 0.0) {
        return bad("--learning-rate must be positive");
    }
    if !(args.max_grad_norm.is_finite() && args.max_grad_norm > 0.0) {
        return bad("--max-grad-norm must be positive");
    }
    if !(0.0..=1.0).contains(&args.discount) {
        return bad("--discount must be in [0, 1]");
    }
    if args.hidden_sizes.is_empty() || args.hidden_sizes.contains(&0) {
        return bad("--hidden-sizes needs at least one positive width");
    }
    if args.lstm && args.lstm_size == 0 {
        return bad("--lstm-size must be at least 1");
    }
    Ok(())
}

/// Built before the server starts.
pub struct TrainingSetup {
    pub model_config: ModelConfig,
    pub weights: Arc<WeightsHandle>,
    pub sink: SinkFactory,
    /// Counters restored from `--resume` (zero otherwise).
    pub resumed: CheckpointState,
    trainer: Trainer,
    replay: Arc<ReplayBuffer>,
    assembler: Arc<UnrollAssembler>,
    unroll: UnrollSpec,
    device: Device,
    prefetch: PrefetchConfig,
    run_dir: Option<PathBuf>,
    checkpoint_every: Duration,
    config: CheckpointConfig,
}

impl TrainingSetup {
    pub fn new(args: &TrainArgs, spec: &EnvSpec, device: &Device) -> Result<Self, LearnerError> {
        validate(args)?;
        let loaded = match &args.resume {
            Some(dir) => Some(
                LoadedCheckpoint::latest(dir)
                    .map_err(|e| LearnerError::Config(format!("--resume: {e}")))?,
            ),
            None => None,
        };
        let model_config = match &loaded {
            // The architecture is the checkpoint's, whatever the flags say.
            Some(l) => l.config.model.clone(),
            None => model_config(args, spec),
        };
        if model_config.obs_shape != spec.obs_shape
            || model_config.num_actions != spec.num_actions as usize
        {
            return Err(LearnerError::Config(format!(
                "--resume: the checkpoint's model is for observations {:?} and {} actions, \
                 the env has {:?} and {}",
                model_config.obs_shape, model_config.num_actions, spec.obs_shape, spec.num_actions
            )));
        }
        let mut model = TrainableModel::new(&model_config, device, args.seed)?;
        if let Some(l) = &loaded {
            l.restore_weights(&mut model)
                .map_err(|e| LearnerError::Config(format!("--resume: {e}")))?;
        }
        let resumed = loaded.as_ref().map(|l| l.state).unwrap_or_default();
        let weights = Arc::new(WeightsHandle::new(
            model.snapshot()?,
            PolicyVersion(resumed.policy_version),
        ));

        let capacity = args
            .replay_capacity
            .unwrap_or(args.batch_size)
            .max(args.batch_size);
        let unroll = UnrollSpec {
            unroll_length: args.unroll_length,
            obs_shape: spec.obs_shape.clone(),
            obs_dtype: spec.obs_dtype,
            num_actions: spec.num_actions as usize,
            state_size: model_config.lstm_size.unwrap_or(0),
        };
        // FIFO consume-once; reuse (`--replay-ratio`) happens after
        // collation, in the prefetcher, so backpressure stays exact.
        let mut replay_cfg = ReplayConfig::new(capacity, SamplerConfig::Fifo)
            .with_writer_policy(WriterPolicy::Block {
                timeout: Duration::from_millis(args.insert_timeout_ms),
            })
            .with_seed(args.seed);
        if let Some(max_lag) = args.max_policy_lag {
            replay_cfg = replay_cfg.with_policy_lag(PolicyLagCap {
                max_lag,
                action: LagAction::Drop,
            });
        }
        let layout = unroll
            .layout()
            .map_err(|e| LearnerError::Config(format!("unroll layout: {e}")))?;
        let replay = Arc::new(
            ReplayBuffer::new(layout, replay_cfg)
                .map_err(|e| LearnerError::Config(format!("replay buffer: {e}")))?,
        );
        replay.set_policy_version(resumed.policy_version);
        let assembler =
            UnrollAssembler::new(unroll.clone(), args.max_env_slots, Arc::clone(&replay));

        let algorithm = match args.optimizer {
            OptimizerKind::Adam => Algorithm::Adam(AdamConfig::default()),
            OptimizerKind::Rmsprop => Algorithm::RmsProp(RmsPropConfig::default()),
        };
        let schedule = if args.lr_decay_steps > 0 {
            LrSchedule::LinearDecay {
                initial: args.learning_rate,
                decay_steps: args.lr_decay_steps,
            }
        } else {
            LrSchedule::Constant {
                lr: args.learning_rate,
            }
        };
        let trainer_cfg = TrainerConfig {
            loss: ImpalaLossConfig {
                discount: args.discount,
                baseline_cost: args.baseline_cost,
                entropy_cost: args.entropy_cost,
                clip: VTraceClip {
                    rho: args.vtrace_clip,
                    c: args.vtrace_clip,
                    pg_rho: args.vtrace_clip,
                },
            },
            optimizer: OptimizerConfig {
                algorithm,
                schedule,
            },
            max_grad_norm: args.max_grad_norm,
        };
        let mut trainer = Trainer::new(
            model,
            trainer_cfg,
            Arc::clone(&weights),
            Some(Arc::clone(&replay)),
        )
        .map_err(LearnerError::Training)?;
        if let Some(l) = &loaded {
            l.restore_optimizer(&mut trainer.optimizer, device)
                .map_err(|e| LearnerError::Config(format!("--resume: {e}")))?;
            info!(dir = %l.dir.display(), learner_steps = resumed.learner_steps,
                policy_version = resumed.policy_version, "resumed from checkpoint");
        }
        let flags = Hyperparameters {
            unroll_length: args.unroll_length,
            batch_size: args.batch_size,
            optimizer: args.optimizer,
            learning_rate: args.learning_rate,
            lr_decay_steps: args.lr_decay_steps,
            discount: args.discount,
            entropy_cost: args.entropy_cost,
            baseline_cost: args.baseline_cost,
            max_grad_norm: args.max_grad_norm,
            vtrace_clip: args.vtrace_clip,
            replay_ratio: args.replay_ratio,
            replay_capacity: capacity,
            max_policy_lag: args.max_policy_lag,
            seed: args.seed,
            local_actors: args.local_actors,
            envs_per_actor: args.envs_per_actor,
        };
        let config = CheckpointConfig {
            model: model_config.clone(),
            env: env_description(args, spec),
            flags: serde_json::to_value(&flags).unwrap_or_default(),
        };
        Ok(TrainingSetup {
            sink: assembler.sink_factory(),
            model_config,
            weights,
            resumed,
            trainer,
            replay,
            assembler,
            unroll,
            device: device.clone(),
            prefetch: PrefetchConfig {
                batch_size: args.batch_size,
                queue_depth: args.prefetch_depth,
                threads: args.prefetch_threads,
                reuse: args.replay_ratio,
            },
            run_dir: args.run_dir.clone().or_else(|| args.resume.clone()),
            checkpoint_every: Duration::from_secs_f64(args.checkpoint_secs.max(0.1)),
            config,
        })
    }

    /// Starts prefetch and training; `metrics` gets `learner_steps` and
    /// reports the training side from then on.
    pub fn start(self, metrics: Arc<Metrics>) -> Result<Training, LearnerError> {
        let prefetcher = Arc::new(Prefetcher::spawn(
            Arc::clone(&self.replay),
            &self.unroll,
            &self.device,
            self.prefetch,
        )?);
        let stats = Arc::new(TrainerStats::default());
        let stop = Arc::new(AtomicBool::new(false));
        let started = Instant::now();
        let base = self.resumed;
        let counters = {
            let metrics = Arc::clone(&metrics);
            move |trainer: &Trainer| CheckpointState {
                learner_steps: trainer.optimizer.step_count(),
                policy_version: trainer.weights().version().0,
                env_steps: metrics.env_steps.load(Ordering::Relaxed),
                episodes: metrics.episodes.load(Ordering::Relaxed),
                wall_seconds: base.wall_seconds + started.elapsed().as_secs_f64(),
            }
        };
        let between = self.run_dir.clone().map(|dir| {
            let config = self.config.clone();
            let every = self.checkpoint_every;
            let counters = counters.clone();
            let mut next = Instant::now() + every;
            Box::new(move |trainer: &Trainer| {
                if Instant::now() >= next {
                    next = Instant::now() + every;
                    if let Err(e) = checkpoint::save(&dir, trainer, &counters(trainer), &config) {
                        warn!(error = %e, "periodic checkpoint failed");
                    }
                }
            }) as crate::train::BetweenSteps
        });
        let on_step = {
            let metrics = Arc::clone(&metrics);
            Arc::new(move |_: &crate::train::TrainStep| {
                metrics.learner_steps.fetch_add(1, Ordering::Relaxed);
            })
        };
        metrics
            .learner_steps
            .store(self.resumed.learner_steps, Ordering::Relaxed);
        let handle = spawn_training_thread(
            self.trainer,
            Arc::clone(&prefetcher),
            Arc::clone(&stats),
            Arc::clone(&stop),
            between,
            on_step,
        )?;
        let probe = Arc::new(TrainingProbe {
            replay: self.replay,
            assembler: self.assembler,
            prefetcher,
            stats,
        });
        metrics.attach_training(Arc::clone(&probe));
        Ok(Training {
            probe,
            stop,
            handle: Some(handle),
            run_dir: self.run_dir,
            config: self.config,
            counters: Box::new(counters),
            started,
        })
    }
}

/// What the reports read of the training side, shared by [`Training`] and
/// [`Metrics`] (so every report, live scrapes included, sees the same
/// figures). Reading it touches only atomics and queue lengths.
pub struct TrainingProbe {
    pub replay: Arc<ReplayBuffer>,
    pub assembler: Arc<UnrollAssembler>,
    pub prefetcher: Arc<Prefetcher>,
    pub stats: Arc<TrainerStats>,
}

/// The running training threads.
pub struct Training {
    probe: Arc<TrainingProbe>,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<Result<Trainer, TrainError>>>,
    run_dir: Option<PathBuf>,
    config: CheckpointConfig,
    counters: Box<dyn Fn(&Trainer) -> CheckpointState + Send>,
    started: Instant,
}

/// A moment's view of the training side (progress line, metrics file, summary).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct TrainingSnapshot {
    pub learner_steps: u64,
    pub unrolls_trained: u64,
    pub total_loss: f32,
    pub pg_loss: f32,
    pub value_loss: f32,
    pub entropy: f32,
    pub grad_norm: f32,
    pub learning_rate: f32,
    /// Mean policy lag over all trained unrolls so far, and the largest.
    pub mean_policy_lag: f64,
    pub max_policy_lag: u64,
    /// Seconds the trainer waited for batches / computed, so far.
    pub trainer_wait_seconds: f64,
    pub trainer_busy_seconds: f64,
    pub replay_stored: usize,
    pub prefetch_queue: usize,
    pub unrolls_inserted: u64,
    pub unrolls_dropped_full: u64,
    /// Seconds inference spent blocked on a full buffer (backpressure).
    pub insert_wait_seconds: f64,
}

impl TrainingSnapshot {
    /// Fraction of the trainer's time spent waiting for data.
    pub fn wait_fraction(&self) -> f64 {
        let total = self.trainer_wait_seconds + self.trainer_busy_seconds;
        if total > 0.0 {
            self.trainer_wait_seconds / total
        } else {
            0.0
        }
    }
}

impl TrainingProbe {
    /// Every training figure at once.
    pub fn snapshot(&self) -> TrainingSnapshot {
        let s = &self.stats;
        let r = Ordering::Relaxed;
        let unrolls = s.unrolls.load(r);
        let a = &self.assembler.stats;
        TrainingSnapshot {
            learner_steps: s.steps.load(r),
            unrolls_trained: unrolls,
            total_loss: s.total_loss.get(),
            pg_loss: s.pg_loss.get(),
            value_loss: s.value_loss.get(),
            entropy: s.entropy.get(),
            grad_norm: s.grad_norm.get(),
            learning_rate: s.learning_rate.get(),
            mean_policy_lag: s.policy_lag_sum.load(r) as f64 / unrolls.max(1) as f64,
            max_policy_lag: s.policy_lag_max.load(r),
            trainer_wait_seconds: self.prefetcher.stats.trainer_wait_us.load(r) as f64 * 1e-6,
            trainer_busy_seconds: s.busy_us.load(r) as f64 * 1e-6,
            replay_stored: self.replay.len(),
            prefetch_queue: self.prefetcher.queue_len(),
            unrolls_inserted: a.inserted.load(r),
            unrolls_dropped_full: a.dropped_full.load(r),
            insert_wait_seconds: a.insert_wait_us.load(r) as f64 * 1e-6,
        }
    }
}

impl Training {
    /// Every training figure at once (what [`Metrics::snapshot`] reports).
    pub fn snapshot(&self) -> TrainingSnapshot {
        self.probe.snapshot()
    }

    /// The shared view of the training side.
    pub fn probe(&self) -> &Arc<TrainingProbe> {
        &self.probe
    }

    /// Seconds since training started.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Stops training, joins its threads and writes the final checkpoint
    /// (with `--run-dir`).
    pub fn stop(mut self) -> Result<(), LearnerError> {
        self.stop.store(true, Ordering::Relaxed);
        self.probe.prefetcher.stop();
        self.probe.replay.close();
        let trainer = match self.handle.take().map(|h| h.join()) {
            Some(Ok(Ok(t))) => Some(t),
            Some(Ok(Err(e))) => return Err(LearnerError::Training(e)),
            Some(Err(_)) => {
                return Err(LearnerError::Config("the training thread panicked".into()))
            }
            None => None,
        };
        // By reference: `Metrics` keeps the probe (and so the prefetcher).
        self.probe.prefetcher.join();
        if let (Some(dir), Some(t)) = (&self.run_dir, &trainer) {
            let state = (self.counters)(t);
            let path = checkpoint::save(dir, t, &state, &self.config)
                .map_err(|e| LearnerError::Config(format!("final checkpoint: {e}")))?;
            info!(path = %path.display(), learner_steps = state.learner_steps, "checkpoint written");
        }
        Ok(())
    }
}
