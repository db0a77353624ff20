//! The learner: serves actor streams, batches inference across all of them,
//! assembles unrolls, stores them in the replay buffer, and trains.
pub mod app;
pub mod device;
pub mod error;
pub mod heap;
pub mod infer;
pub mod learn;
pub mod loom;
pub mod metrics;
pub mod model;
pub mod replay;
pub mod report;
pub mod serve;
pub mod cli;
