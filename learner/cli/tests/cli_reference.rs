//! `docs/cli.md` carries the `--help` text of `learner`, `learner eval` and
//! `actor`; this test keeps it equal to what clap renders, so the reference
//! never drifts from the flags. After changing a flag, regenerate with
//! `UPDATE_CLI_DOC=1 cargo test --release -p seed-learner-cli --test cli_reference`.
use std::path::PathBuf;

use clap::{Args, Command, CommandFactory};
use seed_actor::cli::ActorArgs;
use seed_learner_cli::flags::Cli;

/// Rendered at a fixed width, so the text does not depend on the terminal.
const WIDTH: usize = 100;

/// What `--help` prints: the long layout where a flag has a long doc, else
/// the compact one (clap's own choice for `--help`).
fn render(cmd: Command, long: bool) -> String {
    let mut cmd = cmd.term_width(WIDTH);
    let text = if long {
        cmd.render_long_help()
    } else {
        cmd.render_help()
    };
    text.to_string().trim_end().to_owned()
}

/// (heading of the block in docs/cli.md, the help text it must hold)
fn blocks() -> Vec<(&'static str, String)> {
    let mut learner = Cli::command();
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
    vec![
        ("### `learner --help`", render(Cli::command(), true)),
        ("### `learner eval --help`", render(eval, false)),
        ("### `actor --help`", render(actor, true)),
    ]
}

/// `doc` with the fenced block after each heading replaced by its text.
fn regenerate(doc: &str) -> Result<String, String> {
    let mut out = doc.to_owned();
    for (heading, text) in blocks() {
        let at = out
            .find(heading)
            .ok_or_else(|| format!("docs/cli.md has no heading {heading}"))?;
        let open = out[at..]
            .find("```text\n")
            .map(|i| at + i + "```text\n".len())
            .ok_or_else(|| format!("no ```text block after {heading}"))?;
        let close = out[open..]
            .find("\n```")
            .map(|i| open + i)
            .ok_or_else(|| format!("unclosed block after {heading}"))?;
        out.replace_range(open..close, &text);
    }
    Ok(out)
}

#[test]
fn docs_cli_md_holds_the_current_help_text() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/cli.md");
    let doc = std::fs::read_to_string(&path).expect("docs/cli.md is readable");
    let fresh = regenerate(&doc).expect("docs/cli.md has its three help blocks");
    if std::env::var_os("UPDATE_CLI_DOC").is_some() {
        std::fs::write(&path, &fresh).expect("docs/cli.md is writable");
        return;
    }
    assert!(
        fresh == doc,
        "docs/cli.md differs from the --help text; regenerate it with \
         `UPDATE_CLI_DOC=1 cargo test --release -p seed-learner-cli --test cli_reference`"
    );
}
