//! The hour on one PNG, four panels against minutes: RSS of the learner
//! and the replay server (the server's anonymous part apart from its
//! mapped table's pages), their open fds, the learner's env steps/s, and
//! its 100-episode mean return.
use std::path::Path;

use plotters::prelude::*;

use super::{HourSoakReport, Minute};
use crate::error::HarnessError;

const SIZE: (u32, u32) = (1280, 880);
const BLUE: RGBColor = RGBColor(31, 119, 180);
const ORANGE: RGBColor = RGBColor(255, 127, 14);
const GREEN: RGBColor = RGBColor(44, 160, 44);

type Series<'a> = (&'a str, RGBColor, fn(&Minute) -> f64);

/// Draws `report` into `path`.
pub fn draw(report: &HourSoakReport, path: &Path) -> Result<(), HarnessError> {
    let err = |e: &dyn std::fmt::Display| HarnessError::Output {
        path: path.to_path_buf(),
        reason: e.to_string(),
    };
    seed_learner::report::plot_font::register();
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let panels = root.split_evenly((2, 2));
    let m = &report.minutes;
    let rss: [Series; 3] = [
        ("learner RSS", BLUE, |m| m.learner.rss_mib),
        ("replay server RSS", ORANGE, |m| m.server.rss_mib),
        ("replay server anonymous", GREEN, |m| m.server.rss_anon_mib),
    ];
    let fds: [Series; 2] = [
        ("learner fds", BLUE, |m| m.learner.fds as f64),
        ("replay server fds", ORANGE, |m| m.server.fds as f64),
    ];
    let rate: [Series; 1] = [("learner env steps/s", BLUE, |m| m.env_steps_per_s)];
    let ret: [Series; 1] = [("100-episode mean return", BLUE, |m| m.mean_return_last_100)];
    panel(&panels[0], "Resident memory", "MiB", m, &rss).map_err(|e| err(&e))?;
    panel(&panels[1], "Open file descriptors", "fds", m, &fds).map_err(|e| err(&e))?;
    // Minute 0 has no minute before it to rate.
    let rated = m.get(1..).unwrap_or(m);
    panel(
        &panels[2],
        "Learner throughput",
        "env steps/s",
        rated,
        &rate,
    )
    .map_err(|e| err(&e))?;
    panel(&panels[3], "CartPole return", "return", m, &ret).map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))
}

fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    unit: &str,
    minutes: &[Minute],
    series: &[Series],
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let x1 = minutes.last().map_or(1.0, |m| f64::from(m.minute)).max(1.0);
    let y1 = minutes
        .iter()
        .flat_map(|m| series.iter().map(move |(_, _, f)| f(m)))
        .filter(|v| v.is_finite())
        .fold(1.0f64, f64::max)
        * 1.15;
    let mut chart = ChartBuilder::on(area)
        .caption(title, (seed_learner::report::plot_font::FAMILY, 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..x1, 0.0..y1)?;
    chart
        .configure_mesh()
        .x_desc("minute")
        .y_desc(unit)
        .draw()?;
    for &(label, colour, f) in series {
        chart
            .draw_series(LineSeries::new(
                minutes.iter().map(|m| (f64::from(m.minute), f(m))),
                colour.stroke_width(2),
            ))?
            .label(label)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], colour.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
}
