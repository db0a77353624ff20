//! The `learner` binary's settings files end to end: `--print-config`
//! output read back by `--config`, the `config.toml` every `--run-dir`
//! keeps, a preset's actor command, and a bad file refused naming the file
//! and the key. Runs are bounded by `--max-seconds` (work, not a timed
//! assertion: nothing here depends on how far a run gets).
use std::path::Path;
use std::process::{Command, Output};

fn learner(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_learner"))
        .args(args)
        .env_remove("SEED_TOKEN")
        .env("RUST_LOG", "info")
        .output()
        .expect("the learner binary runs")
}

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).expect("utf-8")
}

fn print_config(args: &[&str]) -> String {
    let mut all = args.to_vec();
    all.push("--print-config");
    stdout(&learner(&all))
}

#[test]
fn printed_settings_read_back_print_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let printed = print_config(&["--preset", "minatar", "--seed", "4"]);
    assert!(printed.contains("target_return = 10.0"), "{printed}");
    assert!(printed.contains("learning_rate = 0.0006"), "{printed}");
    assert!(printed.contains("seed = 4"), "{printed}");
    let file = dir.path().join("minatar.toml");
    std::fs::write(&file, &printed).unwrap();
    assert_eq!(print_config(&["--config", file.to_str().unwrap()]), printed);
}

/// A short serving run: no actors arrive, it stops at `--max-seconds`.
fn short_run(dir: &Path, extra: &[&str]) -> Output {
    let socket = format!("unix:{}", dir.join("l.sock").display());
    let mut args = vec![
        "--no-train",
        "--local-actors",
        "0",
        "--listen",
        &socket,
        "--max-seconds",
        "0.2",
        "--progress-secs",
        "0",
    ];
    args.extend(extra);
    learner(&args)
}

#[test]
fn a_run_dir_keeps_the_settings_that_run_it_again() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let out = short_run(
        dir.path(),
        &["--env", "pendulum", "--run-dir", run.to_str().unwrap()],
    );
    stdout(&out);
    let kept = std::fs::read_to_string(run.join("config.toml")).expect("config.toml");
    assert!(kept.contains("env = \"pendulum\""), "{kept}");
    assert!(kept.contains("no_train = true"), "{kept}");
    let kept_path = run.join("config.toml");
    assert_eq!(
        print_config(&["--config", kept_path.to_str().unwrap()]),
        kept
    );
}

#[test]
fn a_preset_for_python_actors_logs_the_actor_command() {
    let dir = tempfile::tempdir().unwrap();
    // No actor comes, so the run ends with no env spec fixed (an error,
    // not under test here); the command was logged at start.
    let out = short_run(dir.path(), &["--preset", "minatar"]);
    let log = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        log.contains("python -m seed_rs.actor --env MinAtar/Breakout-v1 --envs 64"),
        "{log}"
    );
}

#[test]
fn a_bad_config_file_is_refused_naming_the_file_and_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.toml");
    std::fs::write(&file, "[train]\nunroll_length = -3\n").unwrap();
    let out = learner(&["--config", file.to_str().unwrap(), "--print-config"]);
    assert!(!out.status.success());
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(
        log.contains("bad.toml") && log.contains("train.unroll_length"),
        "{log}"
    );
}
