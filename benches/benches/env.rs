//! Environment stepping on the actor: what one env step costs, alone and as
//! a pool half (step plus encoding the half's step batch).
//!
//! Groups:
//! - `env/cartpole`: `step` of one CartPole (auto-reset on episode end);
//! - `env/pool_cartpole`: `EnvPool::step_half` + `take_batch` for K in
//!   {2, 64, 512} (halves of K/2);
//! - `env/pool_atari_84x84x4u8`: the same for the synthetic 84x84x4 u8 env,
//!   K in {2, 64}.
//!
//! Throughput is env steps per second.
//!
//! Run: `cargo bench -p seed-benches --bench env`.
use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use seed_actor::EnvPool;
use seed_env::{Action, CartPole, Env, EnvConfig, SyntheticConfig};
use seed_shared::ObsDType;

fn bench_cartpole(c: &mut Criterion) {
    let mut group = c.benchmark_group("env/cartpole");
    group.throughput(Throughput::Elements(1));
    let mut env = CartPole::new();
    let mut obs = [0u8; 16];
    env.reset(1, &mut obs).expect("reset");
    let mut action = 0u32;
    let mut episode = 1u64;
    group.bench_function("step", |b| {
        b.iter(|| {
            action ^= 1;
            let t = env
                .step(Action::Discrete(black_box(action)), &mut obs)
                .expect("cartpole step");
            if t.terminated || t.truncated {
                episode += 1;
                env.reset(episode, &mut obs).expect("reset");
            }
            t.reward
        })
    });
    group.finish();
}

fn bench_pool(c: &mut Criterion, name: &str, env: &EnvConfig, sizes: &[usize]) {
    let mut group = c.benchmark_group(name);
    for &k in sizes {
        let mut pool = EnvPool::from_config(env, k, 3).expect("env pool");
        let half = pool.half_envs(0).len();
        let actions: Vec<u32> = (0..half as u32).map(|i| i % 2).collect();
        let mut seq = 0u64;
        group.throughput(Throughput::Elements(half as u64));
        group.bench_with_input(BenchmarkId::new("step_half_and_encode", k), &k, |b, _| {
            b.iter(|| {
                pool.step_half(0, black_box(&actions)).expect("step");
                seq += 1;
                pool.take_batch(0, seq).observations.len()
            })
        });
    }
    group.finish();
}

fn bench_env(c: &mut Criterion) {
    bench_cartpole(c);
    bench_pool(c, "env/pool_cartpole", &EnvConfig::CartPole, &[2, 64, 512]);
    let atari = EnvConfig::Synthetic(SyntheticConfig {
        obs_shape: vec![4, 84, 84],
        obs_dtype: ObsDType::U8,
        num_actions: 6,
        step_cost_us: 0,
        episode_len: 1000,
    });
    bench_pool(c, "env/pool_atari_84x84x4u8", &atari, &[2, 64]);
}

criterion_group!(benches, bench_env);
criterion_main!(benches);
