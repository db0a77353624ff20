//! [`Sweep`]: a grid of scenarios (actors x envs per actor x transport), run
//! one after another, written as JSON, CSV and PNG plots.
//!
//! A grid point that fails is logged and left out (its child logs stay in
//! the run directory); the others still run. Cost: two phases of
//! `duration` per point plus process start-up (about a second).
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;
use tracing::{error, info};

use crate::error::HarnessError;
use crate::machine::Machine;
use crate::scenario::{run_scenario, Binaries, Scenario, ScenarioResult};
use crate::transport::Transport;

/// The grid and everything held fixed across it.
#[derive(Debug, Clone)]
pub struct Sweep {
    /// Fixed fields (env, batching, duration); actors, envs and transport are overwritten.
    pub base: Scenario,
    pub actors: Vec<usize>,
    pub envs_per_actor: Vec<usize>,
    pub transports: Vec<Transport>,
}

impl Sweep {
    pub fn points(&self) -> Vec<Scenario> {
        let mut out = Vec::new();
        for &transport in &self.transports {
            for &envs in &self.envs_per_actor {
                for &actors in &self.actors {
                    out.push(Scenario {
                        actors,
                        envs_per_actor: envs,
                        transport,
                        ..self.base.clone()
                    });
                }
            }
        }
        out
    }
}

/// What `sweep.json` holds.
#[derive(Debug, Clone, Serialize)]
pub struct SweepReport {
    pub machine: Machine,
    pub results: Vec<ScenarioResult>,
    /// Labels of grid points that failed.
    pub failed: Vec<String>,
}

/// Runs every point, logging progress; children log under `run_dir/<label>/`.
pub async fn run_sweep(sweep: &Sweep, bins: &Binaries, run_dir: &Path) -> SweepReport {
    let points = sweep.points();
    let mut results = Vec::with_capacity(points.len());
    let mut failed = Vec::new();
    for (i, point) in points.iter().enumerate() {
        let label = point.label();
        info!("[{}/{}] {label}", i + 1, points.len());
        match run_scenario(point, bins, &run_dir.join(&label)).await {
            Ok(r) => {
                info!(
                    "[{}/{}] {label}: p50 {:.0} us ({:.2}x echo), p99 {:.0} us, {:.0} env steps/s, batch {:.1}",
                    i + 1,
                    points.len(),
                    r.p50_us,
                    r.p50_ratio,
                    r.p99_us,
                    r.env_steps_per_second,
                    r.mean_batch_fill
                );
                results.push(r);
            }
            Err(e) => {
                error!("[{}/{}] {label} failed: {e}", i + 1, points.len());
                failed.push(label);
            }
        }
    }
    SweepReport {
        machine: Machine::detect(),
        results,
        failed,
    }
}

/// The CSV columns, in order (one per [`ScenarioResult`] field).
const CSV_HEADER: &str = "actors,envs_per_actor,env,obs_bytes_per_env,max_batch,flush_us,transport,duration_s,\
p50_us,p90_us,p99_us,p999_us,p99_us_worst,echo_p50_us,echo_p90_us,echo_p99_us,echo_p999_us,\
p50_ratio,p99_ratio,env_steps_per_second,echo_rows_per_second,obs_mb_per_second,mean_batch_fill,\
learner_env_steps,learner_cpu_seconds,learner_cpu_s_per_million_steps,learner_step_p50_us,learner_step_p99_us";

/// The results as CSV text with [`CSV_HEADER`].
pub fn to_csv(results: &[ScenarioResult]) -> String {
    let mut out = String::from(CSV_HEADER);
    out.push('\n');
    for r in results {
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{:.1},{:.1},{:.1},{:.1},{:.1},{:.1},{:.1},{:.1},{:.1},{:.3},{:.3},{:.0},{:.0},{:.2},{:.2},{},{:.3},{:.3},{:.1},{:.1}",
            r.actors, r.envs_per_actor, r.env, r.obs_bytes_per_env, r.max_batch, r.flush_us,
            r.transport, r.duration_s, r.p50_us, r.p90_us, r.p99_us, r.p999_us, r.p99_us_worst,
            r.echo_p50_us, r.echo_p90_us, r.echo_p99_us, r.echo_p999_us, r.p50_ratio, r.p99_ratio,
            r.env_steps_per_second, r.echo_rows_per_second, r.obs_mb_per_second, r.mean_batch_fill,
            r.learner_env_steps, r.learner_cpu_seconds, r.learner_cpu_s_per_million_steps,
            r.learner_step_p50_us, r.learner_step_p99_us,
        );
    }
    out
}

/// Writes `sweep.json`, `sweep.csv` and the plots into `out_dir`; returns
/// the paths written. A plot that cannot be drawn (no fonts, say) is logged,
/// not fatal: the JSON and CSV hold every figure.
pub fn write_outputs(report: &SweepReport, out_dir: &Path) -> Result<Vec<PathBuf>, HarnessError> {
    std::fs::create_dir_all(out_dir)?;
    let out_err = |path: &Path, reason: String| HarnessError::Output {
        path: path.to_path_buf(),
        reason,
    };
    let json_path = out_dir.join("sweep.json");
    let json =
        serde_json::to_string_pretty(report).map_err(|e| out_err(&json_path, e.to_string()))?;
    std::fs::write(&json_path, json + "\n").map_err(|e| out_err(&json_path, e.to_string()))?;
    let csv_path = out_dir.join("sweep.csv");
    std::fs::write(&csv_path, to_csv(&report.results))
        .map_err(|e| out_err(&csv_path, e.to_string()))?;
    let mut written = vec![json_path, csv_path];
    for (name, draw) in [
        (
            "latency_vs_batch_fill.png",
            crate::plot::latency_vs_batch_fill as crate::plot::PlotFn,
        ),
        (
            "throughput_vs_actors.png",
            crate::plot::throughput_vs_actors,
        ),
    ] {
        let path = out_dir.join(name);
        match draw(&report.results, &path) {
            Ok(()) => written.push(path),
            Err(e) => error!("plot {} not drawn: {e}", path.display()),
        }
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use seed_env::EnvConfig;
    use std::time::Duration;

    #[test]
    fn grid_covers_every_combination() {
        let sweep = Sweep {
            base: Scenario {
                actors: 9,
                envs_per_actor: 9,
                env: EnvConfig::CartPole,
                max_batch: 256,
                flush_us: 500,
                transport: Transport::Tcp,
                duration: Duration::from_secs(1),
                rounds: 1,
                inference_threads: 1,
                inline_max_rows: 32,
                device: "cpu".into(),
                train: false,
            },
            actors: vec![1, 2],
            envs_per_actor: vec![1, 16, 64],
            transports: vec![Transport::Tcp, Transport::Unix],
        };
        let points = sweep.points();
        assert_eq!(points.len(), 12);
        assert!(points.iter().all(|p| p.max_batch == 256));
        let mut labels: Vec<_> = points.iter().map(Scenario::label).collect();
        labels.sort();
        labels.dedup();
        assert_eq!(labels.len(), 12);
    }

    #[test]
    fn csv_has_one_column_per_header_field() {
        assert_eq!(to_csv(&[]).lines().count(), 1);
        let cols = CSV_HEADER.split(',').count();
        let r = crate::plot::tests::result(1, 1, Transport::Unix, 10.0, 100.0);
        let csv = to_csv(&[r]);
        let row = csv.lines().nth(1).unwrap();
        assert_eq!(row.split(',').count(), cols, "{row}");
    }
}
