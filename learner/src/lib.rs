//! The learner: serves actor streams, batches inference across all of them,
//! assembles unrolls, stores them in the replay buffer, and trains.
//!
//! # Floor plan
//! Data flows one way: actor → stream (`serve`) → batcher and inference
//! (`infer`) → unroll (`learn`) → unroll store (`unroll_store`: the replay
//! buffer in process or a remote table) → prefetch → train (`learn`) → weights
//! (`model`) → inference. `app` is the one place the stages are built and
//! wired ([`app::Learner::start`], with `app::training` for the learning
//! side); the `learner` binary (crate
//! `seed-learner-cli`) turns flags into an [`app::LearnerConfig`] and calls
//! it.
//!
//! # Layering
//! A module imports only modules of a lower layer (or its own folder):
//!
//! | layer | modules | may import |
//! |---|---|---|
//! | 7 | `app` | everything below |
//! | 6 | `report` | metrics |
//! | 5 | `serve` | infer, model, metrics |
//! | 4 | `learn` | infer's sink interface and exploration schedule, model, metrics, unroll_store; inside it, bottom first: the stages (unroll, prefetch, optimizer, checkpoint) < `agent_step` < `vtrace/`, `r2d2/` < `agent` < the trainer |
//! | 3 | `unroll_store` (the seam to replay: in-process buffer or remote table) | leaves, `seed_replay`, `seed_replay_service` |
//! | 2 | `infer` | model, metrics |
//! | 1 | `model` (networks, weights) | leaves |
//! | 0 | `metrics`, `error`, `device`, `heap`, `loom`, `log_throttle` | nothing of the crate |
//!
//! Two arrows of the data flow point "back" and are inverted on purpose:
//! inference pushes into the learning side through
//! [`infer::sink::InferenceSink`], which `learn` implements (so inference
//! never names the trainer and `--no-train` simply has no sink); and the
//! trainer publishes into the weights, which sit at the bottom with the
//! model so inference and training both read them from below. Metrics are a
//! leaf: stages push into its counters or attach probes (closures over their
//! own state). `tests/integration/layering.rs` fails on an import that breaks this table.
pub mod app;
pub mod device;
pub mod error;
pub mod heap;
pub mod infer;
pub mod learn;
pub mod log_throttle;
pub mod loom;
pub mod metrics;
pub mod model;
pub mod report;
pub mod serve;
pub mod unroll_store;
