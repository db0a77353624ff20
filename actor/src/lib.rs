//! The actor side of a SEED-style central-inference RL system.
//!
//! An actor process runs K environments (from the `seed_env` crate) in an
//! [`EnvPool`], streams their observations to the learner over one
//! persistent bidirectional gRPC stream and applies the actions the learner
//! returns ([`run_actor`]; [`run_actor_with_envs`] for envs of your own). It never holds model weights. [`cli`] is its
//! command line, shared by the `actor` binary and the learner's embedded
//! `learner actor` subcommand.

pub mod backoff;
pub mod cli;
pub mod client;
pub mod command;
pub mod config;
pub mod error;
pub mod learner_address;
pub mod pool;
pub mod round_trip;
pub mod shared_connection;
pub mod tls;

pub use client::{run_actor, run_actor_with_envs, ActorReport};
pub use config::{ActorConfig, ReconnectPolicy, DEFAULT_NUM_ENVS};
pub use error::{ActorError, ProtocolViolation};
pub use pool::{EnvPool, HalfActions};
pub use round_trip::{RoundTripHistogram, RoundTripPercentiles};
pub use seed_env::{Action, Env, EnvError, Transition};
pub use seed_shared::{ActionSpace, EnvSpec, Keepalive, ObsDType};
pub use shared_connection::SharedConnection;
pub use tls::{ClientIdentity, ClientTls};
