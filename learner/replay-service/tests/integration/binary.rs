//! The `replay-server` binary: a config it cannot serve is refused at
//! start-up with the table and setting named and exit code 1; a good one
//! serves until the process is stopped.
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_replay-server");

#[test]
fn a_bad_config_is_refused_naming_the_table_and_setting() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tables.json");
    std::fs::write(
        &path,
        r#"{"tables": [{"name": "t", "capacity": 8, "sampler": {"kind": "recent", "window": 99},
            "fields": [{"name": "x", "dtype": "f32", "shape": [2]}]}]}"#,
    )
    .unwrap();
    let out = Command::new(BIN)
        .args([
            "--config",
            path.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
        ])
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("table `t`, `sampler`") && stderr.contains("window 99"),
        "{stderr}"
    );
    let out = Command::new(BIN)
        .args(["--config", "/nonexistent/tables.json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/tables.json"));
}

#[test]
fn a_good_config_is_served_until_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tables.json");
    std::fs::write(
        &path,
        r#"{"tables": [{"name": "t", "capacity": 8, "sampler": {"kind": "uniform"},
            "fields": [{"name": "x", "dtype": "f32", "shape": [2]}]}]}"#,
    )
    .unwrap();
    let mut child = Command::new(BIN)
        .args([
            "--config",
            path.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
        ])
        .env("NO_COLOR", "1")
        .env("RUST_LOG", "info")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let listening = BufReader::new(stderr)
        .lines()
        .map_while(Result::ok)
        .find(|l| l.contains("replay server listening"));
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        listening.is_some(),
        "the server never said it was listening"
    );
}

/// `--load` reaches the table: a shard directory that holds no table is
/// refused at start-up naming the table, the shard and its directory.
#[test]
fn a_load_flag_is_checked_at_start_up_naming_the_shard() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tables.json");
    std::fs::write(
        &path,
        r#"{"tables": [{"name": "t", "capacity": 8, "sampler": {"kind": "uniform"},
            "fields": [{"name": "x", "dtype": "f32", "shape": [2]}]}]}"#,
    )
    .unwrap();
    let missing = dir.path().join("no-shard");
    let out = Command::new(BIN)
        .args([
            "--config",
            path.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
        ])
        .args(["--load", &format!("t={}", missing.display())])
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("table `t`, shard 0") && stderr.contains(&missing.display().to_string()),
        "{stderr}"
    );
}
