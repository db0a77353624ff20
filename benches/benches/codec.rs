//! Step-batch wire costs: protobuf encode and decode of a whole
//! `ActorMessage`, the learner's spec validation, and widening the
//! observation bytes into the f32 inference buffer.
//!
//! Groups `codec/{cartpole_4xf32, atari_84x84x4u8}` with envs per batch in
//! {1, 64, 256}; payloads are real ones from an `EnvPool` (`take_batch`).
//! Throughput is observation bytes per second.
//!
//! Run: `cargo bench -p seed-benches --bench codec`.
use std::hint::black_box;

use bytes::{Bytes, BytesMut};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use prost::Message;
use seed_actor::EnvPool;
use seed_env::{EnvConfig, SyntheticConfig};
use seed_shared::pb::actor_message::Kind;
use seed_shared::{codec, pb, ObsDType};

fn atari() -> EnvConfig {
    EnvConfig::Synthetic(SyntheticConfig {
        obs_shape: vec![4, 84, 84],
        obs_dtype: ObsDType::U8,
        num_actions: 6,
        step_cost_us: 0,
        episode_len: 1000,
    })
}

/// A real step batch of `envs` envs (one pool half holding all of them).
fn step_message(env: &EnvConfig, envs: usize) -> pb::ActorMessage {
    // A pool of 2*envs has two halves of `envs` each (1 env: one half of 1).
    let pool_envs = if envs == 1 { 1 } else { 2 * envs };
    let mut pool = EnvPool::from_config(env, pool_envs, 7).expect("env pool");
    let batch = pool.take_batch(0, 3);
    assert_eq!(batch.env_indices.len(), envs);
    pb::ActorMessage {
        kind: Some(Kind::Steps(batch)),
    }
}

fn bench_codec(c: &mut Criterion) {
    for (name, env) in [
        ("cartpole_4xf32", EnvConfig::CartPole),
        ("atari_84x84x4u8", atari()),
    ] {
        let spec = env.spec();
        let mut group = c.benchmark_group(format!("codec/{name}"));
        for envs in [1usize, 64, 256] {
            let msg = step_message(&env, envs);
            let obs_bytes = (envs * spec.obs_bytes()) as u64;
            group.throughput(Throughput::Bytes(obs_bytes));
            let mut buf = BytesMut::with_capacity(msg.encoded_len());
            group.bench_with_input(BenchmarkId::new("encode", envs), &msg, |b, msg| {
                b.iter(|| {
                    buf.clear();
                    black_box(msg).encode(&mut buf).map_err(|e| e.to_string())
                })
            });
            let encoded: Bytes = msg.encode_to_vec().into();
            group.bench_with_input(BenchmarkId::new("decode", envs), &encoded, |b, enc| {
                b.iter(|| {
                    pb::ActorMessage::decode(black_box(enc.clone())).map(|m| m.kind.is_some())
                })
            });
            let Some(Kind::Steps(batch)) = &msg.kind else {
                unreachable!("step_message builds a step batch")
            };
            let num_envs = 2 * envs as u32;
            group.bench_with_input(BenchmarkId::new("validate", envs), batch, |b, batch| {
                b.iter(|| spec.validate_step_batch(black_box(batch), num_envs).is_ok())
            });
            let mut rows = vec![0f32; envs * spec.obs_len()];
            group.bench_with_input(BenchmarkId::new("to_f32", envs), batch, |b, batch| {
                b.iter(|| match spec.obs_dtype {
                    ObsDType::F32 => {
                        codec::read_f32_le_into(black_box(&batch.observations), &mut rows)
                    }
                    ObsDType::U8 => codec::widen_u8_into(black_box(&batch.observations), &mut rows),
                })
            });
        }
        group.finish();
    }
}

criterion_group!(benches, bench_codec);
criterion_main!(benches);
