//! The learner: serves actor streams, batches inference across all of them,
//! assembles unrolls, stores them in the replay buffer, and trains.
//!
//! Data flows one way: stream -> batcher -> inference -> unroll -> replay ->
//! prefetch -> train -> weights -> inference. See the README's architecture
//! section for the thread model.
pub mod algo;
pub mod batcher;
pub mod checkpoint;
pub mod cli;
pub mod device;
pub mod error;
pub mod eval;
pub mod heap;
pub mod inference;
pub mod learning_curve;
pub mod local_actors;
pub mod log_histogram;
pub mod loom;
pub mod metrics;
pub mod metrics_endpoint;
pub mod metrics_log;
pub mod model;
pub mod optimizer;
pub mod plot_font;
pub mod prefetch;
pub mod prometheus;
pub mod run;
pub mod server;
pub mod state_table;
pub mod step_request;
pub mod summary;
pub mod train;
pub mod training;
pub mod transport;
pub mod unroll;
pub mod weights;
