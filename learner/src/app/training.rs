//! The composition root's learning half: builds the model and weights
//! handle, the unroll store, unroll assembly (the inference sink), prefetch
//! threads, the training thread and periodic checkpoints from a
//! [`TrainConfig`]; [`crate::app::Learner::start`] calls it.
//!
//! Order of life: [`TrainingSetup::new`] builds the model (restoring a
//! checkpoint with `--resume`), the weights handle and the replay buffer,
//! and gives inference its weights and sink; once serving runs,
//! [`TrainingSetup::start`] starts prefetch and training; [`Training::stop`]
//! closes the buffer (inference inserts blocked on backpressure return at
//! once), joins the threads and writes the final checkpoint.
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use candle_core::Device;
use seed_env::EnvConfig;
use seed_shared::EnvSpec;
use tracing::{info, warn};

use crate::app::evaluator::Evaluator;
use crate::error::LearnerError;
use crate::infer::sink::SinkFactory;
use crate::learn::checkpoint::{
    self, CheckpointConfig, CheckpointState, EnvDescription, LoadedCheckpoint,
};
use crate::learn::config::TrainConfig;
use crate::learn::prefetch::{PrefetchConfig, Prefetcher};
use crate::learn::trainer::{TrainError, Trainer};
use crate::learn::trainer_stats::TrainerStats;
use crate::learn::training_thread::spawn_training_thread;
use crate::learn::unroll::{UnrollAssembler, UnrollSpec};
use crate::metrics::{Metrics, TrainingSnapshot};
use crate::model::weights::{PolicyVersion, WeightsHandle};
use crate::model::{ModelConfig, TrainableModel};
use crate::unroll_store::{RemoteTable, UnrollStore};
use seed_replay::ReplayBuffer;

/// What the learning side is built for, besides its own settings.
pub struct TrainingTarget {
    /// The architecture to train, unless `--resume` brings its own.
    pub model: ModelConfig,
    /// The envs' spec (observation and action shapes of the unrolls).
    pub spec: EnvSpec,
    /// The env as recorded in checkpoints (for `learner eval`).
    pub env: EnvDescription,
    pub device: Device,
    /// The weights' dtype inference runs (`--inference-dtype`); training
    /// stays `f32`.
    pub inference_dtype: crate::model::InferenceDType,
    pub seed: u64,
    /// Env slots inference may serve (the unroll builder keeps one per slot).
    pub max_env_slots: usize,
    /// Save checkpoints here when given.
    pub run_dir: Option<PathBuf>,
    /// A connected remote replay table (`--replay-addr`) to use instead of
    /// the in-process buffer; checked against the unrolls here.
    pub remote_replay: Option<RemoteTable>,
}

/// The unrolls `train` builds for an env of `spec` and a model of `model`:
/// what the replay buffer (or a remote table) holds.
pub fn unroll_spec(train: &TrainConfig, spec: &EnvSpec, model: &ModelConfig) -> UnrollSpec {
    UnrollSpec {
        unroll_length: train.unroll_length,
        obs_shape: spec.obs_shape.clone(),
        obs_dtype: spec.obs_dtype,
        action: model.action,
        state_size: model.lstm_size.unwrap_or(0),
        stride: train.trainer.agent.unroll_stride(train.unroll_length),
    }
}

/// Built before the server starts.
pub struct TrainingSetup {
    pub model_config: ModelConfig,
    pub weights: Arc<WeightsHandle>,
    pub sink: SinkFactory,
    /// Counters restored from `--resume` (zero otherwise).
    pub resumed: CheckpointState,
    trainer: Trainer,
    replay: UnrollStore,
    assembler: Arc<UnrollAssembler>,
    unroll: UnrollSpec,
    device: Device,
    prefetch: PrefetchConfig,
    run_dir: Option<PathBuf>,
    checkpoint_every: Duration,
    config: CheckpointConfig,
    /// `--eval-every`: the env to play, episodes, learner steps between.
    evaluation: Option<(EnvConfig, usize, u64)>,
}

impl TrainingSetup {
    /// Builds the learning side `train` describes, for `target` (see
    /// [`TrainingTarget`]).
    pub fn new(train: &TrainConfig, target: TrainingTarget) -> Result<Self, LearnerError> {
        let TrainingTarget {
            model,
            spec,
            env,
            device,
            seed,
            max_env_slots,
            run_dir,
            inference_dtype,
            remote_replay,
        } = target;
        let (spec, device) = (&spec, &device);
        train.validate()?;
        let loaded = match &train.checkpoints.resume {
            Some(dir) => Some(
                LoadedCheckpoint::latest(dir)
                    .map_err(|e| LearnerError::Config(format!("--resume: {e}")))?,
            ),
            None => None,
        };
        let model_config = match &loaded {
            // The architecture is the checkpoint's, whatever the flags say,
            // as long as it fits the env.
            Some(l) => {
                l.config
                    .check_env(spec)
                    .map_err(|e| LearnerError::Config(format!("--resume: {e}")))?;
                l.config.model.clone()
            }
            None => model,
        };
        let mut model = TrainableModel::new(&model_config, device, seed)?;
        if let Some(l) = &loaded {
            l.restore_weights(&mut model)
                .map_err(|e| LearnerError::Config(format!("--resume: {e}")))?;
        }
        let resumed = loaded.as_ref().map(|l| l.state).unwrap_or_default();
        let weights = Arc::new(WeightsHandle::new(
            model.snapshot_as(inference_dtype.dtype())?,
            PolicyVersion(resumed.policy_version),
        ));

        train.validate()?;
        if train.trainer.agent.r2d2().is_some() && model_config.action.continuous_dim() > 0 {
            return Err(LearnerError::Config(format!(
                "--algo r2d2 needs discrete actions; this env's are a {} (use V-trace)",
                model_config.action
            )));
        }
        let unroll = unroll_spec(train, spec, &model_config);
        let layout = unroll
            .layout()
            .map_err(|e| LearnerError::Config(format!("unroll layout: {e}")))?;
        let replay = match remote_replay {
            // A remote table keeps its own items (the server checkpoints
            // them); a checkpoint's in-process buffer is not used.
            Some(mut remote) => {
                remote.check(&layout, train.trainer.agent.r2d2().is_some())?;
                if loaded.as_ref().is_some_and(|l| l.has_replay()) {
                    info!(table = %remote.address(), "the checkpoint's in-process replay buffer \
                        is not restored: unrolls go to the remote table, which keeps its own");
                }
                remote.start(layout, resumed.policy_version);
                UnrollStore::Remote(Arc::new(remote))
            }
            None => UnrollStore::Local(Self::local_replay(
                loaded.as_ref(),
                layout,
                train.replay.replay_config(train.batch_size, seed),
            )?),
        };
        replay.set_policy_version(resumed.policy_version);
        let assembler = UnrollAssembler::new(
            unroll.clone(),
            max_env_slots,
            replay.clone(),
            Some(train.replay.insert_timeout),
        );

        let mut trainer = Trainer::new(
            model,
            train.trainer,
            Arc::clone(&weights),
            Some(replay.clone()),
        )
        .map_err(LearnerError::from)?;
        if let Some(l) = &loaded {
            l.restore_optimizer(&mut trainer.optimizer, device)
                .map_err(|e| LearnerError::Config(format!("--resume: {e}")))?;
            info!(dir = %l.dir.display(), learner_steps = resumed.learner_steps,
                policy_version = resumed.policy_version, "resumed from checkpoint");
        }
        let evaluation = match train.checkpoints.eval_every {
            0 => None,
            every => {
                let Some(dir) = &run_dir else {
                    return Err(LearnerError::Config(
                        "--eval-every needs --run-dir (the best policy is kept in RUN_DIR/best/)"
                            .into(),
                    ));
                };
                let env = crate::app::eval::env_config(&env, dir).map_err(|e| {
                    LearnerError::Config(format!(
                        "--eval-every plays the learner's own env: {e}; or keep it off and \
                         evaluate checkpoints with `python -m seed_rs.actor --eval RUN_DIR`"
                    ))
                })?;
                Some((env, train.checkpoints.eval_episodes, every))
            }
        };
        let config = CheckpointConfig {
            model: model_config.clone(),
            env,
            flags: serde_json::to_value(train).unwrap_or_default(),
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
                batch_size: train.batch_size,
                queue_depth: train.prefetch_depth,
                threads: train.prefetch_threads,
            },
            run_dir,
            checkpoint_every: train.checkpoints.every.max(Duration::from_millis(100)),
            config,
            evaluation,
        })
    }

    /// The in-process buffer: a checkpoint's (with `--resume`), which
    /// continues where it stopped (same contents, priorities, limiter
    /// counters and sampling RNG; its settings must be the run's), or a new
    /// one.
    fn local_replay(
        loaded: Option<&LoadedCheckpoint>,
        layout: seed_replay::ItemLayout,
        replay_cfg: seed_replay::ReplayConfig,
    ) -> Result<Arc<ReplayBuffer>, LearnerError> {
        let restored = match loaded {
            Some(l) => l
                .restore_replay(layout.clone(), replay_cfg.clone())
                .map_err(|e| {
                    LearnerError::Config(format!(
                        "--resume: {e} (resume with the replay flags of the checkpointed run)"
                    ))
                })?,
            None => None,
        };
        Ok(Arc::new(match restored {
            Some(r) => {
                info!(
                    stored = r.len(),
                    "replay buffer restored from the checkpoint"
                );
                r
            }
            None => ReplayBuffer::new(layout, replay_cfg)
                .map_err(|e| LearnerError::Config(format!("replay buffer: {e}")))?,
        }))
    }

    /// Starts prefetch and training; `metrics` gets `learner_steps` and
    /// reports the training side from then on.
    pub fn start(self, metrics: Arc<Metrics>) -> Result<Training, LearnerError> {
        let prefetcher = Arc::new(Prefetcher::spawn(
            &self.replay,
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
        let mut evaluator = match (&self.evaluation, &self.run_dir) {
            (Some((env, episodes, every)), Some(dir)) => Some(Evaluator::start(
                env.clone(),
                self.config.clone(),
                dir,
                *episodes,
                *every,
                self.resumed.learner_steps,
                Arc::clone(&metrics),
            )?),
            _ => None,
        };
        let between = self.run_dir.clone().map(|dir| {
            let config = self.config.clone();
            let replay = self.replay.local().cloned();
            let every = self.checkpoint_every;
            let counters = counters.clone();
            let mut next = Instant::now() + every;
            Box::new(move |trainer: &Trainer| {
                if let Some(e) = evaluator.as_mut() {
                    e.maybe_send(
                        trainer.optimizer.step_count(),
                        || trainer.model.named_tensors(),
                        || counters(trainer),
                    );
                }
                if Instant::now() >= next {
                    next = Instant::now() + every;
                    if let Err(e) = checkpoint::save_with_replay(
                        &dir,
                        &trainer.model,
                        &trainer.optimizer,
                        &counters(trainer),
                        &config,
                        replay.as_deref(),
                    ) {
                        warn!(error = %e, "periodic checkpoint failed");
                    }
                }
            }) as crate::learn::training_thread::BetweenSteps
        });
        let on_step = {
            let metrics = Arc::clone(&metrics);
            Arc::new(move |_: &crate::learn::trainer::TrainStep| {
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
        {
            let probe = Arc::clone(&probe);
            metrics.attach_training(Box::new(move || probe.snapshot()));
        }
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
    pub replay: UnrollStore,
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

impl TrainingProbe {
    /// Every training figure at once.
    pub fn snapshot(&self) -> TrainingSnapshot {
        let s = &self.stats;
        let r = Ordering::Relaxed;
        let unrolls = s.unrolls.load(r);
        let a = &self.assembler.stats;
        TrainingSnapshot {
            learner_steps: s.steps.load(r),
            skipped_steps: s.skipped_steps.load(r),
            unrolls_trained: unrolls,
            total_loss: s.total_loss.get(),
            pg_loss: s.pg_loss.get(),
            value_loss: s.value_loss.get(),
            entropy: s.entropy.get(),
            grad_norm: s.grad_norm.get(),
            learning_rate: s.learning_rate.get(),
            mean_policy_lag: s.policy_lag_sum.load(r) as f64 / unrolls.max(1) as f64,
            max_policy_lag: s.policy_lag_max.load(r),
            policy_lags: s.policy_lags.snapshot(),
            trainer_wait_seconds: self.prefetcher.stats.trainer_wait_us.load(r) as f64 * 1e-6,
            trainer_busy_seconds: s.busy_us.load(r) as f64 * 1e-6,
            replay_stored: self.replay.stored(),
            prefetch_queue: self.prefetcher.queue_len(),
            unrolls_inserted: match self.replay.remote() {
                Some(t) => t.stats.acked.load(r),
                None => a.inserted.load(r),
            },
            unrolls_dropped_full: a.dropped_full.load(r),
            insert_wait_seconds: a.insert_wait_us.load(r) as f64 * 1e-6,
            priority_updates: s.priority_updates.load(r),
            stale_priority_updates: self.replay.stale_priority_updates(),
            priority_update_seconds: s.priority_update_us.load(r) as f64 * 1e-6,
            timed_samples: self.prefetcher.stats.timed_samples.load(r),
            sample_seconds: self.prefetcher.stats.sample_us.load(r) as f64 * 1e-6,
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
        if let Some(t) = self.probe.replay.remote() {
            let s = &t.stats;
            let r = Ordering::Relaxed;
            info!(table = %t.address(), queued = s.queued.load(r), acknowledged = s.acked.load(r),
                dropped_queue_full = s.dropped_queue_full.load(r), lost = s.lost.load(r),
                insert_batches = s.insert_batches.load(r), sampled_batches = s.sampled_batches.load(r),
                stream_errors = s.stream_errors.load(r), "remote replay table: unrolls sent and sampled");
        }
        let trainer = match self.handle.take().map(|h| h.join()) {
            Some(Ok(Ok(t))) => Some(t),
            Some(Ok(Err(e))) => return Err(e.into()),
            Some(Err(_)) => {
                return Err(LearnerError::Config("the training thread panicked".into()))
            }
            None => None,
        };
        // By reference: `Metrics` keeps the probe (and so the prefetcher).
        self.probe.prefetcher.join();
        if let (Some(dir), Some(t)) = (&self.run_dir, &trainer) {
            let state = (self.counters)(t);
            // The buffer is closed and the trainer stopped: the replay file
            // is an exact snapshot (a remote table is not in it: the
            // server checkpoints its own tables).
            let path = checkpoint::save_with_replay(
                dir,
                &t.model,
                &t.optimizer,
                &state,
                &self.config,
                self.probe.replay.local().map(|r| r.as_ref()),
            )
            .map_err(|e| LearnerError::Config(format!("final checkpoint: {e}")))?;
            info!(path = %path.display(), learner_steps = state.learner_steps, "checkpoint written");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::learn::optimizer::{Optimizer, OptimizerConfig};
    use seed_shared::ActionSpace;

    /// A learning side for `spec` resuming from `resume`.
    fn setup(spec: &EnvSpec, resume: &std::path::Path) -> Result<TrainingSetup, LearnerError> {
        let mut train = crate::app::LearnerConfig::default()
            .train
            .expect("training by default");
        train.checkpoints.resume = Some(resume.to_path_buf());
        TrainingSetup::new(
            &train,
            TrainingTarget {
                model: ModelConfig::for_spec(spec),
                spec: spec.clone(),
                env: EnvDescription {
                    env_name: None,
                    kind: "test".into(),
                    obs_shape: spec.obs_shape.clone(),
                    obs_dtype: spec.obs_dtype.to_string(),
                    num_actions: spec.num_actions().unwrap_or(0),
                    action_box: EnvDescription::action_box_of(&spec.action),
                    episode_len: 0,
                    step_cost_us: 0,
                },
                device: Device::Cpu,
                inference_dtype: Default::default(),
                seed: 1,
                max_env_slots: 4,
                run_dir: None,
                remote_replay: None,
            },
        )
    }

    /// The learning side of a CartPole run for `train`, saving into
    /// `run_dir` (a small LSTM, so sequences carry their recurrent state).
    fn cartpole_setup(train: &TrainConfig, run_dir: &std::path::Path) -> TrainingSetup {
        TrainingSetup::new(train, cartpole_target(run_dir)).expect("training setup")
    }

    /// What [`cartpole_setup`] builds for.
    fn cartpole_target(run_dir: &std::path::Path) -> TrainingTarget {
        let spec = EnvSpec::cartpole();
        let model = ModelConfig {
            lstm_size: Some(4),
            ..ModelConfig::for_spec(&spec)
        };
        TrainingTarget {
            model,
            spec: spec.clone(),
            env: EnvDescription {
                env_name: None,
                kind: "cartpole".into(),
                obs_shape: vec![4],
                obs_dtype: "f32".into(),
                num_actions: 2,
                action_box: None,
                episode_len: 0,
                step_cost_us: 0,
            },
            device: Device::Cpu,
            inference_dtype: Default::default(),
            seed: 11,
            max_env_slots: 4,
            run_dir: Some(run_dir.to_path_buf()),
            remote_replay: None,
        }
    }

    #[test]
    fn eval_every_refuses_an_env_only_actors_run_and_a_run_without_a_run_dir() {
        let dir = tempfile::tempdir().unwrap();
        let mut train = crate::app::LearnerConfig::default()
            .train
            .expect("training by default");
        train.checkpoints.eval_every = 100;
        let mut remote = cartpole_target(dir.path());
        remote.env.kind = "remote".into();
        remote.env.env_name = Some("CartPole-v1".into());
        let err = TrainingSetup::new(&train, remote)
            .err()
            .expect("refused")
            .to_string();
        assert!(
            err.contains("--eval-every plays the learner's own env")
                && err.contains("python -m seed_rs.actor --eval"),
            "{err}"
        );
        let mut no_dir = cartpole_target(dir.path());
        no_dir.run_dir = None;
        let err = TrainingSetup::new(&train, no_dir)
            .err()
            .expect("refused")
            .to_string();
        assert!(err.contains("--eval-every needs --run-dir"), "{err}");
        assert!(TrainingSetup::new(&train, cartpole_target(dir.path())).is_ok());
    }

    /// The in-process buffer of a store.
    fn local(store: &UnrollStore) -> &ReplayBuffer {
        store.local().expect("an in-process buffer")
    }

    /// What a sample hands out: keys, importance weights and every byte.
    fn draw(replay: &ReplayBuffer, n: usize) -> (Vec<u64>, Vec<f32>, Vec<u8>) {
        let mut batch = replay.new_batch(n);
        replay.sample_into(&mut batch, n).expect("sample");
        let bytes = (0..replay.layout().fields().len())
            .flat_map(|i| batch.field_bytes(i).unwrap_or_default().to_vec())
            .collect();
        (
            batch.keys().iter().map(|k| k.0).collect(),
            batch.weights().to_vec(),
            bytes,
        )
    }

    /// A checkpoint carries the replay buffer, and `--resume` continues
    /// sampling exactly as the saved run would have: the same keys,
    /// importance weights (R2D2's written-back priorities) and contents.
    fn resume_continues_sampling_identically(algo: &str) {
        use crate::infer::sink::{InferredRow, SampledAction};
        use crate::infer::state_table::{EnvSlot, LeaseId};
        use crate::learn::unroll::{PushOutcome, UnrollBuilder};
        let dir = tempfile::tempdir().unwrap();
        let train = crate::app::settings::resolve_toml(&format!(
            "[train]\nalgo = \"{algo}\"\nbatch_size = 4\nunroll_length = 6\n\
             [r2d2]\nburn_in = 2\n[replay]\nreplay_capacity = 16\nreplay_min_size = 4\n"
        ))
        .unwrap()
        .train
        .expect("a training run");
        let a = cartpole_setup(&train, dir.path());
        // Sequences of one env slot with distinct observations and rewards.
        let mut b = UnrollBuilder::new(&a.unroll);
        let h = [0.25f32; 4];
        let mut inserted = 0;
        for k in 0..200u32 {
            let obs: Vec<u8> = [k as f32, 1.0, -(k as f32), 0.5]
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect();
            let row = InferredRow {
                slot: EnvSlot(0),
                lease: LeaseId(1),
                run_id: 1,
                observation: &obs,
                reward: (k % 7) as f32,
                terminated: k % 23 == 22,
                truncated: false,
                episode_start: k % 23 == 0,
                action: SampledAction::Discrete(k % 2),
                policy_params: &[0.1, -0.1],
                value: 0.0,
                recurrent_h: Some(&h),
                recurrent_c: Some(&h),
            };
            if b.push(&row, PolicyVersion(u64::from(k))) == PushOutcome::Complete {
                // The rate limiter refuses inserts once the actors are a
                // batch ahead; that is where a run would wait.
                if local(&a.replay).insert_ref(b.fields().as_slice()).is_err() {
                    break;
                }
                inserted += 1;
                b.advance();
            }
        }
        assert!(inserted >= 8, "only {inserted} sequences fit");
        // Train once on a sample (R2D2 writes its priorities back).
        let mut trainer = a.trainer;
        let mut collator =
            crate::learn::prefetch::Collator::new(a.unroll.clone(), Device::Cpu, 4).unwrap();
        let mut sample = local(&a.replay).new_batch(4);
        local(&a.replay).sample_into(&mut sample, 4).unwrap();
        let step = trainer.step(&collator.collate(&sample).unwrap()).unwrap();
        if algo == "r2d2" {
            assert_eq!(step.priorities_written, 4);
        }
        let state = CheckpointState {
            learner_steps: 1,
            policy_version: 1,
            ..CheckpointState::default()
        };
        checkpoint::save_with_replay(
            dir.path(),
            &trainer.model,
            &trainer.optimizer,
            &state,
            &a.config,
            Some(local(&a.replay)),
        )
        .unwrap();

        let mut resumed = train.clone();
        resumed.checkpoints.resume = Some(dir.path().to_path_buf());
        let r = cartpole_setup(&resumed, dir.path());
        assert_eq!(local(&r.replay).len(), local(&a.replay).len());
        for _ in 0..3 {
            assert_eq!(draw(local(&a.replay), 4), draw(local(&r.replay), 4));
        }
        // Other replay settings than the checkpoint's are refused, naming them.
        let mut other = resumed.clone();
        other.replay.capacity = 32;
        let spec = EnvSpec::cartpole();
        let err = TrainingSetup::new(
            &other,
            TrainingTarget {
                model: ModelConfig {
                    lstm_size: Some(4),
                    ..ModelConfig::for_spec(&spec)
                },
                spec: spec.clone(),
                env: r.config.env.clone(),
                device: Device::Cpu,
                inference_dtype: Default::default(),
                seed: 11,
                max_env_slots: 4,
                run_dir: None,
                remote_replay: None,
            },
        )
        .err()
        .expect("another capacity is refused")
        .to_string();
        assert!(
            err.contains("--resume") && err.contains("capacity"),
            "{err}"
        );
    }

    #[test]
    fn vtrace_resume_continues_sampling_identically() {
        resume_continues_sampling_identically("vtrace");
    }

    #[test]
    fn r2d2_resume_continues_sampling_identically() {
        resume_continues_sampling_identically("r2d2");
    }

    #[test]
    fn resume_refuses_a_checkpoint_of_another_action_space() {
        // A checkpoint of a Gaussian policy over 4 observations.
        let mut gaussian = EnvSpec::cartpole();
        gaussian.action = ActionSpace::uniform_box(1, -2.0, 2.0);
        let dir = tempfile::tempdir().unwrap();
        let model_config = ModelConfig::for_spec(&gaussian);
        let model = TrainableModel::new(&model_config, &Device::Cpu, 1).unwrap();
        let optimizer =
            Optimizer::new(&model.varmap, OptimizerConfig::constant_adam(6e-4)).unwrap();
        let config = CheckpointConfig {
            model: model_config,
            env: EnvDescription {
                env_name: None,
                kind: "test".into(),
                obs_shape: vec![4],
                obs_dtype: "f32".into(),
                num_actions: 0,
                action_box: EnvDescription::action_box_of(&gaussian.action),
                episode_len: 0,
                step_cost_us: 0,
            },
            flags: serde_json::Value::Null,
        };
        checkpoint::save(
            dir.path(),
            &model,
            &optimizer,
            &CheckpointState::default(),
            &config,
        )
        .unwrap();

        let resumed = setup(&gaussian, dir.path()).unwrap();
        assert_eq!(resumed.model_config.action, config.model.action);
        let Err(err) = setup(&EnvSpec::cartpole(), dir.path()) else {
            panic!("a Gaussian checkpoint resumed on CartPole's discrete actions");
        };
        let text = err.to_string();
        assert!(
            text.contains("--resume")
                && text.contains("Gaussian over 1 floats")
                && text.contains("Discrete(2)"),
            "{text}"
        );
    }
}
