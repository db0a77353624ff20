//! `sample(128)` from a table loaded from two mapped shards beside one
//! mapped table of the same total size, in process, in the same run: prints
//! one JSON object.
//!
//! `cargo run --release -p seed-benches --bin replay_shards_bench [-- --rounds 5 --samples 20000]`
//!
//! Items are one 3x4 `f32` field, samplers uniform. The single table holds
//! 100k items (`ReplayBuffer::sample_into`); the loaded table is two
//! directories of 50k written by separate buffers and opened by
//! `ShardedTable` (`sample_into`: the split between shards, each shard's
//! sample into a scratch batch, the rows appended into one contiguous
//! block per field). Rounds alternate the two; each round times `--samples`
//! single calls and the reported p50/p99 are medians over rounds. Neither
//! side builds the gRPC reply (that copy is the same for both).
//!
//! The directories are written under the system temp directory and
//! removed at the end.
use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::Parser;
use seed_replay::{DType, FieldRef, ItemLayout, ReplayBuffer, ReplayConfig, SamplerConfig, Values};
use seed_replay_service::server::ShardedTable;
use seed_replay_service::ServiceConfig;
use serde_json::json;

#[derive(Parser, Debug)]
#[command(about = "sample(128): two loaded shards against one table; prints one JSON object")]
struct Args {
    /// Alternating rounds; medians are reported.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Timed `sample(128)` calls per side per round.
    #[arg(long, default_value_t = 20_000)]
    samples: usize,
    /// Items in all (the shards hold half each).
    #[arg(long, default_value_t = 100_000)]
    items: usize,
}

const BATCH: usize = 128;

fn main() -> Result<()> {
    let args = Args::parse();
    anyhow::ensure!(
        args.rounds > 0 && args.samples > 0 && args.items >= 2 * BATCH,
        "--rounds and --samples must be positive, --items at least {}",
        2 * BATCH
    );
    let root = std::env::temp_dir().join(format!("replay_shards_bench.{}", std::process::id()));
    let result = run(&args, &root);
    let _ = std::fs::remove_dir_all(&root);
    println!("{}", serde_json::to_string_pretty(&result?)?);
    Ok(())
}

fn run(args: &Args, root: &Path) -> Result<serde_json::Value> {
    let layout = ItemLayout::builder()
        .field("obs", DType::F32, &[3, 4])
        .build()?;
    let half = args.items / 2;
    let one = write(&root.join("one"), &layout, 2 * half)?;
    let shard_dirs = [root.join("s0"), root.join("s1")];
    for d in &shard_dirs {
        drop(write(d, &layout, half)?);
    }
    let dirs: Vec<String> = shard_dirs
        .iter()
        .map(|d| format!("{:?}", d.display().to_string()))
        .collect();
    let config = ServiceConfig::from_json(&format!(
        r#"{{"tables": [{{"name": "t", "capacity": {half}, "sampler": {{"kind": "uniform"}},
            "fields": [{{"name": "obs", "dtype": "f32", "shape": [3, 4]}}],
            "load": [{}]}}]}}"#,
        dirs.join(", ")
    ))?;
    let spec = config.tables.into_iter().next().context("one table")?;
    let sharded = ShardedTable::open(spec)?;

    let mut one_batch = one.new_batch(BATCH);
    let mut sharded_batch = sharded.new_sharded_batch(BATCH);
    let (mut one_p50, mut one_p99, mut sh_p50, mut sh_p99) = (vec![], vec![], vec![], vec![]);
    // Warm-up: touch both sides' pages once.
    for _ in 0..args.samples / 4 {
        one.sample_into(&mut one_batch, BATCH)?;
        sharded.sample_into(&mut sharded_batch, BATCH)?;
    }
    for _ in 0..args.rounds {
        let t = time(args.samples, || one.sample_into(&mut one_batch, BATCH))?;
        one_p50.push(t.0);
        one_p99.push(t.1);
        let t = time(args.samples, || {
            sharded.sample_into(&mut sharded_batch, BATCH)
        })?;
        sh_p50.push(t.0);
        sh_p99.push(t.1);
    }
    let (a50, a99, b50, b99) = (
        median(&mut one_p50),
        median(&mut one_p99),
        median(&mut sh_p50),
        median(&mut sh_p99),
    );
    Ok(json!({
        "items": 2 * half,
        "batch": BATCH,
        "rounds": args.rounds,
        "samples_per_round": args.samples,
        "one_table_sample128_p50_us": a50,
        "one_table_sample128_p99_us": a99,
        "two_shards_sample128_p50_us": b50,
        "two_shards_sample128_p99_us": b99,
        "two_shards_over_one_table_p50": b50 / a50,
    }))
}

/// A mapped uniform table of `items` items in `dir`, filled.
fn write(dir: &Path, layout: &ItemLayout, items: usize) -> Result<ReplayBuffer> {
    let b = ReplayBuffer::create_mapped(
        dir,
        layout.clone(),
        ReplayConfig::new(items, SamplerConfig::Uniform),
    )?;
    let chunk = 1000;
    let mut obs = vec![0f32; chunk * 12];
    let mut done = 0;
    while done < items {
        let rows = chunk.min(items - done);
        for (i, x) in obs[..rows * 12].iter_mut().enumerate() {
            *x = (done * 12 + i) as f32;
        }
        b.insert_batch(
            &[FieldRef::new(&[rows, 3, 4], Values::F32(&obs[..rows * 12]))],
            rows,
        )?;
        done += rows;
    }
    Ok(b)
}

/// (p50, p99) in microseconds of `n` calls of `f`.
fn time<E: std::error::Error + Send + Sync + 'static>(
    n: usize,
    mut f: impl FnMut() -> Result<(), E>,
) -> Result<(f64, f64)> {
    let mut us = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        f()?;
        us.push(t.elapsed().as_secs_f64() * 1e6);
    }
    us.sort_by(f64::total_cmp);
    Ok((us[n / 2], us[(n * 99 / 100).min(n - 1)]))
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
