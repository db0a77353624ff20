//! The replay service over loopback beside the in-process buffer it serves,
//! in the same run: prints one JSON object.
//!
//! `cargo run --release -p seed-benches --bin replay_service_bench [-- --quick]
//! [--reverb-python PATH] [--seed-python PATH]]`
//!
//! It starts the service itself (in this process, on a loopback TCP port)
//! with a uniform table of 100k items of one 3x4 `f32` field, filled
//! through the service, then alternates, `--runs` times, in-process and
//! service measurements and reports medians:
//! - `sample128_p50_us`, `sample128_p99_us`: one `sample(128)` round trip
//!   (`ReplayClient::sample`: a stream opened, one batch, closed);
//! - `sample128_echo_p50_us`, `sample128_echo_p99_us`: the same client call
//!   against a bare tonic echo of the same service answering with a real
//!   reply of this table ([`seed_benches::replay_echo`]), in blocks of 100
//!   calls alternating with the service's, and `sample128_ratio_to_echo`;
//!   `sample128_context_switches_per_call` and
//!   `sample128_echo_context_switches_per_call`: this process's (client
//!   and server) per call;
//! - `sample128_items_per_s`, `sample128_stream_us_per_batch`: a pipelined
//!   client (one sample stream, `--in-flight` batches prepared ahead);
//! - `insert_items_per_s` by batch size 1/100/1000: one `Inserter` with
//!   `--window` batches in flight;
//! - the same figures of the in-process buffer (`inprocess_*`), and the
//!   ratios;
//! - `grouped_fetch_steps_per_s` (and `grouped_*`): `FetchGroup` of groups
//!   of 8 trajectories x 32 steps of 3x4 `f32`, one call at a time, beside
//!   a `sample(256)` round trip of the same bytes
//!   (`seed_benches::grouped_fetch`).
//! - `mirror_lag_items_p50`/`_p99`, `mirror_lag_us_p50`/`_p99`: how far a
//!   mirror (`--mirror-of`) is behind its primary while one writer inserts
//!   batches of 100 at full speed (`seed_benches::mirror_lag`), with the
//!   writer's rate and the items the mirror missed.
//!
//! Client and server share the machine's cores (and, here, one runtime),
//! so the service figures include the client's cost.
//!
//! Measured from Python in the same run, each round after the Rust
//! figures (each script runs as a child for the whole run, answering one
//! JSON line per round; see the scripts' docs):
//! - `--seed-python PATH` (the Python of a venv with `seed_rs`):
//!   `benches/python/seed_rs_sample.py`, `seed_rs.ReplayClient.sample(128)`
//!   against this server's table: `python_sample128_p50_us`/`_p99_us`,
//!   and `next` on a pipelined `sample_stream` (8 batches in flight):
//!   `python_stream_sample128_p50_us`/`_p99_us`, `python_stream_us_per_batch`;
//! - `--reverb-python PATH` (the Python of a venv with `dm-reverb` 0.14 and
//!   `tensorflow-cpu` 2.15, CONTRIBUTING.md): `benches/python/reverb_sample.py`,
//!   a Reverb server (child process) with the same table, `sample(128)`
//!   through `reverb.TrajectoryDataset` batched 128:
//!   `reverb_sample128_us` (p50), `reverb_sample128_p99_us`,
//!   `reverb_us_per_batch` (the mean), the plain
//!   `Client.sample` path (`reverb_client_sample128_*`), and the ratios of
//!   Reverb's p50 to ours (`reverb_ratio_to_service`: the Rust client's
//!   round trip, `reverb_ratio_to_python`: `seed_rs`'s round trip,
//!   `reverb_ratio_to_python_stream`: `seed_rs`'s pipelined stream, the
//!   like of Reverb's pipelined tf.data path, and
//!   `reverb_per_batch_ratio_to_python_stream`, the same by mean per batch).
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::Parser;
use hdrhistogram::Histogram;
use seed_benches::child::context_switches;
use seed_benches::grouped_fetch;
use seed_benches::replay_echo::{serve_echo_replay, EchoReplay};
use seed_replay::{FieldRef, Values};
use seed_replay_service::client::{ClientOptions, SampleOptions};
use seed_replay_service::{InsertBatch, ReplayClient, ServerOptions, ServiceConfig};
use serde_json::{json, Map, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

#[derive(Parser, Debug)]
#[command(about = "Replay service benchmark over loopback; prints one JSON object")]
struct Args {
    /// Fewer iterations (a smoke run, noisier figures).
    #[arg(long)]
    quick: bool,
    /// Alternating runs of every measurement; medians are reported.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Batches a pipelined sample stream has prepared ahead.
    #[arg(long, default_value_t = 8)]
    in_flight: u32,
    /// Insert batches in flight on one stream.
    #[arg(long, default_value_t = 16)]
    window: usize,
    /// Async worker threads of the runtime serving and measuring.
    #[arg(long, default_value_t = 2)]
    worker_threads: usize,
    /// The Python of a venv with dm-reverb 0.14 and tensorflow-cpu 2.15:
    /// measure Reverb's sample(128) in the same run.
    #[arg(long)]
    reverb_python: Option<PathBuf>,
    /// The Python of a venv with seed_rs installed: measure
    /// `seed_rs.ReplayClient.sample(128)` against this server.
    #[arg(long)]
    seed_python: Option<PathBuf>,
    /// Seconds the writer inserts in each run of the mirror-lag measurement
    /// (default 3, 1 with --quick).
    #[arg(long)]
    mirror_secs: Option<f64>,
}

/// A measuring script run as a child: one JSON line when ready, then one
/// per `measure` line written to it.
struct PythonProbe {
    name: &'static str,
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    ready: Value,
}

impl PythonProbe {
    async fn start(
        name: &'static str,
        python: &Path,
        script: &str,
        args: &[String],
    ) -> Result<Self> {
        let script = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("python")
            .join(script);
        eprintln!("starting {name}: {} {}", python.display(), script.display());
        let mut child = tokio::process::Command::new(python)
            .arg(&script)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("cannot start {}", python.display()))?;
        let stdin = child.stdin.take().context("no stdin")?;
        let stdout = child.stdout.take().context("no stdout")?;
        let mut probe = PythonProbe {
            name,
            child,
            stdin,
            lines: BufReader::new(stdout).lines(),
            ready: Value::Null,
        };
        probe.ready = probe.read().await?;
        eprintln!("{name} ready: {}", probe.ready);
        Ok(probe)
    }

    async fn read(&mut self) -> Result<Value> {
        let line = self
            .lines
            .next_line()
            .await?
            .with_context(|| format!("{} exited (its error is above)", self.name))?;
        serde_json::from_str(&line).with_context(|| format!("{}: not JSON: {line}", self.name))
    }

    async fn measure(&mut self) -> Result<Value> {
        self.stdin.write_all(b"measure\n").await?;
        self.stdin.flush().await?;
        self.read().await
    }

    async fn finish(mut self) -> Result<()> {
        drop(self.stdin);
        let status = self.child.wait().await?;
        anyhow::ensure!(status.success(), "{} exited with {status}", self.name);
        Ok(())
    }
}

/// The median of `key` over `rounds`.
fn median_of(rounds: &[Value], key: &str) -> Result<f64> {
    let v = rounds
        .iter()
        .map(|r| {
            r[key]
                .as_f64()
                .with_context(|| format!("no `{key}` in {r}"))
        })
        .collect::<Result<Vec<f64>>>()?;
    Ok(median(v))
}

const ITEMS: usize = 100_000;
const BATCH: u32 = 128;
/// Calls per block when the service's and the echo's round trips alternate.
const ECHO_BLOCK: usize = 100;
/// Groups submitted and fetched per run.
const GROUPED_GROUPS: u64 = 400;

fn config() -> Result<ServiceConfig> {
    let table = |name: &str| {
        format!(
            r#"{{"name": "{name}", "capacity": {ITEMS}, "sampler": {{"kind": "uniform"}},
                "fields": [{{"name": "obs", "dtype": "f32", "shape": [3, 4]}}]}}"#
        )
    };
    Ok(ServiceConfig::from_json(&format!(
        r#"{{"tables": [{}, {}, {}]}}"#,
        table("sample"),
        table("insert"),
        grouped_fetch::table_json("grouped", GROUPED_GROUPS)
    ))?)
}

fn obs_batch(rows: usize, seed: usize) -> Vec<f32> {
    (0..rows * 12).map(|i| (seed + i) as f32).collect()
}

/// `calls` one-batch `sample(128)` round trips of table `sample`, timed into `h`.
async fn lone_samples(
    client: &mut ReplayClient,
    calls: usize,
    h: &mut Histogram<u64>,
) -> Result<()> {
    for _ in 0..calls {
        let t = Instant::now();
        let b = client.sample("sample", BATCH).await?;
        h.record(t.elapsed().as_nanos() as u64)?;
        anyhow::ensure!(b.rows() == BATCH as usize, "short batch");
    }
    Ok(())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

struct Latency {
    p50_us: f64,
    p99_us: f64,
}

fn latency(h: &Histogram<u64>) -> Latency {
    Latency {
        p50_us: h.value_at_quantile(0.5) as f64 / 1e3,
        p99_us: h.value_at_quantile(0.99) as f64 / 1e3,
    }
}

fn main() -> Result<()> {
    let args = Args::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.worker_threads)
        .enable_all()
        .build()?;
    runtime.block_on(run(args))
}

async fn run(args: Args) -> Result<()> {
    let (round_trips, stream_batches, inproc_calls): (usize, u64, usize) = if args.quick {
        (300, 2_000, 5_000)
    } else {
        (2_000, 20_000, 50_000)
    };
    let server = seed_replay_service::start(config()?, ServerOptions::default()).await?;
    let mut client = ReplayClient::connect(&server.url(false), ClientOptions::default()).await?;
    let sample_table = server
        .service()
        .table("sample")
        .ok_or_else(|| anyhow::anyhow!("no table `sample`"))?;
    let insert_table = server
        .service()
        .table("insert")
        .ok_or_else(|| anyhow::anyhow!("no table `insert`"))?;

    // Fill through the service.
    let mut ins = client.inserter("sample").await?;
    for i in 0..ITEMS / 1000 {
        let b = InsertBatch::new(1000).f32("obs", &[3, 4], &obs_batch(1000, i * 1000))?;
        ins.insert(b).await?;
    }
    drop(ins);

    // The echo: a real one-batch reply of the table, answered as is.
    let mut raw = seed_replay_service::pb::replay_client::ReplayClient::connect(server.url(false))
        .await?
        .max_decoding_message_size(seed_shared::DEFAULT_MAX_MESSAGE_BYTES);
    let reply = raw
        .sample(seed_replay_service::pb::SampleRequest {
            table: "sample".into(),
            batch_size: BATCH,
            max_batches: 1,
            ..Default::default()
        })
        .await?
        .into_inner()
        .message()
        .await?
        .context("the table sent no batch for the echo")?;
    drop(raw);
    let echo_addr =
        serve_echo_replay(EchoReplay { reply }, seed_shared::DEFAULT_MAX_MESSAGE_BYTES).await?;
    let mut echo_client =
        ReplayClient::connect(&echo_addr.to_string(), ClientOptions::default()).await?;

    let mut seed_probe = match &args.seed_python {
        Some(python) => Some(
            PythonProbe::start(
                "seed_rs_sample.py",
                python,
                "seed_rs_sample.py",
                &[
                    "--addr".into(),
                    server.url(false),
                    "--table".into(),
                    "sample".into(),
                    "--calls".into(),
                    (if args.quick { 300 } else { 2000 }).to_string(),
                ],
            )
            .await?,
        ),
        None => None,
    };
    let mut reverb_probe = match &args.reverb_python {
        Some(python) => Some(
            PythonProbe::start(
                "reverb_sample.py",
                python,
                "reverb_sample.py",
                &if args.quick {
                    vec![
                        "--batches".into(),
                        "300".into(),
                        "--client-calls".into(),
                        "20".into(),
                    ]
                } else {
                    vec![]
                },
            )
            .await?,
        ),
        None => None,
    };
    let mut seed_rounds = Vec::new();
    let mut reverb_rounds = Vec::new();

    let mut rt_p50 = Vec::new();
    let mut rt_p99 = Vec::new();
    let mut echo_p50 = Vec::new();
    let mut echo_p99 = Vec::new();
    let mut rt_switches = Vec::new();
    let mut echo_switches = Vec::new();
    let mut stream_items = Vec::new();
    let mut stream_p50 = Vec::new();
    let mut local_p50 = Vec::new();
    let mut local_p99 = Vec::new();
    let mut local_items = Vec::new();
    let sizes = [1usize, 100, 1000];
    let mut insert_service: Vec<Vec<f64>> = vec![Vec::new(); sizes.len()];
    let mut insert_local: Vec<Vec<f64>> = vec![Vec::new(); sizes.len()];
    let mut grouped_rounds = Vec::new();
    let mirror_secs = args
        .mirror_secs
        .unwrap_or(if args.quick { 1.0 } else { 3.0 });
    let mut mirror_runs: Vec<seed_benches::mirror_lag::MirrorLag> = Vec::new();

    for run in 0..args.runs as u64 {
        // In-process sample(128) from the served table's own buffer.
        let buffer = sample_table.buffer();
        let mut batch = buffer.new_batch(BATCH as usize);
        let mut h = Histogram::<u64>::new(3)?;
        let start = Instant::now();
        for _ in 0..inproc_calls {
            let t = Instant::now();
            buffer.sample_into(&mut batch, BATCH as usize)?;
            h.record(t.elapsed().as_nanos() as u64)?;
        }
        let secs = start.elapsed().as_secs_f64();
        let l = latency(&h);
        local_p50.push(l.p50_us);
        local_p99.push(l.p99_us);
        local_items.push(inproc_calls as f64 * f64::from(BATCH) / secs);

        // Service: round trips, in blocks alternating with the echo's.
        let mut h = Histogram::<u64>::new(3)?;
        let mut he = Histogram::<u64>::new(3)?;
        let (mut switches, mut switches_echo) = (0u64, 0u64);
        let me = std::process::id();
        for _ in 0..round_trips.div_ceil(ECHO_BLOCK) {
            let before = context_switches(me);
            lone_samples(&mut client, ECHO_BLOCK, &mut h).await?;
            let between = context_switches(me);
            lone_samples(&mut echo_client, ECHO_BLOCK, &mut he).await?;
            switches += between - before;
            switches_echo += context_switches(me) - between;
        }
        let l = latency(&h);
        rt_p50.push(l.p50_us);
        rt_p99.push(l.p99_us);
        let l = latency(&he);
        echo_p50.push(l.p50_us);
        echo_p99.push(l.p99_us);
        rt_switches.push(switches as f64 / h.len() as f64);
        echo_switches.push(switches_echo as f64 / he.len() as f64);

        // Service: one pipelined stream.
        let mut opts = SampleOptions::new(BATCH);
        opts.max_batches = stream_batches;
        opts.max_in_flight = args.in_flight;
        let mut stream = client.sample_stream("sample", opts).await?;
        let mut h = Histogram::<u64>::new(3)?;
        let start = Instant::now();
        let mut last = start;
        let mut items = 0u64;
        while let Some(b) = stream.next().await? {
            let now = Instant::now();
            h.record(now.duration_since(last).as_nanos() as u64)?;
            last = now;
            items += b.rows() as u64;
        }
        let secs = start.elapsed().as_secs_f64();
        stream_items.push(items as f64 / secs);
        stream_p50.push(latency(&h).p50_us);

        // Inserts at 1 / 100 / 1000 rows per batch, in-process then service.
        for (s, &rows) in sizes.iter().enumerate() {
            let total = if args.quick { 20_000 } else { 100_000 }.max(rows * 50);
            let batches = total / rows;
            let obs = obs_batch(rows, 0);
            let shape = [rows, 3, 4];
            let fields = [FieldRef::new(&shape, Values::F32(&obs))];
            let start = Instant::now();
            for _ in 0..batches {
                insert_table.buffer().insert_batch(&fields, rows)?;
            }
            insert_local[s].push((batches * rows) as f64 / start.elapsed().as_secs_f64());

            let template = InsertBatch::new(rows as u32).f32("obs", &[3, 4], &obs)?;
            let mut ins = client.inserter("insert").await?;
            let start = Instant::now();
            for _ in 0..batches {
                if ins.pending() >= args.window {
                    ins.ack().await?;
                }
                ins.send(template.clone()).await?;
            }
            while ins.pending() > 0 {
                ins.ack().await?;
            }
            insert_service[s].push((batches * rows) as f64 / start.elapsed().as_secs_f64());
        }

        // Grouped: submit then fetch whole groups.
        let groups = if args.quick { 100 } else { GROUPED_GROUPS };
        grouped_rounds.push(
            grouped_fetch::round(&mut client, "grouped", "sample", groups, run * groups).await?,
        );
        if let Some(p) = &mut seed_probe {
            seed_rounds.push(p.measure().await?);
        }
        if let Some(p) = &mut reverb_probe {
            reverb_rounds.push(p.measure().await?);
        }
        // A mirror's lag behind a primary under a full-speed writer.
        mirror_runs.push(
            seed_benches::mirror_lag::measure(
                std::time::Duration::from_secs_f64(mirror_secs),
                args.window,
            )
            .await?,
        );
    }
    let grouped_median =
        |f: fn(&grouped_fetch::GroupedRound) -> f64| median(grouped_rounds.iter().map(f).collect());
    let mirror_median = |f: fn(&seed_benches::mirror_lag::MirrorLag) -> f64| {
        median(mirror_runs.iter().map(f).collect())
    };

    let per_size = |v: &[Vec<f64>]| -> Value {
        let mut m = Map::new();
        for (s, &rows) in sizes.iter().enumerate() {
            m.insert(rows.to_string(), json!(median(v[s].clone()).round()));
        }
        Value::Object(m)
    };
    let ratio_per_size = {
        let mut m = Map::new();
        for (s, &rows) in sizes.iter().enumerate() {
            m.insert(
                rows.to_string(),
                json!(median(insert_service[s].clone()) / median(insert_local[s].clone())),
            );
        }
        Value::Object(m)
    };
    let stream_rate = median(stream_items.clone());
    let service_p50 = median(rt_p50.clone());
    let mut out = json!({
        "items": ITEMS,
        "item": "3x4 f32",
        "sampler": "uniform",
        "runs": args.runs,
        "quick": args.quick,
        "transport": "TCP loopback, server and client in one process",
        "worker_threads": args.worker_threads,
        "cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        "sample128_p50_us": service_p50,
        "sample128_p99_us": median(rt_p99),

        "sample128_items_per_s": stream_rate.round(),
        "sample128_stream_us_per_batch": 1e6 * f64::from(BATCH) / stream_rate,
        "sample128_stream_gap_p50_us": median(stream_p50),
        "sample128_stream_in_flight": args.in_flight,
        "inprocess_sample128_p50_us": median(local_p50.clone()),
        "inprocess_sample128_p99_us": median(local_p99),
        "inprocess_sample128_items_per_s": median(local_items.clone()).round(),
        "sample128_items_per_s_ratio_to_inprocess": stream_rate / median(local_items),
        "insert_items_per_s": per_size(&insert_service),
        "inprocess_insert_items_per_s": per_size(&insert_local),
        "insert_ratio_to_inprocess": ratio_per_size,
        "insert_window": args.window,
        "grouped_group": format!(
            "{} trajectories x {} steps of 3x4 f32",
            grouped_fetch::GROUP_SIZE,
            grouped_fetch::STEPS
        ),
        "grouped_fetch_groups_per_s": grouped_median(|r| r.fetch_groups_per_s).round(),
        "grouped_fetch_steps_per_s": grouped_median(|r| r.fetch_steps_per_s).round(),
        "grouped_fetch_p50_us": grouped_median(|r| r.fetch_p50_us),
        "grouped_fetch_p99_us": grouped_median(|r| r.fetch_p99_us),
        "grouped_submit_steps_per_s": grouped_median(|r| r.submit_steps_per_s).round(),
        "sample256_p50_us": grouped_median(|r| r.same_bytes_sample_p50_us),
        "mirror_lag_items_p50": mirror_median(|m| m.items_p50),
        "mirror_lag_items_p99": mirror_median(|m| m.items_p99),
        "mirror_lag_us_p50": mirror_median(|m| m.us_p50),
        "mirror_lag_us_p99": mirror_median(|m| m.us_p99),
        "mirror_writer_items_per_s": mirror_median(|m| m.writer_items_per_s).round(),
        "mirror_missed_items": mirror_median(|m| m.missed_items as f64),
        "mirror_watch_ticks": mirror_median(|m| m.ticks as f64),
        "mirror_write_batch": seed_benches::mirror_lag::WRITE_BATCH,
        "mirror_secs_per_run": mirror_secs,
    });
    out["sample128_echo_p50_us"] = json!(median(echo_p50.clone()));
    out["sample128_echo_p99_us"] = json!(median(echo_p99));
    out["sample128_ratio_to_echo"] = json!(service_p50 / median(echo_p50));
    out["sample128_context_switches_per_call"] = json!(median(rt_switches));
    out["sample128_echo_context_switches_per_call"] = json!(median(echo_switches));
    let python_p50 = if let Some(p) = seed_probe {
        let p50 = median_of(&seed_rounds, "sample128_p50_us")?;
        out["python_sample128_p50_us"] = json!(p50);
        out["python_sample128_p99_us"] = json!(median_of(&seed_rounds, "sample128_p99_us")?);
        out["python_stream_sample128_p50_us"] =
            json!(median_of(&seed_rounds, "stream_sample128_p50_us")?);
        out["python_stream_sample128_p99_us"] =
            json!(median_of(&seed_rounds, "stream_sample128_p99_us")?);
        out["python_stream_us_per_batch"] = json!(median_of(&seed_rounds, "stream_us_per_batch")?);
        out["python_client"] = json!(format!(
            "seed_rs.ReplayClient.sample(128), {}",
            args.seed_python
                .as_deref()
                .unwrap_or(Path::new(""))
                .display()
        ));
        out["python_rounds"] = json!(seed_rounds);
        p.finish().await?;
        Some((
            p50,
            median_of(&seed_rounds, "stream_sample128_p50_us")?,
            median_of(&seed_rounds, "stream_us_per_batch")?,
        ))
    } else {
        None
    };
    if let Some(p) = reverb_probe {
        let p50 = median_of(&reverb_rounds, "sample128_p50_us")?;
        out["reverb_sample128_us"] = json!(p50);
        out["reverb_sample128_p99_us"] = json!(median_of(&reverb_rounds, "sample128_p99_us")?);
        out["reverb_client_sample128_us"] =
            json!(median_of(&reverb_rounds, "client_sample128_p50_us")?);
        out["reverb_client_sample128_p99_us"] =
            json!(median_of(&reverb_rounds, "client_sample128_p99_us")?);
        let per_batch = median_of(&reverb_rounds, "us_per_batch")?;
        out["reverb_us_per_batch"] = json!(per_batch);
        out["reverb_ratio_to_service"] = json!(p50 / service_p50);
        if let Some((ours, ours_stream, ours_per_batch)) = python_p50 {
            out["reverb_ratio_to_python"] = json!(p50 / ours);
            out["reverb_ratio_to_python_stream"] = json!(p50 / ours_stream);
            out["reverb_per_batch_ratio_to_python_stream"] = json!(per_batch / ours_per_batch);
        }
        out["reverb_setup"] = p.ready.clone();
        out["reverb_rounds"] = json!(reverb_rounds);
        p.finish().await?;
    }
    println!("{}", serde_json::to_string_pretty(&out)?);
    server.stop().await?;
    Ok(())
}
