//! The application: [`LearnerConfig`] (every check), [`settings`] (every
//! default, presets and config files, resolved into a `LearnerConfig`), the
//! composition root [`Learner::start`], the run loop with its reports, local
//! actor processes, `learner eval`, and the replay table config a remote
//! replay table needs (`--print-replay-table-config`).
pub mod config;
pub mod eval;
pub mod learner;
pub mod local_actors;
pub mod replay_table;
pub mod run;
pub mod settings;
pub mod threads;

pub use config::LearnerConfig;
pub use learner::{BoundLearner, Learner};
