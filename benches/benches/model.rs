//! Policy inference on CPU by batch size: what one inference batch costs the
//! learner, from host observations to host logits.
//!
//! Groups:
//! - `model/mlp_cartpole`: the default MLP (64x64) on 4 x f32, B in
//!   {1, 4, 16, 64, 256, 1024};
//! - `model/conv_84x84x4u8`: the conv torso on Atari-sized u8 frames, B in
//!   {1, 8, 32}.
//!
//! - `model/activation_1024x64`: the MLP's activation on one hidden layer's
//!   output, `[1024, 64]`: our vectorised `tanh` (`seed_learner::model::tanh`,
//!   what the MLP uses) against candle's `tanh` (a scalar libm call per
//!   element on CPU, which was ~80% of `mlp_cartpole/forward/1024` in perf)
//!   and `relu` as the floor.
//!
//! - `model/first_conv_train`: forward and backward of the conv torso's
//!   first layer (plus ReLU and a sum) on a training batch of MinAtar
//!   frames (`[320, 4, 10, 10]`: B 16 x T 20) and of Atari frames
//!   (`[64, 4, 84, 84]`): candle's `Conv2d` (whose backward also computes
//!   the observations' gradient), `PatchConv` built from candle ops
//!   (patches x weights, then the ReLU) and `PatchConv::forward_relu` (the
//!   layer and its ReLU as one op, what the torso uses in f32 on the CPU).
//!
//! - `model/bias_train`: forward and backward of a bias added to a layer's
//!   output (times a fixed weighting, summed): candle's `broadcast_add`
//!   (whose bias gradient is a reduction over leading dimensions, two
//!   integer divisions per element on the CPU) against `bias_add` (the
//!   gradient as a row sum, what the model's layers use), on the CartPole
//!   MLP's `[272, 64]` (B 16 x T+1 17) and MinAtar's first conv output
//!   `[21504, 16]` (B 16 x T+1 21 frames x 8 x 8 positions).
//!
//! Each `forward` iteration uploads `[B, ...obs]` from a host slice, runs
//! `ActorCritic::step` and copies the logits back, as inference does.
//! Throughput is rows (env steps) per second.
//!
//! Run: `RAYON_NUM_THREADS=1 cargo bench -p seed-benches --bench model`
//! (candle re-reads /proc/cpuinfo per matmul when the pool size is unset).
use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{Conv2dConfig, VarBuilder, VarMap};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use seed_learner::model::patch_conv::PatchConv;
use seed_learner::model::{ModelConfig, TrainableModel};
use seed_shared::{EnvSpec, ObsDType};

fn bench_spec(c: &mut Criterion, group_name: &str, spec: &EnvSpec, batches: &[usize]) {
    let device = Device::Cpu;
    let cfg = ModelConfig::for_spec(spec);
    let model = match TrainableModel::new(&cfg, &device, 1) {
        Ok(m) => m.model,
        Err(e) => panic!("model construction failed: {e}"),
    };
    let obs_len = spec.obs_len();
    let mut dims = vec![0usize];
    dims.extend(spec.obs_shape.iter().copied());
    let mut group = c.benchmark_group(group_name);
    for &b in batches {
        group.throughput(Throughput::Elements(b as u64));
        let host: Vec<f32> = (0..b * obs_len).map(|i| (i % 251) as f32 * 0.01).collect();
        dims[0] = b;
        group.bench_with_input(BenchmarkId::new("forward", b), &b, |bench, _| {
            bench.iter(|| {
                let obs = Tensor::from_slice(&host, dims.as_slice(), &device)?;
                let step = model.step(&obs, None)?;
                step.policy_params.flatten_all()?.to_vec1::<f32>()
            })
        });
    }
    group.finish();
}

fn bench_activation(c: &mut Criterion) {
    let device = Device::Cpu;
    let host: Vec<f32> = (0..1024 * 64)
        .map(|i| (i % 97) as f32 * 0.02 - 1.0)
        .collect();
    let x = match Tensor::from_slice(&host, (1024, 64), &device) {
        Ok(x) => x,
        Err(e) => panic!("tensor: {e}"),
    };
    let mut group = c.benchmark_group("model/activation_1024x64");
    group.throughput(Throughput::Elements(1024 * 64));
    group.bench_function("tanh_vectorised", |b| {
        b.iter(|| seed_learner::model::tanh::tanh(&x))
    });
    group.bench_function("tanh_candle", |b| b.iter(|| x.tanh()));
    group.bench_function("relu", |b| b.iter(|| x.relu()));
    group.finish();
}

/// One training pass through a first conv layer: forward, ReLU, sum, backward.
fn train_pass(layer: &dyn Module, xs: &Tensor) -> candle_core::Result<()> {
    layer.forward(xs)?.relu()?.sum_all()?.backward()?;
    Ok(())
}

fn bench_first_conv(c: &mut Criterion) {
    let mut group = c.benchmark_group("model/first_conv_train");
    // (name, [B, C, H, W], kernel, stride): the two torsos' first layers.
    for (name, shape, kernel, stride) in [
        ("minatar_320x4x10x10", [320, 4, 10, 10], 3, 1),
        ("atari_64x4x84x84", [64, 4, 84, 84], 8, 4),
    ] {
        let map = VarMap::new();
        let vb = VarBuilder::from_varmap(&map, DType::F32, &Device::Cpu);
        let frame = [shape[1], shape[2], shape[3]];
        let built = PatchConv::new(frame, 16, kernel, stride, vb.pp("conv")).and_then(|patch| {
            let cfg = Conv2dConfig {
                stride,
                ..Default::default()
            };
            Ok((
                patch,
                candle_nn::conv2d(shape[1], 16, kernel, cfg, vb.pp("conv"))?,
            ))
        });
        let (patch, conv) = match built {
            Ok(layers) => layers,
            Err(e) => panic!("layers: {e}"),
        };
        let n: usize = shape.iter().product();
        let host: Vec<f32> = (0..n).map(|i| (i % 251) as f32 / 251.0).collect();
        let xs = match Tensor::from_vec(host, shape.to_vec(), &Device::Cpu) {
            Ok(xs) => xs,
            Err(e) => panic!("tensor: {e}"),
        };
        group.throughput(Throughput::Elements(shape[0] as u64));
        group.bench_function(BenchmarkId::new("conv2d", name), |b| {
            b.iter(|| train_pass(&conv, &xs))
        });
        group.bench_function(BenchmarkId::new("patch_conv", name), |b| {
            b.iter(|| train_pass(&patch, &xs))
        });
        group.bench_function(BenchmarkId::new("patch_conv_relu", name), |b| {
            b.iter(|| -> candle_core::Result<()> {
                patch.forward_relu(&xs)?.sum_all()?.backward()?;
                Ok(())
            })
        });
    }
    group.finish();
}

/// One training pass through a bias: forward, weighting, sum, backward.
fn bias_pass(
    add: impl Fn(&Tensor, &Tensor) -> candle_core::Result<Tensor>,
    xs: &Tensor,
    bias: &candle_core::Var,
    weights: &Tensor,
) -> candle_core::Result<()> {
    (add(xs, bias.as_tensor())? * weights)?
        .sum_all()?
        .backward()?;
    Ok(())
}

fn bench_bias(c: &mut Criterion) {
    let mut group = c.benchmark_group("model/bias_train");
    for (name, rows, width) in [
        ("mlp_272x64", 272, 64),
        ("minatar_conv_21504x16", 21504, 16),
    ] {
        let built = (|| -> candle_core::Result<_> {
            let host: Vec<f32> = (0..rows * width)
                .map(|i| (i % 97) as f32 * 0.02 - 1.0)
                .collect();
            let xs = candle_core::Var::from_vec(host.clone(), (rows, width), &Device::Cpu)?;
            let weights = Tensor::from_vec(host, (rows, width), &Device::Cpu)?;
            let bias = candle_core::Var::zeros(width, DType::F32, &Device::Cpu)?;
            Ok((xs, weights, bias))
        })();
        let (xs, weights, bias) = match built {
            Ok(t) => t,
            Err(e) => panic!("tensors: {e}"),
        };
        group.throughput(Throughput::Elements((rows * width) as u64));
        group.bench_function(BenchmarkId::new("broadcast_add", name), |b| {
            b.iter(|| bias_pass(|x, b| x.broadcast_add(b), &xs, &bias, &weights))
        });
        group.bench_function(BenchmarkId::new("bias_add", name), |b| {
            b.iter(|| {
                bias_pass(
                    seed_learner::model::bias_add::bias_add,
                    &xs,
                    &bias,
                    &weights,
                )
            })
        });
    }
    group.finish();
}

fn bench_model(c: &mut Criterion) {
    bench_bias(c);
    bench_first_conv(c);
    bench_activation(c);
    bench_spec(
        c,
        "model/mlp_cartpole",
        &EnvSpec::cartpole(),
        &[1, 4, 16, 64, 256, 1024],
    );
    bench_spec(
        c,
        "model/conv_84x84x4u8",
        &EnvSpec::synthetic(vec![4, 84, 84], ObsDType::U8, 6),
        &[1, 8, 32],
    );
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = bench_model
}
criterion_main!(benches);
