//! What the `learner` binary writes when its output goes to a file or a log
//! shipper: no colour codes, one line per error naming its cause once, and
//! JSON lines with `--log-format json`.
use std::process::{Command, Output};

fn learner(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_learner"))
        .args(args)
        .env_remove("NO_COLOR")
        .env("RUST_LOG", "info")
        .output()
        .expect("the learner binary runs")
}

fn stderr(out: &Output) -> String {
    String::from_utf8(out.stderr.clone()).expect("utf-8 log")
}

#[cfg(not(feature = "cuda"))]
#[test]
fn logs_to_a_pipe_have_no_colour_codes() {
    let out = learner(&["--device", "cuda:0", "--local-actors", "0", "--no-train"]);
    assert!(!out.status.success());
    let log = stderr(&out);
    assert!(log.contains("--features cuda"), "{log}");
    assert!(!log.contains('\u{1b}'), "escape codes in: {log:?}");
}

#[cfg(not(feature = "cuda"))]
#[test]
fn json_log_format_writes_one_object_per_line() {
    let out = learner(&[
        "--log-format",
        "json",
        "--device",
        "cuda:0",
        "--local-actors",
        "0",
    ]);
    assert!(!out.status.success());
    let log = stderr(&out);
    let lines: Vec<&str> = log.lines().filter(|l| !l.is_empty()).collect();
    assert!(!lines.is_empty());
    for line in &lines {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert!(v.get("level").is_some(), "{line}");
    }
    assert!(lines
        .iter()
        .any(|l| l.contains("ERROR") && l.contains("--features cuda")));
}

#[test]
fn a_busy_port_is_one_line_naming_the_address_and_what_to_do() {
    let busy = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a port");
    let addr = busy.local_addr().expect("address").to_string();
    let os = std::net::TcpListener::bind(&addr)
        .expect_err("the port is taken")
        .to_string();
    let out = learner(&["--listen", &addr, "--local-actors", "0", "--no-train"]);
    assert!(!out.status.success());
    let log = stderr(&out);
    let errors: Vec<&str> = log.lines().filter(|l| l.contains("ERROR")).collect();
    assert_eq!(errors.len(), 1, "{log}");
    assert_eq!(errors[0].matches(os.as_str()).count(), 1, "{}", errors[0]);
    assert!(
        errors[0].contains(&addr) && errors[0].contains("--listen"),
        "{}",
        errors[0]
    );
}
