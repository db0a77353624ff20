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
//! Each `forward` iteration uploads `[B, ...obs]` from a host slice, runs
//! `ActorCritic::step` and copies the logits back, as inference does.
//! Throughput is rows (env steps) per second.
//!
//! Run: `RAYON_NUM_THREADS=1 cargo bench -p seed-benches --bench model`
//! (candle re-reads /proc/cpuinfo per matmul when the pool size is unset).
use candle_core::{Device, Tensor};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
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

fn bench_model(c: &mut Criterion) {
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
