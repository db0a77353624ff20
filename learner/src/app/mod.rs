//! The application: [`LearnerConfig`] (every default and check), the
//! composition root [`Learner::start`], the run loop with its reports, local
//! actor processes, and `learner eval`.
pub mod config;
pub mod eval;
pub mod learner;
pub mod local_actors;
pub mod run;
pub mod threads;

pub use config::LearnerConfig;
pub use learner::{BoundLearner, Learner};
