//! The `--metrics-addr` endpoint end to end: a learner in-process on
//! `127.0.0.1:0` serves a known number of steps; `GET /metrics` (over a
//! plain TCP socket, HTTP/1.1) then reports exactly what the `Status` RPC
//! does, in well-formed exposition text. Other paths are 404; a busy port
//! is an error naming it.
use crate::support;

use std::net::SocketAddr;

use seed_learner::app::LearnerConfig;
use seed_learner::error::LearnerError;
use seed_shared::pb::{self, actor_message::Kind, learner_message};
use support::{steps, RawStream};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Step batches the test sends, each of [`ENVS`] envs.
const STEP_BATCHES: u64 = 50;
const ENVS: u32 = 4;

/// A parsed HTTP/1.1 response.
struct HttpResponse {
    status: u16,
    content_type: String,
    body: String,
}

/// `GET path` with `Connection: close`, read to the end.
async fn get(addr: SocketAddr, path: &str) -> HttpResponse {
    support::within("the metrics endpoint to answer", async {
        let mut stream = tokio::net::TcpStream::connect(addr)
            .await
            .expect("connect to the metrics endpoint");
        let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
        stream
            .write_all(request.as_bytes())
            .await
            .expect("send request");
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).await.expect("read response");
        let raw = String::from_utf8(raw).expect("utf-8 response");
        let (head, body) = raw.split_once("\r\n\r\n").expect("header/body separator");
        let mut lines = head.lines();
        let status = lines
            .next()
            .and_then(|l| l.split(' ').nth(1))
            .and_then(|c| c.parse().ok())
            .expect("status line");
        let content_type = lines
            .filter_map(|l| l.split_once(':'))
            .find(|(k, _)| k.eq_ignore_ascii_case("content-type"))
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_default();
        HttpResponse {
            status,
            content_type,
            // Without chunking (hyper sends a Content-Length for a String body).
            body: body.to_string(),
        }
    })
    .await
}

/// Every sample line as `(name with labels, value)`; panics on a line that
/// is neither a comment nor `name{labels} value`.
fn samples(text: &str) -> Vec<(String, f64)> {
    let is_name = |s: &str| {
        let mut chars = s.chars();
        chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
    };
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|line| {
            let (series, value) = line
                .rsplit_once(' ')
                .unwrap_or_else(|| panic!("no value in {line:?}"));
            let name = match series.split_once('{') {
                Some((name, labels)) => {
                    assert!(labels.ends_with('}'), "unclosed labels in {line:?}");
                    for pair in labels.trim_end_matches('}').split(',') {
                        let (k, v) = pair
                            .split_once('=')
                            .unwrap_or_else(|| panic!("label without = in {line:?}"));
                        assert!(is_name(k), "bad label name in {line:?}");
                        assert!(
                            v.len() >= 2 && v.starts_with('"') && v.ends_with('"'),
                            "unquoted label value in {line:?}"
                        );
                    }
                    name
                }
                None => series,
            };
            assert!(is_name(name), "bad metric name in {line:?}");
            let value = match value {
                "+Inf" => f64::INFINITY,
                "-Inf" => f64::NEG_INFINITY,
                v => v
                    .parse::<f64>()
                    .unwrap_or_else(|_| panic!("bad value in {line:?}")),
            };
            (series.to_string(), value)
        })
        .collect()
}

fn sample(samples: &[(String, f64)], series: &str) -> f64 {
    samples
        .iter()
        .find(|(s, _)| s == series)
        .unwrap_or_else(|| panic!("no sample {series}"))
        .1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_endpoint_reports_what_status_reports() {
    let server = support::start_learner(|c| {
        c.serve.metrics_addr = Some("127.0.0.1:0".parse().expect("literal address"));
    })
    .await;
    let addr = server.metrics_addr().expect("metrics endpoint configured");
    assert_ne!(addr.port(), 0, "the bound port is reported");

    // One step batch at a time: exactly STEP_BATCHES batches of ENVS rows.
    let mut s = RawStream::open(&server).await;
    s.hello(ENVS, "").await;
    let envs: Vec<u32> = (0..ENVS).collect();
    for seq in 0..STEP_BATCHES {
        s.send(Kind::Steps(steps(seq, &envs))).await;
        let learner_message::Kind::Actions(a) = s.recv().await else {
            panic!("expected actions")
        };
        assert_eq!(a.seq, seq);
    }
    // Inference counts a batch just after sending its actions: wait until
    // the last one is counted, after which nothing changes any more.
    let m = std::sync::Arc::clone(server.metrics());
    support::wait_until("the last batch to be counted", || {
        let snap = m.snapshot();
        // Env steps are the last figure an inference thread writes per batch.
        snap.step_latency.count() == STEP_BATCHES
            && snap.action_batches == STEP_BATCHES
            && snap.env_steps == STEP_BATCHES * ENVS as u64
    })
    .await;

    let mut client = support::client(&server).await;
    let status = client
        .status(pb::StatusRequest {})
        .await
        .expect("status")
        .into_inner();
    assert_eq!(status.step_batches, STEP_BATCHES);
    assert_eq!(status.env_steps, STEP_BATCHES * ENVS as u64);

    let r = get(addr, "/metrics").await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(
        r.content_type.starts_with("application/openmetrics-text"),
        "{}",
        r.content_type
    );
    assert!(r.body.ends_with("# EOF\n"), "{}", r.body);
    let got = samples(&r.body);
    let counter = |name: &str| sample(&got, name) as u64;
    assert_eq!(counter("seed_env_steps_total"), status.env_steps);
    assert_eq!(counter("seed_step_batches_total"), status.step_batches);
    assert_eq!(counter("seed_action_batches_total"), status.action_batches);
    assert_eq!(
        counter("seed_inference_batches_total"),
        status.inference_batches
    );
    assert_eq!(
        counter("seed_inference_inline_batches_total"),
        status.inline_batches
    );
    assert_eq!(counter("seed_inference_rows_total"), status.inference_rows);
    assert_eq!(counter("seed_stream_errors_total"), status.stream_errors);
    assert_eq!(
        counter("seed_connected_actors"),
        status.connected_actors as u64
    );
    assert_eq!(counter("seed_live_env_slots"), status.live_env_slots as u64);
    assert_eq!(counter("seed_policy_version"), status.policy_version);
    assert_eq!(
        counter("seed_batcher_queued_requests"),
        status.batcher_queued_requests
    );
    // One latency record per step batch; one batch-size record per batch.
    assert_eq!(
        counter("seed_step_latency_seconds_count"),
        status.step_batches
    );
    assert_eq!(
        counter("seed_step_latency_seconds_bucket{le=\"+Inf\"}"),
        status.step_batches
    );
    assert_eq!(
        counter("seed_inference_batch_rows_count"),
        status.inference_batches
    );
    assert_eq!(
        counter("seed_inference_batch_rows_sum"),
        status.inference_rows
    );
    // Cumulative buckets never decrease.
    let buckets: Vec<f64> = got
        .iter()
        .filter(|(s, _)| s.starts_with("seed_step_latency_seconds_bucket"))
        .map(|(_, v)| *v)
        .collect();
    assert!(buckets.windows(2).all(|w| w[0] <= w[1]), "{buckets:?}");

    let missing = get(addr, "/other").await;
    assert_eq!(missing.status, 404);

    drop(s);
    server.shutdown().await.expect("shutdown");
    // Shut down with the server: the port is free again.
    std::net::TcpListener::bind(addr).expect("metrics port released at shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_metrics_port_is_an_error_naming_it() {
    support::init();
    let busy = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a port");
    let addr = busy.local_addr().expect("local addr");
    let mut config = LearnerConfig::serving(
        "127.0.0.1:0".parse().expect("literal address"),
        seed_env::EnvConfig::CartPole,
    );
    config.serve.metrics_addr = Some(addr);
    let err = seed_learner::app::run::run_until(&config, std::future::pending())
        .await
        .expect_err("the metrics port is taken");
    assert!(
        matches!(err, LearnerError::MetricsBind { addr: a, .. } if a == addr),
        "{err:?}"
    );
    assert!(err.to_string().contains(&addr.to_string()), "{err}");
}
