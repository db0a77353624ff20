//! `replay-server --mirror-of`: a mirror binary copies a primary binary's
//! tables and follows them; an unreachable primary stops the start with
//! exit code 1 naming it; `--mirror-of` and `--config` exclude each other.
use std::process::Command;

use crate::support::{listening_addr, spawn_server as spawn, wait_for, SERVER_BIN as BIN};

#[test]
fn a_mirror_binary_copies_and_follows_the_primarys_tables() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tables.json");
    std::fs::write(
        &path,
        r#"{"tables": [{"name": "t", "capacity": 8, "sampler": {"kind": "uniform"},
            "fields": [{"name": "x", "dtype": "f32", "shape": [2]}]}]}"#,
    )
    .unwrap();
    let (mut primary, mut p_log) = spawn(&[
        "--config",
        path.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
    ]);
    let addr = listening_addr(&mut p_log);
    let (mut mirror, mut m_log) = spawn(&["--mirror-of", &addr, "--listen", "127.0.0.1:0"]);
    // It listens first, then starts following.
    let listening = wait_for(&mut m_log, "replay server listening");
    let following = wait_for(&mut m_log, "following");
    mirror.kill().unwrap();
    mirror.wait().unwrap();
    primary.kill().unwrap();
    primary.wait().unwrap();
    let following = following.expect("the mirror never followed a table");
    assert!(following.contains("table=t"), "{following}");
    assert!(listening.is_some(), "the mirror never listened");
}

#[test]
fn an_unreachable_primary_and_conflicting_flags_are_refused() {
    // Port 1 on loopback: nothing listens there.
    let out = Command::new(BIN)
        .args(["--mirror-of", "127.0.0.1:1", "--listen", "127.0.0.1:0"])
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("mirror of 127.0.0.1:1"), "{stderr}");

    let out = Command::new(BIN)
        .args(["--mirror-of", "127.0.0.1:1", "--config", "tables.json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "clap refuses the pair");
    let out = Command::new(BIN).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "one of the two is required");
}
