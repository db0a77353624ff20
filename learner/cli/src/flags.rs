//! The `learner` command line, and its one translation into settings
//! ([`TrainArgs::layers`]) that the library resolves into a
//! [`LearnerConfig`] ([`TrainArgs::resolve`]).
//!
//! `learner [FLAGS]` (no subcommand) serves actors and runs the embedded
//! default: local actor processes on CartPole over loopback. Subcommands:
//! `learner actor ...` (hidden) runs one actor, so the embedded default needs
//! no second binary; `learner eval ...` runs greedy episodes of a checkpoint.
//!
//! No flag declares a default: every flag is an `Option`, and what is not
//! given comes from the library (`seed_learner::app::settings`: its
//! `defaults.toml`, a `--preset`, a `--config` file). Help text reads the
//! defaults from there too ([`Cli::command_with_defaults`]), so `--help`,
//! `docs/cli.md` and the run always agree. A flag's name is its key in a
//! config file, in the section of its help heading.
use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser, Subcommand};
use seed_actor::cli::ActorArgs;
use seed_env::EnvArgs;
use seed_learner::app::eval::{EvalConfig, EvalPolicy};
use seed_learner::app::settings::schema::{
    section_of, AlgoName, LogFormatName, OptimizerName, SECTIONS,
};
use seed_learner::app::settings::{self, Layer, Origin, Resolved, Settings};
use seed_learner::app::LearnerConfig;
use seed_learner::error::LearnerError;
use seed_learner::learn::config::{ReplaySampler, ReplayWriter};
use seed_learner::model::InferenceDType;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// Central-inference learner: serves actors, batches inference, reports metrics.
#[derive(Parser, Debug)]
#[command(name = "learner", version, args_conflicts_with_subcommands = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub train: TrainArgs,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Runs one actor process (what `--local-actors` spawns).
    #[command(hide = true)]
    Actor(Box<ActorArgs>),
    /// Runs episodes of a checkpointed policy (greedy or sampled) on local
    /// envs and prints mean/min/max return.
    Eval(EvalArgs),
}

impl Cli {
    /// The `learner` command with each flag's default in its help, read
    /// from the library.
    pub fn command_with_defaults() -> clap::Command {
        let mut cmd = Cli::command();
        let ids: Vec<String> = cmd
            .get_arguments()
            .map(|a| a.get_id().to_string())
            .collect();
        for id in ids {
            // The env crate's flags document their own defaults.
            if ENV_KEYS.contains(&id.as_str()) {
                continue;
            }
            let key = section_of(&id).map(|section| format!("{section}.{id}"));
            if let Some(text) = key.as_deref().and_then(settings::describe) {
                cmd = cmd.mut_arg(id, |arg| with_default(arg, &text));
            }
        }
        cmd.mut_subcommand("eval", |eval| {
            let d = EvalConfig::default();
            let policy = match d.policy {
                EvalPolicy::Greedy => "greedy",
                EvalPolicy::Sample => "sample",
            };
            eval.mut_arg("episodes", |a| with_default(a, &d.episodes.to_string()))
                .mut_arg("seed", |a| with_default(a, &d.seed.to_string()))
                .mut_arg("max_steps", |a| with_default(a, &d.max_steps.to_string()))
                .mut_arg("policy", |a| with_default(a, policy))
        })
    }

    /// Parses `args` (the first is the program name) as `learner` does.
    pub fn try_parse_from<I, T>(args: I) -> Result<Cli, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let matches = Cli::command_with_defaults().try_get_matches_from(args)?;
        Cli::from_matches(&matches)
    }

    /// Parses the process's arguments; exits with clap's message on a
    /// usage error (and for `--help`, `--version`).
    pub fn parse_args() -> Cli {
        let matches = Cli::command_with_defaults().get_matches();
        Cli::from_matches(&matches).unwrap_or_else(|e| e.exit())
    }

    fn from_matches(matches: &ArgMatches) -> Result<Cli, clap::Error> {
        let mut cli = <Cli as FromArgMatches>::from_arg_matches(matches)?;
        // The env flags are the env crate's (shared with `actor`, with its
        // own defaults): only those typed count as a layer's values.
        cli.train.env_given = ENV_KEYS
            .iter()
            .filter(|id| matches.value_source(id) == Some(clap::parser::ValueSource::CommandLine))
            .map(|id| (*id).to_owned())
            .collect();
        Ok(cli)
    }
}

/// `arg` with ` [default: TEXT]` after its help.
fn with_default(arg: clap::Arg, text: &str) -> clap::Arg {
    let add = |help: Option<&clap::builder::StyledStr>| {
        let help = help.map(|h| h.to_string()).unwrap_or_default();
        format!("{} [default: {text}]", help.trim_end())
    };
    let long = arg.get_long_help().map(|_| add(arg.get_long_help()));
    let short = add(arg.get_help());
    let arg = arg.help(short);
    match long {
        Some(l) => arg.long_help(l),
        None => arg,
    }
}

/// Flags of `learner eval` (defaults: `EvalConfig::default`).
#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct EvalArgs {
    /// Run directory holding the checkpoint (what `--run-dir` wrote) [default: none, required].
    #[arg(long)]
    pub checkpoint: PathBuf,
    /// Episodes to run.
    #[arg(long)]
    pub episodes: Option<usize>,
    /// Seed of the envs' initial states.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Stop an episode after this many steps (envs without a time limit).
    #[arg(long)]
    pub max_steps: Option<u64>,
    /// Actions: `greedy` (argmax of the logits; a Gaussian policy's mean,
    /// clipped to the bounds) or `sample` (drawn from the policy as actors
    /// do in training; a stochastic policy's argmax can score far below its
    /// samples).
    #[arg(long, value_enum)]
    pub policy: Option<EvalPolicyArg>,
}

/// `learner eval --policy`.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum EvalPolicyArg {
    Greedy,
    Sample,
}

impl EvalArgs {
    /// The typed eval config these flags describe.
    pub fn to_config(&self) -> EvalConfig {
        let d = EvalConfig::default();
        EvalConfig {
            episodes: self.episodes.unwrap_or(d.episodes),
            seed: self.seed.unwrap_or(d.seed),
            max_steps: self.max_steps.unwrap_or(d.max_steps),
            policy: match self.policy {
                Some(EvalPolicyArg::Greedy) => EvalPolicy::Greedy,
                Some(EvalPolicyArg::Sample) => EvalPolicy::Sample,
                None => d.policy,
            },
        }
    }
}

/// A flag's value read as the same value in a config file would be (so
/// `--algo` and `algo = ...` accept exactly the same words).
fn setting<T: DeserializeOwned>(text: &str) -> Result<T, String> {
    toml::Value::String(text.to_owned())
        .try_into()
        .map_err(|e: toml::de::Error| e.message().to_owned())
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// The env crate's flags, by id (their section is `actors`).
const ENV_KEYS: &[&str] = &[
    "env",
    "obs_shape",
    "obs_dtype",
    "num_actions",
    "step_cost_us",
    "episode_len",
];

const RUN: &str = seed_learner::app::settings::schema::RunSection::TITLE;
const SERVE: &str = seed_learner::app::settings::schema::ServeSection::TITLE;
const ACTORS: &str = seed_learner::app::settings::schema::ActorsSection::TITLE;
const INFERENCE: &str = seed_learner::app::settings::schema::InferenceSection::TITLE;
const MODEL: &str = seed_learner::app::settings::schema::ModelSection::TITLE;
const TRAIN: &str = seed_learner::app::settings::schema::TrainSection::TITLE;
const R2D2: &str = seed_learner::app::settings::schema::R2d2Section::TITLE;
const REPLAY: &str = seed_learner::app::settings::schema::ReplaySection::TITLE;
const REMOTE: &str = seed_learner::app::settings::schema::RemoteReplaySection::TITLE;
const CHECKPOINTS: &str = seed_learner::app::settings::schema::CheckpointsSection::TITLE;
const SETTINGS: &str = "Settings files";

/// Flags of `learner` (serve + local actors). Each is `None` unless typed;
/// serialized, the given ones are the flags' settings layer.
#[derive(clap::Args, Debug, Clone, PartialEq, Serialize)]
pub struct TrainArgs {
    // ---- Settings files --------------------------------------------------
    /// Start from this preset, a recipe compiled into the binary
    /// (docs/presets.md): `cartpole`, `cartpole-masked-r2d2`,
    /// `cartpole-masked-lstm`, `pendulum`, `minatar`, `atari`,
    /// `lunarlander`. A config
    /// file and flags override it [default: none, the library's defaults].
    #[arg(help_heading = SETTINGS, long, value_name = "NAME")]
    #[serde(skip)]
    pub preset: Option<String>,
    /// Read settings from this TOML file (sections as in --print-config's
    /// output; a run directory's `config.toml` reproduces that run). It
    /// overrides --preset; flags override it [default: none].
    #[arg(help_heading = SETTINGS, long, value_name = "FILE")]
    #[serde(skip)]
    pub config: Option<PathBuf>,
    /// Print the fully resolved settings (defaults, preset, file and flags)
    /// as TOML and exit; secrets are shown redacted [default: off].
    #[arg(help_heading = SETTINGS, long)]
    #[serde(skip)]
    pub print_config: bool,

    // ---- [run] ------------------------------------------------------------
    /// Seed of the network's initial weights, action sampling, replay and local actors.
    #[arg(help_heading = RUN, long)]
    pub seed: Option<u64>,
    /// Log lines as `text` (colour only on a terminal without NO_COLOR) or
    /// `json` (one object per line, for log shippers); local actors log the
    /// same way.
    #[arg(help_heading = RUN, long, value_parser = setting::<LogFormatName>)]
    pub log_format: Option<LogFormatName>,
    /// Stop after this many seconds [default: run until Ctrl-C/SIGTERM].
    #[arg(help_heading = RUN, long)]
    pub max_seconds: Option<f64>,
    /// Stop after this many env steps [default: unlimited].
    #[arg(help_heading = RUN, long)]
    pub max_env_steps: Option<u64>,
    /// Seconds between progress lines; 0 disables them.
    #[arg(help_heading = RUN, long)]
    pub progress_secs: Option<f64>,
    /// Write a JSON summary of the run here at exit [default: none].
    #[arg(help_heading = RUN, long)]
    pub summary_json: Option<PathBuf>,
    /// Write TensorBoard event files (scalars, histograms of returns and
    /// policy lag, the config) into DIR while training; `''` turns them off.
    #[arg(help_heading = RUN, long, value_name = "DIR", value_parser = path_or_empty)]
    pub tensorboard: Option<PathBuf>,
    /// Serve live Prometheus metrics at `GET http://ADDR/metrics` (OpenMetrics
    /// text); ADDR is `IP:PORT`, e.g. `127.0.0.1:9100` (`0.0.0.0:9100` for a
    /// remote Prometheus); port 0 picks a free port, logged at start [default: off].
    #[arg(help_heading = RUN, long, value_name = "ADDR")]
    pub metrics_addr: Option<SocketAddr>,
    /// Mean return over the last 100 episodes that counts as solved; may be
    /// negative (`--target-return -250` for Pendulum).
    #[arg(help_heading = RUN, long, allow_negative_numbers = true)]
    pub target_return: Option<f64>,
    /// Stop as soon as the target return is reached.
    #[arg(help_heading = RUN, long)]
    #[serde(skip_serializing_if = "is_false")]
    pub stop_when_solved: bool,

    // ---- [serve] ----------------------------------------------------------
    /// Listen address: `IP:PORT` (`0.0.0.0:PORT` for clusters), `HOST:PORT`
    /// (resolved once; the first IPv4 address is bound) or `unix:/path`
    /// [default: 127.0.0.1:50051, or an ephemeral port if that one is busy].
    #[arg(help_heading = SERVE, long)]
    pub listen: Option<String>,
    /// Shared secret actors must send in their hello; never written by
    /// --print-config or into a run directory [default: none].
    #[arg(help_heading = SERVE, long, env = "SEED_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Largest gRPC message accepted or sent, in bytes (the actor's default too).
    #[arg(help_heading = SERVE, long)]
    pub max_message_bytes: Option<usize>,
    /// Env slots the learner can serve at once, over all actors.
    #[arg(help_heading = SERVE, long)]
    pub max_env_slots: Option<usize>,
    /// Tokio worker threads for the gRPC server [default: 1 per 4 cores, 1 to 4].
    #[arg(help_heading = SERVE, long)]
    pub io_threads: Option<usize>,
    /// Seconds without traffic on an actor's connection before the learner
    /// pings it (HTTP/2 keepalive; also the TCP keepalive idle time); 0
    /// disables both. An actor that does not answer within
    /// --keepalive-timeout-secs (frozen, or its host gone without closing
    /// the connection) is dropped and its env slots freed: with the
    /// defaults within about 20 s. An idle actor that answers pings keeps
    /// its stream.
    #[arg(help_heading = SERVE, long)]
    pub keepalive_secs: Option<u64>,
    /// Seconds a keepalive ping may stay unanswered before the connection
    /// is dropped; at least 1 while --keepalive-secs is on.
    #[arg(help_heading = SERVE, long)]
    pub keepalive_timeout_secs: Option<u64>,
    /// Serve TLS with this certificate chain (PEM, leaf first); needs
    /// --tls-key and a TCP --listen. Actors connect with `--tls-ca`; local
    /// actors connect over a plaintext unix socket in a private directory
    /// instead [default: none, plaintext].
    #[arg(help_heading = SERVE, long, value_name = "PATH")]
    pub tls_cert: Option<PathBuf>,
    /// Private key (PEM: PKCS#8, PKCS#1 or SEC1) of --tls-cert; a config
    /// file holds its path, never its contents [default: none].
    #[arg(help_heading = SERVE, long, value_name = "PATH")]
    pub tls_key: Option<PathBuf>,
    /// Mutual TLS: refuse actors that do not present a client certificate
    /// signed by one of the CA certificates in this PEM file (actors pass
    /// `--tls-cert`/`--tls-key`); needs --tls-cert. The token is checked
    /// as well [default: none, any TLS client].
    #[arg(help_heading = SERVE, long, value_name = "PATH")]
    pub tls_client_ca: Option<PathBuf>,

    // ---- [actors] ---------------------------------------------------------
    /// Actor processes to spawn on this host; 0 serves remote actors only.
    #[arg(help_heading = ACTORS, long)]
    pub local_actors: Option<usize>,
    /// Environments per local actor. V-trace's policy lag grows with the
    /// env slots (CartPole solves in fewer env steps with 16 slots than
    /// with 32).
    #[arg(help_heading = ACTORS, long)]
    pub envs_per_actor: Option<usize>,
    /// Run local actors from this `actor` binary instead of `learner actor` [default: this executable].
    #[arg(help_heading = ACTORS, long)]
    pub actor_bin: Option<PathBuf>,
    /// The environment actors must run (also passed to local actors).
    #[command(flatten, next_help_heading = ACTORS)]
    #[serde(skip)]
    pub environment: EnvArgs,
    /// The env flags typed on the command line (the others are the env
    /// crate's defaults, which a preset or file may override).
    #[arg(skip)]
    #[serde(skip)]
    pub env_given: Vec<String>,

    // ---- [inference] ------------------------------------------------------
    /// Inference device: `cpu`, or `cuda:N` when built with `--features cuda`;
    /// changes the defaults of --max-batch and --batch-size.
    #[arg(help_heading = INFERENCE, long)]
    pub device: Option<String>,
    /// Weights' precision for inference: `f32`, or `bf16` (a bfloat16 copy
    /// of each published snapshot; training stays f32). For GPUs: on a CPU
    /// bf16 is slower than f32.
    #[arg(help_heading = INFERENCE, long, value_parser = setting::<InferenceDType>)]
    pub inference_dtype: Option<InferenceDType>,
    /// Flush an inference batch at this many env rows.
    #[arg(help_heading = INFERENCE, long)]
    pub max_batch: Option<usize>,
    /// Flush an inference batch this many microseconds after its first
    /// request, even if not full. A batch also flushes as soon as every
    /// active env is in it (see --actor-idle-ms), so this only bounds the
    /// wait for slow actors; 500 us is a few loopback round trips.
    #[arg(help_heading = INFERENCE, long)]
    pub flush_us: Option<u64>,
    /// Park an actor that has sent no step batch for this many
    /// milliseconds: batches stop waiting for its envs (a frozen or stalled
    /// actor would otherwise hold every batch to --flush-us) until its next
    /// step batch rejoins it. Its stream and slots stay; keepalive decides
    /// when a silent peer is gone. 0 never parks.
    #[arg(help_heading = INFERENCE, long)]
    pub actor_idle_ms: Option<u64>,
    /// Inference threads taking batches.
    #[arg(help_heading = INFERENCE, long)]
    pub inference_threads: Option<usize>,
    /// A step batch with at most this many envs that holds every connected
    /// env (one actor) is inferred on its stream's I/O thread instead of
    /// being handed to an inference thread: saves two thread wake-ups per
    /// step; 0 turns this off. Serving only: with training on, the unroll
    /// builder may wait on a full replay buffer, which must not hold an I/O
    /// thread, so this applies with `--no-train`.
    #[arg(help_heading = INFERENCE, long)]
    pub inline_max_rows: Option<usize>,
    /// Size of candle's CPU thread pool, over which the CPU math (matrix
    /// products, conv layers, large inference batches) spreads (sets
    /// RAYON_NUM_THREADS; candle's elementwise pool stays at
    /// CANDLE_NUM_THREADS, 1 unless set) [default: $RAYON_NUM_THREADS if
    /// set, else 1 per 4 cores, at most 8].
    #[arg(help_heading = INFERENCE, long)]
    pub threads: Option<usize>,

    // ---- [model] ----------------------------------------------------------
    /// MLP torso hidden widths, comma-separated.
    #[arg(help_heading = MODEL, long, value_delimiter = ',')]
    pub hidden_sizes: Option<Vec<usize>>,
    /// Conv torso output width (image observations).
    #[arg(help_heading = MODEL, long)]
    pub conv_features: Option<usize>,
    /// Add an LSTM core (state kept per env slot at inference); with Adam
    /// its ε defaults to 1e-8. The `cartpole-masked-lstm` preset gives the
    /// longer unrolls and slower decay the memory task needs.
    #[arg(help_heading = MODEL, long)]
    #[serde(skip_serializing_if = "is_false")]
    pub lstm: bool,
    /// LSTM hidden size with --lstm (and with --algo r2d2).
    #[arg(help_heading = MODEL, long)]
    pub lstm_size: Option<usize>,

    // ---- [train] ----------------------------------------------------------
    /// Serve and infer only; no unrolls, replay or training.
    #[arg(help_heading = TRAIN, long)]
    #[serde(skip_serializing_if = "is_false")]
    pub no_train: bool,
    /// Algorithm: `vtrace` (IMPALA actor-critic) or `r2d2` (recurrent dueling Q-network with
    /// an LSTM core, ε-greedy per env slot, prioritized half-overlapping sequences, burn-in,
    /// n-step double Q with value rescaling, target network). Defaults that differ per
    /// algorithm follow it, from whichever layer it comes.
    #[arg(help_heading = TRAIN, long, value_parser = setting::<AlgoName>)]
    pub algo: Option<AlgoName>,
    /// T: transitions per unroll; unrolls hold T+1 steps and overlap by one (R2D2: sequences
    /// start every T/2 steps and overlap by half).
    #[arg(help_heading = TRAIN, long)]
    pub unroll_length: Option<usize>,
    /// B: unrolls per training batch.
    #[arg(help_heading = TRAIN, long)]
    pub batch_size: Option<usize>,
    /// Optimizer: `adam` or `rmsprop`.
    #[arg(help_heading = TRAIN, long, value_parser = setting::<OptimizerName>)]
    pub optimizer: Option<OptimizerName>,
    /// ε of the optimizer: Adam adds it to √v̂, RMSProp to the mean square.
    /// Adam's step is about the learning rate for any gradient well above ε,
    /// so at 1e-8 the small gradients of a solved task still move the weights
    /// at full speed; V-trace's 1e-3 moves them in proportion, which keeps a
    /// solved CartPole solved. Tasks with small gradients learn slower with
    /// it (the Pendulum, MinAtar and Atari presets give 1e-8), and an LSTM
    /// core far slower.
    #[arg(help_heading = TRAIN, long)]
    pub optimizer_epsilon: Option<f64>,
    /// Learning rate (initial one with --lr-decay-steps).
    #[arg(help_heading = TRAIN, long)]
    pub learning_rate: Option<f64>,
    /// Decay the learning rate linearly over this many learner steps, to
    /// --lr-final-fraction of it, and keep it there; 0 keeps it constant.
    /// V-trace's default lets CartPole solve at a high rate and then stops
    /// the late updates that knocked a solved policy back down; give 0 for
    /// runs tuned with a constant rate.
    #[arg(help_heading = TRAIN, long)]
    pub lr_decay_steps: Option<u64>,
    /// With --lr-decay-steps: the learning rate it decays to, as a fraction of
    /// --learning-rate (V-trace's default stops training there: CartPole is
    /// solved by then, and any rate left on let a solved policy drift and
    /// fall).
    #[arg(help_heading = TRAIN, long)]
    pub lr_final_fraction: Option<f64>,
    /// Discount γ per step. V-trace's 0.98 is tuned on CartPole; tasks with
    /// longer horizons (MinAtar, Atari) want 0.99.
    #[arg(help_heading = TRAIN, long)]
    pub discount: Option<f64>,
    /// Weight of the entropy bonus (V-trace).
    #[arg(help_heading = TRAIN, long)]
    pub entropy_cost: Option<f64>,
    /// Weight of the value loss.
    #[arg(help_heading = TRAIN, long)]
    pub baseline_cost: Option<f64>,
    /// Multiply every reward by this in the loss (values and advantages
    /// are then in scaled units; reported returns are not). Large rewards
    /// make large value errors that swamp the policy gradient in the
    /// shared torso: Pendulum's reach −16 per step.
    #[arg(help_heading = TRAIN, long)]
    pub reward_scale: Option<f64>,
    /// Global gradient-norm clip.
    #[arg(help_heading = TRAIN, long)]
    pub max_grad_norm: Option<f64>,
    /// V-trace clip thresholds ρ̄ and c̄.
    #[arg(help_heading = TRAIN, long)]
    pub vtrace_clip: Option<f64>,
    /// V-trace's λ: each trace weight is λ min(c̄, π/μ). Below 1 the value
    /// targets and advantages lean on the value function sooner (less
    /// variance, more bias, as GAE's λ); 1 is IMPALA's V-trace.
    #[arg(help_heading = TRAIN, long)]
    pub vtrace_lambda: Option<f64>,
    /// ε of PPO's clipped surrogate, used in place of IMPALA's policy term:
    /// the term stops pushing an action once π/μ has moved ε past 1 in its
    /// advantage's direction, so an unroll sampled several times cannot
    /// push one action ever further. 0 is IMPALA's term; PPO uses 0.1-0.3.
    #[arg(help_heading = TRAIN, long)]
    pub ratio_clip: Option<f64>,
    /// Standardise the policy term's advantages over each batch's valid
    /// transitions, (Â − mean) / (std + 1e-8), as PPO implementations do:
    /// the policy gradient then has the same scale on every game whatever
    /// its rewards, so one --entropy-cost weighs the same across a suite.
    /// The value targets keep their units. `true` or `false`.
    #[arg(help_heading = TRAIN, long, value_name = "BOOL")]
    pub normalize_advantages: Option<bool>,
    /// Inference acts with a moving average of the trained weights (Polyak
    /// averaging), w̄ ← τ w̄ + (1 − τ) w after every update, instead of the
    /// latest weights: the policy then moves with what it learns rather
    /// than with each batch's gradient noise, about 1 / (1 − τ) updates
    /// behind (V-trace and the clipped surrogate correct for the lag, as
    /// for any behaviour policy). Checkpoints and --eval-every hold and play
    /// the trained weights. 0 is off.
    #[arg(help_heading = TRAIN, long, value_name = "TAU")]
    pub acting_average: Option<f64>,

    // ---- [r2d2] -----------------------------------------------------------
    /// R2D2: leading steps of each sequence that only refresh the stored recurrent state (no
    /// loss, no gradient); below --unroll-length - 1.
    #[arg(help_heading = R2D2, long)]
    pub burn_in: Option<usize>,
    /// R2D2: steps of reward before the double-Q bootstrap.
    #[arg(help_heading = R2D2, long)]
    pub n_step: Option<usize>,
    /// R2D2: learner steps between copies of the online network into the target network.
    #[arg(help_heading = R2D2, long)]
    pub target_update_period: Option<u64>,
    /// R2D2: η of the sequence priority η·max|δ| + (1−η)·mean|δ|.
    #[arg(help_heading = R2D2, long)]
    pub priority_eta: Option<f64>,
    /// R2D2: ε of the Ape-X schedule; env slot i of N explores with probability
    /// ε^(1 + α·i/(N−1)), N being --local-actors x --envs-per-actor (or --max-env-slots
    /// without local actors). The reported mean return counts every slot's
    /// episodes, the most exploring ones too: LunarLander-v3 and
    /// `cartpole-masked` reach their targets with 0.1, not with Ape-X's 0.4.
    #[arg(help_heading = R2D2, long)]
    pub epsilon: Option<f64>,
    /// R2D2: α of the Ape-X ε schedule.
    #[arg(help_heading = R2D2, long)]
    pub epsilon_alpha: Option<f64>,

    // ---- [replay] ---------------------------------------------------------
    /// Times each unroll is trained on, on average (alias --replay-ratio; R2D2's sequences
    /// overlap by half, so each step is trained on about twice as often):
    /// a rate limiter (Reverb's samples-per-insert) holds inference back when
    /// the actors run more than one batch ahead of this ratio and the trainer
    /// when it runs ahead of it. 1 with the default sampler is consume-once
    /// FIFO; above 1 the default sampler reuses unrolls. Reuse buys sample
    /// efficiency for a little policy lag (CartPole: 4 halves the env steps
    /// to solve versus 1, and 6 with γ 0.98 takes a tenth fewer than 4).
    #[arg(help_heading = REPLAY, long, visible_alias = "replay-ratio")]
    pub samples_per_insert: Option<f64>,
    /// Which unrolls a batch is sampled from: `fifo` (each once, oldest first;
    /// needs --samples-per-insert 1), `uniform` (uniform with replacement over
    /// the buffer), `recent` (uniform over the --replay-window newest) or
    /// `prioritized` (r2d2 only: proportional to priority^--priority-exponent).
    #[arg(help_heading = REPLAY, long, value_parser = setting::<ReplaySampler>)]
    pub replay_sampler: Option<ReplaySampler>,
    /// What an insert into a full buffer does: `block` (inference waits
    /// until the oldest unroll was consumed; fifo only) or `overwrite` (the
    /// oldest unroll is replaced; the rate limiter is the backpressure).
    #[arg(help_heading = REPLAY, long, value_parser = setting::<ReplayWriter>)]
    pub replay_writer: Option<ReplayWriter>,
    /// Replay capacity in unrolls, at least one batch. Small keeps the
    /// policy lag low.
    #[arg(help_heading = REPLAY, long)]
    pub replay_capacity: Option<usize>,
    /// Sampling starts once the buffer holds this many unrolls.
    #[arg(help_heading = REPLAY, long)]
    pub replay_min_size: Option<usize>,
    /// The `recent` sampler's window, in unrolls.
    #[arg(help_heading = REPLAY, long)]
    pub replay_window: Option<usize>,
    /// Prioritized sampler: priority exponent α.
    #[arg(help_heading = REPLAY, long)]
    pub priority_exponent: Option<f64>,
    /// Prioritized sampler: importance-weight exponent β.
    #[arg(help_heading = REPLAY, long)]
    pub importance_exponent: Option<f64>,
    /// How long inference waits on a full replay buffer (or on the rate
    /// limiter) before dropping the unroll, in milliseconds.
    #[arg(help_heading = REPLAY, long)]
    pub insert_timeout_ms: Option<u64>,
    /// Drop sampled unrolls whose oldest step is more than this many policy
    /// versions behind the trainer [default: no cap].
    #[arg(help_heading = REPLAY, long)]
    pub max_policy_lag: Option<u64>,
    /// Prefetch threads collating batches for the trainer.
    #[arg(help_heading = REPLAY, long)]
    pub prefetch_threads: Option<usize>,
    /// Collated batches kept ready ahead of the trainer.
    #[arg(help_heading = REPLAY, long)]
    pub prefetch_depth: Option<usize>,

    // ---- [remote_replay] --------------------------------------------------
    /// Store unrolls in a table of a replay server (`replay-server`) instead
    /// of the in-process buffer: `HOST:PORT/TABLE` (`http://` or `https://`
    /// may lead; with --replay-tls-ca a bare address means TLS). The table
    /// must hold exactly this learner's unrolls (checked at start-up; write
    /// it as --print-replay-table-config prints it); its sampler, capacity,
    /// rate limiter and lag cap are the server's, so the other --replay-*
    /// flags, --samples-per-insert and --max-policy-lag are refused with it.
    /// Inference never waits for the network: unrolls go through a queue of
    /// --replay-insert-queue, and are dropped (counted) when it is full. A
    /// learner checkpoint does not hold the table; the server has its own
    /// (`Checkpoint`) [default: none, the in-process buffer].
    #[arg(help_heading = REMOTE, long, value_name = "HOST:PORT/TABLE")]
    pub replay_addr: Option<String>,
    /// The replay server's token (its `--token`); never written by
    /// --print-config [default: none].
    #[arg(help_heading = REMOTE, long, env = "SEED_REPLAY_TOKEN", hide_env_values = true)]
    pub replay_token: Option<String>,
    /// Reach the replay server over TLS, trusting only the CA certificates
    /// in this PEM file [default: none, plaintext].
    #[arg(help_heading = REMOTE, long, value_name = "PATH")]
    pub replay_tls_ca: Option<PathBuf>,
    /// The name the replay server's certificate must carry; needs
    /// --replay-tls-ca [default: the host of --replay-addr].
    #[arg(help_heading = REMOTE, long, value_name = "NAME")]
    pub replay_tls_domain: Option<String>,
    /// Client certificate chain (PEM) for a replay server that requires one
    /// (its `--tls-client-ca`); needs --replay-tls-key and --replay-tls-ca
    /// [default: none].
    #[arg(help_heading = REMOTE, long, value_name = "PATH")]
    pub replay_tls_cert: Option<PathBuf>,
    /// Private key (PEM) of --replay-tls-cert [default: none].
    #[arg(help_heading = REMOTE, long, value_name = "PATH")]
    pub replay_tls_key: Option<PathBuf>,
    /// Unrolls queued for the replay server before new ones are dropped
    /// (counted in `unroll/dropped_full`); each queued unroll adds policy lag
    /// when the server holds inserts back.
    #[arg(help_heading = REMOTE, long)]
    pub replay_insert_queue: Option<usize>,
    /// Print the replay server's config file (JSON) for a table holding
    /// this learner's unrolls (from --env, the model flags and
    /// --unroll-length), with the sampler, capacity and rate limiter the
    /// --replay-* flags give the in-process buffer, named as in
    /// --replay-addr (else `unrolls`), and exit [default: off].
    #[arg(help_heading = REMOTE, long)]
    #[serde(skip)]
    pub print_replay_table_config: bool,

    // ---- [checkpoints] ----------------------------------------------------
    /// Keep checkpoints, metrics.jsonl, learning_curve.png and the run's
    /// resolved settings (config.toml) here [default: none].
    #[arg(help_heading = CHECKPOINTS, long)]
    pub run_dir: Option<PathBuf>,
    /// Seconds between checkpoints with --run-dir (one is also written at exit).
    #[arg(help_heading = CHECKPOINTS, long)]
    pub checkpoint_secs: Option<f64>,
    /// Continue from the newest checkpoint in this run directory (weights,
    /// optimizer, counters, policy version, replay buffer; the replay flags must be the
    /// checkpointed run's); implies --run-dir DIR unless given [default: none].
    #[arg(help_heading = CHECKPOINTS, long)]
    pub resume: Option<PathBuf>,
    /// Every N learner steps, play --eval-episodes greedy episodes of the
    /// current policy on the learner's own env (not trained on) and keep
    /// the best policy so far in RUN_DIR/best/ (TensorBoard: eval/return);
    /// needs --run-dir and a built-in env; 0 turns it off.
    #[arg(help_heading = CHECKPOINTS, long, value_name = "N")]
    pub eval_every: Option<u64>,
    /// Episodes per evaluation with --eval-every.
    #[arg(help_heading = CHECKPOINTS, long, value_name = "N")]
    pub eval_episodes: Option<usize>,
}

impl TrainArgs {
    /// The settings these flags give, as the last layer: only what was
    /// typed (or set through `SEED_TOKEN`/`SEED_REPLAY_TOKEN`).
    pub fn flags_layer(&self) -> Result<Layer, LearnerError> {
        let bad = |e: toml::ser::Error| LearnerError::Config(format!("flags: {e}"));
        let flat = toml::Table::try_from(self).map_err(bad)?;
        let mut sections = toml::Table::new();
        for (key, value) in flat {
            let section = section_of(&key)
                .ok_or_else(|| LearnerError::Config(format!("--{key} has no settings section")))?;
            sections
                .entry(section)
                .or_insert_with(|| toml::Value::Table(toml::Table::new()))
                .as_table_mut()
                .map(|t| t.insert(key, value));
        }
        let env = &self.environment;
        let actors = sections
            .entry("actors")
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        if let Some(actors) = actors.as_table_mut() {
            for id in &self.env_given {
                let value = match id.as_str() {
                    "env" => env
                        .env
                        .and_then(|k| clap::ValueEnum::to_possible_value(&k))
                        .map(|v| toml::Value::String(v.get_name().to_owned())),
                    "obs_shape" => Some(toml::Value::Array(
                        env.obs_shape
                            .iter()
                            .map(|d| toml::Value::Integer(*d as i64))
                            .collect(),
                    )),
                    "obs_dtype" => Some(toml::Value::String(env.obs_dtype.to_string())),
                    "num_actions" => Some(toml::Value::Integer(env.num_actions.into())),
                    "step_cost_us" => Some(toml::Value::Integer(env.step_cost_us as i64)),
                    "episode_len" => Some(toml::Value::Integer(env.episode_len.into())),
                    _ => None,
                };
                if let Some(v) = value {
                    actors.insert(id.clone(), v);
                }
            }
        }
        let settings: Settings = toml::Value::Table(sections)
            .try_into()
            .map_err(|e: toml::de::Error| LearnerError::Config(format!("flags: {e}")))?;
        Ok(Layer::new(Origin::Flags, settings))
    }

    /// Every layer, lowest first: `--preset`, `--config`, the flags.
    pub fn layers(&self) -> Result<Vec<Layer>, LearnerError> {
        let mut layers = Vec::with_capacity(3);
        if let Some(name) = &self.preset {
            layers.push(settings::presets::preset(name)?);
        }
        if let Some(path) = &self.config {
            layers.push(Layer::read(path)?);
        }
        layers.push(self.flags_layer()?);
        Ok(layers)
    }

    /// The run these flags describe, resolved and validated: the one place
    /// flags become a [`LearnerConfig`]. Reads the TLS files once.
    pub fn resolve(&self) -> Result<Resolved, LearnerError> {
        settings::resolve_with(
            &self.layers()?,
            settings::ResolveOptions {
                describe_remote_table: self.print_replay_table_config,
            },
        )
    }

    /// [`TrainArgs::resolve`]'s config alone.
    pub fn to_config(&self) -> Result<LearnerConfig, LearnerError> {
        Ok(self.resolve()?.config)
    }
}

/// A path where `''` is a value of its own ("off"), which clap's path
/// parser refuses.
fn path_or_empty(text: &str) -> Result<PathBuf, std::convert::Infallible> {
    Ok(PathBuf::from(text))
}

/// Every section's keys, for tests and docs: (section, key).
pub fn setting_keys() -> impl Iterator<Item = (&'static str, &'static str)> {
    SECTIONS
        .iter()
        .flat_map(|(section, _, keys)| keys.iter().map(move |k| (*section, *k)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use seed_learner::device::DeviceSpec;
    use seed_learner::learn::agent::Agent;
    use seed_learner::learn::optimizer::{Algorithm, LrSchedule, OptimizerConfig};
    use seed_shared::Keepalive;
    use std::time::Duration;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("learner").chain(args.iter().copied()))
    }

    /// The optimizer settings a training run with `args` gets.
    fn optimizer(args: &[&str]) -> OptimizerConfig {
        let train = parse(args).unwrap().train.to_config().unwrap().train;
        train.expect("a training run").trainer.optimizer
    }

    /// Why the run `args` describe is refused.
    fn refusal(args: &[&str]) -> String {
        parse(args)
            .unwrap()
            .train
            .to_config()
            .and_then(|c| c.validate())
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn replay_addr_reaches_the_config_and_refuses_the_local_buffer_flags() {
        let config = |args: &[&str]| parse(args).unwrap().train.to_config();
        let c = config(&[
            "--replay-addr",
            "10.0.0.5:50061/unrolls",
            "--replay-token",
            "s",
        ])
        .unwrap();
        let remote = c.train.unwrap().replay.remote.expect("remote table");
        assert_eq!(remote.endpoint, "http://10.0.0.5:50061");
        assert_eq!(remote.table, "unrolls");
        assert_eq!(remote.token, seed_shared::Token::new("s"));
        assert_eq!(remote.insert_queue, 8);
        let e = config(&["--replay-addr", "h:1/t", "--replay-capacity", "64"])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--replay-capacity") && e.contains("--replay-addr"),
            "{e}"
        );
        // Printing the table config applies them instead.
        assert!(config(&[
            "--replay-addr",
            "h:1/t",
            "--replay-capacity",
            "64",
            "--print-replay-table-config"
        ])
        .is_ok());
        let e = config(&["--replay-addr", "h:1/t", "--no-train"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("--no-train"), "{e}");
        let e = config(&["--replay-addr", "h:1"]).unwrap_err().to_string();
        assert!(e.contains("HOST:PORT/TABLE"), "{e}");
        let e = config(&["--replay-token", "s"]).unwrap_err().to_string();
        assert!(e.contains("needs --replay-addr"), "{e}");
    }

    #[test]
    fn no_flags_is_the_embedded_default() {
        let cli = parse(&[]).unwrap();
        assert!(cli.command.is_none());
        let t = cli.train;
        assert_eq!(
            t.flags_layer().unwrap().settings,
            Settings::default(),
            "no flag holds a value of its own"
        );
        let c = t.to_config().unwrap();
        assert!(c.serve.fallback_to_ephemeral);
        assert_eq!(c.run.local_actors, 2);
        assert_eq!(c.run.envs_per_actor, 8);
        assert_eq!(c.env, Some(seed_env::EnvConfig::CartPole));
        assert_eq!(c.inference.batcher.max_rows, 256);
        assert_eq!(c.train.as_ref().unwrap().batch_size, 16);
        assert_eq!(c.inference.dtype, InferenceDType::F32);
        assert_eq!(c.inference.batcher.flush_after, Duration::from_micros(500));
        assert_eq!(c.inference.actor_idle, Some(Duration::from_millis(100)));
        assert_eq!(c.run.progress_every, Some(Duration::from_secs(5)));
        assert_eq!(c.inference.device, DeviceSpec::Cpu);
        assert!(c.train.is_some() && c.model.lstm_size.is_none() && !c.run.stop_when_solved);
        let train = c.train.as_ref().unwrap();
        assert_eq!(train.replay.samples_per_insert, 6.0);
        assert_eq!(train.trainer.agent, Agent::VTrace);
        assert_eq!(c.run.target_return, 475.0);
        assert_eq!(c.model.hidden_sizes, vec![64, 64]);
        assert_eq!(c.serve.metrics_addr, None);
    }

    #[test]
    fn no_flags_give_the_library_defaults() {
        let config = parse(&[]).unwrap().train.to_config().unwrap();
        assert_eq!(config, LearnerConfig::default());
        let serving = parse(&[
            "--no-train",
            "--local-actors",
            "0",
            "--listen",
            "127.0.0.1:50051",
            "--env",
            "cartpole",
        ])
        .unwrap()
        .train
        .to_config()
        .unwrap();
        assert_eq!(
            serving,
            LearnerConfig::serving(
                "127.0.0.1:50051".parse().unwrap(),
                seed_env::EnvConfig::CartPole
            )
        );
        // Without --env, remote actors fix the spec.
        let remote = parse(&["--local-actors", "0"]).unwrap().train;
        assert_eq!(remote.to_config().unwrap().env, None);
        let pendulum = parse(&["--local-actors", "0", "--env", "pendulum"])
            .unwrap()
            .train;
        assert_eq!(
            pendulum.to_config().unwrap().env,
            Some(seed_env::EnvConfig::Pendulum)
        );
    }

    #[test]
    fn cuda_changes_the_batch_defaults_and_flags_still_win() {
        let cuda = parse(&["--device", "cuda"])
            .unwrap()
            .train
            .to_config()
            .unwrap();
        let want = LearnerConfig::for_device(DeviceSpec::Cuda(0));
        assert_eq!(cuda.inference.batcher.max_rows, 1024);
        assert_eq!(cuda.train.as_ref().unwrap().batch_size, 64);
        assert_eq!(cuda.inference, want.inference);
        assert_eq!(cuda.train, want.train);
        let given = parse(&[
            "--device",
            "cuda:0",
            "--batch-size",
            "8",
            "--max-batch",
            "32",
        ])
        .unwrap()
        .train
        .to_config()
        .unwrap();
        assert_eq!(given.train.as_ref().unwrap().batch_size, 8);
        assert_eq!(given.inference.batcher.max_rows, 32);
        let cpu = parse(&["--device", "cpu"])
            .unwrap()
            .train
            .to_config()
            .unwrap();
        assert_eq!(cpu, LearnerConfig::default());
    }

    #[test]
    fn inference_dtype_is_checked_by_the_parser() {
        let bf16 = parse(&["--inference-dtype", "bf16"])
            .unwrap()
            .train
            .to_config()
            .unwrap();
        assert_eq!(bf16.inference.dtype, InferenceDType::Bf16);
        for bad in ["fp16", "BF16", "f16", ""] {
            let e = parse(&["--inference-dtype", bad]).unwrap_err().to_string();
            assert!(
                e.contains("--inference-dtype") && e.contains("bf16"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn r2d2_flags_reach_the_config() {
        let c = parse(&[
            "--algo",
            "r2d2",
            "--burn-in",
            "2",
            "--n-step",
            "5",
            "--target-update-period",
            "7",
            "--epsilon",
            "0.3",
            "--envs-per-actor",
            "8",
            "--replay-sampler",
            "uniform",
        ])
        .unwrap()
        .train
        .to_config()
        .unwrap();
        assert_eq!(c.model.lstm_size, Some(64), "r2d2 turns the LSTM core on");
        let t = c.train.as_ref().unwrap();
        let Agent::R2d2(r) = t.trainer.agent else {
            panic!("not r2d2: {:?}", t.trainer.agent)
        };
        assert_eq!((r.burn_in, r.n_step, r.target_update_period), (2, 5, 7));
        assert_eq!(r.exploration.epsilon, 0.3);
        assert_eq!(r.exploration.slots, 16, "2 local actors x 8 envs");
        assert_eq!(t.replay.sampler, ReplaySampler::Uniform);
        let err = refusal(&["--replay-sampler", "prioritized"]);
        assert!(err.contains("--algo r2d2"), "{err}");
    }

    /// V-trace's CartPole-tuned discount and env slots are its defaults
    /// alone: R2D2 keeps 0.99 and 2 x 32 slots, and flags still win.
    #[test]
    fn discount_and_envs_per_actor_default_per_algorithm() {
        let config = |args: &[&str]| parse(args).unwrap().train.to_config().unwrap();
        let discount = |args: &[&str]| config(args).train.unwrap().trainer.discount();
        let envs = |args: &[&str]| config(args).run.envs_per_actor;
        assert_eq!(discount(&[]), 0.98);
        assert_eq!(discount(&["--algo", "r2d2"]), 0.99);
        assert_eq!(discount(&["--algo", "r2d2", "--discount", "0.9"]), 0.9);
        assert_eq!(discount(&["--discount", "0.995"]), 0.995);
        assert_eq!(envs(&[]), 8);
        assert_eq!(envs(&["--algo", "r2d2"]), 32);
        assert_eq!(envs(&["--algo", "r2d2", "--envs-per-actor", "8"]), 8);
        assert_eq!(envs(&["--envs-per-actor", "64"]), 64);
        // R2D2's ε schedule spreads over the slots the run really has.
        let slots = |args: &[&str]| match config(args).train.unwrap().trainer.agent {
            Agent::R2d2(r) => r.exploration.slots,
            Agent::VTrace => unreachable!("r2d2 was asked for"),
        };
        assert_eq!(slots(&["--algo", "r2d2"]), 2 * 32);
        assert_eq!(slots(&["--algo", "r2d2", "--envs-per-actor", "4"]), 8);
    }

    #[test]
    fn the_learning_rate_schedule_defaults_per_algorithm() {
        let schedule = |flags: &[&str]| optimizer(flags).schedule;
        assert_eq!(
            schedule(&[]),
            LrSchedule::LinearDecay {
                initial: 2e-3,
                decay_steps: 5000,
                last: 0.0,
            }
        );
        assert_eq!(
            schedule(&["--lstm"]),
            LrSchedule::LinearDecay {
                initial: 2e-3,
                decay_steps: 7000,
                last: 2e-3 * 0.03,
            }
        );
        assert_eq!(
            schedule(&["--algo", "r2d2"]),
            LrSchedule::Constant { lr: 2e-3 }
        );
        assert_eq!(
            schedule(&["--lr-decay-steps", "0", "--learning-rate", "1e-3"]),
            LrSchedule::Constant { lr: 1e-3 }
        );
        assert_eq!(
            schedule(&[
                "--algo",
                "r2d2",
                "--lr-decay-steps",
                "50",
                "--lr-final-fraction",
                "0.5"
            ]),
            LrSchedule::LinearDecay {
                initial: 2e-3,
                decay_steps: 50,
                last: 1e-3,
            }
        );
        let err = refusal(&["--lr-final-fraction", "1.5"]);
        assert!(err.contains("--lr-final-fraction"), "{err}");
    }

    #[test]
    fn the_optimizer_epsilon_defaults_per_algorithm_and_optimizer() {
        let eps = |flags: &[&str]| match optimizer(flags).algorithm {
            Algorithm::Adam(a) => ("adam", a.eps),
            Algorithm::RmsProp(r) => ("rmsprop", r.eps),
        };
        assert_eq!(eps(&[]), ("adam", 1e-3));
        assert_eq!(eps(&["--lstm"]), ("adam", 1e-8));
        assert_eq!(eps(&["--algo", "r2d2"]), ("adam", 1e-8));
        assert_eq!(eps(&["--optimizer", "rmsprop"]), ("rmsprop", 0.01));
        assert_eq!(eps(&["--optimizer-epsilon", "1e-5"]), ("adam", 1e-5));
        assert_eq!(
            eps(&["--optimizer", "rmsprop", "--optimizer-epsilon", "0.1"]),
            ("rmsprop", 0.1)
        );
        for bad in ["0", "-1", "inf"] {
            let err = refusal(&[&format!("--optimizer-epsilon={bad}")]);
            assert!(err.contains("--optimizer-epsilon"), "{bad}: {err}");
        }
    }

    #[test]
    fn flags_reach_the_config_and_bad_ones_are_refused() {
        let c = parse(&[
            "--lstm",
            "--lstm-size",
            "32",
            "--lr-decay-steps",
            "100",
            "--optimizer",
            "rmsprop",
            "--device",
            "cuda:1",
            "--run-dir",
            "/tmp/r",
            "--flush-us",
            "7",
            "--reward-scale",
            "0.1",
            "--target-return",
            "-250",
        ])
        .unwrap()
        .train
        .to_config()
        .unwrap();
        let t = c.train.as_ref().unwrap();
        assert_eq!(c.model.lstm_size, Some(32));
        assert!(matches!(
            t.trainer.optimizer.schedule,
            LrSchedule::LinearDecay {
                decay_steps: 100,
                ..
            }
        ));
        assert!(matches!(
            t.trainer.optimizer.algorithm,
            Algorithm::RmsProp(_)
        ));
        assert_eq!(
            c.inference.device,
            seed_learner::device::DeviceSpec::Cuda(1)
        );
        assert_eq!(c.run_dir(), Some(&PathBuf::from("/tmp/r")));
        assert_eq!(c.inference.batcher.flush_after, Duration::from_micros(7));
        assert_eq!(t.trainer.loss.reward_scale, 0.1);
        assert_eq!(c.run.target_return, -250.0);
        for (flags, named) in [
            (&["--max-batch", "0"][..], "--max-batch"),
            (&["--unroll-length", "0"][..], "--unroll-length"),
            (&["--reward-scale", "0"][..], "--reward-scale"),
            (&["--device", "tpu"][..], "--device"),
            (&["--listen", "nowhere"][..], "--listen"),
        ] {
            let e = parse(flags)
                .unwrap()
                .train
                .to_config()
                .unwrap_err()
                .to_string();
            assert!(e.contains(named), "{flags:?}: {e}");
        }
    }

    #[test]
    fn keepalive_and_tls_flags_reach_the_config() {
        let files = seed_test_pki::SelfSignedFiles::generate();
        let (cert, key) = (files.cert.to_str().unwrap(), files.key.to_str().unwrap());
        let c = parse(&[
            "--keepalive-secs",
            "3",
            "--keepalive-timeout-secs",
            "4",
            "--tls-cert",
            cert,
            "--tls-key",
            key,
            "--tls-client-ca",
            cert,
        ])
        .unwrap()
        .train
        .to_config()
        .unwrap();
        assert_eq!(c.serve.keepalive, Keepalive::from_secs(3, 4));
        let tls = c.serve.tls.expect("tls on");
        assert_eq!(tls.cert.path, PathBuf::from(cert));
        assert_eq!(tls.key.path, PathBuf::from(key));
        assert!(tls.client_ca.is_some());
        let off = parse(&["--keepalive-secs", "0"]).unwrap().train.to_config();
        assert_eq!(off.unwrap().serve.keepalive.interval, None);
    }

    #[test]
    fn bad_tls_and_keepalive_flags_are_refused_naming_flag_and_path() {
        let files = seed_test_pki::SelfSignedFiles::generate();
        let (cert, key, other_key) = (
            files.cert.clone(),
            files.key.clone(),
            files.other_key.clone(),
        );
        let missing = files.dir().join("missing.pem");
        let s = |p: &PathBuf| p.to_str().unwrap().to_owned();
        let err = |flags: &[&str]| {
            parse(flags)
                .unwrap()
                .train
                .to_config()
                .unwrap_err()
                .to_string()
        };
        // Half a pair is refused, naming the pair.
        for half in [
            ["--tls-cert", &s(&cert)],
            ["--tls-key", &s(&key)],
            ["--tls-client-ca", &s(&cert)],
        ] {
            let e = err(&half);
            assert!(e.contains("--tls-cert and --tls-key"), "{half:?}: {e}");
        }

        let e = err(&["--tls-cert", &s(&missing), "--tls-key", &s(&key)]);
        assert!(e.contains("--tls-cert") && e.contains("missing.pem"), "{e}");
        let e = err(&["--tls-cert", &s(&key), "--tls-key", &s(&key)]);
        assert!(e.contains("--tls-cert") && e.contains("CERTIFICATE"), "{e}");
        let e = err(&["--tls-cert", &s(&cert), "--tls-key", &s(&cert)]);
        assert!(e.contains("--tls-key") && e.contains("private key"), "{e}");
        let e = err(&["--tls-cert", &s(&cert), "--tls-key", &s(&other_key)]);
        assert!(
            e.contains("--tls-key") && e.contains("other-key.pem"),
            "{e}"
        );
        let e = err(&[
            "--tls-cert",
            &s(&cert),
            "--tls-key",
            &s(&key),
            "--tls-client-ca",
            &s(&missing),
        ]);
        assert!(e.contains("--tls-client-ca"), "{e}");
        let e = err(&[
            "--tls-cert",
            &s(&cert),
            "--tls-key",
            &s(&key),
            "--listen",
            "unix:/tmp/seed-tls.sock",
        ]);
        assert!(e.contains("--tls-cert") && e.contains("unix:"), "{e}");
        let e = err(&["--keepalive-timeout-secs", "0"]);
        assert!(e.contains("--keepalive-timeout-secs"), "{e}");
    }

    #[test]
    fn metrics_addr_takes_a_socket_address() {
        let t = parse(&["--metrics-addr", "127.0.0.1:0"]).unwrap().train;
        assert_eq!(t.metrics_addr, Some("127.0.0.1:0".parse().unwrap()));
        assert_eq!(
            t.to_config().unwrap().serve.metrics_addr,
            Some("127.0.0.1:0".parse().unwrap())
        );
        assert!(parse(&["--metrics-addr", "localhost"]).is_err());
    }

    #[test]
    fn eval_subcommand_parses() {
        let cli = parse(&["eval", "--checkpoint", "/tmp/run", "--episodes", "3"]).unwrap();
        match cli.command {
            Some(Command::Eval(e)) => {
                assert_eq!(e.checkpoint, PathBuf::from("/tmp/run"));
                assert_eq!(e.to_config().episodes, 3);
                assert_eq!(e.to_config().max_steps, EvalConfig::default().max_steps);
                assert_eq!(
                    e.to_config().policy,
                    seed_learner::app::eval::EvalPolicy::Greedy
                );
            }
            other => panic!("{other:?}"),
        }
        let cli = parse(&["eval", "--checkpoint", "/tmp/run", "--policy", "sample"]).unwrap();
        match cli.command {
            Some(Command::Eval(e)) => assert_eq!(
                e.to_config().policy,
                seed_learner::app::eval::EvalPolicy::Sample
            ),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn actor_subcommand_takes_actor_flags() {
        let cli = parse(&["actor", "--learner", "unix:/tmp/l.sock", "--envs", "4"]).unwrap();
        match cli.command {
            Some(Command::Actor(a)) => {
                assert_eq!(a.learner, "unix:/tmp/l.sock");
                assert_eq!(a.envs, 4);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn every_flag_sits_under_a_topic_heading() {
        let mut headings = Vec::new();
        for arg in Cli::command().get_arguments() {
            if arg.get_id() == "help" || arg.get_id() == "version" {
                continue;
            }
            let heading = arg.get_help_heading();
            assert!(heading.is_some(), "--{} has no help heading", arg.get_id());
            headings.extend(heading.map(str::to_owned));
        }
        headings.dedup();
        assert!(headings.len() >= 6, "topics: {headings:?}");
    }

    #[test]
    fn every_flag_documents_its_default() {
        let cmd = Cli::command_with_defaults();
        for arg in cmd.get_arguments() {
            if arg.get_id() == "help" || arg.get_id() == "version" {
                continue;
            }
            let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
            assert!(
                help.contains("[default:"),
                "--{} lacks a default in its doc",
                arg.get_id()
            );
        }
    }

    /// A config file in a fresh temporary directory.
    fn config_file(text: &str) -> (tempfile::TempDir, String) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.toml");
        std::fs::write(&path, text).unwrap();
        let path = path.to_str().unwrap().to_owned();
        (dir, path)
    }

    fn resolved(args: &[&str]) -> Resolved {
        parse(args).unwrap().train.resolve().unwrap()
    }

    #[test]
    fn precedence_is_defaults_then_preset_then_file_then_flags() {
        let loss = |args: &[&str]| resolved(args).config.train.unwrap().trainer.loss;
        assert_eq!(loss(&[]).discount, 0.98, "the default");
        assert_eq!(loss(&["--preset", "pendulum"]).discount, 0.9, "the preset");
        let (_dir, file) = config_file("[train]\ndiscount = 0.95\n");
        let both = loss(&["--preset", "pendulum", "--config", &file]);
        assert_eq!(both.discount, 0.95, "the file over the preset");
        assert_eq!(
            both.reward_scale, 0.1,
            "what the file leaves keeps the preset's"
        );
        let all = loss(&[
            "--preset",
            "pendulum",
            "--config",
            &file,
            "--discount",
            "0.97",
        ]);
        assert_eq!(all.discount, 0.97, "flags over the file");
        assert_eq!(
            loss(&["--config", &file]).reward_scale,
            1.0,
            "the default again"
        );
    }

    /// A switch that takes a value: a preset's `true` can be turned off
    /// from the command line, which a bare `--flag` could not do.
    #[test]
    fn normalize_advantages_takes_true_or_false_over_a_preset() {
        let normalize = |args: &[&str]| {
            resolved(args)
                .config
                .train
                .unwrap()
                .trainer
                .loss
                .normalize_advantages
        };
        assert!(!normalize(&[]), "the default");
        assert!(normalize(&["--preset", "minatar"]), "the preset");
        assert!(!normalize(&[
            "--preset",
            "minatar",
            "--normalize-advantages",
            "false"
        ]));
        assert!(normalize(&["--normalize-advantages", "true"]));
        let e = parse(&["--normalize-advantages", "yes"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("--normalize-advantages"), "{e}");
    }

    /// Defaults that depend on the algorithm (or device) follow the final
    /// value, whichever layer set it.
    #[test]
    fn algorithm_defaults_follow_the_final_algorithm() {
        let (_dir, r2d2) = config_file("[train]\nalgo = \"r2d2\"\n");
        let file = resolved(&["--config", &r2d2]).config;
        let t = file.train.as_ref().unwrap();
        assert!(matches!(t.trainer.agent, Agent::R2d2(_)));
        assert_eq!(t.trainer.discount(), 0.99);
        assert_eq!(file.run.envs_per_actor, 32);
        assert_eq!(t.replay.sampler, ReplaySampler::Prioritized);

        let flag = resolved(&["--config", &r2d2, "--algo", "vtrace"]).config;
        assert_eq!(flag, LearnerConfig::default(), "every value V-trace's own");

        let masked = resolved(&["--preset", "cartpole-masked-r2d2", "--algo", "vtrace"]);
        let t = masked.config.train.as_ref().unwrap();
        assert_eq!(t.trainer.agent, Agent::VTrace);
        assert_eq!(t.trainer.discount(), 0.98);
        assert_eq!(masked.config.env, Some(seed_env::EnvConfig::CartPoleMasked));

        let (_dir, cuda) = config_file("[inference]\ndevice = \"cuda:0\"\n");
        let c = resolved(&["--config", &cuda, "--batch-size", "8"]).config;
        assert_eq!(c.inference.batcher.max_rows, 1024, "the device's default");
        assert_eq!(c.train.unwrap().batch_size, 8, "the flag");
    }

    /// `--print-config`'s output, read back with `--config`, is the same run.
    fn assert_round_trip(args: &[&str]) {
        let first = resolved(args);
        let text = settings::print::to_toml(&first.settings);
        let (_dir, file) = config_file(&text);
        let again = resolved(&["--config", &file]);
        let mut want = first.config.clone();
        // Secrets are never printed, so they come back unset.
        want.serve.token = None;
        if let Some(r) = want.train.as_mut().and_then(|t| t.replay.remote.as_mut()) {
            r.token = None;
        }
        assert_eq!(again.config, want, "{args:?}:\n{text}");
        let unredacted = |t: &str| {
            t.lines()
                .filter(|l| !l.contains("<redacted>"))
                .collect::<Vec<_>>()
                .join("\n")
        };
        assert_eq!(
            settings::print::to_toml(&again.settings),
            unredacted(&text) + "\n",
            "{args:?}: printing is stable"
        );
    }

    #[test]
    fn print_config_reads_back_into_the_same_run_for_every_preset() {
        assert_round_trip(&[]);
        for (name, _) in settings::presets::PRESETS {
            assert_round_trip(&["--preset", name]);
            assert_round_trip(&["--preset", name, "--device", "cuda:0"]);
        }
    }

    /// Random combinations of flags (a fixed seed, so a failure repeats):
    /// each one that resolves prints and reads back into the same run.
    #[test]
    fn print_config_reads_back_into_the_same_run_for_random_flags() {
        let choices: &[&[&str]] = &[
            &["--algo", "r2d2"],
            &["--algo", "vtrace"],
            &["--lstm"],
            &["--lstm-size", "32"],
            &["--optimizer", "rmsprop"],
            &["--optimizer-epsilon", "1e-5"],
            &["--device", "cuda:1"],
            &["--replay-ratio", "1"],
            &["--replay-ratio", "3.5"],
            &["--replay-sampler", "recent"],
            &["--replay-capacity", "100"],
            &["--batch-size", "8"],
            &["--unroll-length", "24"],
            &["--no-train"],
            &["--local-actors", "0"],
            &["--local-actors", "3"],
            &["--envs-per-actor", "5"],
            &["--env", "pendulum"],
            &[
                "--env",
                "synthetic",
                "--obs-shape",
                "3,5",
                "--num-actions",
                "3",
            ],
            &["--listen", "127.0.0.1:7000"],
            &["--max-seconds", "12.5"],
            &["--max-env-steps", "1000"],
            &["--target-return", "-250"],
            &["--stop-when-solved"],
            &["--learning-rate", "3e-4"],
            &["--lr-decay-steps", "0"],
            &["--discount", "0.995"],
            &["--entropy-cost", "0.01"],
            &["--hidden-sizes", "32,16,8"],
            &["--epsilon", "0.1"],
            &["--max-policy-lag", "4"],
            &["--log-format", "json"],
            &["--inference-dtype", "bf16"],
            &["--metrics-addr", "127.0.0.1:0"],
            &["--run-dir", "/tmp/seed-run"],
            &["--token", "s3cret-token"],
            &["--replay-addr", "127.0.0.1:9/t"],
            &["--threads", "2"],
            &["--actor-idle-ms", "0"],
        ];
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move || {
            // xorshift64*: deterministic, no dependency.
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            state.wrapping_mul(0x2545_f491_4f6c_dd1d)
        };
        let mut resolved_runs = 0;
        for _ in 0..300 {
            let mut args: Vec<&str> = Vec::new();
            for _ in 0..(1 + next() % 6) {
                args.extend(choices[(next() % choices.len() as u64) as usize]);
            }
            let Ok(cli) = parse(&args) else { continue };
            if cli.train.resolve().is_err() {
                continue;
            }
            assert_round_trip(&args);
            resolved_runs += 1;
        }
        assert!(
            resolved_runs > 100,
            "only {resolved_runs} combinations resolved"
        );
    }

    #[test]
    fn secrets_are_never_printed() {
        let r = resolved(&[
            "--token",
            "s3cret-token",
            "--replay-addr",
            "127.0.0.1:9/t",
            "--replay-token",
            "r3play-token",
        ]);
        assert_eq!(
            r.config.serve.token,
            seed_shared::Token::new("s3cret-token")
        );
        let text = settings::print::to_toml(&r.settings);
        assert!(
            !text.contains("s3cret") && !text.contains("r3play"),
            "{text}"
        );
        assert!(text.contains("# token = \"<redacted>\""), "{text}");
        assert!(text.contains("# replay_token = \"<redacted>\""), "{text}");
    }

    #[test]
    fn a_bad_value_in_a_file_names_the_file_the_key_and_the_range() {
        let (_dir, file) = config_file("[train]\nbatch_size = 0\n");
        let e = parse(&["--config", &file])
            .unwrap()
            .train
            .to_config()
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("r.toml") && e.contains("train.batch_size") && e.contains("at least 1"),
            "{e}"
        );
        let (_dir, file) = config_file("[replay]\nreplay_sampler = \"prioritized\"\n");
        let e = parse(&["--config", &file])
            .unwrap()
            .train
            .to_config()
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("replay.replay_sampler") && e.contains("r2d2"),
            "{e}"
        );
        let e = parse(&["--config", "/nonexistent/r.toml"])
            .unwrap()
            .train
            .to_config()
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--config") && e.contains("/nonexistent/r.toml"),
            "{e}"
        );
        let e = parse(&["--preset", "nope"])
            .unwrap()
            .train
            .to_config()
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("nope") && e.contains("cartpole-masked-lstm"),
            "{e}"
        );
    }

    #[test]
    fn a_run_dir_keeps_a_config_that_reproduces_the_run() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        let run_s = run.to_str().unwrap();
        let first = resolved(&["--preset", "minatar", "--run-dir", run_s, "--seed", "7"]);
        settings::print::write_run_config(&run, &first.settings).unwrap();
        let kept = run.join(settings::print::RUN_CONFIG_FILE);
        let again = resolved(&["--config", kept.to_str().unwrap()]);
        assert_eq!(again.config, first.config);
    }

    /// Every flag of a setting is that setting's key, under the heading of
    /// its section; the other flags only choose files or print.
    #[test]
    fn every_flag_is_a_key_of_the_settings_under_its_section_heading() {
        let actions = [
            "preset",
            "config",
            "print_config",
            "print_replay_table_config",
        ];
        let cmd = Cli::command_with_defaults();
        for arg in cmd.get_arguments() {
            let id = arg.get_id().as_str();
            if ["help", "version"].contains(&id) || actions.contains(&id) {
                continue;
            }
            let section = section_of(id).unwrap_or_else(|| panic!("--{id} is no setting"));
            let title = SECTIONS.iter().find(|(n, _, _)| *n == section).unwrap().1;
            assert_eq!(arg.get_help_heading(), Some(title), "--{id}");
        }
        for (section, key) in setting_keys() {
            assert!(
                cmd.get_arguments().any(|a| a.get_id() == key),
                "{section}.{key} has no flag"
            );
        }
    }

    /// No flag's own doc states a default the library declares: help adds
    /// it from there, once.
    #[test]
    fn help_reads_each_default_from_the_library() {
        for arg in Cli::command().get_arguments() {
            let id = arg.get_id().as_str();
            let Some(section) = section_of(id) else {
                continue;
            };
            if ENV_KEYS.contains(&id) {
                continue;
            }
            let own = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
            let library = settings::describe(&format!("{section}.{id}"));
            assert!(
                library.is_none() || !own.contains("[default:"),
                "--{id} writes its default again: {own:?}"
            );
        }
        let help = Cli::command_with_defaults().render_long_help().to_string();
        assert!(help.contains("[default: cpu: 16, cuda: 64]"), "batch size");
        assert!(
            help.contains("[default: vtrace: 0.98, r2d2: 0.99]"),
            "discount"
        );
    }
}
