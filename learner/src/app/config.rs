//! [`LearnerConfig`]: everything a learner run is, typed, with every check
//! in one place.
//!
//! One is built by resolving settings (`crate::app::settings`: the
//! library's defaults, a preset, a config file, the flags): the `learner`
//! binary does so at the edge (the library never sees clap types); tests
//! and embedders start from [`LearnerConfig::default`] (the defaults with
//! no layer) or `settings::resolve_toml`. [`LearnerConfig::validate`] is
//! the one place a configuration is refused; its messages name the flag
//! that sets the field, since that is what a user can change.
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use seed_env::EnvConfig;
use seed_shared::{Keepalive, DEFAULT_LEARNER_ADDR};

use crate::device::DeviceSpec;
use crate::error::LearnerError;
use crate::infer::batcher::BatcherConfig;
use crate::learn::config::TrainConfig;
use crate::model::{InferenceDType, ModelShape};
use crate::serve::tls::ServerTls;
use crate::serve::transport::ListenAddr;

/// A learner run: what to serve, how to infer, how (and whether) to train,
/// and when to stop.
#[derive(Debug, Clone, PartialEq)]
pub struct LearnerConfig {
    /// The environment actors must run (also what local actors run);
    /// `None` (`--local-actors 0` without `--env`): the first actor's hello
    /// fixes the env spec and the model is built from it.
    pub env: Option<EnvConfig>,
    /// Seed of the initial weights, action sampling, replay and local actors.
    pub seed: u64,
    /// The network's shape beyond what the env spec fixes.
    pub model: ModelShape,
    pub serve: ServeConfig,
    pub inference: InferenceConfig,
    /// `None`: serve and infer only (`--no-train`).
    pub train: Option<TrainConfig>,
    pub run: RunConfig,
}

/// The gRPC side.
#[derive(Debug, Clone, PartialEq)]
pub struct ServeConfig {
    /// `--listen`.
    pub listen: ListenAddr,
    /// With a busy TCP port, listen on an ephemeral one instead (true only
    /// when `--listen` was not given).
    pub fallback_to_ephemeral: bool,
    /// `--token`: the shared secret actors must send; `None`: no check.
    pub token: Option<seed_shared::Token>,
    /// `--max-message-bytes`.
    pub max_message_bytes: usize,
    /// `--max-env-slots`: env slots served at once over all actors.
    pub max_env_slots: usize,
    /// `--io-threads`: tokio workers; `None`: 1 per 4 cores, 1 to 4.
    pub io_threads: Option<usize>,
    /// `--metrics-addr`: serve Prometheus `GET /metrics` here.
    pub metrics_addr: Option<SocketAddr>,
    /// `--keepalive-secs`, `--keepalive-timeout-secs`: when a silent actor
    /// is pinged, and dropped if it does not answer.
    pub keepalive: Keepalive,
    /// `--tls-cert`, `--tls-key`, `--tls-client-ca`; `None`: plaintext.
    /// TCP `--listen` only.
    pub tls: Option<ServerTls>,
}

/// Batching and inference.
#[derive(Debug, Clone, PartialEq)]
pub struct InferenceConfig {
    /// `--max-batch` and `--flush-us`.
    pub batcher: BatcherConfig,
    /// `--inference-threads`.
    pub threads: usize,
    /// `--actor-idle-ms`: an actor with no step batch for this long is
    /// parked and batches stop waiting for its envs until its next step
    /// batch; `None` (`0`): never (see `crate::infer::state_table`).
    pub actor_idle: Option<Duration>,
    /// `--inline-max-rows`: a step batch of at most this many rows that
    /// holds every live env slot runs on its stream task; 0 turns this off,
    /// and so does training (see `crate::infer::inference::InlineInference`).
    pub inline_max_rows: usize,
    /// `--device`.
    pub device: DeviceSpec,
    /// `--inference-dtype`: the weights' dtype inference runs with
    /// (training stays `f32`).
    pub dtype: InferenceDType,
    /// `--threads`: candle's CPU pool; `None`: `$RAYON_NUM_THREADS` if set,
    /// else 1 per 4 cores, at most 8.
    pub candle_threads: Option<usize>,
}

/// The run loop: local actors, stop conditions, reports.
#[derive(Debug, Clone, PartialEq)]
pub struct RunConfig {
    /// `--local-actors`: actor processes to spawn; 0 serves remote actors only.
    pub local_actors: usize,
    /// `--envs-per-actor`.
    pub envs_per_actor: usize,
    /// `--actor-bin`: run local actors from this binary; `None`: this
    /// executable's `actor` subcommand.
    pub actor_bin: Option<PathBuf>,
    /// `--max-seconds`.
    pub max_seconds: Option<f64>,
    /// `--max-env-steps`.
    pub max_env_steps: Option<u64>,
    /// `--progress-secs`; `None`: no progress lines.
    pub progress_every: Option<Duration>,
    /// `--summary-json`.
    pub summary_json: Option<PathBuf>,
    /// `--tensorboard`: the directory of TensorBoard's event files
    /// (resolved: `RUN_DIR/tensorboard` by default); `None`: none written.
    pub tensorboard: Option<PathBuf>,
    /// The resolved settings as a config file (`--print-config`'s text),
    /// for the run's records (TensorBoard's `run/config`). Set by the
    /// command that resolved them, like `self_command`: a record of the
    /// run, not a setting (two configs that run the same compare equal).
    pub settings_toml: Option<String>,
    /// `--target-return`: the mean return (last 100 episodes) that counts as solved.
    pub target_return: f64,
    /// `--stop-when-solved`.
    pub stop_when_solved: bool,
    /// `--run-dir`: checkpoints, metrics.jsonl and learning_curve.png.
    pub run_dir: Option<PathBuf>,
    /// Extra flags for every local actor (the CLI passes `--log-format`).
    pub local_actor_flags: Vec<String>,
    /// How this program runs itself again, for local actors without
    /// `--actor-bin`; `None`: this executable. Set by embedders whose
    /// executable is not the learner (the Python package's `seed-rs
    /// learner`, where it is the Python interpreter).
    pub self_command: Option<SelfCommand>,
}

/// A program and the arguments that make it the `learner` command line
/// (the hidden `actor` subcommand and the actor's flags follow them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelfCommand {
    pub program: PathBuf,
    pub args: Vec<std::ffi::OsString>,
}

/// `127.0.0.1:50051`, the address actors try by default.
pub fn default_listen() -> ListenAddr {
    ListenAddr::Tcp(
        DEFAULT_LEARNER_ADDR
            .parse()
            .expect("DEFAULT_LEARNER_ADDR is a socket address literal"),
    )
}

impl LearnerConfig {
    /// Serving only, on `listen`, for `env`: no training and no local actors
    /// (what tests and embedders that bring their own actors start from).
    pub fn serving(listen: ListenAddr, env: EnvConfig) -> Self {
        let mut config = LearnerConfig {
            env: Some(env),
            train: None,
            ..LearnerConfig::default()
        };
        config.serve.listen = listen;
        config.serve.fallback_to_ephemeral = false;
        config.run.local_actors = 0;
        config
    }

    /// The run directory: `--run-dir`, else the `--resume` directory.
    pub fn run_dir(&self) -> Option<&PathBuf> {
        let resume = self
            .train
            .as_ref()
            .and_then(|t| t.checkpoints.resume.as_ref());
        self.run.run_dir.as_ref().or(resume)
    }

    /// Refuses configurations that cannot run, naming the flag.
    pub fn validate(&self) -> Result<(), LearnerError> {
        let bad = |m: &str| Err(LearnerError::Config(m.into()));
        if self.inference.batcher.max_rows == 0 {
            return bad("--max-batch must be at least 1");
        }
        if self.serve.max_env_slots == 0 {
            return bad("--max-env-slots must be at least 1");
        }
        if self.env.is_none() && self.run.local_actors > 0 {
            return bad(
                "local actors need an env (--env); only with --local-actors 0 can the first \
                 actor's hello fix it",
            );
        }
        if let Some(problem) = self.serve.keepalive.problem() {
            return bad(problem);
        }
        if let (Some(tls), ListenAddr::Unix(_)) = (&self.serve.tls, &self.serve.listen) {
            return bad(&format!(
                "--tls-cert {} needs a TCP --listen address; a unix socket ({}) is not served \
                 with TLS: it never leaves the host and its file permissions decide who connects",
                tls.cert.path.display(),
                self.serve.listen
            ));
        }
        if self.run.max_seconds.is_some_and(|s| !s.is_finite()) {
            return bad("--max-seconds must be a finite number");
        }
        if self.model.hidden_sizes.is_empty() || self.model.hidden_sizes.contains(&0) {
            return bad("--hidden-sizes needs at least one positive width");
        }
        if self.model.lstm_size == Some(0) {
            return bad("--lstm-size must be at least 1");
        }
        if let Some(t) = &self.train {
            t.validate()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::learn::optimizer::LrSchedule;

    #[test]
    fn cuda_defaults_batch_more_and_cpu_keeps_the_defaults() {
        assert_eq!(
            LearnerConfig::for_device(DeviceSpec::Cpu),
            LearnerConfig::default()
        );
        let cuda = LearnerConfig::for_device(DeviceSpec::Cuda(1));
        cuda.validate().unwrap();
        assert_eq!(cuda.inference.device, DeviceSpec::Cuda(1));
        assert_eq!(cuda.inference.batcher.max_rows, 1024);
        assert_eq!(cuda.train.as_ref().unwrap().batch_size, 64);
        let mut back = cuda.clone();
        back.inference = LearnerConfig::default().inference;
        back.train = LearnerConfig::default().train;
        assert_eq!(back, LearnerConfig::default(), "nothing else changes");
    }

    #[test]
    fn defaults_validate() {
        LearnerConfig::default().validate().unwrap();
        let serving = LearnerConfig::serving(default_listen(), EnvConfig::CartPole);
        serving.validate().unwrap();
        assert!(serving.train.is_none() && serving.run.local_actors == 0);
    }

    #[test]
    fn each_check_names_its_flag() {
        let with = |f: &dyn Fn(&mut LearnerConfig)| {
            let mut c = LearnerConfig::default();
            f(&mut c);
            c.validate().unwrap_err().to_string()
        };
        fn train(c: &mut LearnerConfig) -> &mut TrainConfig {
            c.train.as_mut().expect("training by default")
        }
        assert!(with(&|c| c.inference.batcher.max_rows = 0).contains("--max-batch"));
        assert!(with(&|c| train(c).unroll_length = 0).contains("--unroll-length"));
        assert!(with(&|c| train(c).batch_size = 0).contains("--batch-size"));
        assert!(
            with(&|c| train(c).replay.samples_per_insert = 0.0).contains("--samples-per-insert")
        );
        assert!(
            with(&|c| train(c).trainer.optimizer.schedule = LrSchedule::Constant { lr: -1.0 })
                .contains("--learning-rate")
        );
        assert!(with(&|c| train(c).trainer.max_grad_norm = f32::NAN).contains("--max-grad-norm"));
        assert!(with(&|c| train(c).trainer.acting_average = 1.0).contains("--acting-average"));
        assert!(with(&|c| train(c).trainer.acting_average = -0.1).contains("--acting-average"));
        assert!(with(&|c| train(c).trainer.loss.discount = 1.5).contains("--discount"));
        assert!(with(&|c| train(c).trainer.loss.clip.lambda = -0.1).contains("--vtrace-lambda"));
        assert!(with(&|c| train(c).trainer.loss.ratio_clip = 1.0).contains("--ratio-clip"));
        assert!(with(&|c| train(c).trainer.loss.ratio_clip = f32::NAN).contains("--ratio-clip"));
        assert!(with(&|c| c.model.hidden_sizes = vec![]).contains("--hidden-sizes"));
        assert!(with(&|c| c.model.lstm_size = Some(0)).contains("--lstm-size"));
        assert!(with(&|c| c.serve.keepalive = Keepalive::from_secs(5, 0))
            .contains("--keepalive-timeout-secs"));
    }
}
