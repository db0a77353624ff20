//! The cost of refusing poisoned observations: the non-finite scan of f32
//! observation bytes (`first_non_finite_f32`, part of the learner's step
//! batch validation) beside the decode that the serving path already does
//! to every f32 observation byte (`read_f32_le_into`, in inference), and the
//! whole validation of a CartPole step batch with and without f32 data.
//!
//! Groups: `validation/scan_1MiB` (scan, decode; throughput in bytes) and
//! `validation/step_batch` (CartPole f32 vs the same shape in u8, 256 envs).
//!
//! Run: `cargo bench -p seed-benches --bench validation`.
use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use seed_shared::spec::first_non_finite_f32;
use seed_shared::{codec, pb, EnvSpec, ObsDType};

fn finite_bytes(floats: usize) -> Vec<u8> {
    (0..floats)
        .flat_map(|i| ((i % 1000) as f32 * 0.01 - 5.0).to_le_bytes())
        .collect()
}

fn batch(envs: usize, obs_bytes: usize) -> pb::StepBatch {
    pb::StepBatch {
        seq: 0,
        env_indices: (0..envs as u32).collect(),
        observations: finite_bytes(envs * obs_bytes / 4).into(),
        rewards: vec![1.0; envs],
        terminated: vec![false; envs],
        truncated: vec![false; envs],
        run_ids: vec![1; envs],
        episodes: vec![],
    }
}

fn bench_validation(c: &mut Criterion) {
    const MIB: usize = 1 << 20;
    let bytes = finite_bytes(MIB / 4);
    let mut out = vec![0f32; MIB / 4];
    let mut group = c.benchmark_group("validation/scan_1MiB");
    group.throughput(Throughput::Bytes(MIB as u64));
    group.bench_function("non_finite_scan", |b| {
        b.iter(|| first_non_finite_f32(black_box(&bytes)))
    });
    group.bench_function("decode_f32_le", |b| {
        b.iter(|| codec::read_f32_le_into(black_box(&bytes), &mut out))
    });
    group.finish();

    let mut group = c.benchmark_group("validation/step_batch");
    let envs = 256;
    let f32_spec = EnvSpec::cartpole();
    let u8_spec = EnvSpec::synthetic(vec![16], ObsDType::U8, 2);
    let b = batch(envs, 16);
    group.throughput(Throughput::Bytes(b.observations.len() as u64));
    group.bench_function("cartpole_f32_256_envs", |bench| {
        bench.iter(|| f32_spec.validate_step_batch(black_box(&b), envs as u32))
    });
    group.bench_function("same_bytes_as_u8_256_envs", |bench| {
        bench.iter(|| u8_spec.validate_step_batch(black_box(&b), envs as u32))
    });
    group.finish();
}

criterion_group!(benches, bench_validation);
criterion_main!(benches);
