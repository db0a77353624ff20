//! The `learner` command line as a library, so the latency harness and tests
//! parse exactly what users type: [`flags::Cli`] (clap), validated once by
//! [`flags::TrainArgs::to_config`] into the library's typed
//! [`seed_learner::app::LearnerConfig`]. Nothing in `seed-learner` sees a
//! clap type. The binary (`main.rs`) only parses, sets up logging, runs and
//! maps the outcome to an exit code.
pub mod flags;
