//! V-trace on CPU: the plain-slice kernel alone and through tensors.
//!
//! Groups `vtrace/T{t}_B{b}` for T ∈ {20, 80}, B ∈ {32, 256}, each with
//! - `slices`: `vtrace_slices` into preallocated buffers (the kernel alone);
//! - `tensor`: `vtrace`, what the IMPALA loss calls (the inputs staged and
//!   copied out, the kernel, the outputs copied back).
//!
//! Run: `RAYON_NUM_THREADS=1 cargo bench -p seed-benches --bench vtrace`.
use std::hint::black_box;

use candle_core::{Device, Tensor};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use seed_learner::learn::vtrace::targets::{
    vtrace, vtrace_slices, VTraceInputs, VTraceSlices, VTraceSlicesOut,
};
use seed_learner::learn::vtrace::VTraceClip;

/// Random time-major inputs, `T·B` each (`B` for the bootstrap).
struct HostInputs {
    batch: usize,
    behaviour_log_probs: Vec<f32>,
    target_log_probs: Vec<f32>,
    discounts: Vec<f32>,
    rewards: Vec<f32>,
    values: Vec<f32>,
    bootstrap_value: Vec<f32>,
    valid: Vec<f32>,
}

impl HostInputs {
    fn random(t_len: usize, batch: usize) -> Self {
        let mut rng = StdRng::seed_from_u64(0);
        let n = t_len * batch;
        let mut column = |low: f32, high: f32| -> Vec<f32> {
            (0..n).map(|_| rng.random_range(low..high)).collect()
        };
        let behaviour_log_probs = column(-3.0, 0.0);
        let target_log_probs = column(-3.0, 0.0);
        let rewards = column(-1.0, 1.0);
        let values = column(-2.0, 2.0);
        let discounts = (0..n)
            .map(|_| if rng.random_bool(0.02) { 0.0 } else { 0.99 })
            .collect();
        let valid = (0..n)
            .map(|_| if rng.random_bool(0.01) { 0.0 } else { 1.0 })
            .collect();
        let bootstrap_value = (0..batch).map(|_| rng.random_range(-2.0..2.0)).collect();
        Self {
            batch,
            behaviour_log_probs,
            target_log_probs,
            discounts,
            rewards,
            values,
            bootstrap_value,
            valid,
        }
    }

    fn slices(&self) -> VTraceSlices<'_> {
        VTraceSlices {
            batch: self.batch,
            behaviour_log_probs: &self.behaviour_log_probs,
            target_log_probs: &self.target_log_probs,
            discounts: &self.discounts,
            rewards: &self.rewards,
            values: &self.values,
            bootstrap_value: &self.bootstrap_value,
            valid: &self.valid,
        }
    }
}

/// The same inputs as `[T, B]` CPU tensors.
struct TensorInputs {
    behaviour_log_probs: Tensor,
    target_log_probs: Tensor,
    discounts: Tensor,
    rewards: Tensor,
    values: Tensor,
    bootstrap_value: Tensor,
    valid: Tensor,
}

impl TensorInputs {
    fn from_host(host: &HostInputs, t_len: usize) -> candle_core::Result<Self> {
        let shape = (t_len, host.batch);
        let tensor = |xs: &[f32]| Tensor::from_slice(xs, shape, &Device::Cpu);
        Ok(Self {
            behaviour_log_probs: tensor(&host.behaviour_log_probs)?,
            target_log_probs: tensor(&host.target_log_probs)?,
            discounts: tensor(&host.discounts)?,
            rewards: tensor(&host.rewards)?,
            values: tensor(&host.values)?,
            bootstrap_value: Tensor::from_slice(&host.bootstrap_value, host.batch, &Device::Cpu)?,
            valid: tensor(&host.valid)?,
        })
    }

    fn inputs(&self) -> VTraceInputs<'_> {
        VTraceInputs {
            behaviour_log_probs: &self.behaviour_log_probs,
            target_log_probs: &self.target_log_probs,
            discounts: &self.discounts,
            rewards: &self.rewards,
            values: &self.values,
            bootstrap_value: &self.bootstrap_value,
            valid: &self.valid,
        }
    }
}

fn bench_vtrace(c: &mut Criterion) {
    let clip = VTraceClip::default();
    for t_len in [20usize, 80] {
        for batch in [32usize, 256] {
            let host = HostInputs::random(t_len, batch);
            let tensors = match TensorInputs::from_host(&host, t_len) {
                Ok(tensors) => tensors,
                Err(err) => panic!("building bench tensors: {err}"),
            };
            let n = t_len * batch;
            let mut group = c.benchmark_group(format!("vtrace/T{t_len}_B{batch}"));
            group.throughput(Throughput::Elements(n as u64));

            let (mut vs, mut pg_advantages, mut advantages, mut clipped_rhos) =
                (vec![0f32; n], vec![0f32; n], vec![0f32; n], vec![0f32; n]);
            group.bench_function(BenchmarkId::from_parameter("slices"), |bench| {
                bench.iter(|| {
                    let result = vtrace_slices(
                        black_box(&host.slices()),
                        &clip,
                        VTraceSlicesOut {
                            vs: &mut vs,
                            pg_advantages: &mut pg_advantages,
                            advantages: &mut advantages,
                            clipped_rhos: &mut clipped_rhos,
                        },
                    );
                    black_box(result.is_ok())
                })
            });
            group.bench_function(BenchmarkId::from_parameter("tensor"), |bench| {
                bench.iter(|| black_box(vtrace(&tensors.inputs(), &clip).is_ok()))
            });
            group.finish();
        }
    }
}

criterion_group!(benches, bench_vtrace);
criterion_main!(benches);
