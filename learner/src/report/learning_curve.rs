//! The learning curve: mean episode return (last 100 episodes) against env
//! steps and against wall seconds, sampled during the run and drawn at exit
//! as `learning_curve.png` (two panels) with plotters' bitmap backend.
//!
//! Text uses the font compiled into the binary ([`crate::report::plot_font`]); if
//! drawing text fails anyway, the panels are drawn without labels rather
//! than not at all.
//!
//! Cost: one small struct per sample; drawing takes a few milliseconds.
use std::path::Path;

use plotters::prelude::*;

use crate::error::LearnerError;

/// One sample of the curve.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CurvePoint {
    pub env_steps: u64,
    pub seconds: f64,
    pub mean_return: f64,
}

/// Samples collected during a run.
#[derive(Debug, Clone, Default)]
pub struct LearningCurve {
    points: Vec<CurvePoint>,
    /// A horizontal line at the target return, if any.
    target: Option<f64>,
}

impl LearningCurve {
    pub fn new(target: Option<f64>) -> Self {
        LearningCurve {
            points: Vec::new(),
            target,
        }
    }

    pub fn push(&mut self, p: CurvePoint) {
        self.points.push(p);
    }

    pub fn points(&self) -> &[CurvePoint] {
        &self.points
    }

    /// Writes the PNG (800x360, two panels).
    pub fn write_png(&self, path: &Path) -> Result<(), LearnerError> {
        match self.draw(path, true) {
            Ok(()) => Ok(()),
            // Text failed (the font did not load): try again without any.
            Err(_) => self.draw(path, false).map_err(|reason| LearnerError::Io {
                what: format!("drawing {}", path.display()),
                source: std::io::Error::other(reason),
            }),
        }
    }

    fn draw(&self, path: &Path, text: bool) -> Result<(), String> {
        crate::report::plot_font::register();
        let root = BitMapBackend::new(path, (1000, 400)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let (left, right) = root.split_horizontally(500);
        let max_steps = self
            .points
            .iter()
            .map(|p| p.env_steps)
            .max()
            .unwrap_or(1)
            .max(1) as f64;
        let max_secs = self.points.iter().map(|p| p.seconds).fold(1.0, f64::max);
        let max_ret = self
            .points
            .iter()
            .map(|p| p.mean_return)
            .chain(self.target)
            .fold(1.0, f64::max)
            * 1.05;
        let panels = [
            Panel {
                area: &left,
                xlabel: "env steps",
                xmax: max_steps,
                x: |p| p.env_steps as f64,
            },
            Panel {
                area: &right,
                xlabel: "seconds",
                xmax: max_secs,
                x: |p| p.seconds,
            },
        ];
        for Panel {
            area,
            xlabel,
            xmax,
            x,
        } in panels
        {
            let mut builder = ChartBuilder::on(area);
            builder.margin(12);
            if text {
                builder
                    .caption(
                        format!("mean return vs {xlabel}"),
                        (crate::report::plot_font::FAMILY, 18),
                    )
                    .x_label_area_size(36)
                    .y_label_area_size(48);
            }
            let mut chart = builder
                .build_cartesian_2d(0.0..xmax, 0.0..max_ret)
                .map_err(|e| e.to_string())?;
            let mut mesh = chart.configure_mesh();
            if text {
                mesh.x_desc(xlabel).y_desc("mean return (last 100)");
            } else {
                mesh.disable_x_mesh()
                    .disable_y_mesh()
                    .x_labels(0)
                    .y_labels(0);
            }
            mesh.draw().map_err(|e| e.to_string())?;
            chart
                .draw_series(LineSeries::new(
                    self.points.iter().map(|p| (x(p), p.mean_return)),
                    &BLUE,
                ))
                .map_err(|e| e.to_string())?;
            if let Some(t) = self.target {
                chart
                    .draw_series(LineSeries::new([(0.0, t), (xmax, t)], &RED))
                    .map_err(|e| e.to_string())?;
            }
        }
        root.present().map_err(|e| e.to_string())
    }
}

/// One chart: where it goes and what its x axis is.
struct Panel<'a, DB: DrawingBackend> {
    area: &'a DrawingArea<DB, plotters::coord::Shift>,
    xlabel: &'static str,
    xmax: f64,
    x: fn(&CurvePoint) -> f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_a_png() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = LearningCurve::new(Some(475.0));
        for i in 0..20u64 {
            c.push(CurvePoint {
                env_steps: i * 1000,
                seconds: i as f64 * 0.5,
                mean_return: (i * 20) as f64,
            });
        }
        let path = dir.path().join("curve.png");
        c.write_png(&path).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[1..4], b"PNG");
    }
}
