//! Reports.
pub mod learning_curve;
pub mod metrics_endpoint;
pub mod metrics_log;
pub mod plot_font;
pub mod progress;
pub mod prometheus;
pub mod summary;
