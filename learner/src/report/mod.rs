//! Reports: everything that reads a `crate::metrics` snapshot and shows it
//! to a person or a program: the progress line and `metrics.jsonl`
//! ([`progress`], [`metrics_log`]), the summary JSON ([`summary`]), the
//! learning curve PNG ([`learning_curve`], [`plot_font`]) and the
//! Prometheus exposition and its `/metrics` endpoint ([`prometheus`],
//! [`metrics_endpoint`]). Imports only leaves (metrics, errors).
pub mod learning_curve;
pub mod metrics_endpoint;
pub mod metrics_log;
pub mod plot_font;
pub mod progress;
pub mod prometheus;
pub mod summary;
pub mod tensorboard;
pub mod thinned;
