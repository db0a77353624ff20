//! How far a mirror (`replay-server --mirror-of`) lags its primary while a
//! writer inserts at full speed: the `replay_service_bench`'s
//! `mirror_lag_*` figures.
//!
//! One run: a primary with one uniform table (100k items of one 3x4 `f32`
//! field) and a mirror of it start on loopback ports in this process; one
//! writer inserts batches of [`WRITE_BATCH`] rows through an `Inserter`
//! with `window` batches in flight, as fast as the primary takes them,
//! for `duration`. A watcher thread reads both tables' next keys every
//! [`TICK`] (in-process, so watching costs neither server a call):
//! - items behind: `primary next key - mirror next key`;
//! - time behind: how long ago the primary took the oldest item the mirror
//!   does not have yet (0 when the mirror is level), from the watcher's own
//!   record of when the primary's next key passed it; its resolution is
//!   the tick, about 100 us on an idle core, more on a loaded one.
//!
//! After the writer stops, the run waits for the mirror to catch up and
//! counts the items it missed (gaps: it fell a ring behind). Primary,
//! mirror, writer and watcher share the machine's cores, so the lag
//! includes the mirror's wait for a core.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use hdrhistogram::Histogram;
use seed_replay_service::client::ClientOptions;
use seed_replay_service::server::{start_mirror, MirrorOptions};
use seed_replay_service::{InsertBatch, ReplayClient, ServerOptions, ServiceConfig};

/// Rows per insert batch of the writer.
pub const WRITE_BATCH: u32 = 100;
/// Watcher period.
pub const TICK: Duration = Duration::from_micros(100);
const ITEMS: usize = 100_000;

/// One run's figures.
#[derive(Debug, Clone, Copy)]
pub struct MirrorLag {
    pub items_p50: f64,
    pub items_p99: f64,
    pub us_p50: f64,
    pub us_p99: f64,
    /// The writer's rate into the primary.
    pub writer_items_per_s: f64,
    /// Items the mirror never received (it fell a ring behind).
    pub missed_items: u64,
    /// Watcher ticks recorded.
    pub ticks: usize,
}

/// One watcher observation.
#[derive(Debug, Clone, Copy)]
struct Tick {
    at: Instant,
    primary: u64,
    mirror: u64,
}

/// One run of `duration` with `window` insert batches in flight.
pub async fn measure(duration: Duration, window: usize) -> Result<MirrorLag> {
    let config = ServiceConfig::from_json(&format!(
        r#"{{"tables": [{{"name": "mirrored", "capacity": {ITEMS},
            "sampler": {{"kind": "uniform"}},
            "fields": [{{"name": "obs", "dtype": "f32", "shape": [3, 4]}}]}}]}}"#
    ))?;
    let primary = seed_replay_service::start(config, ServerOptions::default()).await?;
    let mirror = start_mirror(
        MirrorOptions {
            upstream: primary.addr().to_string(),
            client: ClientOptions::default(),
        },
        ServerOptions::default(),
    )
    .await?;
    let p_table = primary
        .service()
        .table("mirrored")
        .context("no primary table")?;
    let m_table = mirror
        .service()
        .table("mirrored")
        .context("no mirror table")?;

    let stop = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (p, m, stop) = (
            Arc::clone(&p_table),
            Arc::clone(&m_table),
            Arc::clone(&stop),
        );
        std::thread::spawn(move || {
            let mut ticks = Vec::with_capacity(1 << 16);
            // Relaxed: a flag polled by this thread only; nothing else is
            // ordered by it.
            while !stop.load(Ordering::Relaxed) {
                ticks.push(Tick {
                    at: Instant::now(),
                    primary: p.buffer().next_key(),
                    mirror: m.buffer().next_key(),
                });
                std::thread::sleep(TICK);
            }
            ticks
        })
    };

    let obs: Vec<f32> = (0..WRITE_BATCH as usize * 12).map(|i| i as f32).collect();
    let template = InsertBatch::new(WRITE_BATCH).f32("obs", &[3, 4], &obs)?;
    let mut client = ReplayClient::connect(&primary.url(false), ClientOptions::default()).await?;
    let mut ins = client.inserter("mirrored").await?;
    let start = Instant::now();
    let mut written = 0u64;
    while start.elapsed() < duration {
        if ins.pending() >= window {
            ins.ack().await?;
        }
        ins.send(template.clone()).await?;
        written += u64::from(WRITE_BATCH);
    }
    while ins.pending() > 0 {
        ins.ack().await?;
    }
    let secs = start.elapsed().as_secs_f64();
    drop(ins);
    tokio::time::timeout(Duration::from_secs(120), m_table.wait_for_next_key(written))
        .await
        .context("the mirror did not catch up within 120 s")?;
    stop.store(true, Ordering::Relaxed);
    let ticks = watcher
        .join()
        .map_err(|_| anyhow::anyhow!("watcher panicked"))?;
    let missed = p_table
        .buffer()
        .stats()
        .inserted
        .saturating_sub(m_table.buffer().stats().inserted);
    mirror.stop().await?;
    primary.stop().await?;

    let (items, us) = lag_histograms(&ticks)?;
    Ok(MirrorLag {
        items_p50: items.value_at_quantile(0.5) as f64,
        items_p99: items.value_at_quantile(0.99) as f64,
        us_p50: us.value_at_quantile(0.5) as f64 / 1e3,
        us_p99: us.value_at_quantile(0.99) as f64 / 1e3,
        writer_items_per_s: written as f64 / secs,
        missed_items: missed,
        ticks: ticks.len(),
    })
}

/// Items behind and time behind (ns) at every tick.
fn lag_histograms(ticks: &[Tick]) -> Result<(Histogram<u64>, Histogram<u64>)> {
    let mut items = Histogram::<u64>::new(3)?;
    let mut ns = Histogram::<u64>::new(3)?;
    for (i, t) in ticks.iter().enumerate() {
        items.record(t.primary.saturating_sub(t.mirror))?;
        if t.mirror >= t.primary {
            ns.record(0)?;
            continue;
        }
        // The first tick at which the primary held key `t.mirror` (the
        // oldest the mirror lacks): ticks are in time order and the next
        // key only grows.
        let first = ticks[..=i].partition_point(|u| u.primary <= t.mirror);
        let since = ticks.get(first).map_or(t.at, |u| u.at);
        ns.record(t.at.duration_since(since).as_nanos() as u64)?;
    }
    Ok((items, ns))
}
