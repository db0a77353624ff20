//! Helpers of the service tests: a server on a loopback port with a table
//! config, connected clients, and checksummed items whose bytes say who
//! wrote them and in what order.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Lines};
use std::process::{Child, ChildStderr, Command, Stdio};

use seed_replay_service::client::ClientOptions;
use seed_replay_service::{
    FieldBlocks, InsertBatch, ReplayClient, RunningServer, ServerOptions, ServiceConfig,
};

/// One table called `name`: `obs` f32 [3, 4] and `tag` u64 [4] (writer,
/// sequence number, checksum, policy version) and `extra` as more keys of
/// the table's JSON (its sampler at least).
pub fn table_json(name: &str, capacity: usize, extra: &str) -> String {
    format!(
        r#"{{"name": "{name}", "capacity": {capacity},
            "fields": [{{"name": "obs", "dtype": "f32", "shape": [3, 4]}},
                       {{"name": "tag", "dtype": "u64", "shape": [4]}}],
            {extra}}}"#
    )
}

pub fn config(tables: &[String]) -> ServiceConfig {
    ServiceConfig::from_json(&format!(r#"{{"tables": [{}]}}"#, tables.join(","))).unwrap()
}

pub async fn serve(config: ServiceConfig) -> RunningServer {
    seed_replay_service::start(config, ServerOptions::default())
        .await
        .unwrap()
}

pub async fn client(server: &RunningServer) -> ReplayClient {
    ReplayClient::connect(&server.url(false), ClientOptions::default())
        .await
        .unwrap()
}

/// The checksum of item (`writer`, `seq`) with these `obs`.
pub fn checksum(writer: u64, seq: u64, obs: &[f32]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ writer.rotate_left(17) ^ seq;
    for x in obs {
        h = (h ^ u64::from(x.to_bits())).wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The `obs` of item (`writer`, `seq`).
pub fn obs_of(writer: u64, seq: u64) -> [f32; 12] {
    std::array::from_fn(|i| (writer * 1_000_000 + seq) as f32 + i as f32 * 0.25)
}

/// `rows` checksummed items of `writer` from sequence number `first`.
pub fn items(writer: u64, first: u64, rows: u32) -> InsertBatch {
    let mut obs = Vec::with_capacity(rows as usize * 12);
    let mut tag = Vec::with_capacity(rows as usize * 4);
    for seq in first..first + u64::from(rows) {
        let o = obs_of(writer, seq);
        obs.extend_from_slice(&o);
        tag.extend_from_slice(&[writer, seq, checksum(writer, seq, &o), 0]);
    }
    InsertBatch::new(rows)
        .f32("obs", &[3, 4], &obs)
        .unwrap()
        .u64("tag", &[4], &tag)
        .unwrap()
}

/// Each row of a sampled batch as (writer, seq), checking it whole: the
/// checksum matches its bytes, and the bytes are exactly what that writer
/// wrote as that sequence number. Panics on a torn or foreign row.
pub fn verify(batch: &seed_replay_service::SampledBatch) -> Vec<(u64, u64)> {
    let obs = batch.field_f32("obs").unwrap();
    let tag = batch.field_u64("tag").unwrap();
    assert_eq!(obs.len(), batch.rows() * 12);
    assert_eq!(tag.len(), batch.rows() * 4);
    assert_eq!(batch.keys().len(), batch.rows());
    (0..batch.rows())
        .map(|r| {
            let o = &obs[r * 12..(r + 1) * 12];
            let (writer, seq, sum) = (tag[r * 4], tag[r * 4 + 1], tag[r * 4 + 2]);
            assert_eq!(sum, checksum(writer, seq, o), "row {r}: torn item");
            assert_eq!(o, &obs_of(writer, seq), "row {r}: foreign bytes");
            (writer, seq)
        })
        .collect()
}

/// The `replay-server` binary the tests run.
pub const SERVER_BIN: &str = env!("CARGO_BIN_EXE_replay-server");

/// `replay-server` with `args`, logging at info without colour; its
/// stderr's lines to read.
pub fn spawn_server(args: &[&str]) -> (Child, Lines<BufReader<ChildStderr>>) {
    let mut child = Command::new(SERVER_BIN)
        .args(args)
        .env("NO_COLOR", "1")
        .env("RUST_LOG", "info")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = BufReader::new(child.stderr.take().unwrap()).lines();
    (child, lines)
}

/// The first line containing `what` (the process's log ends when it dies).
pub fn wait_for(lines: &mut Lines<BufReader<ChildStderr>>, what: &str) -> Option<String> {
    lines.map_while(Result::ok).find(|l| l.contains(what))
}

/// The address a spawned server says it listens on.
pub fn listening_addr(lines: &mut Lines<BufReader<ChildStderr>>) -> String {
    let line = wait_for(lines, "replay server listening").expect("the server listens");
    line.split_whitespace()
        .find_map(|w| w.strip_prefix("addr="))
        .expect("addr in the log line")
        .to_owned()
}
