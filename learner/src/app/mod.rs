//! The application.
pub mod eval;
pub mod local_actors;
pub mod run;
