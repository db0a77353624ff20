//! Environments of a SEED-style central-inference RL system: what an actor
//! steps and what the learner evaluates on.
//!
//! - [`Env`], [`Action`] and [`Transition`] ([`env`](mod@env)): one environment
//!   with discrete or continuous actions that writes its observation into the
//!   caller's buffer.
//! - [`CartPole`] ([`cartpole`]): Gymnasium's CartPole-v1 with its exact dynamics.
//! - [`MaskedCartPole`] ([`cartpole_masked`]): CartPole-v1 observed through
//!   cart position and pole angle only (no velocities), a memory task.
//! - [`Pendulum`] ([`pendulum`]): Gymnasium's Pendulum-v1, continuous actions.
//! - [`SyntheticEnv`] and [`SyntheticConfig`] ([`synthetic`]): a benchmark env
//!   of any observation shape, dtype and per-step CPU cost.
//! - [`EnvConfig`] ([`config`]): which env to run; builds envs and their spec.
//! - [`EnvArgs`] and [`EnvKind`] ([`flags`]): the `--env ...` command-line
//!   flags shared by the actor, the learner and the benchmarks.
//!
//! Why a crate of its own: the actor, the learner (evaluation, local actors)
//! and the benchmarks all need envs, and none of them should need the actor's
//! gRPC client to get one. Cost: nothing beyond the envs themselves (see each
//! module); the crate depends only on `seed-shared`, `rand` and `clap`.

pub mod cartpole;
pub mod cartpole_masked;
pub mod config;
pub mod env;
pub mod flags;
pub mod pendulum;
pub mod synthetic;

pub use cartpole::{CartPole, CARTPOLE_MAX_EPISODE_STEPS};
pub use cartpole_masked::MaskedCartPole;
pub use config::EnvConfig;
pub use env::{Action, Env, EnvError, Transition};
pub use flags::{env_flags, EnvArgs, EnvKind};
pub use pendulum::{Pendulum, PENDULUM_MAX_EPISODE_STEPS};
pub use synthetic::{SyntheticConfig, SyntheticEnv};
