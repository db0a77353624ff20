//! [`RunMonitor`]: what the `learner` run watches while it trains: the
//! stop conditions (`--max-seconds`, `--max-env-steps`, solved with
//! `--stop-when-solved`), the first time the target is reached and the
//! lowest mean after it, the learning curve, the progress lines and
//! `metrics.jsonl`, TensorBoard's event files; at the end, the summary and
//! the curve's PNG.
//!
//! Cost: one metrics snapshot per stop check (every 50 ms); the curve and
//! the progress line only when due. TensorBoard's points are queued for
//! its writer thread, never written here (`report::tensorboard`).
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::{error, info, warn};

use crate::app::config::LearnerConfig;
use crate::app::learner::Learner;
use crate::error::LearnerError;
use crate::metrics::{Episode, Metrics, MetricsSnapshot, RETURN_WINDOW};
use crate::report::learning_curve::{CurvePoint, LearningCurve};
use crate::report::metrics_log::MetricsLog;
use crate::report::progress::{interval_record, log_progress};
use crate::report::summary::{RunSummary, TrainingSummary};
use crate::report::tensorboard::event_file::wall_time_now;
use crate::report::tensorboard::{Point, PointKind, TensorBoard};

/// How often the learning curve is sampled.
const CURVE_EVERY: Duration = Duration::from_millis(500);

/// TensorBoard's first points of a run: the restart marker at the run's
/// first step (a resumed run's curve joins the earlier one's, see
/// `report::tensorboard`) and the resolved config, when the command that
/// resolved it passed it on.
fn start_points(snap: &MetricsSnapshot, settings_toml: Option<&str>) -> Vec<Point> {
    let at = |kind| Point {
        step: snap.env_steps,
        wall_time: wall_time_now(),
        kind,
    };
    let mut points = vec![at(PointKind::Start)];
    if let Some(text) = settings_toml {
        points.push(at(PointKind::Text {
            tag: "run/config".into(),
            text: code_block(text),
        }));
    }
    points
}

/// Each episode's return and length, at `env_steps`.
fn episode_points(env_steps: u64, episodes: &[Episode]) -> Vec<Point> {
    let wall_time = wall_time_now();
    episodes
        .iter()
        .flat_map(|e| {
            [
                ("env/episode_return", f64::from(e.episode_return)),
                ("env/episode_length", f64::from(e.length)),
            ]
        })
        .map(|(tag, value)| Point {
            step: env_steps,
            wall_time,
            kind: PointKind::Scalar {
                tag: tag.into(),
                value,
            },
        })
        .collect()
}

/// `text` as a Markdown code block (TensorBoard's text plugin renders
/// Markdown): every line indented by four spaces.
fn code_block(text: &str) -> String {
    text.lines().map(|l| format!("    {l}\n")).collect()
}

/// The run's observer (see the module docs).
pub struct RunMonitor {
    metrics: Arc<Metrics>,
    /// The run's one clock (see `run_until`).
    t0: Instant,
    deadline: Option<tokio::time::Instant>,
    max_env_steps: Option<u64>,
    target_return: f64,
    stop_when_solved: bool,
    /// Episodes a resumed run had already counted (the solved check needs
    /// a full window of this run's own).
    resumed_episodes: u64,
    run_dir: Option<PathBuf>,
    metrics_log: Option<MetricsLog>,
    curve: LearningCurve,
    /// Episodes already on the curve (those of a resumed run's past are
    /// not in memory: it starts from what is recorded at start).
    episodes_seen: u64,
    new_episodes: Vec<Episode>,
    /// TensorBoard's writer, when training with a directory for it.
    tensorboard: Option<TensorBoard>,
    /// Returns of the progress interval so far (TensorBoard's histogram).
    interval_returns: Vec<f64>,
    next_curve: tokio::time::Instant,
    /// Env steps and seconds when the target was first reached.
    solved: Option<(u64, f64)>,
    /// Lowest 100-episode mean after the first solve, sampled with the
    /// progress lines (every --progress-secs, else every stop check).
    min_after_solve: Option<f64>,
    progress_every: Option<Duration>,
    next_progress: Option<tokio::time::Instant>,
    /// The snapshot of the last progress line (rates are per interval).
    last: MetricsSnapshot,
}

impl RunMonitor {
    /// Starts watching `learner`; opens `metrics.jsonl` in the run dir when
    /// training.
    pub fn new(
        config: &LearnerConfig,
        learner: &Learner,
        t0: Instant,
        deadline: Option<tokio::time::Instant>,
    ) -> Result<Self, LearnerError> {
        let args = &config.run;
        let metrics = Arc::clone(learner.metrics());
        let run_dir = config.run_dir().cloned();
        let metrics_log = match (&run_dir, config.train.is_some()) {
            (Some(d), true) => Some(MetricsLog::open(d)?),
            _ => None,
        };
        let progress_every = args.progress_every;
        let last = metrics.snapshot();
        let tensorboard = match (&args.tensorboard, config.train.is_some()) {
            (Some(dir), true) => match TensorBoard::start(dir) {
                Ok(tb) => {
                    tb.send(start_points(&last, args.settings_toml.as_deref()));
                    Some(tb)
                }
                Err(e) => {
                    error!(error = %e, "no TensorBoard events this run; training goes on");
                    None
                }
            },
            _ => None,
        };
        Ok(RunMonitor {
            resumed_episodes: metrics.episodes.load(Ordering::Relaxed),
            episodes_seen: metrics.episodes_since(u64::MAX, &mut Vec::new()),
            last,
            tensorboard,
            interval_returns: Vec::new(),
            metrics,
            t0,
            deadline,
            max_env_steps: args.max_env_steps,
            target_return: args.target_return,
            stop_when_solved: args.stop_when_solved,
            run_dir,
            metrics_log,
            curve: LearningCurve::new(Some(args.target_return)),
            new_episodes: Vec::new(),
            next_curve: tokio::time::Instant::now(),
            solved: None,
            min_after_solve: None,
            progress_every,
            next_progress: progress_every.map(|p| tokio::time::Instant::now() + p),
        })
    }

    /// One stop check at `now`: the reason to stop, if any; otherwise
    /// records what is due (solved, curve, progress line).
    pub fn tick(&mut self, now: tokio::time::Instant) -> Option<&'static str> {
        if self.deadline.is_some_and(|d| now >= d) {
            return Some("--max-seconds reached");
        }
        if let Some(max) = self.max_env_steps {
            if self.metrics.env_steps.load(Ordering::Relaxed) >= max {
                return Some("--max-env-steps reached");
            }
        }
        let snap = self.metrics.snapshot();
        let seconds = self.t0.elapsed().as_secs_f64();
        self.report_evaluations();
        if self.check_solved(&snap, seconds) && self.stop_when_solved {
            return Some("solved (--stop-when-solved)");
        }
        if now >= self.next_curve {
            self.next_curve = now + CURVE_EVERY;
            self.sample_curve(&snap, seconds);
        }
        let progress_due = self.next_progress.is_none_or(|at| now >= at);
        if let (true, Some(m)) = (progress_due && self.solved.is_some(), self.min_after_solve) {
            self.min_after_solve = Some(m.min(snap.mean_return_last_100));
        }
        if let (Some(at), Some(every)) = (self.next_progress, self.progress_every) {
            if now >= at {
                self.report_progress(snap, seconds);
                self.next_progress = Some(at + every);
            }
        }
        None
    }

    /// The evaluations (`--eval-every`) since the last call: a log line
    /// each, and TensorBoard's `eval/return` (the mean), `eval/return_min`
    /// and `eval/return_max` at the evaluated weights' env steps.
    fn report_evaluations(&mut self) {
        for e in self.metrics.take_evaluations() {
            info!(
                learner_steps = e.learner_steps,
                policy_version = e.policy_version,
                episodes = e.episodes,
                mean_return = format!("{:.1}", e.mean_return),
                min_return = format!("{:.1}", e.min_return),
                max_return = format!("{:.1}", e.max_return),
                best = e.best,
                "evaluated (greedy)"
            );
            if let Some(tb) = &self.tensorboard {
                let wall_time = wall_time_now();
                let points = [
                    ("eval/return", e.mean_return),
                    ("eval/return_min", e.min_return),
                    ("eval/return_max", e.max_return),
                ]
                .into_iter()
                .map(|(tag, value)| Point {
                    step: e.env_steps,
                    wall_time,
                    kind: PointKind::Scalar {
                        tag: tag.into(),
                        value,
                    },
                })
                .collect();
                tb.send(points);
            }
        }
    }

    /// Records the first time the 100-episode mean reaches the target (over
    /// a full window of this run's episodes); `true` exactly then.
    fn check_solved(&mut self, snap: &MetricsSnapshot, seconds: f64) -> bool {
        let episodes_here = snap.episodes.saturating_sub(self.resumed_episodes);
        if self.solved.is_some()
            || episodes_here < RETURN_WINDOW as u64
            || snap.mean_return_last_100 < self.target_return
        {
            return false;
        }
        self.solved = Some((snap.env_steps, seconds));
        self.min_after_solve = Some(snap.mean_return_last_100);
        info!(
            env_steps = snap.env_steps,
            seconds = format!("{seconds:.1}"),
            mean_return = format!("{:.1}", snap.mean_return_last_100),
            "solved"
        );
        true
    }

    fn sample_curve(&mut self, snap: &MetricsSnapshot, seconds: f64) {
        let point = CurvePoint {
            env_steps: snap.env_steps,
            seconds,
            mean_return: snap.mean_return_last_100,
            episodes: snap.episodes,
        };
        self.new_episodes.clear();
        self.episodes_seen = self
            .metrics
            .episodes_since(self.episodes_seen, &mut self.new_episodes);
        let returns: Vec<f32> = self.new_episodes.iter().map(|e| e.episode_return).collect();
        self.curve.push_episodes(point, &returns);
        self.curve.push(point);
        if let Some(tb) = &self.tensorboard {
            self.interval_returns
                .extend(returns.iter().map(|&r| f64::from(r)));
            tb.send(episode_points(snap.env_steps, &self.new_episodes));
        }
    }

    /// The interval's record, its histograms and what is left of its
    /// episodes to TensorBoard.
    fn tensorboard_interval(&mut self, record: &serde_json::Value, snap: &MetricsSnapshot) {
        if self.tensorboard.is_none() {
            return;
        }
        // The episodes since the curve's last sample, into this interval.
        self.sample_curve(snap, self.t0.elapsed().as_secs_f64());
        let at = |kind| Point {
            step: snap.env_steps,
            wall_time: wall_time_now(),
            kind,
        };
        let mut points: Vec<Point> = record
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(tag, v)| {
                v.as_f64().map(|value| {
                    at(PointKind::Scalar {
                        tag: tag.clone(),
                        value,
                    })
                })
            })
            .collect();
        points.push(at(PointKind::Values {
            tag: "env/episode_returns".into(),
            values: std::mem::take(&mut self.interval_returns),
        }));
        if let (Some(now), last) = (&snap.training, &self.last.training) {
            let earlier = last
                .as_ref()
                .map(|t| t.policy_lags.clone())
                .unwrap_or_default();
            points.push(at(PointKind::Buckets {
                tag: "train/policy_lag".into(),
                snapshot: now.policy_lags.since(&earlier),
            }));
        }
        if let Some(tb) = &self.tensorboard {
            tb.send(points);
        }
    }

    /// The progress line, and its record in `metrics.jsonl`.
    fn report_progress(&mut self, snap: MetricsSnapshot, seconds: f64) {
        log_progress(&snap, &self.last, snap.training.as_ref());
        if let Some(t) = snap.training.as_ref() {
            let record = interval_record(&snap, &self.last, t, seconds);
            if let Some(log) = self.metrics_log.as_mut() {
                if let Err(e) = log.append(&record) {
                    warn!(error = %e, "metrics.jsonl");
                }
            }
            self.tensorboard_interval(&record, &snap);
        }
        self.last = snap;
    }

    /// The run's last snapshot and its wall time, taken before anything
    /// stops; the last `metrics.jsonl` record is written from it.
    pub fn final_snapshot(&mut self) -> (MetricsSnapshot, Duration) {
        let wall = self.t0.elapsed();
        let snap = self.metrics.snapshot();
        if let Some(t) = snap.training.as_ref() {
            let record = interval_record(&snap, &self.last, t, self.t0.elapsed().as_secs_f64());
            if let Some(log) = self.metrics_log.as_mut() {
                if let Err(e) = log.append(&record) {
                    warn!(error = %e, "metrics.jsonl");
                }
            }
            self.tensorboard_interval(&record, &snap);
        }
        (snap, wall)
    }

    /// The run's summary from the final snapshot (`train_secs`: how long
    /// training ran); writes the learning curve into the run dir.
    pub fn finish(
        mut self,
        snap: &MetricsSnapshot,
        wall: Duration,
        train_secs: f64,
        failures: usize,
        addr: String,
    ) -> RunSummary {
        let mut summary = RunSummary::new(snap, wall, failures, addr);
        if let Some(t) = &snap.training {
            summary.training = Some(TrainingSummary::new(
                t,
                train_secs,
                self.target_return,
                self.solved,
                snap.mean_return_last_100,
                self.min_after_solve,
            ));
        }
        if let Some(dir) = &self.run_dir {
            self.curve.push(CurvePoint {
                env_steps: snap.env_steps,
                seconds: self.t0.elapsed().as_secs_f64(),
                mean_return: snap.mean_return_last_100,
                episodes: snap.episodes,
            });
            let path = dir.join("learning_curve.png");
            match self.curve.write_png(&path) {
                Ok(()) => info!(path = %path.display(), "learning curve written"),
                Err(e) => warn!(error = %e, "learning curve"),
            }
        }
        self.report_evaluations();
        if let Some(tb) = self.tensorboard.take() {
            if let Ok(json) = serde_json::to_string_pretty(&summary) {
                tb.send(vec![Point {
                    step: snap.env_steps,
                    wall_time: wall_time_now(),
                    kind: PointKind::Text {
                        tag: "run/summary".into(),
                        text: code_block(&json),
                    },
                }]);
            }
            tb.finish();
        }
        summary
    }
}
