//! The learning curve: mean episode return (last 100 episodes) against env
//! steps and against wall seconds, sampled during the run and drawn at exit
//! as `learning_curve.png` (two panels) with plotters' bitmap backend. The
//! episode returns themselves are drawn faintly under the mean, and the
//! target as a dashed line, so a reader sees at a glance whether a run
//! stayed solved. Axis ticks read 500k / 1M env steps and whole seconds.
//!
//! Text uses the font compiled into the binary ([`crate::report::plot_font`]); if
//! drawing text fails anyway, the panels are drawn without labels rather
//! than not at all.
//!
//! Cost: at most [`MAX_POINTS`] samples and [`MAX_EPISODES`] episodes,
//! thinned evenly over the run however long it is
//! ([`crate::report::thinned`]); drawing takes a few milliseconds.
use std::path::Path;

use plotters::prelude::*;

use crate::error::LearnerError;
use crate::report::thinned::Thinned;

/// Samples of the mean the curve keeps (a PNG panel is 500 pixels wide).
pub const MAX_POINTS: usize = 4096;
/// Episode returns the curve keeps for its faint dots.
pub const MAX_EPISODES: usize = 20_000;

/// One sample of the curve.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CurvePoint {
    pub env_steps: u64,
    pub seconds: f64,
    /// The mean over the last 100 episodes (or fewer), meaningful only once
    /// `episodes` is above 0.
    pub mean_return: f64,
    /// Episodes finished so far.
    pub episodes: u64,
}

/// One finished episode, placed where the run was when it was read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EpisodePoint {
    pub env_steps: f64,
    pub seconds: f64,
    pub episode_return: f32,
}

/// Samples collected during a run, thinned to a bounded number.
#[derive(Debug, Clone)]
pub struct LearningCurve {
    points: Thinned<CurvePoint>,
    episodes: Thinned<EpisodePoint>,
    /// A horizontal line at the target return, if any.
    target: Option<f64>,
}

impl LearningCurve {
    pub fn new(target: Option<f64>) -> Self {
        LearningCurve {
            points: Thinned::new(MAX_POINTS),
            episodes: Thinned::new(MAX_EPISODES),
            target,
        }
    }

    /// Adds a sample of the mean; one taken before any episode finished is
    /// left out (its mean of 0 would draw a line from 0 down to the first
    /// real mean: -1,200 on Pendulum).
    pub fn push(&mut self, p: CurvePoint) {
        if p.episodes > 0 {
            self.points.push(p);
        }
    }

    /// Adds the returns of episodes that finished since the previous
    /// sample, spread evenly between that sample and `now` (the run reads
    /// them in batches, so their exact step is not known).
    pub fn push_episodes(&mut self, now: CurvePoint, returns: &[f32]) {
        let (s0, t0) = self
            .points
            .latest()
            .map_or((0.0, 0.0), |p| (p.env_steps as f64, p.seconds));
        let n = returns.len() as f64;
        for (i, &r) in returns.iter().enumerate() {
            let f = (i + 1) as f64 / n;
            self.episodes.push(EpisodePoint {
                env_steps: s0 + f * (now.env_steps as f64 - s0),
                seconds: t0 + f * (now.seconds - t0),
                episode_return: r,
            });
        }
    }

    /// The samples the curve draws: thinned evenly, ending at the latest.
    pub fn points(&self) -> Vec<CurvePoint> {
        self.points.iter().copied().collect()
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
        let (min_ret, max_ret) = return_range(
            self.points
                .iter()
                .map(|p| p.mean_return)
                .chain(self.episodes.iter().map(|e| e.episode_return as f64))
                .chain(self.target),
        );
        let panels = [
            Panel {
                area: &left,
                xlabel: "env steps",
                xmax: max_steps,
                x: |p| p.env_steps as f64,
                episode_x: |e| e.env_steps,
                tick: format_steps,
            },
            Panel {
                area: &right,
                xlabel: "seconds",
                xmax: max_secs,
                x: |p| p.seconds,
                episode_x: |e| e.seconds,
                tick: format_seconds,
            },
        ];
        for Panel {
            area,
            xlabel,
            xmax,
            x,
            episode_x,
            tick,
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
                .build_cartesian_2d(0.0..xmax, min_ret..max_ret)
                .map_err(|e| e.to_string())?;
            let x_tick = |v: &f64| tick(*v);
            let y_tick = |v: &f64| format_return(*v, max_ret - min_ret);
            let mut mesh = chart.configure_mesh();
            if text {
                mesh.x_desc(xlabel)
                    .y_desc("return")
                    .x_label_formatter(&x_tick)
                    .y_label_formatter(&y_tick);
            } else {
                mesh.disable_x_mesh()
                    .disable_y_mesh()
                    .x_labels(0)
                    .y_labels(0);
            }
            mesh.draw().map_err(|e| e.to_string())?;
            let faint = BLUE.mix(0.18);
            chart
                .draw_series(self.episodes.iter().map(|e| {
                    Circle::new((episode_x(e), e.episode_return as f64), 1, faint.filled())
                }))
                .map_err(|e| e.to_string())?
                .label("episode return")
                .legend(move |(lx, ly)| Circle::new((lx + 10, ly), 2, faint.filled()));
            chart
                .draw_series(LineSeries::new(
                    self.points.iter().map(|p| (x(p), p.mean_return)),
                    BLUE.stroke_width(2),
                ))
                .map_err(|e| e.to_string())?
                .label("mean of the last 100")
                .legend(|(lx, ly)| {
                    PathElement::new([(lx, ly), (lx + 20, ly)], BLUE.stroke_width(2))
                });
            if let Some(t) = self.target {
                chart
                    .draw_series(DashedLineSeries::new(
                        [(0.0, t), (xmax, t)],
                        6,
                        4,
                        RED.into(),
                    ))
                    .map_err(|e| e.to_string())?
                    .label(format!("target {t:.0}"))
                    .legend(|(lx, ly)| PathElement::new([(lx, ly), (lx + 20, ly)], RED));
            }
            if text {
                chart
                    .configure_series_labels()
                    .position(SeriesLabelPosition::LowerRight)
                    .background_style(WHITE.mix(0.85))
                    .border_style(BLACK.mix(0.3))
                    .label_font((crate::report::plot_font::FAMILY, 13))
                    .draw()
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
    episode_x: fn(&EpisodePoint) -> f64,
    tick: fn(f64) -> String,
}

/// The return axis: from 0 (or the lowest return, when one is negative,
/// as all of Pendulum's are) to the highest (or 0), with 5% headroom on the
/// open sides and at least a span of 1, so that a flat or empty curve still
/// has an axis.
pub fn return_range(returns: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = returns
        .filter(|r| r.is_finite())
        .fold((0.0_f64, 0.0_f64), |(lo, hi), r| (lo.min(r), hi.max(r)));
    let hi = hi.max(lo + 1.0);
    let span = hi - lo;
    let lo = if lo < 0.0 { lo - 0.05 * span } else { 0.0 };
    (lo, hi + 0.05 * span)
}

/// A return tick: whole numbers, with one decimal when the axis spans
/// less than 10 (a MinAtar run starting near 0.5).
pub fn format_return(v: f64, span: f64) -> String {
    if span < 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.0}")
    }
}

/// An env-step tick: `0`, `2.5k`, `500k`, `1M`, `1.5M`.
pub fn format_steps(v: f64) -> String {
    let (scaled, unit) = if v.abs() >= 1e6 {
        (v / 1e6, "M")
    } else if v.abs() >= 1e3 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let text = format!("{scaled:.1}");
    let text = text.strip_suffix(".0").unwrap_or(&text);
    format!("{text}{unit}")
}

/// A seconds tick: whole seconds (tenths below 10 s when not whole).
pub fn format_seconds(v: f64) -> String {
    if v < 10.0 && (v - v.round()).abs() > 1e-9 {
        format!("{v:.1}")
    } else {
        format!("{v:.0}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_read_like_numbers_people_write() {
        assert_eq!(format_steps(0.0), "0");
        assert_eq!(format_steps(2500.0), "2.5k");
        assert_eq!(format_steps(500_000.0), "500k");
        assert_eq!(format_steps(1_000_000.0), "1M");
        assert_eq!(format_steps(1_500_000.0), "1.5M");
        assert_eq!(format_seconds(2.0), "2");
        assert_eq!(format_seconds(2.5), "2.5");
        assert_eq!(format_seconds(30.0), "30");
    }

    #[test]
    fn the_return_axis_holds_negative_returns() {
        // Pendulum: every return below 0, the target too.
        let (lo, hi) = return_range([-1243.0, -180.0, -250.0].into_iter());
        assert!(lo < -1243.0 && hi > 0.0, "{lo}..{hi}");
        // CartPole: the axis starts at 0 with headroom above 500.
        let (lo, hi) = return_range([22.0, 500.0, 475.0].into_iter());
        assert_eq!(lo, 0.0);
        assert!(hi > 500.0);
        // Nothing yet, or a flat zero curve: still a usable span.
        assert_eq!(return_range(std::iter::empty()), (0.0, 1.05));
        assert_eq!(return_range([0.0, f64::NAN].into_iter()), (0.0, 1.05));
        assert_eq!(format_return(0.5, 1.05), "0.5");
        assert_eq!(format_return(-250.0, 1300.0), "-250");
    }

    #[test]
    fn a_mean_before_any_episode_is_not_drawn() {
        let mut c = LearningCurve::new(Some(-250.0));
        let p = |episodes: u64, mean_return: f64| CurvePoint {
            env_steps: episodes * 200,
            seconds: episodes as f64,
            mean_return,
            episodes,
        };
        c.push(p(0, 0.0));
        c.push(p(5, -1200.0));
        assert_eq!(c.points(), vec![p(5, -1200.0)]);
    }

    #[test]
    fn episodes_spread_between_samples() {
        let mut c = LearningCurve::new(None);
        let p = |s: u64, t: f64| CurvePoint {
            env_steps: s,
            seconds: t,
            mean_return: 0.0,
            episodes: 1,
        };
        c.push(p(1000, 1.0));
        c.push_episodes(p(3000, 2.0), &[10.0, 20.0]);
        let xs: Vec<(f64, f64)> = c
            .episodes
            .iter()
            .map(|e| (e.env_steps, e.seconds))
            .collect();
        assert_eq!(xs, vec![(2000.0, 1.5), (3000.0, 2.0)]);
    }

    #[test]
    fn a_long_run_keeps_a_bounded_curve_that_ends_where_the_run_is() {
        let mut c = LearningCurve::new(None);
        for i in 0..50_000u64 {
            let now = CurvePoint {
                env_steps: i * 100,
                seconds: i as f64 * 0.5,
                mean_return: 1.0,
                episodes: 4 * (i + 1),
            };
            c.push_episodes(now, &[1.0; 4]);
            c.push(now);
        }
        assert!(c.points().len() <= MAX_POINTS + 1);
        assert!(c.episodes.len() <= MAX_EPISODES + 1);
        assert_eq!(c.points().last().map(|p| p.env_steps), Some(49_999 * 100));
    }

    #[test]
    fn writes_a_png() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = LearningCurve::new(Some(475.0));
        for i in 0..20u64 {
            c.push(CurvePoint {
                env_steps: i * 1000,
                seconds: i as f64 * 0.5,
                mean_return: (i * 20) as f64,
                episodes: i + 1,
            });
            let now = CurvePoint {
                env_steps: (i + 1) * 1000,
                seconds: (i + 1) as f64 * 0.5,
                mean_return: 0.0,
                episodes: 2 * i + 2,
            };
            c.push_episodes(now, &[i as f32 * 15.0, i as f32 * 25.0]);
        }
        let path = dir.path().join("curve.png");
        c.write_png(&path).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[1..4], b"PNG");
    }
}
