//! The learner's math on the CPU, case for case against PyTorch: the Rust
//! side of `benches/cpu_math.py` (the PyTorch side is
//! `benches/python/torch_cpu_bench.py`, same cases, same output).
//!
//! - `forward`: what an inference thread does per batch,
//!   `PolicySnapshot::forward_batch` on a host buffer of observations (u8
//!   frames or f32 vectors; the LSTM model's `[B, H]` state too) and one
//!   action sampled per row;
//! - `train`: one `Trainer::step` (the network over all `(T + 1)·B`
//!   observations, the IMPALA loss with V-trace targets, backward, the
//!   global gradient norm clipped to 40, Adam, and the weights published
//!   for inference) on a batch already in memory. Rows are the `T·B`
//!   transitions.
//!
//! Models: `mlp` (CartPole, 4 -> 64 -> 64, train B 16 x T 16), `lstm`
//! (masked CartPole, the MLP then an LSTM core of 64, B 16 x T 32),
//! `minatar` (`[4, 10, 10]` u8, B 16 x T 20), `atari` (`[4, 84, 84]` u8,
//! B 32 x T 20), six actions for the image models.
//!
//! Inputs: Atari frames are random bytes; MinAtar frames 0 or 255 with 8%
//! of cells on (as a MinAtar Breakout frame); vectors uniform in [-1, 1).
//!
//! Threads: `--threads N` sets candle's pools as the learner's `--threads
//! N` does (`seed_learner::app::threads`) before anything runs; the heap is
//! set up as the learner's (`seed_learner::heap`). One JSON object per line on stdout.
//!
//! `cargo run --release -p seed-benches --bin cpu_math_bench -- --threads 2`
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use candle_core::{DType, Device, Tensor};
use clap::Parser;
use seed_learner::learn::agent::Agent;
use seed_learner::learn::optimizer::OptimizerConfig;
use seed_learner::learn::prefetch::TrainBatch;
use seed_learner::learn::trainer::{Trainer, TrainerConfig};
use seed_learner::learn::vtrace::ImpalaLossConfig;
use seed_learner::model::host_forward::{BatchOutputs, HostBatch, HostObs};
use seed_learner::model::weights::{PolicySnapshot, PolicyVersion, WeightsHandle};
use seed_learner::model::{ActionSampler, ModelConfig, RecurrentState, TrainableModel};
use seed_shared::{ActionSpace, EnvSpec, ObsDType};

const MODELS: [&str; 4] = ["mlp", "lstm", "minatar", "atari"];

#[derive(Parser, Debug)]
#[command(about = "Forward and training rows/s of the learner's networks on the CPU")]
struct Args {
    /// candle's CPU threads (`RAYON_NUM_THREADS`), set before anything runs.
    #[arg(long)]
    threads: usize,
    /// `forward`, `train` or both.
    #[arg(long, value_delimiter = ',', default_value = "forward,train")]
    cases: Vec<String>,
    /// From `mlp`, `lstm`, `minatar`, `atari`.
    #[arg(long, value_delimiter = ',', default_value = "mlp,lstm,minatar,atari")]
    models: Vec<String>,
    /// Forward batch sizes.
    #[arg(long, value_delimiter = ',', default_value = "1,16,64,256,1024")]
    batches: Vec<usize>,
    /// Time per case after the warm-up (at least 5 iterations), in ms.
    #[arg(long, default_value_t = 1000)]
    budget_ms: u64,
}

/// One model of the comparison: its env and training batch shape.
struct Case {
    spec: EnvSpec,
    lstm: Option<usize>,
    /// `(B, T)`.
    train: (usize, usize),
    /// MinAtar's frames: cells are 0 or 255, this share of them on.
    cells_on: Option<f32>,
}

impl Case {
    /// `n` observation values: MinAtar-like cells, random bytes, or
    /// uniform floats.
    fn inputs(&self, n: usize, rng: &mut Lcg) -> (Vec<f32>, Vec<u8>) {
        match (self.spec.obs_dtype, self.cells_on) {
            (ObsDType::F32, _) => ((0..n).map(|_| rng.float()).collect(), Vec::new()),
            (ObsDType::U8, Some(on)) => {
                let cell = |rng: &mut Lcg| if rng.float() * 0.5 + 0.5 < on { 255 } else { 0 };
                (Vec::new(), (0..n).map(|_| cell(rng)).collect())
            }
            (ObsDType::U8, None) => (Vec::new(), (0..n).map(|_| rng.next() as u8).collect()),
        }
    }
}

fn case(name: &str) -> Result<Case> {
    let image = |shape: Vec<usize>| EnvSpec::synthetic(shape, ObsDType::U8, 6);
    Ok(match name {
        "mlp" => Case {
            spec: EnvSpec::cartpole(),
            lstm: None,
            train: (16, 16),
            cells_on: None,
        },
        "lstm" => Case {
            spec: EnvSpec {
                env_name: "CartPole-v1-masked".into(),
                obs_shape: vec![2],
                obs_dtype: ObsDType::F32,
                action: ActionSpace::Discrete(2),
            },
            lstm: Some(64),
            train: (16, 32),
            cells_on: None,
        },
        "minatar" => Case {
            spec: image(vec![4, 10, 10]),
            lstm: None,
            train: (16, 20),
            cells_on: Some(0.08),
        },
        "atari" => Case {
            spec: image(vec![4, 84, 84]),
            lstm: None,
            train: (32, 20),
            cells_on: None,
        },
        other => bail!("--models: unknown model `{other}` (expected one of {MODELS:?})"),
    })
}

fn model(case: &Case) -> Result<TrainableModel> {
    let mut cfg = ModelConfig::for_spec(&case.spec);
    cfg.lstm_size = case.lstm;
    Ok(TrainableModel::new(&cfg, &Device::Cpu, 1)?)
}

/// A deterministic pseudo-random stream (the same inputs every run).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) as u32
    }

    /// Uniform in `[-1, 1)`.
    fn float(&mut self) -> f32 {
        self.next() as f32 / (1u64 << 30) as f32 - 1.0
    }
}

/// Median seconds of `f` after a warm-up, and the iterations timed.
fn time_it(budget: Duration, mut f: impl FnMut() -> Result<()>) -> Result<(f64, usize)> {
    for _ in 0..3 {
        f()?;
    }
    let mut times = Vec::new();
    let start = Instant::now();
    while times.len() < 5 || (start.elapsed() < budget && times.len() < 100_000) {
        let t = Instant::now();
        f()?;
        times.push(t.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    Ok((times[times.len() / 2], times.len()))
}

fn forward(name: &str, case: &Case, rows: usize, budget: Duration) -> Result<serde_json::Value> {
    let snapshot = PolicySnapshot::new(PolicyVersion(0), model(case)?.snapshot()?);
    let n = rows * case.spec.obs_len();
    let (floats, bytes) = case.inputs(n, &mut Lcg(7));
    let hidden = case.lstm.unwrap_or(0);
    let state = vec![0f32; rows * hidden];
    let mut sampler = ActionSampler::new(1);
    let mut actions = vec![0u32; rows];
    let num_actions = case.spec.action.dim();
    let mut out = BatchOutputs::default();
    let (median, iterations) = time_it(budget, || {
        let obs = match case.spec.obs_dtype {
            ObsDType::F32 => HostObs::F32(&floats),
            ObsDType::U8 => HostObs::U8(&bytes),
        };
        let batch = HostBatch {
            obs,
            rows,
            h: &state,
            c: &state,
        };
        snapshot.forward_batch(&batch, &Device::Cpu, true, &mut out)?;
        sampler.sample(&out.params, num_actions, &mut actions);
        Ok(())
    })?;
    Ok(serde_json::json!({
        "kind": "forward", "model": name, "rows": rows, "median_us": median * 1e6,
        "iterations": iterations, "rows_per_second": rows as f64 / median,
    }))
}

fn train(name: &str, case: &Case, budget: Duration) -> Result<serde_json::Value> {
    let (b, t) = case.train;
    let t1 = t + 1;
    let model = model(case)?;
    let weights = std::sync::Arc::new(WeightsHandle::new(model.snapshot()?, PolicyVersion(0)));
    let mut trainer = Trainer::new(
        model,
        TrainerConfig {
            agent: Agent::VTrace,
            loss: ImpalaLossConfig::impala_paper(),
            optimizer: OptimizerConfig::constant_adam(6e-4),
            max_grad_norm: 40.0,
            acting_average: 0.0,
        },
        weights,
        None,
    )?;
    let dev = Device::Cpu;
    let mut rng = Lcg(11);
    let mut obs_shape = vec![t1, b];
    obs_shape.extend(&case.spec.obs_shape);
    let n = t1 * b * case.spec.obs_len();
    let obs = match case.inputs(n, &mut rng) {
        (floats, _) if case.spec.obs_dtype == ObsDType::F32 => {
            Tensor::from_vec(floats, obs_shape, &dev)?
        }
        (_, bytes) => Tensor::from_vec(bytes, obs_shape, &dev)?,
    };
    let a = case.spec.action.dim();
    let steps = t1 * b;
    let flags = |rng: &mut Lcg| -> Vec<u8> {
        (0..steps)
            .map(|_| u8::from(rng.next().is_multiple_of(50)))
            .collect()
    };
    let (terminated, truncated) = (flags(&mut rng), vec![0u8; steps]);
    let episode_start: Vec<f32> = flags(&mut rng).into_iter().map(f32::from).collect();
    let batch = TrainBatch {
        obs,
        actions: Tensor::from_vec(
            (0..steps)
                .map(|_| rng.next() % a as u32)
                .collect::<Vec<_>>(),
            (t1, b),
            &dev,
        )?,
        rewards: Tensor::from_vec(
            (0..steps).map(|_| rng.float()).collect::<Vec<_>>(),
            (t1, b),
            &dev,
        )?,
        terminated: Tensor::from_vec(terminated, (t1, b), &dev)?,
        truncated: Tensor::from_vec(truncated, (t1, b), &dev)?,
        episode_start: Tensor::from_vec(episode_start, (t1, b), &dev)?,
        behaviour_params: Tensor::from_vec(
            (0..steps * a).map(|_| rng.float()).collect::<Vec<_>>(),
            (t1, b, a),
            &dev,
        )?,
        initial_state: match case.lstm {
            Some(h) => Some(RecurrentState {
                h: Tensor::zeros((b, h), DType::F32, &dev)?,
                c: Tensor::zeros((b, h), DType::F32, &dev)?,
            }),
            None => None,
        },
        policy_versions: vec![0; b],
        keys: (0..b as u64).map(seed_replay::ItemKey).collect(),
        weights: vec![1.0; b],
    };
    let (median, iterations) = time_it(budget, || {
        trainer.step(&batch)?;
        Ok(())
    })?;
    Ok(serde_json::json!({
        "kind": "train", "model": name, "rows": t * b, "batch": b, "unroll": t,
        "median_us": median * 1e6, "iterations": iterations,
        "rows_per_second": (t * b) as f64 / median,
    }))
}

fn main() -> Result<()> {
    let args = Args::parse();
    if args.threads == 0 {
        bail!("--threads: must be at least 1");
    }
    for c in &args.cases {
        if c != "forward" && c != "train" {
            bail!("--cases: unknown case `{c}` (expected forward or train)");
        }
    }
    // Before any thread exists, as the learner's `main` does: candle's
    // pools, then the heap.
    seed_learner::app::threads::configure_candle_threads(Some(args.threads));
    seed_learner::heap::keep_large_buffers_on_the_heap();
    let budget = Duration::from_millis(args.budget_ms);
    for name in &args.models {
        let case = case(name)?;
        let mut records = Vec::new();
        if args.cases.iter().any(|c| c == "forward") {
            for &rows in &args.batches {
                records.push(forward(name, &case, rows, budget)?);
            }
        }
        if args.cases.iter().any(|c| c == "train") {
            records.push(train(name, &case, budget)?);
        }
        for mut record in records {
            record["side"] = "ours".into();
            record["threads"] = args.threads.into();
            println!("{record}");
        }
    }
    Ok(())
}
