//! Inference: turns step requests from every stream into actions.
//!
//! - [`batcher`]: the `DynamicBatcher`, a lock-free queue that flushes a
//!   batch at `--max-batch` rows, `--flush-us` after its first request, or
//!   when every live env is in;
//! - [`state_table`]: env slots, their leases and per-env state (run id,
//!   recurrent state), claimed with one atomic bit per env;
//! - [`step_request`]: one validated step batch with its claim and reply
//!   channel;
//! - [`exploration`]: per-env-slot ε-greedy with the Ape-X schedule (R2D2);
//! - [`inference`]: the inference threads (and the inline path a stream
//!   task may take), one forward per batch;
//! - [`sink`]: the interface through which inference hands every inferred
//!   batch to the learning side (implemented in `crate::learn::unroll`).
pub mod batcher;
pub mod exploration;
pub mod inference;
pub mod sink;
pub mod state_table;
pub mod step_request;

#[cfg(all(test, loom))]
mod tests;
