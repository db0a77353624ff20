//! Benchmarks of the SEED-style learner and actors.
//!
//! The criterion micro-benchmarks live in `benches/benches/` (one file per
//! subsystem). This library is the end-to-end latency harness behind the
//! `latency` binary: it starts a learner and actor processes on this host
//! ([`scenario`]), measures the actor's step round trip and throughput, and
//! in the same run measures the floor they are bounded by: a bare tonic echo
//! of the same `Learner` service with the same payload, streams and
//! transport ([`echo_server`], [`echo_client`]). [`sweep`] runs a grid and
//! [`plot`] draws it. [`frozen_actor`] is the `liveness_bench` scenario: a
//! good actor's throughput beside an actor that freezes; [`soak`] its
//! other scenario: actors killed under training and a learner restart;
//! [`hour_soak`] is the hour under churn behind `scripts/soak.sh`.
//! [`grouped_fetch`] is `replay_service_bench`'s grouped-table figure.
//! [`mirror_lag`] is the replay service benchmark's mirror lag, and
//! [`replay_echo`] the floor of its `sample(128)` round trip.
pub mod child;
pub mod cli;
pub mod echo_client;
pub mod echo_server;
pub mod error;
pub mod frozen_actor;
pub mod gather_floor;
pub mod grouped_fetch;
pub mod hour_soak;
pub mod machine;
pub mod mirror_lag;
pub mod plot;
pub mod proc_stats;
pub mod replay_echo;
pub mod replay_kill;
pub mod replay_scale;
pub mod replay_workload;
pub mod scenario;
pub mod soak;
pub mod stream_load;
pub mod sweep;
pub mod transport;

#[cfg(test)]
mod echo_tests;

pub use error::HarnessError;
