//! The defaults whose home is Rust, as the native module exports them
//! (`seed_rs._native.DEFAULT_LEARNER_ADDR`, `DEFAULT_NUM_ENVS`) for
//! `seed_rs.defaults`, so each value is written once across both
//! languages: the learner's address is [`seed_shared::DEFAULT_LEARNER_ADDR`],
//! and an actor's env count is the default of the Rust actor's `--envs`
//! flag, read from its clap definition ([`ActorArgs`]).
//!
//! Cost: building the actor's clap command once, at import.
use clap::Args;
use seed_actor::cli::ActorArgs;

/// The learner's default address (`HOST:PORT`).
pub const LEARNER_ADDR: &str = seed_shared::DEFAULT_LEARNER_ADDR;

/// The default of the Rust actor's `--envs`; `Err` says what of the flag
/// is missing or not a number.
pub fn actor_num_envs() -> Result<usize, String> {
    let command = ActorArgs::augment_args(clap::Command::new("actor"));
    let envs = command
        .get_arguments()
        .find(|a| a.get_id() == "envs")
        .ok_or("the actor's flags have no `--envs`")?;
    let value = envs
        .get_default_values()
        .first()
        .ok_or("the actor's `--envs` has no default")?;
    value
        .to_str()
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("the actor's `--envs` default {value:?} is not a number"))
}
