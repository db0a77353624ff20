//! Resolution: layers merged, defaults picked for the final algorithm and
//! device, rules applied, and the result turned into a [`LearnerConfig`]:
//! the one place settings become a run.
//!
//! Order: the layers (preset < config file < flags) merge first, so the
//! case of the run (`--algo`, `--device`, `--optimizer`, `--lstm`) is the
//! one the user ends up with; then `defaults.toml` fills what no layer
//! names, for that case; then the rules below fill what depends on other
//! values (replay sizes follow `--batch-size`). The result is every value
//! of the run ([`Resolved::settings`]); printed (`--print-config`) and read
//! back it resolves to an equal [`LearnerConfig`].
use std::time::Duration;

use seed_env::{EnvConfig, SyntheticConfig};
use seed_shared::tls::{read_certificates, read_private_key};
use seed_shared::{Keepalive, Token};

use super::defaults::{defaults_for, Case};
use super::layer::{Layer, Origin};
use super::schema::{section_of, About, AlgoName, EnvName, LogFormatName, OptimizerName, Settings};
use crate::app::config::{InferenceConfig, LearnerConfig, RunConfig, ServeConfig};
use crate::device::DeviceSpec;
use crate::error::LearnerError;
use crate::infer::batcher::BatcherConfig;
use crate::infer::exploration::EpsilonSchedule;
use crate::learn::agent::Agent;
use crate::learn::config::{
    CheckpointSettings, ReplaySampler, ReplaySettings, ReplayWriter, TrainConfig,
};
use crate::learn::optimizer::{AdamConfig, Algorithm, LrSchedule, OptimizerConfig, RmsPropConfig};
use crate::learn::r2d2::R2d2Config;
use crate::learn::trainer::TrainerConfig;
use crate::learn::vtrace::{ImpalaLossConfig, VTraceClip};
use crate::model::ModelShape;
use crate::serve::tls::ServerTls;
use crate::serve::transport::ListenAddr;
use crate::unroll_store::RemoteReplayConfig;

/// The replay keys a remote table decides (its server's config); refused
/// with `--replay-addr`, and derived only for the in-process buffer.
const LOCAL_REPLAY_KEYS: &[&str] = &[
    "replay.replay_sampler",
    "replay.replay_writer",
    "replay.replay_capacity",
    "replay.replay_min_size",
    "replay.replay_window",
    "replay.samples_per_insert",
    "replay.max_policy_lag",
];

/// What a key without a value in `defaults.toml` defaults to, as help text
/// says it: the rules [`apply_rules`] applies, and the meaning of "unset"
/// for optional keys.
/// Where a run's TensorBoard files go inside its run directory.
pub const TENSORBOARD_IN_RUN_DIR: &str = "tensorboard";

pub fn rule(key: &str) -> Option<&'static str> {
    Some(match key {
        "actors.env" => {
            "cartpole; a learner with --local-actors 0 and no --env takes the env spec from the \
             first actor's hello instead"
        }
        "replay.replay_sampler" => "fifo with --samples-per-insert 1, else uniform",
        "replay.replay_writer" => "block with fifo, else overwrite",
        "replay.replay_capacity" => {
            "--batch-size with fifo, twice that otherwise; at least --batch-size"
        }
        "replay.replay_min_size" => {
            "--batch-size; a default is raised to --batch-size and held to the capacity"
        }
        "replay.replay_window" => "--batch-size",
        "run.tensorboard" => "RUN_DIR/tensorboard when training with --run-dir, else off",
        _ => return None,
    })
}

/// A run's settings, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    /// Every value of the run: the layers, the defaults and the rules.
    pub settings: Settings,
    /// The run itself.
    pub config: LearnerConfig,
    /// The preset's (or file's) `[about]`, if any layer has one.
    pub about: Option<About>,
}

/// How to resolve.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResolveOptions {
    /// Accept the in-process buffer's keys beside `--replay-addr`: they
    /// describe the table `--print-replay-table-config` prints.
    pub describe_remote_table: bool,
}

/// The run `layers` describe (later layers win), checked.
pub fn resolve(layers: &[Layer]) -> Result<Resolved, LearnerError> {
    resolve_with(layers, ResolveOptions::default())
}

/// [`resolve`] with options.
pub fn resolve_with(layers: &[Layer], options: ResolveOptions) -> Result<Resolved, LearnerError> {
    let user = layers
        .iter()
        .fold(Settings::default(), |acc, l| acc.merge(l.settings.clone()));
    let about = user.about.clone();
    let remote = user.remote_replay.replay_addr.is_some();
    if remote && !options.describe_remote_table {
        if let Some(key) = LOCAL_REPLAY_KEYS.iter().find(|k| user.sets(k)) {
            return Err(with_origin(
                LearnerError::Config(format!(
                    "--{} sets the in-process buffer; with --replay-addr the table's config on \
                     the replay server decides it (--print-replay-table-config prints a config \
                     with these settings applied)",
                    key.split_once('.')
                        .map_or(*key, |(_, k)| k)
                        .replace('_', "-")
                )),
                layers,
            ));
        }
    }
    let case = Case::of(&user)?;
    let min_size_given = user.sets("replay.replay_min_size");
    let mut settings = defaults_for(&case)?.merge(user);
    settings.about = None;
    let derived = apply_rules(&mut settings, min_size_given).map_err(|e| with_origin(e, layers))?;
    let config = to_config(&settings, &derived).map_err(|e| with_origin(e, layers))?;
    config.validate().map_err(|e| with_origin(e, layers))?;
    settings.to_table().map_err(|e| {
        LearnerError::Config(format!(
            "a setting does not fit a config file (integers up to 2^63 - 1): {e}"
        ))
    })?;
    if remote {
        // The table is the server's: its sizes are not part of this run.
        for key in LOCAL_REPLAY_KEYS {
            clear(&mut settings, key);
        }
    }
    Ok(Resolved {
        settings,
        config,
        about,
    })
}

// The library's defaults as a `LearnerConfig`: here rather than beside the
// type, so that `app::config` (which this module builds) imports nothing
// of the settings.
impl Default for LearnerConfig {
    /// The library's defaults with no preset, file or flag: CartPole, 2
    /// local actors, V-trace on the CPU (`crate::app::settings`).
    fn default() -> Self {
        resolve(&[]).expect("the defaults resolve (tested)").config
    }
}

impl LearnerConfig {
    /// The defaults for a run on `device` (on CUDA larger batches, as
    /// `defaults.toml` says).
    pub fn for_device(device: DeviceSpec) -> Self {
        let layer = Layer::new(
            Origin::Flags,
            Settings {
                inference: super::schema::InferenceSection {
                    device: Some(device.to_string()),
                    ..Default::default()
                },
                ..Default::default()
            },
        );
        resolve(&[layer])
            .expect("the defaults resolve on every device (tested)")
            .config
    }
}

/// The settings given as TOML text, resolved (tests and embedders: what
/// `learner --config FILE` with that file gives).
pub fn resolve_toml(text: &str) -> Result<LearnerConfig, LearnerError> {
    let layer = Layer::parse(text, Origin::File("(inline)".into()))?;
    Ok(resolve(&[layer])?.config)
}

/// The replay sizes the rules give; kept apart from the settings so a
/// remote table's run does not record them.
struct Derived {
    sampler: ReplaySampler,
    writer: ReplayWriter,
    capacity: usize,
    min_size: usize,
    window: usize,
}

/// Fills what depends on other values: the env of local actors, and the
/// replay buffer's sampler, writer and sizes. `min_size_given`: a layer set
/// `replay_min_size` (taken as it is; a default from `defaults.toml` is
/// raised to the batch size and held to the capacity).
fn apply_rules(s: &mut Settings, min_size_given: bool) -> Result<Derived, LearnerError> {
    let local_actors = s.actors.local_actors.unwrap_or_default();
    if s.actors.env.is_none() && local_actors > 0 {
        s.actors.env = Some(EnvName::Cartpole);
    }
    let b = need(s.train.batch_size, "train.batch_size")?;
    let spi = need(s.replay.samples_per_insert, "replay.samples_per_insert")?;
    let r = &mut s.replay;
    let sampler = *r.replay_sampler.get_or_insert(if spi == 1.0 {
        ReplaySampler::Fifo
    } else {
        ReplaySampler::Uniform
    });
    let fifo = sampler == ReplaySampler::Fifo;
    let writer = *r.replay_writer.get_or_insert(if fifo {
        ReplayWriter::Block
    } else {
        ReplayWriter::Overwrite
    });
    let capacity = r
        .replay_capacity
        .unwrap_or(if fifo { b } else { 2 * b })
        .max(b);
    r.replay_capacity = Some(capacity);
    let min_size = match r.replay_min_size {
        Some(given) if min_size_given => given,
        default => default.unwrap_or(b).max(b).min(capacity),
    };
    r.replay_min_size = Some(min_size);
    let window = *r.replay_window.get_or_insert(b);
    Ok(Derived {
        sampler,
        writer,
        capacity,
        min_size,
        window,
    })
}

/// Unsets `key` (`section.name`).
fn clear(s: &mut Settings, key: &str) {
    match key {
        "replay.replay_sampler" => s.replay.replay_sampler = None,
        "replay.replay_writer" => s.replay.replay_writer = None,
        "replay.replay_capacity" => s.replay.replay_capacity = None,
        "replay.replay_min_size" => s.replay.replay_min_size = None,
        "replay.replay_window" => s.replay.replay_window = None,
        "replay.samples_per_insert" => s.replay.samples_per_insert = None,
        "replay.max_policy_lag" => s.replay.max_policy_lag = None,
        _ => {}
    }
}

/// A value every resolved run has (`defaults.toml` names it).
fn need<T>(value: Option<T>, key: &str) -> Result<T, LearnerError> {
    value.ok_or_else(|| LearnerError::Config(format!("{key} has no value and no default")))
}

/// Prefixes an error naming a flag with the preset or file that set it
/// (an error about a flag the user typed is left as it is).
fn with_origin(e: LearnerError, layers: &[Layer]) -> LearnerError {
    let LearnerError::Config(message) = &e else {
        return e;
    };
    let Some(flag) = message
        .split(|c: char| c.is_whitespace() || c == ',' || c == '(' || c == ')')
        .find_map(|w| w.strip_prefix("--"))
    else {
        return e;
    };
    let name = flag
        .trim_end_matches(|c: char| !c.is_ascii_alphanumeric())
        .replace('-', "_");
    let Some(section) = section_of(&name) else {
        return e;
    };
    let key = format!("{section}.{name}");
    match layers.iter().rev().find(|l| l.settings.sets(&key)) {
        Some(layer) if layer.origin != Origin::Flags => {
            LearnerError::Config(format!("{}, key {key}: {message}", layer.origin))
        }
        _ => e,
    }
}

/// The run the resolved settings `s` describe; reads the TLS files once.
fn to_config(s: &Settings, derived: &Derived) -> Result<LearnerConfig, LearnerError> {
    let t = &s.train;
    let r = &s.replay;
    let algo = need(t.algo, "train.algo")?;
    let local_actors = need(s.actors.local_actors, "actors.local_actors")?;
    let envs_per_actor = need(s.actors.envs_per_actor, "actors.envs_per_actor")?;
    let max_env_slots = need(s.serve.max_env_slots, "serve.max_env_slots")?;
    let checkpoint_secs = need(s.checkpoints.checkpoint_secs, "checkpoints.checkpoint_secs")?;
    if !checkpoint_secs.is_finite() {
        return Err(LearnerError::Config(
            "--checkpoint-secs must be a finite number".into(),
        ));
    }
    let progress_secs = need(s.run.progress_secs, "run.progress_secs")?;
    if !progress_secs.is_finite() {
        return Err(LearnerError::Config(
            "--progress-secs must be a finite number".into(),
        ));
    }
    let no_train = need(t.no_train, "train.no_train")?;
    let remote = remote_replay(s)?;
    if no_train && remote.is_some() {
        return Err(LearnerError::Config(
            "--replay-addr with --no-train: a learner that does not train stores no unrolls".into(),
        ));
    }
    let (listen, fallback_to_ephemeral) = match &s.serve.listen {
        Some(l) => (l.parse::<ListenAddr>()?, false),
        None => (crate::app::config::default_listen(), true),
    };
    let tls = match (&s.serve.tls_cert, &s.serve.tls_key) {
        (Some(cert), Some(key)) => Some(ServerTls::from_files(
            cert,
            key,
            s.serve.tls_client_ca.as_deref(),
        )?),
        (None, None) if s.serve.tls_client_ca.is_none() => None,
        _ => {
            return Err(LearnerError::Config(
                "--tls-cert and --tls-key go together (and --tls-client-ca needs them)".into(),
            ))
        }
    };
    let device: DeviceSpec = need(s.inference.device.clone(), "inference.device")?.parse()?;
    let learning_rate = need(t.learning_rate, "train.learning_rate")?;
    let epsilon = need(t.optimizer_epsilon, "train.optimizer_epsilon")?;
    let algorithm = match need(t.optimizer, "train.optimizer")? {
        OptimizerName::Adam => Algorithm::Adam(AdamConfig::with_eps(epsilon)),
        OptimizerName::Rmsprop => Algorithm::RmsProp(RmsPropConfig::with_eps(epsilon)),
    };
    let decay_steps = need(t.lr_decay_steps, "train.lr_decay_steps")?;
    let schedule = if decay_steps > 0 {
        LrSchedule::LinearDecay {
            initial: learning_rate,
            decay_steps,
            last: learning_rate * need(t.lr_final_fraction, "train.lr_final_fraction")?,
        }
    } else {
        LrSchedule::Constant { lr: learning_rate }
    };
    let q = &s.r2d2;
    // γ and the reward scale define the return both algorithms learn.
    let discount = need(t.discount, "train.discount")? as f32;
    let reward_scale = need(t.reward_scale, "train.reward_scale")? as f32;
    let agent = match algo {
        AlgoName::Vtrace => Agent::VTrace,
        AlgoName::R2d2 => Agent::R2d2(R2d2Config {
            burn_in: need(q.burn_in, "r2d2.burn_in")?,
            n_step: need(q.n_step, "r2d2.n_step")?,
            target_update_period: need(q.target_update_period, "r2d2.target_update_period")?,
            priority_eta: need(q.priority_eta, "r2d2.priority_eta")?,
            exploration: EpsilonSchedule {
                epsilon: need(q.epsilon, "r2d2.epsilon")?,
                alpha: need(q.epsilon_alpha, "r2d2.epsilon_alpha")?,
                // The schedule spreads over the slots the run really has.
                slots: if local_actors > 0 {
                    local_actors * envs_per_actor
                } else {
                    max_env_slots
                },
            },
            discount,
            reward_scale,
        }),
    };
    let clip = need(t.vtrace_clip, "train.vtrace_clip")? as f32;
    let lambda = need(t.vtrace_lambda, "train.vtrace_lambda")? as f32;
    let train = if no_train {
        None
    } else {
        Some(TrainConfig {
            unroll_length: need(t.unroll_length, "train.unroll_length")?,
            batch_size: need(t.batch_size, "train.batch_size")?,
            trainer: TrainerConfig {
                agent,
                loss: ImpalaLossConfig {
                    discount,
                    baseline_cost: need(t.baseline_cost, "train.baseline_cost")? as f32,
                    entropy_cost: need(t.entropy_cost, "train.entropy_cost")? as f32,
                    reward_scale,
                    clip: VTraceClip {
                        rho: clip,
                        c: clip,
                        pg_rho: clip,
                        lambda,
                    },
                    ratio_clip: need(t.ratio_clip, "train.ratio_clip")? as f32,
                    normalize_advantages: need(
                        t.normalize_advantages,
                        "train.normalize_advantages",
                    )?,
                },
                optimizer: OptimizerConfig {
                    algorithm,
                    schedule,
                },
                max_grad_norm: need(t.max_grad_norm, "train.max_grad_norm")? as f32,
                acting_average: need(t.acting_average, "train.acting_average")? as f32,
            },
            replay: ReplaySettings {
                sampler: derived.sampler,
                writer: derived.writer,
                samples_per_insert: need(r.samples_per_insert, "replay.samples_per_insert")?,
                capacity: derived.capacity,
                min_size: derived.min_size,
                priority_exponent: need(r.priority_exponent, "replay.priority_exponent")?,
                importance_exponent: need(r.importance_exponent, "replay.importance_exponent")?,
                recent_window: derived.window,
                insert_timeout: Duration::from_millis(need(
                    r.insert_timeout_ms,
                    "replay.insert_timeout_ms",
                )?),
                max_policy_lag: r.max_policy_lag,
                remote,
            },
            prefetch_threads: need(r.prefetch_threads, "replay.prefetch_threads")?,
            prefetch_depth: need(r.prefetch_depth, "replay.prefetch_depth")?,
            checkpoints: CheckpointSettings {
                every: Duration::from_secs_f64(checkpoint_secs.max(0.0)),
                resume: s.checkpoints.resume.clone(),
                eval_every: need(s.checkpoints.eval_every, "checkpoints.eval_every")?,
                eval_episodes: need(s.checkpoints.eval_episodes, "checkpoints.eval_episodes")?,
            },
        })
    };
    let metrics_addr = match &s.run.metrics_addr {
        Some(a) => Some(a.parse().map_err(|_| {
            LearnerError::Config(format!(
                "--metrics-addr `{a}`: expected IP:PORT, e.g. 127.0.0.1:9100"
            ))
        })?),
        None => None,
    };
    let actor_idle_ms = need(s.inference.actor_idle_ms, "inference.actor_idle_ms")?;
    Ok(LearnerConfig {
        // Remote actors only and no env: the first hello fixes the spec.
        env: s.actors.env.map(|name| env_config(name, s)).transpose()?,
        seed: need(s.run.seed, "run.seed")?,
        model: ModelShape {
            hidden_sizes: need(s.model.hidden_sizes.clone(), "model.hidden_sizes")?,
            conv_features: need(s.model.conv_features, "model.conv_features")?,
            // R2D2's Q-network is recurrent.
            lstm_size: (need(s.model.lstm, "model.lstm")? || algo == AlgoName::R2d2)
                .then(|| need(s.model.lstm_size, "model.lstm_size"))
                .transpose()?,
        },
        serve: ServeConfig {
            listen,
            fallback_to_ephemeral,
            token: Token::from_option(s.serve.token.as_deref()),
            max_message_bytes: need(s.serve.max_message_bytes, "serve.max_message_bytes")?,
            max_env_slots,
            io_threads: s.serve.io_threads,
            metrics_addr,
            keepalive: Keepalive::from_secs(
                need(s.serve.keepalive_secs, "serve.keepalive_secs")?,
                need(
                    s.serve.keepalive_timeout_secs,
                    "serve.keepalive_timeout_secs",
                )?,
            ),
            tls,
        },
        inference: InferenceConfig {
            batcher: BatcherConfig {
                max_rows: need(s.inference.max_batch, "inference.max_batch")?,
                flush_after: Duration::from_micros(need(
                    s.inference.flush_us,
                    "inference.flush_us",
                )?),
            },
            threads: need(s.inference.inference_threads, "inference.inference_threads")?,
            actor_idle: (actor_idle_ms > 0).then(|| Duration::from_millis(actor_idle_ms)),
            inline_max_rows: need(s.inference.inline_max_rows, "inference.inline_max_rows")?,
            device,
            dtype: need(s.inference.inference_dtype, "inference.inference_dtype")?,
            candle_threads: s.inference.threads,
        },
        train,
        run: RunConfig {
            local_actors,
            envs_per_actor,
            actor_bin: s.actors.actor_bin.clone(),
            max_seconds: s.run.max_seconds,
            max_env_steps: s.run.max_env_steps,
            progress_every: (progress_secs > 0.0).then(|| Duration::from_secs_f64(progress_secs)),
            summary_json: s.run.summary_json.clone(),
            tensorboard: match &s.run.tensorboard {
                Some(dir) if dir.as_os_str().is_empty() => None,
                Some(dir) => Some(dir.clone()),
                None => s
                    .checkpoints
                    .run_dir
                    .as_ref()
                    .or(s.checkpoints.resume.as_ref())
                    .map(|d| d.join(TENSORBOARD_IN_RUN_DIR)),
            },
            settings_toml: None,
            self_command: None,
            target_return: need(s.run.target_return, "run.target_return")?,
            stop_when_solved: need(s.run.stop_when_solved, "run.stop_when_solved")?,
            run_dir: s.checkpoints.run_dir.clone(),
            local_actor_flags: match need(s.run.log_format, "run.log_format")? {
                LogFormatName::Text => Vec::new(),
                LogFormatName::Json => vec!["--log-format".into(), "json".into()],
            },
        },
    })
}

/// The env `name` names, with the synthetic env's shape from `[actors]`
/// (its defaults are the env library's, [`SyntheticConfig::default`]).
fn env_config(name: EnvName, s: &Settings) -> Result<EnvConfig, LearnerError> {
    Ok(match name {
        EnvName::Cartpole => EnvConfig::CartPole,
        EnvName::CartpoleMasked => EnvConfig::CartPoleMasked,
        EnvName::Pendulum => EnvConfig::Pendulum,
        EnvName::Synthetic => {
            let d = SyntheticConfig::default();
            let a = &s.actors;
            EnvConfig::Synthetic(SyntheticConfig {
                obs_shape: a.obs_shape.clone().unwrap_or(d.obs_shape),
                obs_dtype: match &a.obs_dtype {
                    Some(t) => t.parse().map_err(|e: String| {
                        LearnerError::Config(format!("--obs-dtype `{t}`: {e}"))
                    })?,
                    None => d.obs_dtype,
                },
                num_actions: a.num_actions.unwrap_or(d.num_actions),
                step_cost_us: a.step_cost_us.unwrap_or(d.step_cost_us),
                episode_len: a.episode_len.unwrap_or(d.episode_len),
            })
        }
    })
}

/// `[remote_replay]`, checked; the TLS files read once.
fn remote_replay(s: &Settings) -> Result<Option<RemoteReplayConfig>, LearnerError> {
    let rr = &s.remote_replay;
    let Some(addr) = &rr.replay_addr else {
        for (key, given) in [
            ("--replay-token", rr.replay_token.is_some()),
            ("--replay-tls-ca", rr.replay_tls_ca.is_some()),
            ("--replay-tls-cert", rr.replay_tls_cert.is_some()),
        ] {
            if given {
                return Err(LearnerError::Config(format!("{key} needs --replay-addr")));
            }
        }
        return Ok(None);
    };
    let mut remote = RemoteReplayConfig::parse(addr, rr.replay_tls_ca.is_some())
        .map_err(LearnerError::Config)?;
    remote.token = Token::from_option(rr.replay_token.as_deref());
    remote.tls_ca = match &rr.replay_tls_ca {
        Some(p) => Some(read_certificates("--replay-tls-ca", p)?),
        None => None,
    };
    remote.tls_domain = rr.replay_tls_domain.clone();
    remote.tls_identity = match (&rr.replay_tls_cert, &rr.replay_tls_key) {
        (Some(c), Some(k)) => Some((
            read_certificates("--replay-tls-cert", c)?,
            read_private_key("--replay-tls-key", k)?,
        )),
        (None, None) => None,
        _ => {
            return Err(LearnerError::Config(
                "--replay-tls-cert and --replay-tls-key go together".into(),
            ))
        }
    };
    let queue = need(rr.replay_insert_queue, "remote_replay.replay_insert_queue")?;
    if queue == 0 {
        return Err(LearnerError::Config(
            "--replay-insert-queue must be at least 1".into(),
        ));
    }
    remote.insert_queue = queue;
    remote.max_message_bytes = need(s.serve.max_message_bytes, "serve.max_message_bytes")?;
    Ok(Some(remote))
}
