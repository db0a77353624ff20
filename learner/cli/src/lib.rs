//! The `learner` command line as a library, so the latency harness and tests
//! parse exactly what users type: [`flags::Cli`] (clap), validated once by
//! [`flags::TrainArgs::to_config`] into the library's typed
//! [`seed_learner::app::LearnerConfig`]. Nothing in `seed-learner` sees a
//! clap type. [`command::run`] parses, sets up logging, runs and maps the
//! outcome to an exit code: the binary (`main.rs`) calls it, as does the
//! Python package's `seed-rs learner`.
pub mod command;
pub mod flags;
