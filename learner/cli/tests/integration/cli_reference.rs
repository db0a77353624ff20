//! `docs/cli.md` and `docs/presets.md` are generated, never written by
//! hand: `docs/cli.md` is the `--help` text of `learner`, `learner eval`,
//! `actor` and `replay-server` as clap renders it (defaults read from the
//! library), `docs/presets.md` the library's defaults file and every
//! preset file. This test fails when either differs from what it would
//! generate. After changing a flag, a default or a preset, regenerate with
//! `UPDATE_CLI_DOC=1 cargo test --release -p seed-learner-cli --test integration cli_reference`.
use std::path::PathBuf;

use clap::{Args, Command, CommandFactory};
use seed_actor::cli::ActorArgs;
use seed_learner::app::settings::defaults::DEFAULTS_TOML;
use seed_learner::app::settings::presets::{preset, PRESETS};
use seed_learner_cli::flags::Cli;

/// Rendered at a fixed width, so the text does not depend on the terminal.
const WIDTH: usize = 100;

const REGENERATE: &str =
    "`UPDATE_CLI_DOC=1 cargo test --release -p seed-learner-cli --test integration cli_reference`";

/// What `--help` prints, at the fixed width: the long layout where a flag
/// has a long doc, else the compact one (clap's own choice for `--help`).
fn render(cmd: Command, long: bool) -> String {
    let mut cmd = cmd.term_width(WIDTH);
    let text = if long {
        cmd.render_long_help()
    } else {
        cmd.render_help()
    };
    text.to_string().trim_end().to_owned()
}

fn block(heading: &str, intro: &str, text: &str) -> String {
    format!("## {heading}\n\n{intro}\n\n```text\n{text}\n```\n")
}

/// The whole of `docs/cli.md`.
fn cli_md() -> String {
    let mut learner = Cli::command_with_defaults();
    learner.build();
    let eval = learner
        .find_subcommand("eval")
        .expect("learner has an eval subcommand")
        .clone()
        .bin_name("learner eval");
    // The `actor` binary's parser is ActorArgs under the actor package's
    // description (actor/src/main.rs, `#[command(about)]`).
    let actor = ActorArgs::augment_args(Command::new("actor").version(env!("CARGO_PKG_VERSION")))
        .about("Actor process: steps environments and streams them to a SEED-style learner")
        .long_about(None);
    let replay_server = seed_replay_service::cli::Flags::command();
    [
        format!(
            "# Command-line reference\n\n\
             Generated from the flags' definitions by `learner/cli/tests/integration/cli_reference.rs`\n\
             (regenerate with {REGENERATE}); a test fails when this page\n\
             differs. Every default shown is read from the library\n\
             (`learner/src/app/settings/defaults.toml`), where it is declared once; the\n\
             presets and their values are in [presets.md](presets.md). With `cargo run`,\n\
             put flags after `--`: `cargo run --release --bin learner -- --preset pendulum`.\n"
        ),
        block(
            "`learner`",
            "Serves actors, batches inference and trains (package `seed-learner-cli`).\n\
             With no flags: CartPole, two local actor processes (`learner actor ...`, a\n\
             hidden subcommand, so no second binary is needed), V-trace on the CPU.\n\
             Settings come from the defaults, then `--preset`, then `--config FILE`,\n\
             then flags; a flag's name is its key in a file, in the section named by\n\
             its heading (`--batch-size` is `batch_size` under `[train]`).\n\
             `--print-config` prints every resolved value as such a file.",
            &render(Cli::command_with_defaults(), true),
        ),
        block(
            "`learner eval`",
            "Runs episodes of a checkpointed policy.",
            &render(eval, false),
        ),
        block(
            "`actor`",
            "Steps the built-in envs and streams them to a learner (package `seed-actor`).\n\
             Gymnasium envs run through the Python actor instead\n\
             (`python -m seed_rs.actor`, see `python/README.md`).",
            &render(actor, true),
        ),
        block(
            "`replay-server`",
            "Serves replay tables over `seed.v1.Replay` (package `seed-replay-service`);\n\
             the JSON config's keys are in `learner/replay-service/src/config.rs`.",
            &render(replay_server, true),
        ),
    ]
    .join("\n")
}

/// The whole of `docs/presets.md`.
fn presets_md() -> String {
    let mut out = format!(
        "# Presets and defaults\n\n\
         Generated from the files by `learner/cli/tests/integration/cli_reference.rs` (regenerate\n\
         with {REGENERATE}).\n\n\
         A preset is an env recipe: a TOML file in `learner/presets/`, compiled into\n\
         the binary, that overrides only what differs from the defaults.\n\
         `learner --preset NAME` runs it; a `--config FILE` and flags override it\n\
         (defaults < preset < config file < flags). Values that differ per\n\
         algorithm or device resolve after the layers merge, so\n\
         `--preset cartpole-masked-r2d2 --algo vtrace` gets V-trace's discount.\n\
         `learner --preset NAME --print-config` shows every resolved value.\n\n\
         | preset | what | run |\n|---|---|---|\n"
    );
    for (name, _) in PRESETS {
        let settings = preset(name).expect("presets parse").settings;
        let about = settings.about.expect("presets have [about]");
        let remote_actors = settings.actors.local_actors == Some(0);
        let run = match (&about.actor, remote_actors) {
            (Some(actor), true) => format!("`learner --preset {name}` and `{actor}`"),
            (Some(actor), false) => format!(
                "`learner --preset {name}` (local actors), or with `--local-actors 0` and `{actor}`"
            ),
            (None, _) => format!("`learner --preset {name}`"),
        };
        out.push_str(&format!("| `{name}` | {} | {run} |\n", about.description));
    }
    for (name, text) in PRESETS {
        out.push_str(&format!(
            "\n## `{name}`\n\n`learner/presets/{name}.toml`:\n\n```toml\n{}\n```\n",
            text.trim_end()
        ));
    }
    out.push_str(&format!(
        "\n## The defaults\n\n`learner/src/app/settings/defaults.toml`, the one place each \
         default is written:\n\n```toml\n{}\n```\n",
        DEFAULTS_TOML.trim_end()
    ));
    out
}

fn check(file: &str, fresh: String) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../docs")
        .join(file);
    if std::env::var_os("UPDATE_CLI_DOC").is_some() {
        std::fs::write(&path, &fresh).expect("docs/ is writable");
        return;
    }
    let doc = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        fresh == doc,
        "docs/{file} differs from what the flags and presets generate; regenerate it with \
         {REGENERATE}"
    );
}

#[test]
fn docs_cli_md_is_the_generated_help_of_every_binary() {
    check("cli.md", cli_md());
}

#[test]
fn docs_presets_md_is_the_generated_list_of_presets_and_defaults() {
    check("presets.md", presets_md());
}
