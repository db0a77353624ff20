//! The grouped-table figure of `replay_service_bench`: `FetchGroup`
//! throughput over loopback for groups of [`GROUP_SIZE`] trajectories of
//! [`STEPS`] steps of one 3x4 `f32` field, beside a `sample` round trip of
//! as many items of the same field from a uniform table (the same bytes
//! through the fixed-shape path), in the same run.
//!
//! One round: `groups` groups are submitted (one `SubmitSteps` per
//! trajectory, its last step ending it; timed as submit throughput), then
//! fetched one `FetchGroup` call at a time until the table is empty (timed
//! per call and in total), then `groups` `sample(256)` round trips.
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use hdrhistogram::Histogram;
use seed_replay::DType;
use seed_replay_service::{ReplayClient, StepBatch};

/// Trajectories per group.
pub const GROUP_SIZE: u32 = 8;
/// Steps per trajectory.
pub const STEPS: u32 = 32;

/// The grouped table's JSON for the service config: capacity `groups`
/// groups (in steps).
pub fn table_json(name: &str, groups: u64) -> String {
    format!(
        r#"{{"name": "{name}", "capacity": {},
            "sampler": {{"kind": "grouped", "group_size": {GROUP_SIZE}}},
            "fields": [{{"name": "obs", "dtype": "f32", "shape": [3, 4]}}]}}"#,
        groups * u64::from(GROUP_SIZE * STEPS)
    )
}

/// One round's figures.
#[derive(Debug, Clone, Copy)]
pub struct GroupedRound {
    pub fetch_groups_per_s: f64,
    pub fetch_steps_per_s: f64,
    pub fetch_p50_us: f64,
    pub fetch_p99_us: f64,
    pub submit_steps_per_s: f64,
    /// `sample(GROUP_SIZE * STEPS)` round trip p50 on `fixed_table`.
    pub same_bytes_sample_p50_us: f64,
}

/// Submits and fetches `groups` groups of `table` (ids from
/// `first_group`), then samples as many batches of the group's step count
/// from `fixed_table`.
pub async fn round(
    client: &mut ReplayClient,
    table: &str,
    fixed_table: &str,
    groups: u64,
    first_group: u64,
) -> Result<GroupedRound> {
    // One trajectory's bytes, shared by every submit (a `Bytes` clone is a
    // reference count).
    let obs = bytes::Bytes::from(
        (0..STEPS as usize * 12)
            .flat_map(|i| (i as f32).to_le_bytes())
            .collect::<Vec<u8>>(),
    );
    let size = u64::from(GROUP_SIZE);
    let start = Instant::now();
    for g in first_group..first_group + groups {
        for k in 0..size {
            let batch = StepBatch::trajectory(g * size + k, g, STEPS).ending().raw(
                "obs",
                DType::F32,
                &[3, 4],
                obs.clone(),
            )?;
            client.submit_steps(table, batch).await?;
        }
    }
    let steps = groups * size * u64::from(STEPS);
    let submit_steps_per_s = steps as f64 / start.elapsed().as_secs_f64();

    let mut h = Histogram::<u64>::new(3)?;
    let start = Instant::now();
    let mut fetched_steps = 0u64;
    for _ in 0..groups {
        let t = Instant::now();
        let group = client
            .fetch_group(table, Duration::ZERO)
            .await?
            .context("a submitted group was not ready")?;
        h.record(t.elapsed().as_nanos() as u64)?;
        ensure!(
            group.lengths().len() == GROUP_SIZE as usize,
            "a group of {} trajectories",
            group.lengths().len()
        );
        fetched_steps += group.steps() as u64;
    }
    let secs = start.elapsed().as_secs_f64();
    ensure!(fetched_steps == steps, "{fetched_steps} of {steps} steps");

    let mut same = Histogram::<u64>::new(3)?;
    for _ in 0..groups {
        let t = Instant::now();
        let b = client.sample(fixed_table, GROUP_SIZE * STEPS).await?;
        same.record(t.elapsed().as_nanos() as u64)?;
        ensure!(b.rows() == (GROUP_SIZE * STEPS) as usize, "short batch");
    }
    Ok(GroupedRound {
        fetch_groups_per_s: groups as f64 / secs,
        fetch_steps_per_s: steps as f64 / secs,
        fetch_p50_us: h.value_at_quantile(0.5) as f64 / 1e3,
        fetch_p99_us: h.value_at_quantile(0.99) as f64 / 1e3,
        submit_steps_per_s,
        same_bytes_sample_p50_us: same.value_at_quantile(0.5) as f64 / 1e3,
    })
}
