//! Learning: unrolls, prefetch, training.
pub mod algo;
pub mod checkpoint;
pub mod config;
pub mod optimizer;
pub mod prefetch;
pub mod train;
pub mod training;
pub mod unroll;
