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
//!   output, `[1024, 64]`: our vectorised `tanh` (`seed_learner::model::cpu::tanh`,
//!   what the MLP uses) against candle's `tanh` (a scalar libm call per
//!   element on CPU, which was ~80% of `mlp_cartpole/forward/1024` in perf)
//!   and `relu` as the floor.
//!
//! - `model/conv_train`: forward and backward of a conv layer and its ReLU
//!   (then a sum) on a training batch: MinAtar's layer (`[320, 4, 10,
//!   10]`: B 16 x T 20) and the Atari torso's two (`[64, 4, 84, 84]`, and
//!   `[64, 16, 20, 20]` whose input takes a gradient): candle's `conv2d`
//!   against the CPU op the torso uses (`model::cpu::conv_relu`).
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
use candle_core::{DType, Device, Tensor};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use seed_learner::model::cpu::conv_relu::ConvRelu;
use seed_learner::model::cpu::im2col::ConvGeometry;
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
        b.iter(|| seed_learner::model::cpu::tanh::tanh(&x))
    });
    group.bench_function("tanh_candle", |b| b.iter(|| x.tanh()));
    group.bench_function("relu", |b| b.iter(|| x.relu()));
    group.finish();
}

/// One training pass through a conv layer and its ReLU: forward, a sum,
/// backward (reaching the input when it is a variable).
fn conv_pass(
    layer: impl Fn(&Tensor) -> candle_core::Result<Tensor>,
    xs: &Tensor,
) -> candle_core::Result<()> {
    layer(xs)?.sum_all()?.backward()?;
    Ok(())
}

fn bench_conv(c: &mut Criterion) {
    let mut group = c.benchmark_group("model/conv_train");
    // (name, [B, C, H, W], out channels, kernel, stride, input gradient):
    // the torsos' layers on a training batch.
    for (name, shape, out, kernel, stride, input_grad) in [
        ("minatar_320x4x10x10", [320, 4, 10, 10], 16, 3, 1, false),
        ("atari1_64x4x84x84", [64, 4, 84, 84], 16, 8, 4, false),
        ("atari2_64x16x20x20", [64, 16, 20, 20], 32, 4, 2, true),
    ] {
        let built = (|| -> candle_core::Result<_> {
            let geometry = ConvGeometry::new([shape[1], shape[2], shape[3]], out, kernel, stride)
                .map_err(candle_core::Error::Msg)?;
            let n: usize = shape.iter().product();
            let host: Vec<f32> = (0..n).map(|i| (i % 251) as f32 / 251.0 - 0.3).collect();
            let data = Tensor::from_vec(host, shape.to_vec(), &Device::Cpu)?;
            let xs = if input_grad {
                candle_core::Var::from_tensor(&data)?.as_tensor().clone()
            } else {
                data
            };
            let weight =
                candle_core::Var::randn(0f32, 0.1, (out, shape[1], kernel, kernel), &Device::Cpu)?;
            let bias = candle_core::Var::zeros(out, DType::F32, &Device::Cpu)?;
            Ok((geometry, xs, weight, bias))
        })();
        let (geometry, xs, weight, bias) = match built {
            Ok(t) => t,
            Err(e) => panic!("layer: {e}"),
        };
        group.throughput(Throughput::Elements(shape[0] as u64));
        group.bench_function(BenchmarkId::new("candle_conv2d", name), |b| {
            b.iter(|| {
                conv_pass(
                    |x| {
                        x.conv2d(weight.as_tensor(), 0, stride, 1, 1)?
                            .broadcast_add(&bias.as_tensor().reshape((1, out, 1, 1))?)?
                            .relu()
                    },
                    &xs,
                )
            })
        });
        group.bench_function(BenchmarkId::new("conv_relu", name), |b| {
            b.iter(|| {
                conv_pass(
                    |x| {
                        let op = ConvRelu {
                            geometry,
                            u8_scale: 1.0,
                        };
                        x.reshape((shape[0], geometry.frame_len()))?.apply_op3(
                            weight.as_tensor(),
                            bias.as_tensor(),
                            op,
                        )
                    },
                    &xs,
                )
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
                    seed_learner::model::cpu::bias_add::bias_add,
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
    bench_conv(c);
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
