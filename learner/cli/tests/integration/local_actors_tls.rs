//! A learner serving mutual TLS still runs its own local actors: they
//! connect over the private plaintext unix socket, with no certificate.
//! The run is bounded by work (`--max-env-steps`); `--max-seconds` only
//! keeps a broken run from hanging, and then fails the step count.
use std::process::Command;

#[test]
fn local_actors_run_when_the_learner_serves_mutual_tls() {
    let files = seed_test_pki::SelfSignedFiles::generate();
    let (cert_path, key_path) = (&files.cert, &files.key);
    let summary = files.dir().join("summary.json");
    let path = |p: &std::path::Path| p.to_str().expect("utf-8 path").to_owned();

    let out = Command::new(env!("CARGO_BIN_EXE_learner"))
        .args(["--listen", "127.0.0.1:0", "--tls-cert", &path(cert_path)])
        .args(["--tls-key", &path(key_path)])
        .args(["--tls-client-ca", &path(cert_path)])
        .args(["--local-actors", "1", "--envs-per-actor", "2", "--no-train"])
        .args(["--max-env-steps", "200", "--max-seconds", "120"])
        .args(["--progress-secs", "0", "--summary-json", &path(&summary)])
        .env_remove("SEED_TOKEN")
        .output()
        .expect("the learner binary runs");
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&summary).expect("summary written"))
            .expect("summary is JSON");
    let steps = s["env_steps"].as_u64().expect("env_steps");
    assert!(steps >= 200, "local actors stepped {steps} times: {log}");
    assert_eq!(s["local_actor_failures"], 0, "{log}");
}
