//! Criterion benchmarks of the replay buffer, a group per scenario: the
//! TorchRL RFC workloads (sample 128 of 3x4 and of a dict item from 100k,
//! steady-state insert in batches of 1/100/1000, prioritized sample+update
//! at 1M) and a FIFO insert-then-consume round trip. Buffers are filled
//! (first-touched) before timing. `replay_bench` prints the same figures as
//! JSON with ratios to the references.
use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use seed_benches::replay_workload;
use seed_replay::{
    FieldRef, ItemKey, ItemLayout, PrioritizedConfig, ReplayBuffer, ReplayConfig, SamplerConfig,
    Values,
};

/// The shared RFC workload, with failures as panics (a bench has no caller).
fn layout_3x4() -> ItemLayout {
    replay_workload::layout_3x4().expect("valid layout")
}

fn layout_dict() -> ItemLayout {
    replay_workload::layout_dict().expect("valid layout")
}

fn fill(b: &ReplayBuffer, n: usize) {
    replay_workload::fill(b, n).expect("fill");
}

fn sample128(c: &mut Criterion) {
    let mut g = c.benchmark_group("sample128_of_100k");
    g.throughput(Throughput::Elements(128));
    for (name, layout) in [("3x4_f32", layout_3x4()), ("dict_a_b_c", layout_dict())] {
        let b = ReplayBuffer::new(layout, ReplayConfig::new(100_000, SamplerConfig::Uniform))
            .expect("buffer");
        fill(&b, 100_000);
        let mut batch = b.new_batch(128);
        g.bench_function(name, |bench| {
            bench.iter(|| {
                b.sample_into(&mut batch, 128).expect("sample");
                black_box(batch.keys()[0]);
            })
        });
    }
    g.finish();
}

fn insert_steady_state(c: &mut Criterion) {
    let mut g = c.benchmark_group("insert_full_100k_3x4");
    let b = ReplayBuffer::new(
        layout_3x4(),
        ReplayConfig::new(100_000, SamplerConfig::Uniform),
    )
    .expect("buffer");
    fill(&b, 100_000);
    for rows in [1usize, 100, 1000] {
        let xs: Vec<f32> = (0..rows * 12).map(|i| i as f32).collect();
        let shape = [rows, 3, 4];
        let fields = [FieldRef::new(&shape, Values::F32(&xs))];
        g.throughput(Throughput::Elements(rows as u64));
        g.bench_function(format!("batch_{rows}"), |bench| {
            bench.iter(|| black_box(b.insert_batch(&fields, rows).expect("insert")))
        });
    }
    g.finish();
}

fn prioritized_1m(c: &mut Criterion) {
    let mut g = c.benchmark_group("prioritized_1m");
    g.sample_size(30);
    let n = 1_000_000;
    let cfg = ReplayConfig::new(n, SamplerConfig::Prioritized(PrioritizedConfig::default()));
    let b = ReplayBuffer::new(layout_3x4(), cfg).expect("buffer");
    fill(&b, n);
    let keys: Vec<ItemKey> = (0..n as u64).map(ItemKey).collect();
    let prios: Vec<f32> = (0..n)
        .map(|i| ((i * 7919) % 1000) as f32 / 100.0 + 0.01)
        .collect();
    b.update_priorities(&keys, &prios).expect("priorities");
    let mut batch = b.new_batch(128);
    let new_prios: Vec<f32> = (0..128).map(|i| i as f32 * 0.1 + 0.01).collect();
    g.bench_function("sample128_update128", |bench| {
        bench.iter(|| {
            b.sample_into(&mut batch, 128).expect("sample");
            black_box(
                b.update_priorities(batch.keys(), &new_prios)
                    .expect("update"),
            );
        })
    });
    g.finish();
}

fn fifo_round_trip(c: &mut Criterion) {
    let mut g = c.benchmark_group("fifo_insert128_consume128");
    g.throughput(Throughput::Elements(128));
    let b = ReplayBuffer::new(layout_3x4(), ReplayConfig::new(4096, SamplerConfig::Fifo))
        .expect("buffer");
    let xs = vec![1.0f32; 128 * 12];
    let shape = [128, 3, 4];
    let fields = [FieldRef::new(&shape, Values::F32(&xs))];
    let mut batch = b.new_batch(128);
    g.bench_function("3x4_f32", |bench| {
        bench.iter_batched(
            || (),
            |()| {
                b.insert_batch(&fields, 128).expect("insert");
                b.sample_into(&mut batch, 128).expect("consume");
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

criterion_group!(
    benches,
    sample128,
    insert_steady_state,
    prioritized_1m,
    fifo_round_trip
);
criterion_main!(benches);
