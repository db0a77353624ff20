//! [`Settings`]: what a config file, a preset or the flags may say, typed.
//!
//! One struct per section, one field per key; every key is the flag of the
//! same name (`train.batch_size` is `--batch-size`). Every field is an
//! `Option`: a layer names only what it sets, and a key left unset after
//! every layer and default is the "none" of an optional setting
//! (`run.max_seconds`: run until stopped). Unknown keys and wrong types are
//! refused by serde when a layer is read (`deny_unknown_fields`), naming the
//! key; ranges are checked once the run is resolved
//! ([`crate::app::LearnerConfig::validate`]). Cost: parsing a few hundred
//! bytes of TOML once at start-up.
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::learn::config::{ReplaySampler, ReplayWriter};
use crate::model::InferenceDType;

/// Every setting of a learner run, by section.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    /// What a preset says of itself; never part of the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub about: Option<About>,
    pub run: RunSection,
    pub serve: ServeSection,
    pub actors: ActorsSection,
    pub inference: InferenceSection,
    pub model: ModelSection,
    pub train: TrainSection,
    pub r2d2: R2d2Section,
    pub replay: ReplaySection,
    pub remote_replay: RemoteReplaySection,
    pub checkpoints: CheckpointsSection,
}

/// A preset's description, and what to start beside the learner when it
/// does not step its env itself.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct About {
    pub description: String,
    /// The actor command this preset expects (Gymnasium envs through the
    /// Python actor).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<String>,
    /// What to install first for that actor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install: Option<String>,
}

/// Serde attributes shared by every section: unknown keys refused, unset
/// keys left out when printed.
macro_rules! section {
    ($(#[$doc:meta])* $name:ident, $title:literal { $($(#[$fdoc:meta])* $field:ident : $ty:ty),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
        #[serde(deny_unknown_fields, default)]
        pub struct $name {
            $(
                $(#[$fdoc])*
                #[serde(skip_serializing_if = "Option::is_none")]
                pub $field: Option<$ty>,
            )*
        }

        impl $name {
            /// `over`'s values where it has them, else this section's.
            pub fn merge(self, over: Self) -> Self {
                Self { $($field: over.$field.or(self.$field)),* }
            }

            /// The section's help heading (the CLI groups its flags under it).
            pub const TITLE: &'static str = $title;
            /// The section's keys, in declaration order.
            pub const KEYS: &'static [&'static str] = &[$(stringify!($field)),*];
        }
    };
}

section!(
    /// `[run]`: seed, stop conditions, reports.
    RunSection, "Run: seed, stopping, reports and metrics" {
        seed: u64,
        log_format: LogFormatName,
        max_seconds: f64,
        max_env_steps: u64,
        progress_secs: f64,
        summary_json: PathBuf,
        /// `''` turns TensorBoard's event files off.
        tensorboard: PathBuf,
        metrics_addr: String,
        target_return: f64,
        stop_when_solved: bool,
    }
);

section!(
    /// `[serve]`: the gRPC server, liveness and TLS.
    ServeSection, "Serving, liveness and TLS" {
        listen: String,
        /// A secret: never printed.
        token: String,
        max_message_bytes: usize,
        max_env_slots: usize,
        io_threads: usize,
        keepalive_secs: u64,
        keepalive_timeout_secs: u64,
        tls_cert: PathBuf,
        tls_key: PathBuf,
        tls_client_ca: PathBuf,
    }
);

section!(
    /// `[actors]`: local actor processes and the env they run.
    ActorsSection, "Local actors and environment" {
        local_actors: usize,
        envs_per_actor: usize,
        actor_bin: PathBuf,
        env: EnvName,
        obs_shape: Vec<usize>,
        obs_dtype: String,
        num_actions: u32,
        step_cost_us: u64,
        episode_len: u32,
    }
);

section!(
    /// `[inference]`: batching and the device.
    InferenceSection, "Inference" {
        device: String,
        inference_dtype: InferenceDType,
        max_batch: usize,
        flush_us: u64,
        actor_idle_ms: u64,
        inference_threads: usize,
        inline_max_rows: usize,
        threads: usize,
    }
);

section!(
    /// `[model]`: the network beyond what the env spec fixes.
    ModelSection, "Model" {
        hidden_sizes: Vec<usize>,
        conv_features: usize,
        lstm: bool,
        lstm_size: usize,
    }
);

section!(
    /// `[train]`: algorithm, loss and optimizer.
    TrainSection, "Training" {
        no_train: bool,
        algo: AlgoName,
        unroll_length: usize,
        batch_size: usize,
        optimizer: OptimizerName,
        optimizer_epsilon: f64,
        learning_rate: f64,
        lr_decay_steps: u64,
        lr_final_fraction: f64,
        discount: f64,
        entropy_cost: f64,
        baseline_cost: f64,
        reward_scale: f64,
        max_grad_norm: f64,
        vtrace_clip: f64,
        vtrace_lambda: f64,
        ratio_clip: f64,
        normalize_advantages: bool,
        acting_average: f64,
    }
);

section!(
    /// `[r2d2]`: R2D2's own settings (read with `train.algo = "r2d2"`).
    R2d2Section, "R2D2" {
        burn_in: usize,
        n_step: usize,
        target_update_period: u64,
        priority_eta: f64,
        epsilon: f64,
        epsilon_alpha: f64,
    }
);

section!(
    /// `[replay]`: the in-process buffer and the prefetch stage.
    ReplaySection, "Replay and prefetch" {
        samples_per_insert: f64,
        replay_sampler: ReplaySampler,
        replay_writer: ReplayWriter,
        replay_capacity: usize,
        replay_min_size: usize,
        replay_window: usize,
        priority_exponent: f64,
        importance_exponent: f64,
        insert_timeout_ms: u64,
        max_policy_lag: u64,
        prefetch_threads: usize,
        prefetch_depth: usize,
    }
);

section!(
    /// `[remote_replay]`: a replay server's table instead of the buffer.
    RemoteReplaySection, "Remote replay table" {
        replay_addr: String,
        /// A secret: never printed.
        replay_token: String,
        replay_tls_ca: PathBuf,
        replay_tls_domain: String,
        replay_tls_cert: PathBuf,
        replay_tls_key: PathBuf,
        replay_insert_queue: usize,
    }
);

section!(
    /// `[checkpoints]`: the run directory and how often it is saved.
    CheckpointsSection, "Checkpoints" {
        run_dir: PathBuf,
        checkpoint_secs: f64,
        resume: PathBuf,
        eval_every: u64,
        eval_episodes: usize,
    }
);

impl Settings {
    /// `over`'s values where it has them, else these.
    pub fn merge(self, over: Settings) -> Settings {
        Settings {
            about: over.about.or(self.about),
            run: self.run.merge(over.run),
            serve: self.serve.merge(over.serve),
            actors: self.actors.merge(over.actors),
            inference: self.inference.merge(over.inference),
            model: self.model.merge(over.model),
            train: self.train.merge(over.train),
            r2d2: self.r2d2.merge(over.r2d2),
            replay: self.replay.merge(over.replay),
            remote_replay: self.remote_replay.merge(over.remote_replay),
            checkpoints: self.checkpoints.merge(over.checkpoints),
        }
    }

    /// The values as a TOML table, section by section (unset keys absent);
    /// an error for a value TOML cannot hold (an integer above 2^63 - 1).
    pub fn to_table(&self) -> Result<toml::Table, toml::ser::Error> {
        toml::Table::try_from(self)
    }

    /// Whether `key` (`section.name`) is set here.
    pub fn sets(&self, key: &str) -> bool {
        let Some((section, name)) = key.split_once('.') else {
            return false;
        };
        self.to_table()
            .ok()
            .as_ref()
            .and_then(|t| t.get(section))
            .and_then(|s| s.as_table())
            .is_some_and(|s| s.contains_key(name))
    }
}

/// Every section: its name in a file, its help heading, its keys.
pub const SECTIONS: &[(&str, &str, &[&str])] = &[
    ("run", RunSection::TITLE, RunSection::KEYS),
    ("serve", ServeSection::TITLE, ServeSection::KEYS),
    ("actors", ActorsSection::TITLE, ActorsSection::KEYS),
    ("inference", InferenceSection::TITLE, InferenceSection::KEYS),
    ("model", ModelSection::TITLE, ModelSection::KEYS),
    ("train", TrainSection::TITLE, TrainSection::KEYS),
    ("r2d2", R2d2Section::TITLE, R2d2Section::KEYS),
    ("replay", ReplaySection::TITLE, ReplaySection::KEYS),
    (
        "remote_replay",
        RemoteReplaySection::TITLE,
        RemoteReplaySection::KEYS,
    ),
    (
        "checkpoints",
        CheckpointsSection::TITLE,
        CheckpointsSection::KEYS,
    ),
];

/// The keys whose values are secrets: shown redacted, never written.
pub const SECRET_KEYS: &[&str] = &["serve.token", "remote_replay.replay_token"];

/// The section holding `key` (a flag's name with `_` for `-`).
pub fn section_of(key: &str) -> Option<&'static str> {
    SECTIONS
        .iter()
        .find(|(_, _, keys)| keys.contains(&key))
        .map(|(name, _, _)| *name)
}

/// `--algo`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AlgoName {
    Vtrace,
    R2d2,
}

impl AlgoName {
    /// The name used in files and as a case of a default.
    pub fn as_str(self) -> &'static str {
        match self {
            AlgoName::Vtrace => "vtrace",
            AlgoName::R2d2 => "r2d2",
        }
    }
}

/// `--optimizer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OptimizerName {
    Adam,
    Rmsprop,
}

/// `--log-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormatName {
    Text,
    Json,
}

/// `--env`: the envs the learner's local actors step themselves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EnvName {
    Cartpole,
    CartpoleMasked,
    Pendulum,
    Synthetic,
}
