//! The environment's command-line flags: [`EnvArgs`] (`--env`, and the
//! synthetic env's `--obs-shape`, `--obs-dtype`, `--num-actions`,
//! `--step-cost-us`, `--episode-len`) and [`env_flags`], their inverse.
//!
//! Why here: one set of flags is shared by the `actor` binary, the `learner`
//! (which passes them on to its local actors) and the benchmark harnesses, so
//! it lives with the envs and each of them embeds it with
//! `#[command(flatten)]`. Cost: parsing happens once per process.

use clap::ValueEnum;
use seed_shared::ObsDType;

use crate::config::EnvConfig;
use crate::synthetic::SyntheticConfig;

/// Which environment to run (`--env`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EnvKind {
    /// Gymnasium's CartPole-v1.
    Cartpole,
    /// CartPole-v1 observing only cart position and pole angle (no velocities): a memory task.
    CartpoleMasked,
    /// Gymnasium's Pendulum-v1 (continuous actions).
    Pendulum,
    /// Configurable benchmark env (`--obs-shape`, `--obs-dtype`, ...).
    Synthetic,
}

/// Which environment to run and how the synthetic one looks: one set of
/// flags shared by `actor`, `learner` (which passes them on to its local
/// actors) and the latency harness.
#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct EnvArgs {
    /// Environment: `cartpole` (Gymnasium CartPole-v1), `cartpole-masked` (CartPole-v1 observing
    /// only cart position and pole angle), `pendulum` (Pendulum-v1, continuous
    /// actions) or `synthetic` [default: cartpole; a learner with `--local-actors 0` and no
    /// `--env` takes the env spec from the first actor's hello instead].
    #[arg(long, value_enum, hide_default_value = true)]
    pub env: Option<EnvKind>,
    /// Synthetic env: observation shape, comma-separated [default: 4,84,84].
    #[arg(
        long,
        value_delimiter = ',',
        hide_default_value = true,
        default_value = "4,84,84"
    )]
    pub obs_shape: Vec<usize>,
    /// Synthetic env: observation dtype, `f32` or `u8` [default: u8].
    #[arg(long, hide_default_value = true, default_value = "u8")]
    pub obs_dtype: ObsDType,
    /// Synthetic env: number of discrete actions [default: 6].
    #[arg(long, hide_default_value = true, default_value_t = 6)]
    pub num_actions: u32,
    /// Synthetic env: CPU busy work per env step, in microseconds [default: 0].
    #[arg(long, hide_default_value = true, default_value_t = 0)]
    pub step_cost_us: u64,
    /// Synthetic env: steps per episode (the last one terminates) [default: 1000].
    #[arg(long, hide_default_value = true, default_value_t = 1000)]
    pub episode_len: u32,
}

impl EnvArgs {
    /// The env these flags describe (CartPole without `--env`).
    pub fn env_config(&self) -> EnvConfig {
        match self.env.unwrap_or(EnvKind::Cartpole) {
            EnvKind::Cartpole => EnvConfig::CartPole,
            EnvKind::CartpoleMasked => EnvConfig::CartPoleMasked,
            EnvKind::Pendulum => EnvConfig::Pendulum,
            EnvKind::Synthetic => EnvConfig::Synthetic(SyntheticConfig {
                obs_shape: self.obs_shape.clone(),
                obs_dtype: self.obs_dtype,
                num_actions: self.num_actions,
                step_cost_us: self.step_cost_us,
                episode_len: self.episode_len,
            }),
        }
    }

    /// The same flags as command-line arguments, to start an actor that
    /// runs exactly this env.
    pub fn to_flags(&self) -> Vec<String> {
        env_flags(&self.env_config())
    }
}

/// `--env ...` arguments that make an `actor` (or `learner`) run `env`.
pub fn env_flags(env: &EnvConfig) -> Vec<String> {
    match env {
        EnvConfig::CartPole => vec!["--env".into(), "cartpole".into()],
        EnvConfig::CartPoleMasked => vec!["--env".into(), "cartpole-masked".into()],
        EnvConfig::Pendulum => vec!["--env".into(), "pendulum".into()],
        EnvConfig::Synthetic(s) => {
            let shape: Vec<String> = s.obs_shape.iter().map(|d| d.to_string()).collect();
            vec![
                "--env".into(),
                "synthetic".into(),
                "--obs-shape".into(),
                shape.join(","),
                "--obs-dtype".into(),
                s.obs_dtype.to_string(),
                "--num-actions".into(),
                s.num_actions.to_string(),
                "--step-cost-us".into(),
                s.step_cost_us.to_string(),
                "--episode-len".into(),
                s.episode_len.to_string(),
            ]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        environment: EnvArgs,
    }

    fn parse<S: AsRef<str>>(args: &[S]) -> Result<EnvArgs, clap::Error> {
        let args = args.iter().map(|a| a.as_ref());
        Cli::try_parse_from(std::iter::once("env").chain(args)).map(|c| c.environment)
    }

    #[test]
    fn no_flags_mean_cartpole() {
        let none: [&str; 0] = [];
        assert_eq!(parse(&none).unwrap().env_config(), EnvConfig::CartPole);
    }

    #[test]
    fn synthetic_flag_defaults_are_the_config_defaults() {
        assert_eq!(
            parse(&["--env", "synthetic"]).unwrap().env_config(),
            EnvConfig::Synthetic(SyntheticConfig::default())
        );
    }

    #[test]
    fn env_flags_parse_back_to_the_same_env() {
        let synthetic = EnvConfig::Synthetic(SyntheticConfig {
            obs_shape: vec![8, 3],
            obs_dtype: ObsDType::F32,
            num_actions: 4,
            step_cost_us: 7,
            episode_len: 20,
        });
        for env in [
            EnvConfig::CartPole,
            EnvConfig::CartPoleMasked,
            EnvConfig::Pendulum,
            synthetic,
        ] {
            let args = parse(&env_flags(&env)).unwrap();
            assert_eq!(args.env_config(), env);
            assert_eq!(args.to_flags(), env_flags(&env));
        }
    }
}
