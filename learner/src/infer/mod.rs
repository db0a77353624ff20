//! Inference: the dynamic batcher, the env-slot state table, step requests and
//! the inference threads.
pub mod batcher;
pub mod inference;
pub mod state_table;
pub mod step_request;

#[cfg(all(test, loom))]
mod tests;
