//! Grouped tables as a token trajectory pool (the agentic/LLM shape):
//! variable-length fields stored and returned without padding, string ids
//! kept whole, step metadata, `max_queue_size`, stale groups kept with
//! their lags; and each kind of bad input refused naming the field and
//! the row while the table and every acknowledged step go on.
use crate::support;

use std::time::Duration;

use bytes::Bytes;
use seed_replay::DType;
use seed_replay_service::pb::replay_client::ReplayClient as RawClient;
use seed_replay_service::pb::{
    CompleteTrajectoryRequest, FieldBlock, FieldDtype, SubmitStepsRequest,
};
use seed_replay_service::{FetchedGroup, FieldBlocks, ReplayClient, ServiceConfig, StepBatch};
use support::*;
use tonic::Code;

/// A hang guard for fetches that must find a group, not a timing claim.
const WAIT: Duration = Duration::from_secs(60);
const MAX_PROMPT: u64 = 4096;

/// A pool of token steps: `prompt_ids` (at most `MAX_PROMPT`) and
/// `response_ids` of any length, a scalar reward; `sampler` and `extra`
/// appended to the table.
fn pool_json(name: &str, sampler: &str, extra: &str) -> String {
    format!(
        r#"{{"name": "{name}", "capacity": 100000,
            "fields": [{{"name": "prompt_ids", "dtype": "i32", "shape": [-1], "max_len": {MAX_PROMPT}}},
                       {{"name": "response_ids", "dtype": "i32", "shape": [-1]}},
                       {{"name": "reward", "dtype": "f32", "shape": []}}],
            "sampler": {{"kind": "grouped", {sampler}}}{extra}}}"#
    )
}

/// Token `k` of field `f` (0 prompt, 1 response) of step `s` of trajectory
/// `t`: every value says where it belongs.
fn token(t: u64, s: u64, f: u64, k: u64) -> i32 {
    (t * 1_000_000 + s * 10_000 + f * 5_000 + k) as i32
}

/// Lengths of step `s` of trajectory `t`: prompts 100-2,000, responses
/// 0-1,000 (an empty one included).
fn lengths(t: u64, s: u64) -> (u64, u64) {
    (100 + (t * 37 + s * 511) % 1901, (t * 53 + s * 97) % 1001)
}

/// Steps `steps` of trajectory `t` (its uid `traj-t`) in group `group`.
fn token_steps(t: u64, group: &str, steps: std::ops::Range<u64>, last: bool) -> StepBatch {
    let n = steps.end - steps.start;
    let mut fields = [(Vec::new(), vec![0u64]), (Vec::new(), vec![0u64])];
    let mut rewards = Vec::new();
    let mut metadata = Vec::new();
    for s in steps.clone() {
        let (p, r) = lengths(t, s);
        for (f, len) in [p, r].into_iter().enumerate() {
            let (bytes, offsets) = &mut fields[f];
            for k in 0..len {
                bytes.extend_from_slice(&token(t, s, f as u64, k).to_le_bytes());
            }
            offsets.push(offsets.last().unwrap() + len);
        }
        rewards.push(s as f32 + t as f32 / 100.0);
        // Every other step carries metadata.
        metadata.push(if s.is_multiple_of(2) {
            Bytes::from(format!(r#"{{"trajectory": {t}, "turn": {s}}}"#))
        } else {
            Bytes::new()
        });
    }
    let [(prompt, prompt_offsets), (response, response_offsets)] = fields;
    let mut is_last = vec![false; n as usize];
    if last {
        is_last[n as usize - 1] = true;
    }
    StepBatch::with_uids(
        vec![format!("traj-{t}"); n as usize],
        vec![group.into(); n as usize],
    )
    .unwrap()
    .variable(
        "prompt_ids",
        DType::I32,
        &[],
        Bytes::from(prompt),
        prompt_offsets,
    )
    .unwrap()
    .variable(
        "response_ids",
        DType::I32,
        &[],
        Bytes::from(response),
        response_offsets,
    )
    .unwrap()
    .f32("reward", &[], &rewards)
    .unwrap()
    .metadata(metadata)
    .unwrap()
    .policy_versions(steps.map(|s| 10 + s).collect())
    .unwrap()
    .is_last(is_last)
    .unwrap()
}

fn i32s(bytes: &[u8]) -> Vec<i32> {
    bytes
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Checks every token of every step of `g` (trajectory `traj-t` has
/// `steps_of(t)` steps) and returns the trajectories' numbers.
fn verify_tokens(g: &FetchedGroup, steps_of: impl Fn(u64) -> u64) -> Vec<u64> {
    let fields = [
        ("prompt_ids", i32s(g.field("prompt_ids").unwrap())),
        ("response_ids", i32s(g.field("response_ids").unwrap())),
    ];
    let rewards = g.field_f32("reward").unwrap();
    let mut seen = Vec::new();
    for (i, uid) in g.trajectory_uids().iter().enumerate() {
        let t: u64 = uid.strip_prefix("traj-").unwrap().parse().unwrap();
        let rows = g.trajectory_steps(i);
        assert_eq!(rows.len() as u64, steps_of(t), "{uid}: every step");
        for (s, row) in rows.enumerate() {
            let s = s as u64;
            let (p, r) = lengths(t, s);
            for (f, ((name, values), len)) in fields.iter().zip([p, r]).enumerate() {
                let offsets = g.offsets(name).unwrap();
                let (a, b) = (offsets[row] as usize, offsets[row + 1] as usize);
                assert_eq!((b - a) as u64, len, "{uid} step {s}: {name} length");
                let want: Vec<i32> = (0..len).map(|k| token(t, s, f as u64, k)).collect();
                assert_eq!(values[a..b], want[..], "{uid} step {s}: {name} tokens");
            }
            assert_eq!(rewards[row], s as f32 + t as f32 / 100.0);
            let meta = &g.metadata()[row];
            if s.is_multiple_of(2) {
                assert_eq!(
                    &meta[..],
                    format!(r#"{{"trajectory": {t}, "turn": {s}}}"#).as_bytes()
                );
            } else {
                assert!(meta.is_empty(), "{uid} step {s}: no metadata");
            }
            assert_eq!(g.policy_versions()[row], 10 + s);
        }
        seen.push(t);
    }
    // No padding anywhere: the values are exactly the tokens.
    let total: u64 = seen
        .iter()
        .flat_map(|&t| (0..steps_of(t)).map(move |s| lengths(t, s)))
        .map(|(p, r)| p + r)
        .sum();
    assert_eq!((fields[0].1.len() + fields[1].1.len()) as u64, total);
    seen
}

async fn grouped_info(
    c: &mut ReplayClient,
    table: &str,
) -> seed_replay_service::pb::GroupedTableInfo {
    c.info(Some(table))
        .await
        .unwrap()
        .remove(0)
        .grouped
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_steps_of_any_length_come_back_whole_without_padding() {
    let server = serve(config(&[pool_json(
        "pool",
        r#""group_size": 2, "ids": "str""#,
        "",
    )]))
    .await;
    let mut c = client(&server).await;
    // Two trajectories of one prompt's group, their turns interleaved.
    let steps_of = |t: u64| 2 + t % 3;
    for (t, from, to) in [(1u64, 0u64, 1u64), (2, 0, 2), (1, 1, 3), (2, 2, 4)] {
        let last = to == steps_of(t);
        let report = c
            .submit_steps("pool", token_steps(t, "prompt-7", from..to, last))
            .await
            .unwrap();
        assert_eq!(report.groups_completed, u32::from(t == 2 && last));
    }
    c.set_policy_version("pool", 12).await.unwrap();
    let g = c
        .fetch_group("pool", WAIT)
        .await
        .unwrap()
        .expect("one group");
    assert_eq!(g.group_uid(), "prompt-7");
    assert!(g.trajectory_ids().is_empty());
    assert_eq!(verify_tokens(&g, steps_of), vec![1, 2]);
    assert_eq!(g.table_policy_version(), 12);
    // Trajectory 1's steps then 2's, each from version 10 on.
    assert_eq!(g.lags(), vec![2, 1, 0, 2, 1, 0, 0]);
    assert!(c
        .fetch_group("pool", Duration::ZERO)
        .await
        .unwrap()
        .is_none());
    let info = c.info(Some("pool")).await.unwrap().remove(0);
    assert!(info.fields[0].variable_length && info.fields[0].max_len == MAX_PROMPT);
    assert!(info.fields[1].variable_length && info.fields[1].max_len == 0);
    assert!(!info.fields[2].variable_length);
    assert_eq!(info.grouped.unwrap().ids, "str");
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn string_ids_are_kept_whole_and_never_collide() {
    let server = serve(config(&[pool_json(
        "pool",
        r#""group_size": 1, "ids": "str""#,
        "",
    )]))
    .await;
    let mut c = client(&server).await;
    // Ids that agree in their first bytes and in length: a hash or a
    // prefix would merge them.
    let a = format!("{}a", "x".repeat(300));
    let b = format!("{}b", "x".repeat(300));
    for uid in [&a, &b] {
        let steps = token_steps(3, uid, 0..2, false);
        let mut req = steps.into_request("pool");
        req.trajectory_uids = vec![uid.clone(); 2];
        c.raw().submit_steps(req).await.unwrap();
    }
    assert!(c.complete_trajectory_uid("pool", &b).await.unwrap());
    let g = c.fetch_group("pool", WAIT).await.unwrap().unwrap();
    assert_eq!(
        (g.group_uid(), g.trajectory_uids()),
        (&b[..], &[b.clone()][..])
    );
    assert_eq!(g.steps(), 2);
    assert!(c.complete_trajectory_uid("pool", &a).await.unwrap());
    let g = c.fetch_group("pool", WAIT).await.unwrap().unwrap();
    assert_eq!(g.group_uid(), a);
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_queue_size_drops_the_oldest_ready_group_and_counts_it() {
    let server = serve(config(&[pool_json(
        "pool",
        r#""group_size": 1, "ids": "str", "max_queue_size": 2"#,
        "",
    )]))
    .await;
    let mut c = client(&server).await;
    let mut dropped = 0;
    for g in 0..5u64 {
        let r = c
            .submit_steps("pool", token_steps(g, &format!("g{g}"), 0..1, true))
            .await
            .unwrap();
        dropped += r.groups_dropped_queue_full;
    }
    assert_eq!(dropped, 3);
    let info = grouped_info(&mut c, "pool").await;
    assert_eq!((info.groups_ready, info.groups_dropped_queue_full), (2, 3));
    assert_eq!(info.max_queue_size, Some(2));
    // The two newest, in order.
    for want in ["g3", "g4"] {
        let g = c.fetch_group("pool", WAIT).await.unwrap().unwrap();
        assert_eq!(g.group_uid(), want);
    }
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_groups_are_kept_with_their_lags_or_dropped_as_configured() {
    let keep = r#", "policy_lag": {"max_lag": 3, "action": "keep"}"#;
    let drop = r#", "policy_lag": {"max_lag": 3, "action": "drop"}"#;
    let server = serve(config(&[
        pool_json("keep", r#""group_size": 1, "ids": "str""#, keep),
        pool_json("drop", r#""group_size": 1, "ids": "str""#, drop),
    ]))
    .await;
    let mut c = client(&server).await;
    for table in ["keep", "drop"] {
        // Steps of versions 10 and 11; the table moves to 20.
        c.submit_steps(table, token_steps(1, "old", 0..2, true))
            .await
            .unwrap();
        c.set_policy_version(table, 20).await.unwrap();
    }
    let g = c.fetch_group("keep", WAIT).await.unwrap().expect("kept");
    assert_eq!((g.group_uid(), g.lags()), ("old", vec![10, 9]));
    let kept = grouped_info(&mut c, "keep").await;
    assert_eq!(
        (kept.groups_released_stale, kept.groups_dropped_stale),
        (1, 0)
    );
    assert!(kept.keep_stale);
    assert!(c
        .fetch_group("drop", Duration::ZERO)
        .await
        .unwrap()
        .is_none());
    let dropped = grouped_info(&mut c, "drop").await;
    assert_eq!(
        (dropped.groups_released_stale, dropped.groups_dropped_stale),
        (0, 1)
    );
    server.stop().await.unwrap();
}

/// A request of one step of `traj-1` in group `bad` with the given
/// prompt block, a good response block and reward.
fn one_step(prompt: FieldBlock) -> SubmitStepsRequest {
    SubmitStepsRequest {
        table: "pool".into(),
        rows: 1,
        fields: vec![
            prompt,
            FieldBlock {
                name: "response_ids".into(),
                dtype: FieldDtype::I32 as i32,
                shape: vec![],
                data: Bytes::from(vec![0u8; 8]),
                offsets: vec![0, 2],
            },
            FieldBlock {
                name: "reward".into(),
                dtype: FieldDtype::F32 as i32,
                shape: vec![],
                data: Bytes::from(vec![0u8; 4]),
                offsets: vec![],
            },
        ],
        trajectory_uids: vec!["traj-1".into()],
        group_uids: vec!["bad".into()],
        ..SubmitStepsRequest::default()
    }
}

fn prompt(tokens: usize, offsets: Vec<u64>) -> FieldBlock {
    FieldBlock {
        name: "prompt_ids".into(),
        dtype: FieldDtype::I32 as i32,
        shape: vec![],
        data: Bytes::from(vec![0u8; tokens * 4]),
        offsets,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_token_input_is_refused_naming_the_field_and_the_row() {
    let server = serve(config(&[
        pool_json("pool", r#""group_size": 2, "ids": "str""#, ""),
        pool_json("numbered", r#""group_size": 1"#, ""),
    ]))
    .await;
    let mut good = client(&server).await;
    // Half a group acknowledged before the bad requests.
    good.submit_steps("pool", token_steps(1, "kept", 0..2, true))
        .await
        .unwrap();
    let mut raw = RawClient::connect(server.url(false)).await.unwrap();
    let too_long = MAX_PROMPT as usize + 1;
    let mut cases: Vec<(SubmitStepsRequest, Code, &str)> = vec![
        (
            one_step(prompt(3, vec![0, 4])),
            Code::InvalidArgument,
            "fields[\"prompt_ids\"].data",
        ),
        (
            one_step(prompt(3, vec![0])),
            Code::InvalidArgument,
            "fields[\"prompt_ids\"].offsets",
        ),
        (
            one_step(prompt(3, vec![1, 3])),
            Code::InvalidArgument,
            "fields[\"prompt_ids\"].offsets[0]",
        ),
        (
            one_step(prompt(3, vec![])),
            Code::InvalidArgument,
            "fields[\"prompt_ids\"].offsets",
        ),
        (
            one_step(prompt(too_long, vec![0, too_long as u64])),
            Code::InvalidArgument,
            "fields[\"prompt_ids\"].offsets[1]",
        ),
    ];
    // Backwards: two rows, the second ending before the first.
    let mut backwards = one_step(prompt(3, vec![0, 3, 2]));
    backwards.rows = 2;
    backwards.fields[1] = FieldBlock {
        offsets: vec![0, 1, 2],
        ..backwards.fields[1].clone()
    };
    backwards.fields[2].data = Bytes::from(vec![0u8; 8]);
    backwards.trajectory_uids = vec!["traj-1".into(); 2];
    backwards.group_uids = vec!["bad".into(); 2];
    cases.push((
        backwards,
        Code::InvalidArgument,
        "fields[\"prompt_ids\"].offsets[2]",
    ));
    // Offsets on a fixed-shape field.
    let mut fixed = one_step(prompt(3, vec![0, 3]));
    fixed.fields[2].offsets = vec![0, 1];
    cases.push((fixed, Code::InvalidArgument, "fields[\"reward\"].offsets"));
    // Ids of the wrong kind, an empty one, oversized metadata.
    let mut numbers = one_step(prompt(3, vec![0, 3]));
    numbers.trajectory_ids = vec![1];
    cases.push((numbers, Code::InvalidArgument, "trajectory_ids"));
    let mut empty = one_step(prompt(3, vec![0, 3]));
    empty.group_uids = vec![String::new()];
    cases.push((empty, Code::InvalidArgument, "group_uids[0]"));
    let mut strings = one_step(prompt(3, vec![0, 3]));
    strings.table = "numbered".into();
    cases.push((strings, Code::InvalidArgument, "trajectory_uids"));
    let mut big = one_step(prompt(3, vec![0, 3]));
    big.metadata = vec![Bytes::from(vec![b'x'; (1 << 16) + 1])];
    cases.push((big, Code::InvalidArgument, "metadata[0]"));
    // A step of a complete trajectory; a group past its size.
    let mut after_last = one_step(prompt(3, vec![0, 3]));
    after_last.group_uids = vec!["kept".into()];
    cases.push((after_last, Code::FailedPrecondition, "trajectory_uids[0]"));
    for (req, code, field) in cases {
        let status = raw.submit_steps(req).await.unwrap_err();
        assert_eq!(status.code(), code, "{field}: {status:?}");
        assert!(
            status.message().contains(&format!("`{field}`")),
            "{field}: {}",
            status.message()
        );
    }
    let third = token_steps(9, "kept", 0..1, true);
    good.submit_steps("pool", token_steps(2, "kept", 0..1, false))
        .await
        .unwrap();
    let status = good.submit_steps("pool", third).await.unwrap_err();
    assert!(
        status
            .to_string()
            .contains("already has its 2 trajectories"),
        "{status}"
    );
    assert!(good
        .complete_trajectory_uid("pool", "traj-2")
        .await
        .unwrap());
    for (id, uid, field) in [
        (5u64, "", "trajectory_uid"),
        (0, "nobody", "trajectory_uid"),
    ] {
        let status = raw
            .complete_trajectory(CompleteTrajectoryRequest {
                table: "pool".into(),
                trajectory_id: id,
                trajectory_uid: uid.into(),
            })
            .await
            .unwrap_err();
        assert!(
            status.message().contains(&format!("`{field}`")),
            "{}",
            status.message()
        );
    }
    // Nothing acknowledged was lost, nothing refused was stored.
    let g = good.fetch_group("pool", WAIT).await.unwrap().unwrap();
    assert_eq!(
        verify_tokens(&g, |t| if t == 1 { 2 } else { 1 }),
        vec![1, 2]
    );
    let info = good.info(Some("pool")).await.unwrap().remove(0);
    assert_eq!((info.inserted, info.stored), (3, 0));
    assert!(info.rejected_requests >= 12);
    server.stop().await.unwrap();
}

#[test]
fn variable_fields_are_bounded_as_declared() {
    let err = |json: String| {
        ServiceConfig::from_json(&format!(r#"{{"tables": [{json}]}}"#))
            .unwrap_err()
            .to_string()
    };
    // Ring tables hold them too (`ring_tokens.rs`), with the same checks.
    let ring = r#"{"name": "ring", "capacity": 8, "sampler": {"kind": "uniform"},
        "fields": [{"name": "tokens", "dtype": "i32", "shape": [-1], "max_len": 16}]}"#;
    let config = ServiceConfig::from_json(&format!(r#"{{"tables": [{ring}]}}"#)).unwrap();
    assert!(config.tables[0].layout.fields()[0].is_variable());
    let ring_zero = ring.replace("16", "0");
    let e = err(ring_zero);
    assert!(e.contains("`tokens`") && e.contains("max_len"), "{e}");
    let fixed_max = r#"{"name": "g", "capacity": 8, "sampler": {"kind": "grouped", "group_size": 1},
        "fields": [{"name": "x", "dtype": "i32", "shape": [4], "max_len": 9}]}"#;
    assert!(err(fixed_max.into()).contains("`max_len`"));
    let inner = r#"{"name": "g", "capacity": 8, "sampler": {"kind": "grouped", "group_size": 1},
        "fields": [{"name": "x", "dtype": "i32", "shape": [-1, 4]}]}"#;
    assert!(err(inner.into()).contains("only the last"));
    let ids = pool_json("g", r#""group_size": 1, "ids": "uuid""#, "");
    assert!(err(ids).contains("`ids`"));
    let queue = pool_json("g", r#""group_size": 1, "max_queue_size": 0"#, "");
    assert!(err(queue).contains("`max_queue_size`"));
}

/// The `replay-server` binary with a pool on disk (`storage_dir`), killed
/// with SIGKILL while two writers submit: restarted on the same directory,
/// every group whose steps were acknowledged comes back whole, a group
/// with one trajectory acknowledged is open and completes when its other
/// trajectory comes, and a submit cut off by the kill is in the table
/// whole or not at all.
#[test]
fn a_sigkilled_server_keeps_every_acknowledged_step_of_a_pool_on_disk() {
    use std::collections::{BTreeMap, BTreeSet};
    use std::io::{BufReader, Lines};
    use std::process::{Child, ChildStderr};

    /// The server, killed when the test ends, passed or not.
    struct Server(Child);
    impl Drop for Server {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("pool");
    let path = dir.path().join("tables.json");
    std::fs::write(
        &path,
        format!(
            r#"{{"tables": [{}]}}"#,
            pool_json(
                "pool",
                r#""group_size": 2, "ids": "str""#,
                &format!(r#", "storage_dir": {:?}"#, storage.to_str().unwrap()),
            )
        ),
    )
    .unwrap();
    let spawn = || -> (Server, Lines<BufReader<ChildStderr>>, String) {
        let (child, mut lines) = spawn_server(&[
            "--config",
            path.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
        ]);
        let child = Server(child);
        let addr = listening_addr(&mut lines);
        (child, lines, addr)
    };
    // Trajectory `t` has `1 + t % 3` steps, all in one submit; group `w-i`
    // is trajectories `2n` and `2n + 1` of writer `w`.
    fn steps_of(t: u64) -> u64 {
        1 + t % 3
    }
    fn submit_of(t: u64) -> StepBatch {
        token_steps(t, &format!("g{}", t / 2), 0..steps_of(t), true)
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();

    let (mut server, _log, addr) = spawn();
    let acked: BTreeSet<u64> = rt.block_on(async {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let mut writers = Vec::new();
        for w in 0..2u64 {
            let tx = tx.clone();
            let addr = addr.clone();
            writers.push(tokio::spawn(async move {
                let mut c = ReplayClient::connect(&addr, Default::default())
                    .await
                    .unwrap();
                // Until the server dies: every acknowledged trajectory sent.
                for t in (0..).map(|n| w * 1_000_000 + n) {
                    if c.submit_steps("pool", submit_of(t)).await.is_err() {
                        break;
                    }
                    let _ = tx.send(t);
                }
            }));
        }
        drop(tx);
        let mut acked = BTreeSet::new();
        while acked.len() < 60 {
            acked.insert(rx.recv().await.expect("the writers go on"));
        }
        // SIGKILL, both writers mid-stream.
        server.0.kill().unwrap();
        server.0.wait().unwrap();
        for w in writers {
            w.await.unwrap();
        }
        while let Ok(t) = rx.try_recv() {
            acked.insert(t);
        }
        acked
    });
    // Each writer had at most one submit in flight: the one after its last
    // acknowledged trajectory.
    let in_flight: BTreeSet<u64> = (0..2u64)
        .map(|w| {
            acked
                .range(w * 1_000_000..(w + 1) * 1_000_000)
                .next_back()
                .map_or(w * 1_000_000, |t| t + 1)
        })
        .collect();

    let (_server, _log, addr) = spawn();
    rt.block_on(async {
        let mut c = ReplayClient::connect(&addr, Default::default())
            .await
            .unwrap();
        let mut fetched: BTreeMap<String, Vec<u64>> = BTreeMap::new();
        while let Some(g) = c.fetch_group("pool", Duration::ZERO).await.unwrap() {
            fetched.insert(g.group_uid().to_string(), verify_tokens(&g, steps_of));
        }
        for (group, ts) in &fetched {
            for t in ts {
                assert!(
                    acked.contains(t) || in_flight.contains(t),
                    "group {group}: trajectory {t} was never submitted"
                );
            }
        }
        let both: BTreeSet<u64> = acked
            .iter()
            .map(|t| t / 2)
            .filter(|g| acked.contains(&(2 * g)) && acked.contains(&(2 * g + 1)))
            .collect();
        for g in &both {
            assert!(
                fetched.contains_key(&format!("g{g}")),
                "group g{g} was acknowledged whole"
            );
        }
        // The rest go on: their missing trajectories (or a cut-off one
        // again, refused if it had landed) complete them.
        let open: BTreeSet<u64> = acked
            .iter()
            .chain(&in_flight)
            .map(|t| t / 2)
            .filter(|g| !fetched.contains_key(&format!("g{g}")))
            .collect();
        let info = grouped_info(&mut c, "pool").await;
        assert!(info.groups_open as usize <= open.len(), "{info:?}");
        for g in &open {
            for t in [2 * g, 2 * g + 1] {
                if acked.contains(&t) {
                    continue;
                }
                if let Err(e) = c.submit_steps("pool", submit_of(t)).await {
                    assert!(in_flight.contains(&t), "trajectory {t}: {e}");
                    assert!(e.to_string().contains("is complete"), "{e}");
                }
            }
            let group = c
                .fetch_group("pool", WAIT)
                .await
                .unwrap()
                .expect("the group completed");
            assert_eq!(group.group_uid(), format!("g{g}"));
            assert_eq!(verify_tokens(&group, steps_of), vec![2 * g, 2 * g + 1]);
        }
        assert_eq!(grouped_info(&mut c, "pool").await.groups_open, 0);
    });
}

/// `SubmitStepsStream`: answers in order as `SubmitSteps` would, with
/// several in flight; a refusal ends only that stream, naming the field,
/// keeps what was answered before it and stores nothing sent after it;
/// another stream and unary calls go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_submit_stream_answers_in_order_and_a_refusal_ends_only_it() {
    let server = serve(config(&[pool_json(
        "pool",
        r#""group_size": 2, "ids": "str""#,
        "",
    )]))
    .await;
    let mut c = client(&server).await;
    let mut s = c.step_submitter("pool").await.unwrap();
    let mut other = c.step_submitter("pool").await.unwrap();
    // Trajectories 1 and 2 of group "g": four submits in flight.
    s.send(token_steps(1, "g", 0..1, false)).await.unwrap();
    s.send(token_steps(2, "g", 0..2, false)).await.unwrap();
    s.send(token_steps(1, "g", 1..2, true)).await.unwrap();
    s.send(token_steps(2, "g", 2..3, true)).await.unwrap();
    assert_eq!(s.pending(), 4);
    let completed: Vec<u32> = [
        s.ack().await.unwrap(),
        s.ack().await.unwrap(),
        s.ack().await.unwrap(),
        s.ack().await.unwrap(),
    ]
    .iter()
    .map(|r| r.groups_completed)
    .collect();
    assert_eq!(completed, vec![0, 0, 0, 1], "answered in order");
    // Trajectory 3 completes; a step more of it is refused, and
    // trajectory 5's step sent after the refusal is not stored.
    s.send(token_steps(3, "h", 0..1, true)).await.unwrap();
    s.send(token_steps(3, "h", 1..2, false)).await.unwrap();
    // Sent until the ended stream refuses them: the reply to trajectory
    // 3's first step, read off the stream by that failed send, is kept.
    while s.send(token_steps(5, "k", 0..1, false)).await.is_ok() {}
    assert_eq!(s.ack().await.unwrap().groups_completed, 0);
    let err = s.ack().await.unwrap_err().to_string();
    assert!(
        err.contains("trajectory_uids[0]") && err.contains("complete"),
        "{err}"
    );
    assert!(
        s.submit(token_steps(6, "k", 0..1, true)).await.is_err(),
        "the stream ended"
    );
    // The other stream and unary calls go on.
    other.submit(token_steps(4, "h", 0..2, true)).await.unwrap();
    let g = c.fetch_group("pool", WAIT).await.unwrap().expect("group g");
    assert_eq!(
        verify_tokens(&g, |t| if t == 1 { 2 } else { 3 }),
        vec![1, 2]
    );
    let h = c.fetch_group("pool", WAIT).await.unwrap().expect("group h");
    assert_eq!(
        verify_tokens(&h, |t| if t == 3 { 1 } else { 2 }),
        vec![3, 4]
    );
    let info = grouped_info(&mut c, "pool").await;
    assert_eq!(
        (info.groups_open, info.steps_pending),
        (0, 0),
        "nothing of k stored"
    );
    server.stop().await.unwrap();
}
