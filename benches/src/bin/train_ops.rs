//! Tensor ops per training step, the stand-in for kernel launches on a GPU,
//! counted on the CPU build (no GPU needed).
//!
//! For the CartPole MLP and the same model with an LSTM core, one training
//! step as the trainer runs it (unroll, IMPALA loss, backward, gradient
//! clip, Adam) on a synthetic batch of `--batch-size` unrolls of
//! `--unroll-length` transitions:
//!
//! - `forward`: ops in the loss's autograd graph
//!   (`seed_learner::model::graph_ops`);
//! - `backward`: ops in the gradients' graphs beyond those, with
//!   `CANDLE_GRAD_DO_NOT_DETACH=1` so candle keeps them (a lower bound: the
//!   first ops on the loss's unit gradient, and the zeros candle creates to
//!   accumulate each gradient into, hold no graph);
//! - `optimizer`: the update's ops for `P` variables, clip included, from
//!   the formulas in `learn::optimizer`'s docs: per variable (the form
//!   before the flat buffers) and flat (now);
//! - `lstm_core`: the LSTM core's unroll alone, forward and backward, in
//!   candle's cell (what the core replaced) and in the core with each
//!   input projection (`Batched` on a GPU, `Fused` on a CPU: one op for
//!   the whole recurrence, `PerStep` candle's ops on a CPU before it). The
//!   model's `forward` and `backward` above are the CPU's, `Fused`.
//!
//! `cargo run --release -p seed-benches --bin train_ops [-- --json FILE]`
use anyhow::{Context, Result};
use candle_core::{DType, Device, Tensor};
use clap::Parser;
use seed_learner::learn::optimizer::{Optimizer, OptimizerConfig};
use seed_learner::learn::vtrace::{impala_loss, ImpalaLossConfig, ImpalaLossInputs};
use seed_learner::model::graph_ops::ops_in_graph;
use seed_learner::model::lstm::{InputProjection, LstmCore};
use seed_learner::model::{ModelConfig, RecurrentState, TrainableModel};
use seed_shared::EnvSpec;

#[derive(Parser, Debug)]
#[command(about = "Tensor ops (GPU kernel launches) per training step, counted on the CPU")]
struct Args {
    /// T: transitions per unroll.
    #[arg(long, default_value_t = 16)]
    unroll_length: usize,
    /// B: unrolls per batch.
    #[arg(long, default_value_t = 16)]
    batch_size: usize,
    /// Hidden size of the LSTM model's core.
    #[arg(long, default_value_t = 64)]
    lstm_size: usize,
    /// Write the results as one JSON object here.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
}

#[derive(serde::Serialize)]
struct Count {
    model: String,
    variables: usize,
    forward: usize,
    backward_at_least: usize,
    optimizer_per_variable: usize,
    optimizer_flat: usize,
}

/// Forward and backward ops of one LSTM core unroll.
#[derive(serde::Serialize)]
struct CoreCount {
    variant: &'static str,
    forward: usize,
    backward_at_least: usize,
}

/// The core alone over `[T+1, B, in]` inputs that depend on a variable (as
/// the torso's features do), in candle's cell and in ours.
fn count_core(t1: usize, b: usize, input: usize, hidden: usize) -> Result<Vec<CoreCount>> {
    use candle_nn::rnn::{LSTMConfig, LSTMState, RNN};
    let dev = Device::Cpu;
    let map = candle_nn::VarMap::new();
    let vb = candle_nn::VarBuilder::from_varmap(&map, DType::F32, &dev);
    let ours = LstmCore::new(input, hidden, vb.clone())?;
    let candle = candle_nn::rnn::lstm(input, hidden, LSTMConfig::default(), vb)?;
    let source = candle_core::Var::randn(0f32, 1.0, (t1, b, input), &dev)?;
    let starts = Tensor::zeros((t1, b), DType::F32, &dev)?;
    let zero = Tensor::zeros((b, hidden), DType::F32, &dev)?;
    let vars = map.all_vars();
    let measure = |variant: &'static str, out: Tensor| -> Result<CoreCount> {
        let loss = out.sum_all()?;
        let forward = ops_in_graph([&loss]);
        let grads = loss.backward()?;
        let mut roots = vec![loss.clone()];
        roots.extend(
            vars.iter()
                .filter_map(|v| grads.get(v.as_tensor()).cloned()),
        );
        roots.extend(grads.get(source.as_tensor()).cloned());
        Ok(CoreCount {
            variant,
            forward,
            backward_at_least: ops_in_graph(roots.iter()) - forward,
        })
    };
    let keep = starts.affine(-1.0, 1.0)?;
    let xs = source.as_tensor().tanh()?;
    let mut state = LSTMState::new(zero.clone(), zero.clone());
    let mut outs = Vec::with_capacity(t1);
    for t in 0..t1 {
        let k = keep.get(t)?.unsqueeze(1)?;
        let masked = LSTMState::new(state.h.broadcast_mul(&k)?, state.c.broadcast_mul(&k)?);
        state = candle.step(&xs.get(t)?, &masked)?;
        outs.push(state.h.clone());
    }
    let initial = RecurrentState {
        h: zero.clone(),
        c: zero,
    };
    Ok(vec![
        measure("candle_cell", Tensor::stack(&outs, 0)?)?,
        measure(
            "per_step_projection",
            ours.unroll_with(
                &source.as_tensor().tanh()?,
                &starts,
                Some(&initial),
                InputProjection::PerStep,
            )?,
        )?,
        measure(
            "batched_projection",
            ours.unroll_with(
                &source.as_tensor().tanh()?,
                &starts,
                Some(&initial),
                InputProjection::Batched,
            )?,
        )?,
        measure(
            "fused",
            ours.unroll_with(
                &source.as_tensor().tanh()?,
                &starts,
                Some(&initial),
                InputProjection::Fused,
            )?,
        )?,
    ])
}

fn count(name: &str, lstm_size: Option<usize>, t: usize, b: usize) -> Result<Count> {
    let dev = Device::Cpu;
    let mut cfg = ModelConfig::for_spec(&EnvSpec::cartpole());
    cfg.lstm_size = lstm_size;
    let model = TrainableModel::new(&cfg, &dev, 1)?;
    let optimizer = Optimizer::new(&model.varmap, OptimizerConfig::constant_adam(6e-4))?;
    let t1 = t + 1;
    let obs = Tensor::randn(0f32, 1.0, (t1, b, 4), &dev)?;
    let episode_start = Tensor::zeros((t1, b), DType::F32, &dev)?;
    let initial = match lstm_size {
        Some(h) => Some(seed_learner::model::RecurrentState {
            h: Tensor::zeros((b, h), DType::F32, &dev)?,
            c: Tensor::zeros((b, h), DType::F32, &dev)?,
        }),
        None => None,
    };
    let out = model.model.unroll(&obs, &episode_start, initial.as_ref())?;
    let loss = impala_loss(
        &ImpalaLossInputs {
            distribution: cfg.action,
            target_params: &out.policy_params,
            values: &out.values,
            behaviour_params: &Tensor::zeros((t1, b, 2), DType::F32, &dev)?,
            actions: &Tensor::zeros((t1, b), DType::U32, &dev)?,
            rewards: &Tensor::ones((t1, b), DType::F32, &dev)?,
            terminated: &Tensor::zeros((t1, b), DType::U8, &dev)?,
            truncated: &Tensor::zeros((t1, b), DType::U8, &dev)?,
        },
        &ImpalaLossConfig::impala_paper(),
    )?;
    let forward = ops_in_graph([&loss.total]);
    let grads = loss.total.backward()?;
    let grad_tensors: Vec<Tensor> = optimizer
        .vars()
        .filter_map(|v| grads.get(v.as_tensor()).cloned())
        .collect();
    let total = ops_in_graph(std::iter::once(&loss.total).chain(grad_tensors.iter()));
    let p = optimizer.vars().count();
    Ok(Count {
        model: name.to_string(),
        variables: p,
        forward,
        backward_at_least: total - forward,
        // Adam: 15 ops per variable; the clip's norm a square and a sum
        // per variable, a stack (P copies), a sum and a root; its scaling
        // 1 per variable.
        optimizer_per_variable: 15 * p + (3 * p + 2) + p,
        // Adam over the flat buffer: 3P + 13; the clip's norm over the flat
        // gradients P + 3, its scaling P.
        optimizer_flat: (3 * p + 13) + (p + 3) + p,
    })
}

fn main() -> Result<()> {
    // candle reads this once per thread, at its first backward pass: set it
    // before any (and before any other thread exists).
    std::env::set_var("CANDLE_GRAD_DO_NOT_DETACH", "1");
    if std::env::var_os("RAYON_NUM_THREADS").is_none() {
        std::env::set_var("RAYON_NUM_THREADS", "1");
    }
    let args = Args::parse();
    let (t, b) = (args.unroll_length, args.batch_size);
    let counts = vec![
        count("cartpole_mlp", None, t, b)?,
        count("cartpole_lstm", Some(args.lstm_size), t, b)?,
    ];
    for c in &counts {
        eprintln!(
            "{:<14} P={:<3} forward {:>4}  backward >= {:>4}  optimizer {:>4} -> {:>3}",
            c.model,
            c.variables,
            c.forward,
            c.backward_at_least,
            c.optimizer_per_variable,
            c.optimizer_flat,
        );
    }
    // The LSTM model's core: torso width (64) in, --lstm-size out.
    let core = count_core(t + 1, b, 64, args.lstm_size)?;
    for c in &core {
        eprintln!(
            "lstm core, {:<20} forward {:>4}  backward >= {:>4}",
            c.variant, c.forward, c.backward_at_least
        );
    }
    let report = serde_json::json!({
        "unroll_length": t,
        "batch_size": b,
        "counts": counts,
        "lstm_core": core,
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
