//! Inference throughput of the learner's policies, per device and batch size.
//!
//! For each model (the MLP on CartPole's 4 x f32 observations, the conv torso
//! on 84x84x4 u8 frames) and each batch size, one iteration is what the
//! inference thread does per batch: upload the host observation buffer as one
//! tensor, run the forward pass, download the logits once and sample actions
//! on the host. Rows/s = batch / median iteration time. `--devices cpu,cuda:0`
//! measures both devices in the same run so their ratio is meaningful;
//! `--dtypes f32,bf16` runs each with f32 weights and with the bf16 copy
//! `--inference-dtype bf16` serves (the figures carry a `dtype` field).
//! `--paths candle,host` adds the plain-code forward the inference threads
//! use for every f32 CPU model (`seed_learner::model::host_forward`; the
//! figures carry a `path` field; models without one, bf16 copies, are
//! skipped on that path).
//!
//! `cargo run --release -p seed-benches --bin inference_bench -- --json out.json`
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use candle_core::{DType, Device, Tensor};
use clap::Parser;
use seed_learner::model::host_forward::{self, HostForward};
use seed_learner::model::{ActionSampler, InferenceDType, ModelConfig, TrainableModel};
use seed_shared::{EnvSpec, ObsDType};

#[derive(Parser, Debug)]
#[command(about = "Inference rows/s of the MLP and conv policies, per device and batch size")]
struct Args {
    /// Devices to compare, comma separated (`cpu`, `cuda:N` with `--features cuda`).
    #[arg(long, value_delimiter = ',', default_value = "cpu")]
    devices: Vec<String>,
    /// Batch sizes.
    #[arg(long, value_delimiter = ',', default_value = "1,64,256,1024,4096")]
    batch_sizes: Vec<usize>,
    /// Models: `mlp` (CartPole 4 x f32), `conv` (84x84x4 u8).
    #[arg(long, value_delimiter = ',', default_value = "mlp,conv")]
    models: Vec<String>,
    /// Weights' dtypes: `f32`, `bf16` (as `--inference-dtype`).
    #[arg(long, value_delimiter = ',', default_value = "f32")]
    dtypes: Vec<String>,
    /// Forward paths: `candle` (tensors), `host` (the plain code the
    /// inference threads run for f32 CPU models).
    #[arg(long, value_delimiter = ',', default_value = "candle")]
    paths: Vec<String>,
    /// Time budget per (model, device, dtype, path, batch) measurement, in milliseconds.
    #[arg(long, default_value_t = 500)]
    budget_ms: u64,
    /// Write the results as one JSON object here.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
}

fn open_device(spec: &str) -> Result<Device> {
    match spec {
        "cpu" => Ok(Device::Cpu),
        s if s.starts_with("cuda") => {
            let ordinal: usize = match s.strip_prefix("cuda:") {
                Some(n) => n.parse().with_context(|| format!("bad device `{s}`"))?,
                None => 0,
            };
            open_cuda(ordinal).with_context(|| format!("opening device `{s}`"))
        }
        other => bail!("unknown device `{other}` (expected cpu or cuda:N)"),
    }
}

#[cfg(feature = "cuda")]
fn open_cuda(ordinal: usize) -> Result<Device> {
    Ok(Device::new_cuda(ordinal)?)
}

#[cfg(not(feature = "cuda"))]
fn open_cuda(_ordinal: usize) -> Result<Device> {
    bail!("built without CUDA; rebuild with `--features cuda`")
}

/// A host observation buffer shaped like what the batcher gathers.
enum ObsBuffer {
    F32(Vec<f32>),
    U8(Vec<u8>),
}

#[derive(serde::Serialize)]
struct Measurement {
    model: String,
    device: String,
    dtype: String,
    path: String,
    batch: usize,
    iterations: usize,
    median_us: f64,
    rows_per_second: f64,
}

fn measure(
    model: &str,
    device_name: &str,
    dtype: InferenceDType,
    path: &str,
    batch: usize,
    budget: Duration,
) -> Result<Option<Measurement>> {
    let device = open_device(device_name)?;
    let spec = match model {
        "mlp" => EnvSpec::cartpole(),
        "conv" => EnvSpec::synthetic(vec![4, 84, 84], ObsDType::U8, 6),
        other => bail!("unknown model `{other}` (expected mlp or conv)"),
    };
    let cfg = ModelConfig::for_spec(&spec);
    let net = TrainableModel::new(&cfg, &device, 1)?.snapshot_as(dtype.dtype())?;
    let mut shape = vec![batch];
    shape.extend_from_slice(&spec.obs_shape);
    let n = batch * spec.obs_len();
    // Pre-touched, deterministic content (first touch of fresh memory is slow).
    let host = match spec.obs_dtype {
        ObsDType::F32 => ObsBuffer::F32((0..n).map(|i| ((i % 97) as f32) / 97.0 - 0.5).collect()),
        ObsDType::U8 => ObsBuffer::U8((0..n).map(|i| (i % 251) as u8).collect()),
    };
    let mut sampler = ActionSampler::new(1);
    let mut actions = vec![0u32; batch];
    let num_actions = spec.action.dim();
    let host_forward = match path {
        "candle" => None,
        "host" => match HostForward::from_model(&net)? {
            Some(h) => Some(h),
            None => return Ok(None),
        },
        other => bail!("unknown path `{other}` (expected candle or host)"),
    };
    let mut out = host_forward::BatchOutputs::default();
    let threads = seed_learner::model::cpu::pool_threads();
    let mut iteration = || -> Result<()> {
        if let Some(h) = &host_forward {
            let obs = match &host {
                ObsBuffer::F32(v) => host_forward::HostObs::F32(v),
                ObsBuffer::U8(v) => host_forward::HostObs::U8(v),
            };
            let rows = host_forward::HostBatch {
                obs,
                rows: batch,
                h: &[],
                c: &[],
            };
            h.step(&rows, &mut out, threads)?;
            sampler.sample(&out.params, num_actions, &mut actions);
            return Ok(());
        }
        let obs = match &host {
            ObsBuffer::F32(v) => Tensor::from_slice(v, shape.as_slice(), &device)?,
            ObsBuffer::U8(v) => Tensor::from_slice(v, shape.as_slice(), &device)?,
        };
        let out = net.step(&obs, None)?;
        let logits = out
            .policy_params
            .to_dtype(DType::F32)?
            .flatten_all()?
            .to_vec1::<f32>()?;
        sampler.sample(&logits, num_actions, &mut actions);
        Ok(())
    };
    for _ in 0..3 {
        iteration()?; // warm-up: allocator, kernels, caches
    }
    let mut times = Vec::new();
    let start = Instant::now();
    while times.len() < 5 || (start.elapsed() < budget && times.len() < 100_000) {
        let t = Instant::now();
        iteration()?;
        times.push(t.elapsed().as_secs_f64() * 1e6);
    }
    times.sort_by(f64::total_cmp);
    let median_us = times[times.len() / 2];
    Ok(Some(Measurement {
        model: model.to_string(),
        device: device_name.to_string(),
        dtype: dtype.to_string(),
        path: path.to_string(),
        batch,
        iterations: times.len(),
        median_us,
        rows_per_second: batch as f64 / (median_us * 1e-6),
    }))
}

fn main() -> Result<()> {
    if std::env::var_os("RAYON_NUM_THREADS").is_none() {
        // Unset, candle re-reads /proc/cpuinfo on every CPU matmul.
        std::env::set_var("RAYON_NUM_THREADS", "1");
    }
    let args = Args::parse();
    let budget = Duration::from_millis(args.budget_ms);
    let dtypes = args
        .dtypes
        .iter()
        .map(|d| {
            d.parse::<InferenceDType>()
                .map_err(|e| anyhow::anyhow!("--dtypes: {e}"))
        })
        .collect::<Result<Vec<_>>>()?;
    let mut results = Vec::new();
    for model in &args.models {
        for batch in &args.batch_sizes {
            for device in &args.devices {
                for &dtype in &dtypes {
                    for path in &args.paths {
                        let Some(m) = measure(model, device, dtype, path, *batch, budget)? else {
                            eprintln!("{model} {device} {dtype}: no {path} path, skipped");
                            continue;
                        };
                        eprintln!(
                            "{:<4} {:<7} {:<4} {:<6} batch {:>5}: {:>10.1} us  {:>12.0} rows/s",
                            m.model,
                            m.device,
                            m.dtype,
                            m.path,
                            m.batch,
                            m.median_us,
                            m.rows_per_second
                        );
                        results.push(m);
                    }
                }
            }
        }
    }
    let report = serde_json::json!({
        "rayon_num_threads": std::env::var("RAYON_NUM_THREADS").ok(),
        "results": results,
    });
    let text = serde_json::to_string_pretty(&report)?;
    match &args.json {
        Some(path) => {
            std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?
        }
        None => println!("{text}"),
    }
    Ok(())
}
