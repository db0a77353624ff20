//! `liveness_bench`: a good actor's env steps/s beside an actor that freezes
//! (SIGSTOP), for learner settings compared in the same run, and how long the
//! frozen actor's slots stay leased; with `--soak-kills N`, N actors killed
//! under training and a learner restart. Prints one JSON object. See
//! `liveness_bench --help` and [`seed_benches::frozen_actor`].
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use seed_benches::frozen_actor::{run_frozen_trial, FrozenResult, FrozenTrial};
use seed_benches::machine::Machine;
use seed_benches::soak::{run_soak, SoakConfig};
use seed_benches::transport::Transport;
use serde::Serialize;
use tracing::{error, info};
use tracing_subscriber::EnvFilter;

/// A good actor's throughput when another actor freezes, for each learner
/// setting in `--setting`, alternated over `--rounds` (same run, so the
/// settings see the same machine noise).
#[derive(Parser, Debug)]
#[command(name = "liveness_bench", version, about)]
struct Cli {
    /// `learner` binary [default: `learner` next to this binary].
    #[arg(long)]
    learner_bin: Option<PathBuf>,
    /// `actor` binary [default: `actor` next to this binary].
    #[arg(long)]
    actor_bin: Option<PathBuf>,
    /// Envs per actor [default: 8].
    #[arg(long, hide_default_value = true, default_value_t = 8)]
    envs: usize,
    /// A learner setting to measure: extra learner flags in one string,
    /// split at spaces, e.g. `--actor-idle-ms 0`; repeat to compare; an
    /// empty string is the defaults [default: "" and "--actor-idle-ms 0"].
    #[arg(long = "setting")]
    settings: Vec<String>,
    /// Extra flags for both actors, split at spaces [default: none].
    #[arg(long, default_value = "")]
    actor_flags: String,
    /// Rounds; each round runs every setting once [default: 3].
    #[arg(long, hide_default_value = true, default_value_t = 3)]
    rounds: usize,
    /// Seconds of each measuring window [default: 3].
    #[arg(long, hide_default_value = true, default_value_t = 3.0)]
    window_secs: f64,
    /// Give up waiting for the frozen actor's slots after this many seconds [default: 60].
    #[arg(long, hide_default_value = true, default_value_t = 60.0)]
    free_timeout_secs: f64,
    /// Transport: `tcp` (loopback) or `unix` [default: tcp].
    #[arg(long, value_enum, hide_default_value = true, default_value_t = Transport::Tcp)]
    transport: Transport,
    /// Run the soak instead: this many actors killed (SIGKILL) under
    /// training, then a learner restart with actors attached (see
    /// `seed_benches::soak`) [default: off].
    #[arg(long)]
    soak_kills: Option<usize>,
    /// Directory for child logs [default: a fresh one under the temp dir].
    #[arg(long)]
    run_dir: Option<PathBuf>,
}

#[derive(Serialize)]
struct Summary {
    learner_flags: String,
    median_solo_env_steps_per_s: f64,
    median_beside_frozen_env_steps_per_s: f64,
    median_kept_fraction: f64,
    median_slots_freed_after_s: Option<f64>,
}

#[derive(Serialize)]
struct Report {
    machine: Machine,
    envs: usize,
    window_secs: f64,
    summaries: Vec<Summary>,
    trials: Vec<FrozenResult>,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn split(flags: &str) -> Vec<String> {
    flags.split_whitespace().map(str::to_owned).collect()
}

async fn run(cli: Cli) -> anyhow::Result<serde_json::Value> {
    let me = std::env::current_exe()?;
    let learner = cli
        .learner_bin
        .unwrap_or_else(|| me.with_file_name("learner"));
    let actor = cli.actor_bin.unwrap_or_else(|| me.with_file_name("actor"));
    for p in [&learner, &actor] {
        anyhow::ensure!(
            p.is_file(),
            "{} not found (cargo build --release -p seed-learner-cli -p seed-actor)",
            p.display()
        );
    }
    let settings = if cli.settings.is_empty() {
        vec![String::new(), "--actor-idle-ms 0".to_owned()]
    } else {
        cli.settings
    };
    let dir = cli.run_dir.unwrap_or_else(|| {
        std::env::temp_dir().join(format!("seed-liveness-{}", std::process::id()))
    });
    let machine = Machine::detect();
    info!(%machine, dir = %dir.display(), "liveness bench");
    if let Some(kills) = cli.soak_kills {
        let cfg = SoakConfig {
            stable_actors: 2,
            envs: cli.envs,
            kills,
            transport: cli.transport,
        };
        let result = run_soak(&cfg, &learner, &actor, &dir).await?;
        return Ok(serde_json::json!({ "machine": machine, "soak": cfg, "result": result }));
    }
    let mut trials = Vec::new();
    for round in 0..cli.rounds {
        for (i, setting) in settings.iter().enumerate() {
            let trial = FrozenTrial {
                envs: cli.envs,
                warmup: Duration::from_secs(1),
                window: Duration::from_secs_f64(cli.window_secs),
                free_timeout: Duration::from_secs_f64(cli.free_timeout_secs),
                learner_flags: split(setting),
                actor_flags: split(&cli.actor_flags),
                transport: cli.transport,
            };
            let r = run_frozen_trial(
                &trial,
                &learner,
                &actor,
                &dir.join(format!("r{round}-s{i}")),
            )
            .await
            .with_context(|| format!("round {round}, setting {setting:?}"))?;
            info!(round, setting, solo = r.solo_env_steps_per_s, beside = r.beside_frozen_env_steps_per_s,
                kept = r.kept_fraction, freed_after_s = ?r.slots_freed_after_s, "trial");
            trials.push(r);
        }
    }
    let summaries = settings
        .iter()
        .map(|s| {
            let of: Vec<&FrozenResult> = trials
                .iter()
                .filter(|t| t.learner_flags == split(s))
                .collect();
            let freed: Vec<f64> = of.iter().filter_map(|t| t.slots_freed_after_s).collect();
            Summary {
                learner_flags: s.clone(),
                median_solo_env_steps_per_s: median(
                    of.iter().map(|t| t.solo_env_steps_per_s).collect(),
                ),
                median_beside_frozen_env_steps_per_s: median(
                    of.iter().map(|t| t.beside_frozen_env_steps_per_s).collect(),
                ),
                median_kept_fraction: median(of.iter().map(|t| t.kept_fraction).collect()),
                median_slots_freed_after_s: (freed.len() == of.len()).then(|| median(freed)),
            }
        })
        .collect();
    Ok(serde_json::to_value(Report {
        machine,
        envs: cli.envs,
        window_secs: cli.window_secs,
        summaries,
        trials,
    })?)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            error!("tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(report) => match serde_json::to_string_pretty(&report) {
            Ok(s) => {
                println!("{s}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                error!("{e}");
                ExitCode::FAILURE
            }
        },
        Err(e) => {
            error!("{e:#}");
            ExitCode::FAILURE
        }
    }
}
