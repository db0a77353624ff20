//! The `learner` command line, and its one translation into a
//! [`LearnerConfig`] ([`TrainArgs::to_config`]).
//!
//! `learner [FLAGS]` (no subcommand) serves actors and runs the embedded
//! default: local actor processes on CartPole over loopback. Subcommands:
//! `learner actor ...` (hidden) runs one actor, so the embedded default needs
//! no second binary; `learner eval ...` runs greedy episodes of a checkpoint.
//!
//! Each doc comment states its flag's default; clap's own `[default: ...]`
//! is hidden so help does not print it twice. The defaults themselves are
//! [`LearnerConfig::default`]'s: a test below parses no flags and compares.
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};
use seed_actor::cli::ActorArgs;
use seed_env::EnvArgs;
use seed_learner::app::config::{
    InferenceConfig, RunConfig, ServeConfig, DEFAULT_INLINE_MAX_ROWS, R2D2_ENVS_PER_ACTOR,
    VTRACE_ENVS_PER_ACTOR,
};
use seed_learner::app::LearnerConfig;
use seed_learner::device::DeviceSpec;
use seed_learner::error::LearnerError;
use seed_learner::infer::batcher::BatcherConfig;
use seed_learner::infer::exploration::EpsilonSchedule;
use seed_learner::learn::algo::{Agent, ImpalaLossConfig, R2d2Config, VTraceClip};
use seed_learner::learn::config::{
    CheckpointSettings, ReplaySampler, ReplaySettings, ReplayWriter, TrainConfig,
    DEFAULT_LR_FINAL_FRACTION, R2D2_DISCOUNT, VTRACE_ADAM_EPSILON, VTRACE_DISCOUNT,
    VTRACE_ENTROPY_COST, VTRACE_LR_DECAY_STEPS,
};
use seed_learner::learn::optimizer::{
    AdamConfig, Algorithm, LrSchedule, OptimizerConfig, RmsPropConfig,
};
use seed_learner::learn::train::TrainerConfig;
use seed_learner::model::{InferenceDType, ModelShape};
use seed_learner::replay::RemoteReplayConfig;
use seed_learner::serve::tls::ServerTls;
use seed_learner::serve::transport::ListenAddr;
use seed_shared::keepalive::{DEFAULT_KEEPALIVE_SECS, DEFAULT_KEEPALIVE_TIMEOUT_SECS};
use seed_shared::logging::LogFormat;
use seed_shared::tls::{read_certificates, read_private_key};
use seed_shared::{Keepalive, DEFAULT_LEARNER_ADDR, DEFAULT_MAX_MESSAGE_BYTES};

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

/// Flags of `learner eval`.
#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct EvalArgs {
    /// Run directory holding the checkpoint (what `--run-dir` wrote) [default: none, required].
    #[arg(long)]
    pub checkpoint: PathBuf,
    /// Episodes to run [default: 10].
    #[arg(long, hide_default_value = true, default_value_t = 10)]
    pub episodes: usize,
    /// Seed of the envs' initial states [default: 0].
    #[arg(long, hide_default_value = true, default_value_t = 0)]
    pub seed: u64,
    /// Stop an episode after this many steps (envs without a time limit) [default: 10000].
    #[arg(long, hide_default_value = true, default_value_t = 10_000)]
    pub max_steps: u64,
    /// Actions: `greedy` (argmax of the logits; a Gaussian policy's mean,
    /// clipped to the bounds) or `sample` (drawn from the policy as actors
    /// do in training; a stochastic policy's argmax can score far below its
    /// samples) [default: greedy].
    #[arg(long, value_enum, hide_default_value = true, default_value_t = EvalPolicyArg::Greedy)]
    pub policy: EvalPolicyArg,
}

/// `learner eval --policy`.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum EvalPolicyArg {
    Greedy,
    Sample,
}

impl EvalArgs {
    /// The typed eval config these flags describe.
    pub fn to_config(&self) -> seed_learner::app::eval::EvalConfig {
        use seed_learner::app::eval::{EvalConfig, EvalPolicy};
        EvalConfig {
            episodes: self.episodes,
            seed: self.seed,
            max_steps: self.max_steps,
            policy: match self.policy {
                EvalPolicyArg::Greedy => EvalPolicy::Greedy,
                EvalPolicyArg::Sample => EvalPolicy::Sample,
            },
        }
    }
}

/// Flags of `learner` (serve + local actors).
#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct TrainArgs {
    /// Listen address: `IP:PORT` (`0.0.0.0:PORT` for clusters), `HOST:PORT`
    /// (resolved once; the first IPv4 address is bound) or `unix:/path`
    /// [default: 127.0.0.1:50051, or an ephemeral port if that one is busy].
    #[arg(help_heading = "Serving", long)]
    pub listen: Option<String>,
    /// Shared secret actors must send in their hello [default: none].
    #[arg(
        help_heading = "Serving",
        long,
        env = "SEED_TOKEN",
        hide_env_values = true
    )]
    pub token: Option<String>,
    /// Actor processes to spawn on this host; 0 serves remote actors only [default: 2].
    #[arg(
        help_heading = "Local actors and environment",
        long,
        hide_default_value = true,
        default_value_t = 2
    )]
    pub local_actors: usize,
    /// Environments per local actor. V-trace's policy lag grows with the
    /// env slots (CartPole solves in fewer env steps with 16 slots than
    /// with 32) [default: 8 for vtrace, 32 for r2d2].
    #[arg(help_heading = "Local actors and environment", long)]
    pub envs_per_actor: Option<usize>,
    /// The environment actors must run (also passed to local actors).
    #[command(flatten, next_help_heading = "Local actors and environment")]
    pub environment: EnvArgs,
    /// Log lines as `text` (colour only on a terminal without NO_COLOR) or
    /// `json` (one object per line, for log shippers); local actors log the
    /// same way [default: text].
    #[arg(help_heading = "Stopping, reports and metrics", long, value_enum, hide_default_value = true, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Stop after this many seconds [default: run until Ctrl-C/SIGTERM].
    #[arg(help_heading = "Stopping, reports and metrics", long)]
    pub max_seconds: Option<f64>,
    /// Stop after this many env steps [default: unlimited].
    #[arg(help_heading = "Stopping, reports and metrics", long)]
    pub max_env_steps: Option<u64>,
    /// Seconds between progress lines; 0 disables them [default: 5].
    #[arg(
        help_heading = "Stopping, reports and metrics",
        long,
        hide_default_value = true,
        default_value_t = 5.0
    )]
    pub progress_secs: f64,
    /// Write a JSON summary of the run here at exit [default: none].
    #[arg(help_heading = "Stopping, reports and metrics", long)]
    pub summary_json: Option<PathBuf>,
    /// Flush an inference batch at this many env rows [default: 256; 1024
    /// with --device cuda].
    #[arg(help_heading = "Inference", long)]
    pub max_batch: Option<usize>,
    /// Flush an inference batch this many microseconds after its first
    /// request, even if not full. A batch also flushes as soon as every
    /// active env is in it (see --actor-idle-ms), so this only bounds the
    /// wait for slow actors; 500 us is a few loopback round trips [default:
    /// 500].
    #[arg(
        help_heading = "Inference",
        long,
        hide_default_value = true,
        default_value_t = 500
    )]
    pub flush_us: u64,
    /// Park an actor that has sent no step batch for this many
    /// milliseconds: batches stop waiting for its envs (a frozen or stalled
    /// actor would otherwise hold every batch to --flush-us) until its next
    /// step batch rejoins it. Its stream and slots stay; keepalive decides
    /// when a silent peer is gone. 0 never parks [default: 100].
    #[arg(
        help_heading = "Inference",
        long,
        hide_default_value = true,
        default_value_t = 100
    )]
    pub actor_idle_ms: u64,
    /// Largest gRPC message accepted or sent, in bytes [default: 67108864 (64 MiB)].
    #[arg(help_heading = "Serving", long, hide_default_value = true, default_value_t = DEFAULT_MAX_MESSAGE_BYTES)]
    pub max_message_bytes: usize,
    /// Inference device: `cpu`, or `cuda:N` when built with `--features cuda` [default: cpu].
    #[arg(
        help_heading = "Inference",
        long,
        hide_default_value = true,
        default_value = "cpu"
    )]
    pub device: String,
    /// Weights' precision for inference: `f32`, or `bf16` (a bfloat16 copy
    /// of each published snapshot; training stays f32). For GPUs: on a CPU
    /// bf16 is slower than f32 [default: f32].
    #[arg(
        help_heading = "Inference",
        long,
        value_enum,
        hide_default_value = true,
        default_value_t = InferenceDTypeArg::F32
    )]
    pub inference_dtype: InferenceDTypeArg,
    /// Seed of the network's initial weights, action sampling and local actors [default: 0].
    #[arg(
        help_heading = "Inference",
        long,
        hide_default_value = true,
        default_value_t = 0
    )]
    pub seed: u64,
    /// Env slots the learner can serve at once, over all actors [default: 65536].
    #[arg(
        help_heading = "Serving",
        long,
        hide_default_value = true,
        default_value_t = 65_536
    )]
    pub max_env_slots: usize,
    /// Inference threads taking batches [default: 1].
    #[arg(
        help_heading = "Inference",
        long,
        hide_default_value = true,
        default_value_t = 1
    )]
    pub inference_threads: usize,
    /// A step batch with at most this many envs that holds every connected
    /// env (one actor) is inferred on its stream's I/O thread instead of
    /// being handed to an inference thread: saves two thread wake-ups per
    /// step; 0 turns this off. Serving only: with training on, the unroll
    /// builder may wait on a full replay buffer, which must not hold an I/O
    /// thread, so this applies with `--no-train` [default: 32].
    #[arg(help_heading = "Inference", long, hide_default_value = true, default_value_t = DEFAULT_INLINE_MAX_ROWS)]
    pub inline_max_rows: usize,
    /// Size of candle's CPU thread pool (sets RAYON_NUM_THREADS) [default:
    /// $RAYON_NUM_THREADS if set, else 1 per 4 cores, at most 8].
    #[arg(help_heading = "Inference", long)]
    pub threads: Option<usize>,
    /// Tokio worker threads for the gRPC server [default: 1 per 4 cores, 1 to 4].
    #[arg(help_heading = "Serving", long)]
    pub io_threads: Option<usize>,
    /// Seconds without traffic on an actor's connection before the learner
    /// pings it (HTTP/2 keepalive; also the TCP keepalive idle time); 0
    /// disables both. An actor that does not answer within
    /// --keepalive-timeout-secs (frozen, or its host gone without closing
    /// the connection) is dropped and its env slots freed: with the
    /// defaults within about 20 s. An idle actor that answers pings keeps
    /// its stream [default: 10].
    #[arg(help_heading = "Liveness and TLS", long, hide_default_value = true, default_value_t = DEFAULT_KEEPALIVE_SECS)]
    pub keepalive_secs: u64,
    /// Seconds a keepalive ping may stay unanswered before the connection
    /// is dropped; at least 1 while --keepalive-secs is on [default: 10].
    #[arg(help_heading = "Liveness and TLS", long, hide_default_value = true, default_value_t = DEFAULT_KEEPALIVE_TIMEOUT_SECS)]
    pub keepalive_timeout_secs: u64,
    /// Serve TLS with this certificate chain (PEM, leaf first); needs
    /// --tls-key and a TCP --listen. Actors connect with `--tls-ca`; local
    /// actors connect over a plaintext unix socket in a private directory
    /// instead [default: none, plaintext].
    #[arg(
        help_heading = "Liveness and TLS",
        long,
        value_name = "PATH",
        requires = "tls_key"
    )]
    pub tls_cert: Option<PathBuf>,
    /// Private key (PEM: PKCS#8, PKCS#1 or SEC1) of --tls-cert [default: none].
    #[arg(
        help_heading = "Liveness and TLS",
        long,
        value_name = "PATH",
        requires = "tls_cert"
    )]
    pub tls_key: Option<PathBuf>,
    /// Mutual TLS: refuse actors that do not present a client certificate
    /// signed by one of the CA certificates in this PEM file (actors pass
    /// `--tls-cert`/`--tls-key`); needs --tls-cert. The token is checked
    /// as well [default: none, any TLS client].
    #[arg(
        help_heading = "Liveness and TLS",
        long,
        value_name = "PATH",
        requires = "tls_cert"
    )]
    pub tls_client_ca: Option<PathBuf>,
    /// Serve live Prometheus metrics at `GET http://ADDR/metrics` (OpenMetrics
    /// text); ADDR is `IP:PORT`, e.g. `127.0.0.1:9100` (`0.0.0.0:9100` for a
    /// remote Prometheus); port 0 picks a free port, logged at start [default: off].
    #[arg(
        help_heading = "Stopping, reports and metrics",
        long,
        value_name = "ADDR"
    )]
    pub metrics_addr: Option<std::net::SocketAddr>,
    /// Run local actors from this `actor` binary instead of `learner actor` [default: this executable].
    #[arg(help_heading = "Local actors and environment", long)]
    pub actor_bin: Option<PathBuf>,

    // ---- Training -------------------------------------------------------
    /// Serve and infer only; no unrolls, replay or training [default: off].
    #[arg(help_heading = "Training", long)]
    pub no_train: bool,
    /// Algorithm: `vtrace` (IMPALA actor-critic) or `r2d2` (recurrent dueling Q-network with
    /// an LSTM core, ε-greedy per env slot, prioritized half-overlapping sequences, burn-in,
    /// n-step double Q with value rescaling, target network) [default: vtrace].
    #[arg(
        help_heading = "Training",
        long,
        value_enum,
        hide_default_value = true,
        default_value = "vtrace"
    )]
    pub algo: AlgoArg,
    /// R2D2: leading steps of each sequence that only refresh the stored recurrent state (no
    /// loss, no gradient); below --unroll-length - 1 [default: 4].
    #[arg(
        help_heading = "R2D2",
        long,
        hide_default_value = true,
        default_value_t = 4
    )]
    pub burn_in: usize,
    /// R2D2: steps of reward before the double-Q bootstrap [default: 3].
    #[arg(
        help_heading = "R2D2",
        long,
        hide_default_value = true,
        default_value_t = 3
    )]
    pub n_step: usize,
    /// R2D2: learner steps between copies of the online network into the target network
    /// [default: 100].
    #[arg(
        help_heading = "R2D2",
        long,
        hide_default_value = true,
        default_value_t = 100
    )]
    pub target_update_period: u64,
    /// R2D2: η of the sequence priority η·max|δ| + (1−η)·mean|δ| [default: 0.9].
    #[arg(
        help_heading = "R2D2",
        long,
        hide_default_value = true,
        default_value_t = 0.9
    )]
    pub priority_eta: f64,
    /// R2D2: ε of the Ape-X schedule; env slot i of N explores with probability
    /// ε^(1 + α·i/(N−1)), N being --local-actors x --envs-per-actor (or --max-env-slots
    /// without local actors). The reported mean return counts every slot's
    /// episodes, the most exploring ones too: within 2M env steps
    /// `cartpole-masked` reaches 475 with 0.1, not with 0.4 [default: 0.4].
    #[arg(
        help_heading = "R2D2",
        long,
        hide_default_value = true,
        default_value_t = 0.4
    )]
    pub epsilon: f64,
    /// R2D2: α of the Ape-X ε schedule [default: 7].
    #[arg(
        help_heading = "R2D2",
        long,
        hide_default_value = true,
        default_value_t = 7.0
    )]
    pub epsilon_alpha: f64,
    /// T: transitions per unroll; unrolls hold T+1 steps and overlap by one (R2D2: sequences
    /// start every T/2 steps and overlap by half) [default: 16].
    #[arg(
        help_heading = "Training",
        long,
        hide_default_value = true,
        default_value_t = 16
    )]
    pub unroll_length: usize,
    /// B: unrolls per training batch [default: 16; 64 with --device cuda].
    #[arg(help_heading = "Training", long)]
    pub batch_size: Option<usize>,
    /// Optimizer: `adam` or `rmsprop` [default: adam].
    #[arg(
        help_heading = "Training",
        long,
        hide_default_value = true,
        default_value = "adam"
    )]
    pub optimizer: OptimizerKind,
    /// ε of the optimizer: Adam adds it to √v̂, RMSProp to the mean square.
    /// Adam's step is about the learning rate for any gradient well above ε,
    /// so at 1e-8 the small gradients of a solved task still move the weights
    /// at full speed; V-trace's 1e-3 moves them in proportion, which keeps a
    /// solved CartPole solved. Tasks with small gradients learn slower with
    /// it (Pendulum's flags give 1e-8), and an LSTM core far slower
    /// [default: adam: vtrace 1e-3, vtrace with --lstm and r2d2 1e-8;
    /// rmsprop 0.01].
    #[arg(help_heading = "Training", long)]
    pub optimizer_epsilon: Option<f64>,
    /// Learning rate (initial one with --lr-decay-steps) [default: 0.002].
    #[arg(
        help_heading = "Training",
        long,
        hide_default_value = true,
        default_value_t = 2e-3
    )]
    pub learning_rate: f64,
    /// Decay the learning rate linearly over this many learner steps, to
    /// --lr-final-fraction of it, and keep it there; 0 keeps it constant.
    /// V-trace's default lets CartPole solve at a high rate and then damps the
    /// late updates that knocked a solved policy back down; give 0 for runs
    /// tuned with a constant rate [default: vtrace: 7000; r2d2: 0].
    #[arg(help_heading = "Training", long)]
    pub lr_decay_steps: Option<u64>,
    /// With --lr-decay-steps: the learning rate it decays to, as a fraction of
    /// --learning-rate [default: 0.03].
    #[arg(
        help_heading = "Training",
        long,
        hide_default_value = true,
        default_value_t = DEFAULT_LR_FINAL_FRACTION
    )]
    pub lr_final_fraction: f64,
    /// Discount γ per step. V-trace's 0.98 is tuned on CartPole; tasks with
    /// longer horizons (MinAtar, Atari) want 0.99 [default: 0.98 for vtrace,
    /// 0.99 for r2d2].
    #[arg(help_heading = "Training", long)]
    pub discount: Option<f32>,
    /// Weight of the entropy bonus (V-trace) [default: 0.005].
    #[arg(
        help_heading = "Training",
        long,
        hide_default_value = true,
        default_value_t = VTRACE_ENTROPY_COST
    )]
    pub entropy_cost: f32,
    /// Weight of the value loss [default: 0.5].
    #[arg(
        help_heading = "Training",
        long,
        hide_default_value = true,
        default_value_t = 0.5
    )]
    pub baseline_cost: f32,
    /// Multiply every reward by this in the loss (values and advantages
    /// are then in scaled units; reported returns are not). Large rewards
    /// make large value errors that swamp the policy gradient in the
    /// shared torso: Pendulum's reach −16 per step [default: 1].
    #[arg(
        help_heading = "Training",
        long,
        hide_default_value = true,
        default_value_t = 1.0
    )]
    pub reward_scale: f32,
    /// Global gradient-norm clip [default: 40].
    #[arg(
        help_heading = "Training",
        long,
        hide_default_value = true,
        default_value_t = 40.0
    )]
    pub max_grad_norm: f32,
    /// V-trace clip thresholds ρ̄ and c̄ [default: 1].
    #[arg(
        help_heading = "Training",
        long,
        hide_default_value = true,
        default_value_t = 1.0
    )]
    pub vtrace_clip: f32,
    /// Times each unroll is trained on, on average (alias --replay-ratio; R2D2's sequences
    /// overlap by half, so each step is trained on about twice as often):
    /// a rate limiter (Reverb's samples-per-insert) holds inference back when
    /// the actors run more than one batch ahead of this ratio and the trainer
    /// when it runs ahead of it. 1 with the default sampler is consume-once
    /// FIFO; above 1 the default sampler reuses unrolls. Reuse buys sample
    /// efficiency for a little policy lag (CartPole: 4 halves the env steps
    /// to solve versus 1, and 6 with γ 0.98 takes a tenth fewer than 4)
    /// [default: 6 for vtrace, 2 for r2d2].
    #[arg(
        help_heading = "Replay and prefetch",
        long,
        visible_alias = "replay-ratio"
    )]
    pub samples_per_insert: Option<f64>,
    /// Which unrolls a batch is sampled from: `fifo` (each once, oldest first;
    /// needs --samples-per-insert 1), `uniform` (uniform with replacement over
    /// the buffer), `recent` (uniform over the --replay-window newest) or
    /// `prioritized` (r2d2 only: proportional to priority^--priority-exponent)
    /// [default: vtrace: fifo with --samples-per-insert 1, else uniform; r2d2: prioritized].
    #[arg(help_heading = "Replay and prefetch", long, value_enum)]
    pub replay_sampler: Option<ReplaySamplerArg>,
    /// What an insert into a full buffer does: `block` (inference waits
    /// until the oldest unroll was consumed; fifo only) or `overwrite` (the
    /// oldest unroll is replaced; the rate limiter is the backpressure)
    /// [default: block with fifo, else overwrite].
    #[arg(help_heading = "Replay and prefetch", long, value_enum)]
    pub replay_writer: Option<ReplayWriterArg>,
    /// Replay capacity in unrolls, at least one batch. Small keeps the
    /// policy lag low [default: vtrace: --batch-size with fifo, twice that otherwise;
    /// r2d2: 4096].
    #[arg(help_heading = "Replay and prefetch", long)]
    pub replay_capacity: Option<usize>,
    /// Sampling starts once the buffer holds this many unrolls [default:
    /// --batch-size for vtrace, 256 for r2d2].
    #[arg(help_heading = "Replay and prefetch", long)]
    pub replay_min_size: Option<usize>,
    /// Prioritized sampler: priority exponent α [default: 0.9].
    #[arg(
        help_heading = "Replay and prefetch",
        long,
        hide_default_value = true,
        default_value_t = 0.9
    )]
    pub priority_exponent: f64,
    /// Prioritized sampler: importance-weight exponent β [default: 0.6].
    #[arg(
        help_heading = "Replay and prefetch",
        long,
        hide_default_value = true,
        default_value_t = 0.6
    )]
    pub importance_exponent: f64,
    /// The `recent` sampler's window, in unrolls [default: --batch-size].
    #[arg(help_heading = "Replay and prefetch", long)]
    pub replay_window: Option<usize>,
    /// How long inference waits on a full replay buffer (or on the rate
    /// limiter) before dropping the unroll, in milliseconds [default: 5000].
    #[arg(
        help_heading = "Replay and prefetch",
        long,
        hide_default_value = true,
        default_value_t = 5000
    )]
    pub insert_timeout_ms: u64,
    /// Drop sampled unrolls whose oldest step is more than this many policy
    /// versions behind the trainer [default: no cap].
    #[arg(help_heading = "Replay and prefetch", long)]
    pub max_policy_lag: Option<u64>,
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
    #[arg(
        help_heading = "Remote replay table",
        long,
        value_name = "HOST:PORT/TABLE"
    )]
    pub replay_addr: Option<String>,
    /// The replay server's token (its `--token`) [default: none].
    #[arg(
        help_heading = "Remote replay table",
        long,
        env = "SEED_REPLAY_TOKEN",
        hide_env_values = true,
        requires = "replay_addr"
    )]
    pub replay_token: Option<String>,
    /// Reach the replay server over TLS, trusting only the CA certificates
    /// in this PEM file [default: none, plaintext].
    #[arg(
        help_heading = "Remote replay table",
        long,
        value_name = "PATH",
        requires = "replay_addr"
    )]
    pub replay_tls_ca: Option<PathBuf>,
    /// The name the replay server's certificate must carry; needs
    /// --replay-tls-ca [default: the host of --replay-addr].
    #[arg(
        help_heading = "Remote replay table",
        long,
        value_name = "NAME",
        requires = "replay_tls_ca"
    )]
    pub replay_tls_domain: Option<String>,
    /// Client certificate chain (PEM) for a replay server that requires one
    /// (its `--tls-client-ca`); needs --replay-tls-key and --replay-tls-ca
    /// [default: none].
    #[arg(
        help_heading = "Remote replay table",
        long,
        value_name = "PATH",
        requires_all = ["replay_tls_key", "replay_tls_ca"]
    )]
    pub replay_tls_cert: Option<PathBuf>,
    /// Private key (PEM) of --replay-tls-cert [default: none].
    #[arg(
        help_heading = "Remote replay table",
        long,
        value_name = "PATH",
        requires = "replay_tls_cert"
    )]
    pub replay_tls_key: Option<PathBuf>,
    /// Unrolls queued for the replay server before new ones are dropped
    /// (counted in `unroll/dropped_full`); each queued unroll adds policy lag when the server holds inserts back [default: 8].
    #[arg(
        help_heading = "Remote replay table",
        long,
        hide_default_value = true,
        default_value_t = seed_learner::replay::remote_config::DEFAULT_INSERT_QUEUE,
        requires = "replay_addr"
    )]
    pub replay_insert_queue: usize,
    /// Print the replay server's config file (JSON) for a table holding
    /// this learner's unrolls (from --env, the model flags and
    /// --unroll-length), with the sampler, capacity and rate limiter the
    /// --replay-* flags give the in-process buffer, named as in
    /// --replay-addr (else `unrolls`), and exit [default: off].
    #[arg(help_heading = "Remote replay table", long)]
    pub print_replay_table_config: bool,
    /// MLP torso hidden widths, comma-separated [default: 64,64].
    #[arg(
        help_heading = "Training",
        long,
        value_delimiter = ',',
        hide_default_value = true,
        default_value = "64,64"
    )]
    pub hidden_sizes: Vec<usize>,
    /// Conv torso output width (image observations) [default: 256].
    #[arg(
        help_heading = "Training",
        long,
        hide_default_value = true,
        default_value_t = 256
    )]
    pub conv_features: usize,
    /// Add an LSTM core (state kept per env slot at inference). V-trace's
    /// learning-rate decay is tuned for CartPole's few thousand learner
    /// steps; on `cartpole-masked` longer unrolls and a slower decay
    /// (`--unroll-length 32 --lr-decay-steps 20000 --lr-final-fraction 0.1`)
    /// learn the memory task within 2M env steps [default: off].
    #[arg(help_heading = "Training", long)]
    pub lstm: bool,
    /// LSTM hidden size with --lstm [default: 64].
    #[arg(
        help_heading = "Training",
        long,
        hide_default_value = true,
        default_value_t = 64
    )]
    pub lstm_size: usize,
    /// Prefetch threads collating batches for the trainer [default: 1].
    #[arg(
        help_heading = "Replay and prefetch",
        long,
        hide_default_value = true,
        default_value_t = 1
    )]
    pub prefetch_threads: usize,
    /// Collated batches kept ready ahead of the trainer [default: 1].
    #[arg(
        help_heading = "Replay and prefetch",
        long,
        hide_default_value = true,
        default_value_t = 1
    )]
    pub prefetch_depth: usize,
    /// Keep checkpoints, metrics.jsonl and learning_curve.png here [default: none].
    #[arg(help_heading = "Checkpoints", long)]
    pub run_dir: Option<PathBuf>,
    /// Seconds between checkpoints with --run-dir (one is also written at exit) [default: 60].
    #[arg(
        help_heading = "Checkpoints",
        long,
        hide_default_value = true,
        default_value_t = 60.0
    )]
    pub checkpoint_secs: f64,
    /// Continue from the newest checkpoint in this run directory (weights,
    /// optimizer, counters, policy version, replay buffer; the replay flags must be the
    /// checkpointed run's); implies --run-dir DIR unless given [default: none].
    #[arg(help_heading = "Checkpoints", long)]
    pub resume: Option<PathBuf>,
    /// Mean return over the last 100 episodes that counts as solved; may be
    /// negative (`--target-return -250` for Pendulum) [default: 475, CartPole-v1's threshold].
    #[arg(
        help_heading = "Stopping, reports and metrics",
        long,
        allow_negative_numbers = true,
        hide_default_value = true,
        default_value_t = 475.0
    )]
    pub target_return: f64,
    /// Stop as soon as the target return is reached [default: off].
    #[arg(help_heading = "Stopping, reports and metrics", long)]
    pub stop_when_solved: bool,
}

/// `--inference-dtype`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum InferenceDTypeArg {
    F32,
    Bf16,
}

impl From<InferenceDTypeArg> for InferenceDType {
    fn from(arg: InferenceDTypeArg) -> Self {
        match arg {
            InferenceDTypeArg::F32 => InferenceDType::F32,
            InferenceDTypeArg::Bf16 => InferenceDType::Bf16,
        }
    }
}

/// `--optimizer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OptimizerKind {
    Adam,
    Rmsprop,
}

/// `--algo`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AlgoArg {
    Vtrace,
    R2d2,
}

/// `--replay-sampler`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReplaySamplerArg {
    Fifo,
    Uniform,
    Recent,
    Prioritized,
}

impl From<ReplaySamplerArg> for ReplaySampler {
    fn from(a: ReplaySamplerArg) -> Self {
        match a {
            ReplaySamplerArg::Fifo => ReplaySampler::Fifo,
            ReplaySamplerArg::Uniform => ReplaySampler::Uniform,
            ReplaySamplerArg::Recent => ReplaySampler::Recent,
            ReplaySamplerArg::Prioritized => ReplaySampler::Prioritized,
        }
    }
}

/// `--replay-writer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReplayWriterArg {
    Block,
    Overwrite,
}

impl From<ReplayWriterArg> for ReplayWriter {
    fn from(a: ReplayWriterArg) -> Self {
        match a {
            ReplayWriterArg::Block => ReplayWriter::Block,
            ReplayWriterArg::Overwrite => ReplayWriter::Overwrite,
        }
    }
}

impl TrainArgs {
    /// The default listen address (used when `--listen` is not given).
    pub const DEFAULT_LISTEN: &'static str = DEFAULT_LEARNER_ADDR;

    /// `--replay-addr` and its options, checked; the TLS files read once.
    fn remote_replay(&self) -> Result<Option<RemoteReplayConfig>, LearnerError> {
        let Some(addr) = &self.replay_addr else {
            return Ok(None);
        };
        if !self.print_replay_table_config {
            let local_flags = [
                ("--replay-sampler", self.replay_sampler.is_some()),
                ("--replay-writer", self.replay_writer.is_some()),
                ("--replay-capacity", self.replay_capacity.is_some()),
                ("--replay-min-size", self.replay_min_size.is_some()),
                ("--replay-window", self.replay_window.is_some()),
                ("--samples-per-insert", self.samples_per_insert.is_some()),
                ("--max-policy-lag", self.max_policy_lag.is_some()),
            ];
            if let Some((flag, _)) = local_flags.iter().find(|(_, given)| *given) {
                return Err(LearnerError::Config(format!(
                    "{flag} sets the in-process buffer; with --replay-addr the table's config \
                     on the replay server decides it (--print-replay-table-config prints a \
                     config with these flags applied)"
                )));
            }
        }
        let mut remote = RemoteReplayConfig::parse(addr, self.replay_tls_ca.is_some())
            .map_err(LearnerError::Config)?;
        remote.token = self.replay_token.clone().filter(|t| !t.is_empty());
        remote.tls_ca = match &self.replay_tls_ca {
            Some(p) => Some(read_certificates("--replay-tls-ca", p)?),
            None => None,
        };
        remote.tls_domain = self.replay_tls_domain.clone();
        remote.tls_identity = match (&self.replay_tls_cert, &self.replay_tls_key) {
            (Some(c), Some(k)) => Some((
                read_certificates("--replay-tls-cert", c)?,
                read_private_key("--replay-tls-key", k)?,
            )),
            _ => None,
        };
        if self.replay_insert_queue == 0 {
            return Err(LearnerError::Config(
                "--replay-insert-queue must be at least 1".into(),
            ));
        }
        remote.insert_queue = self.replay_insert_queue;
        remote.max_message_bytes = self.max_message_bytes;
        Ok(Some(remote))
    }

    /// `--envs-per-actor` with its per-algorithm default.
    pub fn envs_per_actor(&self) -> usize {
        self.envs_per_actor.unwrap_or(match self.algo {
            AlgoArg::Vtrace => VTRACE_ENVS_PER_ACTOR,
            AlgoArg::R2d2 => R2D2_ENVS_PER_ACTOR,
        })
    }

    /// The run these flags describe, validated: the one place flags become
    /// a [`LearnerConfig`]. Reads the TLS files once.
    pub fn to_config(&self) -> Result<LearnerConfig, LearnerError> {
        if self.no_train && self.replay_addr.is_some() {
            return Err(LearnerError::Config(
                "--replay-addr with --no-train: a learner that does not train stores no unrolls"
                    .into(),
            ));
        }
        let (listen, fallback_to_ephemeral) = match &self.listen {
            Some(l) => (l.parse::<ListenAddr>()?, false),
            None => (Self::DEFAULT_LISTEN.parse::<ListenAddr>()?, true),
        };
        if !self.checkpoint_secs.is_finite() {
            return Err(LearnerError::Config(
                "--checkpoint-secs must be a finite number".into(),
            ));
        }
        if !self.progress_secs.is_finite() {
            return Err(LearnerError::Config(
                "--progress-secs must be a finite number".into(),
            ));
        }
        let tls = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Some(ServerTls::from_files(
                cert,
                key,
                self.tls_client_ca.as_deref(),
            )?),
            (None, None) if self.tls_client_ca.is_none() => None,
            _ => {
                return Err(LearnerError::Config(
                    "--tls-cert and --tls-key go together (and --tls-client-ca needs them)".into(),
                ))
            }
        };
        // Defaults that depend on the device (see `LearnerConfig::for_device`).
        let device: DeviceSpec = self.device.parse()?;
        let defaults = LearnerConfig::for_device(device);
        let default_batch_size = defaults
            .train
            .as_ref()
            .map_or(TrainConfig::default().batch_size, |t| t.batch_size);
        let algorithm = match self.optimizer {
            // An LSTM core learns far slower at V-trace's 1e-3.
            OptimizerKind::Adam => Algorithm::Adam(AdamConfig {
                eps: self.optimizer_epsilon.unwrap_or(match self.algo {
                    AlgoArg::Vtrace if !self.lstm => VTRACE_ADAM_EPSILON,
                    AlgoArg::Vtrace | AlgoArg::R2d2 => AdamConfig::default().eps,
                }),
                ..AdamConfig::default()
            }),
            OptimizerKind::Rmsprop => Algorithm::RmsProp(RmsPropConfig {
                eps: self
                    .optimizer_epsilon
                    .unwrap_or(RmsPropConfig::default().eps),
                ..RmsPropConfig::default()
            }),
        };
        let decay_steps = self.lr_decay_steps.unwrap_or(match self.algo {
            AlgoArg::Vtrace => VTRACE_LR_DECAY_STEPS,
            AlgoArg::R2d2 => 0,
        });
        let schedule = if decay_steps > 0 {
            LrSchedule::LinearDecay {
                initial: self.learning_rate,
                decay_steps,
                last: self.learning_rate * self.lr_final_fraction,
            }
        } else {
            LrSchedule::Constant {
                lr: self.learning_rate,
            }
        };
        let remote_replay = self.remote_replay()?;
        let train = (!self.no_train).then(|| TrainConfig {
            unroll_length: self.unroll_length,
            batch_size: self.batch_size.unwrap_or(default_batch_size),
            trainer: TrainerConfig {
                agent: match self.algo {
                    AlgoArg::Vtrace => Agent::VTrace,
                    AlgoArg::R2d2 => Agent::R2d2(R2d2Config {
                        burn_in: self.burn_in,
                        n_step: self.n_step,
                        target_update_period: self.target_update_period,
                        priority_eta: self.priority_eta,
                        exploration: EpsilonSchedule {
                            epsilon: self.epsilon,
                            alpha: self.epsilon_alpha,
                            slots: if self.local_actors > 0 {
                                self.local_actors * self.envs_per_actor()
                            } else {
                                self.max_env_slots
                            },
                        },
                    }),
                },
                loss: ImpalaLossConfig {
                    discount: self.discount.unwrap_or(match self.algo {
                        AlgoArg::Vtrace => VTRACE_DISCOUNT,
                        AlgoArg::R2d2 => R2D2_DISCOUNT,
                    }),
                    baseline_cost: self.baseline_cost,
                    entropy_cost: self.entropy_cost,
                    reward_scale: self.reward_scale,
                    clip: VTraceClip {
                        rho: self.vtrace_clip,
                        c: self.vtrace_clip,
                        pg_rho: self.vtrace_clip,
                    },
                },
                optimizer: OptimizerConfig {
                    algorithm,
                    schedule,
                },
                max_grad_norm: self.max_grad_norm,
            },
            replay: ReplaySettings {
                sampler: self.replay_sampler.map(Into::into),
                writer: self.replay_writer.map(Into::into),
                samples_per_insert: self.samples_per_insert,
                capacity: self.replay_capacity,
                min_size: self.replay_min_size,
                priority_exponent: self.priority_exponent,
                importance_exponent: self.importance_exponent,
                recent_window: self.replay_window,
                insert_timeout: Duration::from_millis(self.insert_timeout_ms),
                max_policy_lag: self.max_policy_lag,
                remote: remote_replay.clone(),
            },
            prefetch_threads: self.prefetch_threads,
            prefetch_depth: self.prefetch_depth,
            checkpoints: CheckpointSettings {
                every: Duration::from_secs_f64(self.checkpoint_secs.max(0.0)),
                resume: self.resume.clone(),
            },
        });
        let config = LearnerConfig {
            // Remote actors only and no --env: the first hello fixes the spec.
            env: (self.local_actors > 0 || self.environment.env.is_some())
                .then(|| self.environment.env_config()),
            seed: self.seed,
            model: ModelShape {
                hidden_sizes: self.hidden_sizes.clone(),
                conv_features: self.conv_features,
                // R2D2's Q-network is recurrent.
                lstm_size: (self.lstm || self.algo == AlgoArg::R2d2).then_some(self.lstm_size),
            },
            serve: ServeConfig {
                listen,
                fallback_to_ephemeral,
                token: self.token.clone().filter(|t| !t.is_empty()),
                max_message_bytes: self.max_message_bytes,
                max_env_slots: self.max_env_slots,
                io_threads: self.io_threads,
                metrics_addr: self.metrics_addr,
                keepalive: Keepalive::from_secs(self.keepalive_secs, self.keepalive_timeout_secs),
                tls,
            },
            inference: InferenceConfig {
                batcher: BatcherConfig {
                    max_rows: self
                        .max_batch
                        .unwrap_or(defaults.inference.batcher.max_rows),
                    flush_after: Duration::from_micros(self.flush_us),
                },
                threads: self.inference_threads,
                actor_idle: (self.actor_idle_ms > 0)
                    .then(|| Duration::from_millis(self.actor_idle_ms)),
                inline_max_rows: self.inline_max_rows,
                device,
                dtype: self.inference_dtype.into(),
                candle_threads: self.threads,
            },
            train,
            run: RunConfig {
                local_actors: self.local_actors,
                envs_per_actor: self.envs_per_actor(),
                actor_bin: self.actor_bin.clone(),
                max_seconds: self.max_seconds,
                max_env_steps: self.max_env_steps,
                progress_every: (self.progress_secs > 0.0)
                    .then(|| Duration::from_secs_f64(self.progress_secs)),
                summary_json: self.summary_json.clone(),
                target_return: self.target_return,
                stop_when_solved: self.stop_when_solved,
                run_dir: self.run_dir.clone(),
                local_actor_flags: match self.log_format {
                    LogFormat::Text => Vec::new(),
                    LogFormat::Json => vec!["--log-format".into(), "json".into()],
                },
            },
        };
        config.validate()?;
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(remote.token.as_deref(), Some("s"));
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
        assert!(
            parse(&["--replay-token", "s"]).is_err(),
            "needs --replay-addr"
        );
    }

    #[test]
    fn no_flags_is_the_embedded_default() {
        let cli = parse(&[]).unwrap();
        assert!(cli.command.is_none());
        let t = cli.train;
        assert_eq!(t.listen, None);
        assert_eq!(t.local_actors, 2);
        assert_eq!(t.envs_per_actor, None);
        assert_eq!(t.envs_per_actor(), 8);
        assert_eq!(t.environment.env, None);
        assert_eq!(t.environment.env_config(), seed_env::EnvConfig::CartPole);
        assert_eq!(t.max_batch, None);
        assert_eq!(t.batch_size, None);
        assert_eq!(t.inference_dtype, InferenceDTypeArg::F32);
        assert_eq!(t.flush_us, 500);
        assert_eq!(t.actor_idle_ms, 100);
        assert_eq!(
            t.to_config().unwrap().inference.actor_idle,
            seed_learner::app::LearnerConfig::default()
                .inference
                .actor_idle
        );
        assert_eq!(t.progress_secs, 5.0);
        assert_eq!(t.device, "cpu");
        assert!(!t.no_train && !t.lstm && !t.stop_when_solved);
        assert_eq!(t.samples_per_insert, None);
        assert_eq!(t.algo, AlgoArg::Vtrace);
        assert_eq!(t.target_return, 475.0);
        assert_eq!(t.hidden_sizes, vec![64, 64]);
        assert_eq!(t.metrics_addr, None);
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
        assert_eq!(t.replay.sampler, Some(ReplaySampler::Uniform));
        let err = refusal(&["--replay-sampler", "prioritized"]);
        assert!(err.contains("--algo r2d2"), "{err}");
    }

    /// V-trace's CartPole-tuned discount and env slots are its defaults
    /// alone: R2D2 keeps 0.99 and 2 x 32 slots, and flags still win.
    #[test]
    fn discount_and_envs_per_actor_default_per_algorithm() {
        let config = |args: &[&str]| parse(args).unwrap().train.to_config().unwrap();
        let discount = |args: &[&str]| config(args).train.unwrap().trainer.loss.discount;
        let envs = |args: &[&str]| config(args).run.envs_per_actor;
        assert_eq!(discount(&[]), VTRACE_DISCOUNT);
        assert_eq!(discount(&["--algo", "r2d2"]), R2D2_DISCOUNT);
        assert_eq!(discount(&["--algo", "r2d2", "--discount", "0.9"]), 0.9);
        assert_eq!(discount(&["--discount", "0.995"]), 0.995);
        assert_eq!(envs(&[]), VTRACE_ENVS_PER_ACTOR);
        assert_eq!(envs(&["--algo", "r2d2"]), R2D2_ENVS_PER_ACTOR);
        assert_eq!(envs(&["--algo", "r2d2", "--envs-per-actor", "8"]), 8);
        assert_eq!(envs(&["--envs-per-actor", "64"]), 64);
        // R2D2's ε schedule spreads over the slots the run really has.
        let slots = |args: &[&str]| match config(args).train.unwrap().trainer.agent {
            Agent::R2d2(r) => r.exploration.slots,
            Agent::VTrace => unreachable!("r2d2 was asked for"),
        };
        assert_eq!(slots(&["--algo", "r2d2"]), 2 * R2D2_ENVS_PER_ACTOR);
        assert_eq!(slots(&["--algo", "r2d2", "--envs-per-actor", "4"]), 8);
    }

    #[test]
    fn the_learning_rate_schedule_defaults_per_algorithm() {
        let schedule = |flags: &[&str]| optimizer(flags).schedule;
        assert_eq!(
            schedule(&[]),
            LrSchedule::LinearDecay {
                initial: 2e-3,
                decay_steps: VTRACE_LR_DECAY_STEPS,
                last: 2e-3 * DEFAULT_LR_FINAL_FRACTION,
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
        assert_eq!(eps(&[]), ("adam", VTRACE_ADAM_EPSILON));
        assert_eq!(eps(&["--lstm"]), ("adam", AdamConfig::default().eps));
        assert_eq!(
            eps(&["--algo", "r2d2"]),
            ("adam", AdamConfig::default().eps)
        );
        assert_eq!(
            eps(&["--optimizer", "rmsprop"]),
            ("rmsprop", RmsPropConfig::default().eps)
        );
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

    /// A self-signed certificate for `localhost` and its key, and a second
    /// key that belongs to nothing, as PEM files in `dir`.
    fn cert_files(dir: &std::path::Path) -> [PathBuf; 3] {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["localhost".into()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let other = rcgen::KeyPair::generate().unwrap();
        let files = [
            dir.join("cert.pem"),
            dir.join("key.pem"),
            dir.join("other-key.pem"),
        ];
        std::fs::write(&files[0], cert.pem()).unwrap();
        std::fs::write(&files[1], key.serialize_pem()).unwrap();
        std::fs::write(&files[2], other.serialize_pem()).unwrap();
        files
    }

    #[test]
    fn keepalive_and_tls_flags_reach_the_config() {
        let dir = tempfile::tempdir().unwrap();
        let [cert, key, _] = cert_files(dir.path());
        let (cert, key) = (cert.to_str().unwrap(), key.to_str().unwrap());
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
        let dir = tempfile::tempdir().unwrap();
        let [cert, key, other_key] = cert_files(dir.path());
        let missing = dir.path().join("missing.pem");
        let s = |p: &PathBuf| p.to_str().unwrap().to_owned();
        let err = |flags: &[&str]| {
            parse(flags)
                .unwrap()
                .train
                .to_config()
                .unwrap_err()
                .to_string()
        };
        // Half a pair is a usage error.
        assert!(parse(&["--tls-cert", &s(&cert)]).is_err());
        assert!(parse(&["--tls-key", &s(&key)]).is_err());
        assert!(parse(&["--tls-client-ca", &s(&cert)]).is_err());

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
        assert!(parse(&["--metrics-addr", "localhost"]).is_err());
    }

    #[test]
    fn eval_subcommand_parses() {
        let cli = parse(&["eval", "--checkpoint", "/tmp/run", "--episodes", "3"]).unwrap();
        match cli.command {
            Some(Command::Eval(e)) => {
                assert_eq!(e.checkpoint, PathBuf::from("/tmp/run"));
                assert_eq!(e.episodes, 3);
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
        use clap::CommandFactory;
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
        use clap::CommandFactory;
        let cmd = Cli::command();
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
}
