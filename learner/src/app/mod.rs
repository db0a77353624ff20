//! The application: [`LearnerConfig`] (every check), [`settings`] (every
//! default, presets and config files, resolved into a `LearnerConfig`), the
//! composition root [`Learner::start`] (with [`training`], its learning
//! half: model, unroll store, sink, prefetch, trainer), the run loop with its reports, local
//! actor processes, `learner eval` and the checkpoint's [`policy::Policy`] it
//! plays (which the Python package's `seed_rs.Policy` wraps), and the replay table config a remote
//! replay table needs (`--print-replay-table-config`).
pub mod config;
pub mod eval;
pub mod evaluator;
pub mod learner;
pub mod local_actors;
pub mod policy;
pub mod replay_table;
pub mod run;
pub mod run_monitor;
pub mod settings;
pub mod threads;
pub mod training;

pub use config::LearnerConfig;
pub use learner::{BoundLearner, Learner};
