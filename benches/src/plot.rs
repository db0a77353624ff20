//! The sweep's PNG plots (plotters, bitmap backend):
//! - `latency_vs_batch_fill.png`: actor round-trip p50 and p99 (and the echo
//!   floor's p50) against the learner's mean inference batch fill, log-log,
//!   one colour per transport;
//! - `throughput_vs_actors.png`: env steps/s against actor processes, one
//!   line per (envs per actor, transport).
//!
//! Text uses the font compiled into the learner library
//! (`seed_learner::report::plot_font`); if drawing fails anyway the caller logs it
//! (the JSON and CSV carry the same figures).
use std::path::Path;

use plotters::prelude::*;

use crate::error::HarnessError;
use crate::scenario::ScenarioResult;
use crate::transport::Transport;

/// A plot drawer: results in, PNG written to the path.
pub type PlotFn = fn(&[ScenarioResult], &Path) -> Result<(), HarnessError>;

const SIZE: (u32, u32) = (960, 640);
const PALETTE: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

fn out_err<E: std::fmt::Display>(path: &Path) -> impl Fn(E) -> HarnessError + '_ {
    move |e| HarnessError::Output {
        path: path.to_path_buf(),
        reason: e.to_string(),
    }
}

/// `[lo, hi]` widened by a factor of 1.5 each way, for a log axis.
fn log_bounds(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values
        .filter(|v| v.is_finite() && *v > 0.0)
        .fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if lo > hi {
        (1.0, 10.0)
    } else {
        (lo / 1.5, hi * 1.5)
    }
}

fn transports(results: &[ScenarioResult]) -> Vec<Transport> {
    let mut t: Vec<Transport> = results.iter().map(|r| r.transport).collect();
    t.sort_by_key(|t| t.name());
    t.dedup();
    t
}

/// Round-trip percentiles against mean batch fill.
pub fn latency_vs_batch_fill(results: &[ScenarioResult], path: &Path) -> Result<(), HarnessError> {
    let err = out_err(path);
    seed_learner::report::plot_font::register();
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(&err)?;
    let (x0, x1) = log_bounds(results.iter().map(|r| r.mean_batch_fill));
    let (y0, y1) = log_bounds(
        results
            .iter()
            .flat_map(|r| [r.p50_us, r.p99_us, r.echo_p50_us]),
    );
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Step round trip vs inference batch fill",
            (seed_learner::report::plot_font::FAMILY, 24),
        )
        .margin(12)
        .x_label_area_size(48)
        .y_label_area_size(72)
        .build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale())
        .map_err(&err)?;
    chart
        .configure_mesh()
        .x_desc("mean env rows per inference batch")
        .y_desc("round trip (us)")
        .draw()
        .map_err(&err)?;
    for (i, transport) in transports(results).into_iter().enumerate() {
        let mine: Vec<&ScenarioResult> = results
            .iter()
            .filter(|r| r.transport == transport)
            .collect();
        let c = PALETTE[(2 * i) % PALETTE.len()];
        let c2 = PALETTE[(2 * i + 1) % PALETTE.len()];
        chart
            .draw_series(
                mine.iter()
                    .map(|r| Circle::new((r.mean_batch_fill, r.p50_us), 5, c.filled())),
            )
            .map_err(&err)?
            .label(format!("p50 {transport}"))
            .legend(move |(x, y)| Circle::new((x, y), 5, c.filled()));
        chart
            .draw_series(
                mine.iter()
                    .map(|r| TriangleMarker::new((r.mean_batch_fill, r.p99_us), 6, c2.filled())),
            )
            .map_err(&err)?
            .label(format!("p99 {transport}"))
            .legend(move |(x, y)| TriangleMarker::new((x, y), 6, c2.filled()));
        chart
            .draw_series(
                mine.iter()
                    .map(|r| Cross::new((r.mean_batch_fill, r.echo_p50_us), 5, c.stroke_width(2))),
            )
            .map_err(&err)?
            .label(format!("echo floor p50 {transport}"))
            .legend(move |(x, y)| Cross::new((x, y), 5, c.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(&err)?;
    root.present().map_err(&err)
}

/// Env steps/s against actor count.
pub fn throughput_vs_actors(results: &[ScenarioResult], path: &Path) -> Result<(), HarnessError> {
    let err = out_err(path);
    seed_learner::report::plot_font::register();
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(&err)?;
    let max_actors = results.iter().map(|r| r.actors).max().unwrap_or(1) as f64;
    let (y0, y1) = log_bounds(results.iter().map(|r| r.env_steps_per_second));
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Throughput vs actor processes",
            (seed_learner::report::plot_font::FAMILY, 24),
        )
        .margin(12)
        .x_label_area_size(48)
        .y_label_area_size(80)
        .build_cartesian_2d(0.5..max_actors + 0.5, (y0..y1).log_scale())
        .map_err(&err)?;
    chart
        .configure_mesh()
        .x_desc("actor processes")
        .y_desc("env steps / s")
        .draw()
        .map_err(&err)?;
    let mut lines: Vec<(usize, Transport)> = results
        .iter()
        .map(|r| (r.envs_per_actor, r.transport))
        .collect();
    lines.sort_by_key(|(e, t)| (*e, t.name()));
    lines.dedup();
    for (i, (envs, transport)) in lines.into_iter().enumerate() {
        let c = PALETTE[i % PALETTE.len()];
        let mut pts: Vec<(f64, f64)> = results
            .iter()
            .filter(|r| r.envs_per_actor == envs && r.transport == transport)
            .map(|r| (r.actors as f64, r.env_steps_per_second))
            .collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let style = if transport == Transport::Tcp {
            c.stroke_width(2)
        } else {
            c.mix(0.6).stroke_width(2)
        };
        chart
            .draw_series(LineSeries::new(pts.clone(), style))
            .map_err(&err)?
            .label(format!("{envs} envs/actor, {transport}"))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], style));
        chart
            .draw_series(pts.into_iter().map(|p| Circle::new(p, 4, c.filled())))
            .map_err(&err)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(&err)?;
    root.present().map_err(&err)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn result(
        actors: usize,
        envs: usize,
        transport: Transport,
        fill: f64,
        steps: f64,
    ) -> ScenarioResult {
        ScenarioResult {
            actors,
            envs_per_actor: envs,
            env: "cartpole".into(),
            obs_bytes_per_env: 16,
            max_batch: 256,
            flush_us: 500,
            transport,
            device: "cpu".into(),
            train: false,
            inline_max_rows: 32,
            inline_batch_fraction: 0.0,
            duration_s: 1.0,
            rounds: 1,
            p50_us: 80.0 + fill,
            p90_us: 90.0 + fill,
            p99_us: 150.0 + fill,
            p999_us: 300.0,
            p99_us_worst: 160.0,
            echo_p50_us: 60.0,
            echo_p90_us: 70.0,
            echo_p99_us: 100.0,
            echo_p999_us: 200.0,
            p50_ratio: 1.3,
            p99_ratio: 1.5,
            env_steps_per_second: steps,
            echo_rows_per_second: steps * 2.0,
            obs_mb_per_second: steps * 16e-6,
            mean_batch_fill: fill,
            learner_env_steps: 1000,
            learner_cpu_seconds: 1.0,
            learner_cpu_s_per_million_steps: 1000.0,
            learner_step_p50_us: 20.0,
            learner_step_p99_us: 50.0,
            learner_context_switches_per_step: 1.0,
            echo_context_switches_per_step: 2.5,
        }
    }

    #[test]
    fn plots_are_written_as_png() {
        let dir = tempfile::tempdir().unwrap();
        let results = [
            result(1, 1, Transport::Tcp, 1.0, 1e4),
            result(2, 16, Transport::Tcp, 20.0, 1e5),
            result(1, 16, Transport::Unix, 10.0, 5e4),
            result(2, 16, Transport::Unix, 24.0, 1.2e5),
        ];
        for (name, draw) in [
            ("a.png", latency_vs_batch_fill as PlotFn),
            ("b.png", throughput_vs_actors),
        ] {
            let path = dir.path().join(name);
            draw(&results, &path).unwrap();
            let bytes = std::fs::read(&path).unwrap();
            assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
        }
    }
}
