//! Replay-buffer benchmark harness: prints one JSON object with the TorchRL
//! RFC workloads, concurrency scaling, and ratios to the reference figures
//! measured on this machine (torchrl 0.14.1 CPU, one thread; dm-reverb 0.14).
//!
//! `cargo run --release -p seed-benches --bin replay_bench [-- --quick]`
//!
//! `--scale 1000000,10000000,...` instead: a memory-mapped table at each
//! size (`seed_benches::replay_scale`), one JSON row per (items, item
//! bytes, sampler), written to `--out` as well.
//!
//! Every buffer is filled before timing (which first-touches its memory);
//! each figure is the median of several runs. Top-level figures use the
//! default storage order (records); `columns` repeats the sampling figures
//! with `StorageOrder::Columns` in the same run, as the baseline, and
//! `gather_floor_us` times a bare gather of the same bytes from memory of the
//! same size (`seed_benches::gather_floor`), alternating with the 3x4 runs, so
//! the noisy absolute figures come with a ratio to what the memory costs now.
//! `sample128_3x4_resident_us` samples a 256-item buffer that stays in cache:
//! the buffer's own cost per call, without the memory.
use std::sync::Arc;
use std::thread;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::Parser;
use seed_benches::gather_floor::GatherFloor;
use seed_benches::replay_kill;
use seed_benches::replay_scale::{self, ScalePlan};
use seed_benches::replay_workload::{fill, layout_3x4, layout_dict};
use seed_replay::{
    FieldRef, ItemKey, ItemLayout, PrioritizedConfig, ReplayBuffer, ReplayConfig, SamplerConfig,
    StorageOrder, Values,
};
use serde_json::{json, Value};

/// Reference figures (see the issue): TorchRL per call / items per second.
const TORCHRL_SAMPLE128_3X4_US: f64 = 20.8;
const TORCHRL_SAMPLE128_DICT_US: f64 = 48.4;
const TORCHRL_INSERT_PER_S: [(usize, f64); 3] = [(1, 49e3), (100, 4.4e6), (1000, 27.6e6)];
const TORCHRL_PRIORITIZED_1M_US: f64 = 187.0;
const REVERB_SAMPLE128_US: f64 = 642.0;

#[derive(Parser, Debug)]
#[command(about = "Replay buffer benchmarks; prints one JSON object")]
struct Args {
    /// Fewer iterations and runs (a smoke run, noisier figures).
    #[arg(long)]
    quick: bool,
    /// Run only the prioritized 1M scenario (for profiling).
    #[arg(long)]
    only_prioritized: bool,
    /// Run only the cache-resident 3x4 `sample(128)` (for profiling the
    /// buffer's own instructions), 20 times the usual iterations.
    #[arg(long)]
    only_resident: bool,
    /// Run only the dict `sample(128)` from 100k items (for profiling).
    #[arg(long)]
    only_dict: bool,
    /// Table sizes for the scale run (comma-separated item counts), each a
    /// fresh memory-mapped table filled, sampled, reopened prioritized.
    #[arg(long, value_delimiter = ',')]
    scale: Vec<usize>,
    /// Item sizes in bytes for `--scale`.
    #[arg(long, value_delimiter = ',', default_value = "16")]
    item_bytes: Vec<usize>,
    /// Where `--scale` makes its tables (one at a time, removed after;
    /// the largest needs its size on disk).
    #[arg(long, default_value = "target/replay_scale")]
    scale_dir: std::path::PathBuf,
    /// The storage order of `--scale`'s tables: `records` or `columns`.
    #[arg(long, default_value = "records", value_parser = parse_order)]
    scale_order: StorageOrder,
    /// `--scale` without the prioritized half (reopen, sample + update).
    #[arg(long)]
    uniform_only: bool,
    /// With `--scale N`: a writer child fills and overwrites a table of N
    /// items, is SIGKILLed, and the table is reopened (timed) and every
    /// acknowledged item it holds read back (`replay_kill`).
    #[arg(long)]
    scale_kill: bool,
    /// The writer child of `--scale-kill` (not for direct use).
    #[arg(long, hide = true)]
    scale_child: bool,
    /// Also write `--scale`'s rows to this file.
    #[arg(long)]
    out: Option<std::path::PathBuf>,
}

fn parse_order(s: &str) -> Result<StorageOrder, String> {
    match s {
        "records" => Ok(StorageOrder::Records),
        "columns" => Ok(StorageOrder::Columns),
        other => Err(format!("`{other}`: expected `records` or `columns`")),
    }
}

struct Plan {
    runs: usize,
    sample_iters: usize,
    insert_items: usize,
    prio_iters: usize,
    conc_inserts: usize,
    conc_samples: usize,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Median over runs of microseconds per `sample(128)`; with `floor`, each run
/// is followed by as many bare gathers, and the floor's median comes second.
fn sample_us_with_floor(
    layout: ItemLayout,
    order: StorageOrder,
    plan: &Plan,
    mut floor: Option<&mut GatherFloor>,
    capacity: usize,
) -> Result<(f64, f64)> {
    let config = ReplayConfig::new(capacity, SamplerConfig::Uniform).with_storage_order(order);
    let b = ReplayBuffer::new(layout, config)?;
    fill(&b, capacity)?;
    let mut batch = b.new_batch(128);
    b.sample_into(&mut batch, 128)?;
    let (mut runs, mut floor_runs) = (Vec::new(), Vec::new());
    for _ in 0..plan.runs {
        let t = Instant::now();
        for _ in 0..plan.sample_iters {
            b.sample_into(&mut batch, 128)?;
        }
        runs.push(t.elapsed().as_secs_f64() * 1e6 / plan.sample_iters as f64);
        if let Some(f) = floor.as_deref_mut() {
            floor_runs.push(f.gather_us(plan.sample_iters));
        }
    }
    let floor_us = if floor_runs.is_empty() {
        f64::NAN
    } else {
        median(floor_runs)
    };
    Ok((median(runs), floor_us))
}

/// Median over runs of microseconds per `sample(128)` from 100k items.
fn sample_us(layout: ItemLayout, order: StorageOrder, plan: &Plan) -> Result<f64> {
    Ok(sample_us_with_floor(layout, order, plan, None, 100_000)?.0)
}

/// Items in the cache-resident buffer: 256 records of 64 bytes, 16 KiB,
/// which stays in L1 while it is sampled.
const RESIDENT_ITEMS: usize = 256;

/// Median items/s inserting batches of `rows` into a full 100k buffer.
fn insert_rate(rows: usize, plan: &Plan) -> Result<f64> {
    let b = ReplayBuffer::new(
        layout_3x4()?,
        ReplayConfig::new(100_000, SamplerConfig::Uniform),
    )?;
    fill(&b, 100_000)?;
    let xs: Vec<f32> = (0..rows * 12).map(|i| i as f32).collect();
    let shape = [rows, 3, 4];
    let fields = [FieldRef::new(&shape, Values::F32(&xs))];
    let calls = (plan.insert_items / rows).max(1);
    let mut runs = Vec::new();
    for _ in 0..plan.runs {
        let t = Instant::now();
        for _ in 0..calls {
            b.insert_batch(&fields, rows)?;
        }
        runs.push((calls * rows) as f64 / t.elapsed().as_secs_f64());
    }
    Ok(median(runs))
}

/// Median microseconds per `sample(128)` + `update_priorities(128)` at 1M.
fn prioritized_us(order: StorageOrder, plan: &Plan) -> Result<f64> {
    let n = 1_000_000;
    let cfg = ReplayConfig::new(n, SamplerConfig::Prioritized(PrioritizedConfig::default()))
        .with_storage_order(order);
    let b = ReplayBuffer::new(layout_3x4()?, cfg)?;
    fill(&b, n)?;
    // Spread the priorities so the tree is not uniform.
    let keys: Vec<ItemKey> = (0..n as u64).map(ItemKey).collect();
    let prios: Vec<f32> = (0..n)
        .map(|i| ((i * 7919) % 1000) as f32 / 100.0 + 0.01)
        .collect();
    b.update_priorities(&keys, &prios)?;
    let mut batch = b.new_batch(128);
    let mut new_prios = vec![0.0f32; 128];
    let mut runs = Vec::new();
    for _ in 0..plan.runs {
        let t = Instant::now();
        for i in 0..plan.prio_iters {
            b.sample_into(&mut batch, 128)?;
            for (j, p) in new_prios.iter_mut().enumerate() {
                *p = ((i + j) % 97) as f32 * 0.1 + 0.01;
            }
            b.update_priorities(batch.keys(), &new_prios)?;
        }
        runs.push(t.elapsed().as_secs_f64() * 1e6 / plan.prio_iters as f64);
    }
    Ok(median(runs))
}

/// Aggregate rates with `threads` writers (batch-1 inserts) and `threads`
/// samplers (sample 128), each doing a fixed number of operations.
fn concurrency(sampler: SamplerConfig, threads: usize, plan: &Plan) -> Result<Value> {
    let mut ins_rates = Vec::new();
    let mut smp_rates = Vec::new();
    for _ in 0..plan.runs {
        let b = Arc::new(ReplayBuffer::new(
            layout_3x4()?,
            ReplayConfig::new(100_000, sampler),
        )?);
        fill(&b, 100_000)?;
        let start = Instant::now();
        let writers: Vec<_> = (0..threads)
            .map(|w| {
                let (b, n) = (Arc::clone(&b), plan.conc_inserts);
                thread::spawn(move || -> Result<f64> {
                    let x = [w as f32; 12];
                    let f = [FieldRef::new(&[3, 4], Values::F32(&x))];
                    for _ in 0..n {
                        b.insert_ref(&f)?;
                    }
                    Ok(start.elapsed().as_secs_f64())
                })
            })
            .collect();
        let samplers: Vec<_> = (0..threads)
            .map(|_| {
                let (b, n) = (Arc::clone(&b), plan.conc_samples);
                thread::spawn(move || -> Result<f64> {
                    let mut batch = b.new_batch(128);
                    for _ in 0..n {
                        b.sample_into(&mut batch, 128)?;
                    }
                    Ok(start.elapsed().as_secs_f64())
                })
            })
            .collect();
        let mut w_end: f64 = 0.0;
        for w in writers {
            w_end = w_end.max(w.join().map_err(|_| anyhow::anyhow!("writer panicked"))??);
        }
        let mut s_end: f64 = 0.0;
        for s in samplers {
            s_end = s_end.max(
                s.join()
                    .map_err(|_| anyhow::anyhow!("sampler panicked"))??,
            );
        }
        ins_rates.push((threads * plan.conc_inserts) as f64 / w_end);
        smp_rates.push((threads * plan.conc_samples * 128) as f64 / s_end);
    }
    Ok(json!({
        "inserts_per_s": median(ins_rates),
        "sampled_items_per_s": median(smp_rates),
    }))
}

fn main() -> Result<()> {
    let args = Args::parse();
    let plan = if args.quick {
        Plan {
            runs: 3,
            sample_iters: 2_000,
            insert_items: 500_000,
            prio_iters: 500,
            conc_inserts: 100_000,
            conc_samples: 1_000,
        }
    } else {
        Plan {
            runs: 5,
            sample_iters: 10_000,
            insert_items: 5_000_000,
            prio_iters: 2_000,
            conc_inserts: 500_000,
            conc_samples: 5_000,
        }
    };
    if args.scale_child || args.scale_kill {
        let (&items, &bytes) = match (args.scale.first(), args.item_bytes.first()) {
            (Some(i), Some(b)) if args.scale.len() == 1 && args.item_bytes.len() == 1 => (i, b),
            _ => anyhow::bail!("--scale-kill takes one --scale size and one --item-bytes"),
        };
        let dir = replay_kill::table_dir(&args.scale_dir, items, bytes);
        if args.scale_child {
            replay_kill::child_main(&dir, items, bytes, args.scale_order)?;
            return Ok(());
        }
        let exe = std::env::current_exe().context("the path of replay_bench itself")?;
        let row = replay_kill::run(&exe, &args.scale_dir, items, bytes, args.scale_order)?;
        let _ = std::fs::remove_dir_all(&dir);
        let text = serde_json::to_string_pretty(&json!({
            "machine": seed_benches::machine::Machine::detect(),
            "kill": row,
        }))?;
        if let Some(path) = &args.out {
            std::fs::write(path, &text)
                .with_context(|| format!("cannot write --out {}", path.display()))?;
        }
        println!("{text}");
        return Ok(());
    }
    if !args.scale.is_empty() {
        let mut items = args.scale.clone();
        items.sort_unstable();
        let scale_plan = ScalePlan {
            items,
            item_bytes: args.item_bytes.clone(),
            dir: args.scale_dir.clone(),
            order: args.scale_order,
            runs: plan.runs,
            sample_iters: plan.sample_iters,
            prio_iters: plan.prio_iters,
            uniform_only: args.uniform_only,
        };
        let rows = replay_scale::run(&scale_plan)?;
        let out = json!({
            "machine": seed_benches::machine::Machine::detect(),
            "statistic": "median over runs of microseconds per call",
            "rows": rows,
        });
        let text = serde_json::to_string_pretty(&out)?;
        if let Some(path) = &args.out {
            std::fs::write(path, &text)
                .with_context(|| format!("cannot write --out {}", path.display()))?;
        }
        println!("{text}");
        return Ok(());
    }
    if args.only_prioritized {
        println!(
            "{}",
            json!({ "prioritized_1m_sample_update_us": prioritized_us(StorageOrder::default(), &plan)? })
        );
        return Ok(());
    }
    if args.only_dict {
        let us = sample_us(layout_dict()?, StorageOrder::default(), &plan)?;
        println!("{}", json!({ "sample128_dict_us": us }));
        return Ok(());
    }
    if args.only_resident {
        let long = Plan {
            sample_iters: plan.sample_iters * 20,
            ..plan
        };
        let (us, _) = sample_us_with_floor(
            layout_3x4()?,
            StorageOrder::default(),
            &long,
            None,
            RESIDENT_ITEMS,
        )?;
        println!("{}", json!({ "sample128_3x4_resident_us": us }));
        return Ok(());
    }
    // The default order (records) and columns, side by side in one run.
    let order = StorageOrder::default();
    let mut floor = GatherFloor::new();
    let (s3x4, floor_us) =
        sample_us_with_floor(layout_3x4()?, order, &plan, Some(&mut floor), 100_000)?;
    // The same call with the memory taken out: what the buffer's own
    // instructions cost, much less noisy than the figures above.
    let (s3x4_resident, _) =
        sample_us_with_floor(layout_3x4()?, order, &plan, None, RESIDENT_ITEMS)?;
    let s3x4_columns = sample_us(layout_3x4()?, StorageOrder::Columns, &plan)?;
    let sdict = sample_us(layout_dict()?, order, &plan)?;
    let sdict_columns = sample_us(layout_dict()?, StorageOrder::Columns, &plan)?;
    let mut inserts = serde_json::Map::new();
    let mut insert_ratio = serde_json::Map::new();
    for (rows, reference) in TORCHRL_INSERT_PER_S {
        let r = insert_rate(rows, &plan)?;
        inserts.insert(rows.to_string(), json!(r));
        insert_ratio.insert(rows.to_string(), json!(r / reference));
    }
    let prio = prioritized_us(order, &plan)?;
    let prio_columns = prioritized_us(StorageOrder::Columns, &plan)?;
    let mut conc = serde_json::Map::new();
    for (name, sampler) in [
        ("uniform", SamplerConfig::Uniform),
        (
            "prioritized",
            SamplerConfig::Prioritized(PrioritizedConfig::default()),
        ),
    ] {
        let mut by_threads = serde_json::Map::new();
        for t in [1, 2] {
            by_threads.insert(format!("{t}+{t}"), concurrency(sampler, t, &plan)?);
        }
        conc.insert(name.to_owned(), Value::Object(by_threads));
    }
    let out = json!({
        "quick": args.quick,
        "runs": plan.runs,
        "statistic": "median over runs; shared 2-core machine, expect noise",
        "storage_order": format!("{order:?}"),
        "sample128_3x4_us": s3x4,
        "gather_floor_us": floor_us,
        "sample128_3x4_over_floor": s3x4 / floor_us,
        "sample128_3x4_resident_us": s3x4_resident,
        "sample128_dict_us": sdict,
        "insert_items_per_s": Value::Object(inserts),
        "prioritized_1m_sample_update_us": prio,
        "concurrency": Value::Object(conc),
        "columns": {
            "sample128_3x4_us": s3x4_columns,
            "sample128_dict_us": sdict_columns,
            "prioritized_1m_sample_update_us": prio_columns,
        },
        "speedup_vs_torchrl": {
            "sample128_3x4": TORCHRL_SAMPLE128_3X4_US / s3x4,
            "sample128_dict": TORCHRL_SAMPLE128_DICT_US / sdict,
            "insert_items_per_s": Value::Object(insert_ratio),
            "prioritized_1m_sample_update": TORCHRL_PRIORITIZED_1M_US / prio,
        },
        "speedup_vs_reverb_sample128": REVERB_SAMPLE128_US / s3x4,
    });
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}
