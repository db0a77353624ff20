//! Reinforcement-learning algorithms: the math of training, free of threads and I/O.
//!
//! - [`vtrace`]: V-trace targets and advantages (IMPALA eq. 1), `[T, B]` tensors.
pub mod vtrace;
