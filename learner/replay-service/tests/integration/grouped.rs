//! Grouped tables over loopback: whole groups only (several writers
//! interleaving the steps of many groups, several fetchers), FIFO release
//! by completion, the lag cap and capacity dropping groups (counted in
//! `Info`), and bad input refused by name while a good client goes on and
//! nothing stored is lost.
use crate::support;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use seed_replay_service::pb::replay_client::ReplayClient as RawClient;
use seed_replay_service::pb::{
    CompleteTrajectoryRequest, FieldBlock, FieldDtype, InsertRequest, SubmitStepsRequest,
};
use seed_replay_service::{FetchedGroup, FieldBlocks, ReplayClient, StepBatch};
use support::*;
use tokio_stream::StreamExt;
use tonic::Code;

/// A hang guard for fetches that must find a group, not a timing claim.
const WAIT: Duration = Duration::from_secs(60);

fn grouped_table(name: &str, capacity: usize, group_size: u32, extra: &str) -> String {
    table_json(
        name,
        capacity,
        &format!(r#""sampler": {{"kind": "grouped", "group_size": {group_size}}}{extra}"#),
    )
}

/// `obs` and `tag` of step `step` of trajectory `t`: the tag holds
/// (trajectory, step, checksum, group).
fn step_values(t: u64, group: u64, step: u64) -> ([f32; 12], [u64; 4]) {
    let o = obs_of(t, step);
    (o, [t, step, checksum(t, step, &o), group])
}

/// Rows (trajectory, group, step, is_last) as one request.
fn batch(rows: &[(u64, u64, u64, bool)]) -> StepBatch {
    let mut obs = Vec::new();
    let mut tag = Vec::new();
    for &(t, g, s, _) in rows {
        let (o, tg) = step_values(t, g, s);
        obs.extend_from_slice(&o);
        tag.extend_from_slice(&tg);
    }
    StepBatch::new(
        rows.iter().map(|r| r.0).collect(),
        rows.iter().map(|r| r.1).collect(),
    )
    .unwrap()
    .is_last(rows.iter().map(|r| r.3).collect())
    .unwrap()
    .f32("obs", &[3, 4], &obs)
    .unwrap()
    .u64("tag", &[4], &tag)
    .unwrap()
}

/// Steps `from..from + n` of trajectory `t` in group `g`, the last of them
/// ending it when `last`.
fn steps(t: u64, g: u64, from: u64, n: u64, last: bool) -> StepBatch {
    let rows: Vec<_> = (from..from + n)
        .map(|s| (t, g, s, last && s == from + n - 1))
        .collect();
    batch(&rows)
}

/// Checks every step of a fetched group whole (checksum, bytes, order
/// within its trajectory, group) and returns (trajectory, length) pairs.
fn verify_group(g: &FetchedGroup) -> Vec<(u64, usize)> {
    let obs = g.field_f32("obs").unwrap();
    let tag = g.field_u64("tag").unwrap();
    assert_eq!(obs.len(), g.steps() * 12);
    assert_eq!(tag.len(), g.steps() * 4);
    let mut out = Vec::new();
    for (i, &t) in g.trajectory_ids().iter().enumerate() {
        let range = g.trajectory_steps(i);
        for (step, row) in range.clone().enumerate() {
            let o = &obs[row * 12..(row + 1) * 12];
            let tg = &tag[row * 4..(row + 1) * 4];
            assert_eq!(tg[0], t, "row {row}: a step of another trajectory");
            assert_eq!(tg[1], step as u64, "row {row}: steps out of order");
            assert_eq!(tg[2], checksum(t, step as u64, o), "row {row}: torn step");
            assert_eq!(o, &obs_of(t, step as u64), "row {row}: foreign bytes");
            assert_eq!(tg[3], g.group_id(), "row {row}: a step of another group");
        }
        out.push((t, range.len()));
    }
    out
}

async fn info(c: &mut ReplayClient, table: &str) -> seed_replay_service::pb::TableInfo {
    c.info(Some(table)).await.unwrap().remove(0)
}

/// A fetched group's id and its (trajectory, length) pairs.
type FetchedIds = (u64, Vec<(u64, usize)>);

const WRITERS: u64 = 4;
const GROUPS: u64 = 24;

/// Trajectory of writer `w` in group `g`, and its length (3 to 13).
fn trajectory_of(w: u64, g: u64) -> u64 {
    g * WRITERS + w
}
fn length_of(t: u64) -> u64 {
    3 + (t * 7) % 11
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interleaving_writers_and_several_fetchers_get_whole_groups_only() {
    let server = serve(config(&[grouped_table(
        "pool",
        100_000,
        WRITERS as u32,
        "",
    )]))
    .await;
    // Each writer holds one trajectory of every group and interleaves
    // them: two steps of each open group in turn, five rows (of two or
    // three trajectories) per request, so every group is open for a while
    // and its steps arrive from all writers mixed with other groups'.
    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let mut c = client(&server).await;
        writers.push(tokio::spawn(async move {
            let mut rows = Vec::new();
            let mut next: Vec<u64> = vec![0; GROUPS as usize];
            loop {
                let mut any = false;
                for k in 0..GROUPS {
                    // Writers go round the groups in different orders.
                    let g = (k + w * 5) % GROUPS;
                    let t = trajectory_of(w, g);
                    for _ in 0..2 {
                        let s = next[g as usize];
                        if s < length_of(t) {
                            rows.push((t, g, s, s + 1 == length_of(t)));
                            next[g as usize] += 1;
                            any = true;
                        }
                    }
                }
                if !any {
                    break;
                }
            }
            for chunk in rows.chunks(5) {
                c.submit_steps("pool", batch(chunk)).await.unwrap();
            }
        }));
    }
    let fetched: Arc<Mutex<Vec<FetchedIds>>> = Arc::default();
    let mut fetchers = Vec::new();
    for f in 0..2 {
        let mut c = client(&server).await;
        let fetched = Arc::clone(&fetched);
        fetchers.push(tokio::spawn(async move {
            // Between them the fetchers take every group; each takes half.
            for _ in 0..GROUPS / 2 {
                let g = c
                    .fetch_group("pool", WAIT)
                    .await
                    .unwrap()
                    .unwrap_or_else(|| panic!("fetcher {f}: no group"));
                let trajectories = verify_group(&g);
                fetched.lock().unwrap().push((g.group_id(), trajectories));
            }
        }));
    }
    for w in writers {
        w.await.unwrap();
    }
    for f in fetchers {
        f.await.unwrap();
    }
    let fetched = fetched.lock().unwrap().clone();
    let ids: HashSet<u64> = fetched.iter().map(|(g, _)| *g).collect();
    assert_eq!(ids, (0..GROUPS).collect(), "each group exactly once");
    assert_eq!(fetched.len(), GROUPS as usize);
    for (g, trajectories) in &fetched {
        let got: HashMap<u64, usize> = trajectories.iter().copied().collect();
        let want: HashMap<u64, usize> = (0..WRITERS)
            .map(|w| {
                let t = trajectory_of(w, *g);
                (t, length_of(t) as usize)
            })
            .collect();
        assert_eq!(got, want, "group {g}: every trajectory, whole");
    }
    let mut c = client(&server).await;
    let i = info(&mut c, "pool").await;
    let total: u64 = (0..GROUPS * WRITERS).map(length_of).sum();
    let grouped = i.grouped.unwrap();
    assert_eq!((i.inserted, i.sampled, i.stored), (total, total, 0));
    assert_eq!(grouped.groups_released, GROUPS);
    assert_eq!((grouped.groups_ready, grouped.groups_open), (0, 0));
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_is_released_only_when_all_its_trajectories_are_complete() {
    let server = serve(config(&[grouped_table("pool", 1000, 3, "")])).await;
    let mut c = client(&server).await;
    // Trajectories 1 and 2 complete, 3 not yet seen: nothing to fetch.
    c.submit_steps("pool", steps(1, 7, 0, 4, true))
        .await
        .unwrap();
    c.submit_steps("pool", steps(2, 7, 0, 2, true))
        .await
        .unwrap();
    assert!(c
        .fetch_group("pool", Duration::ZERO)
        .await
        .unwrap()
        .is_none());
    // Trajectory 3 has steps but no end: still nothing.
    c.submit_steps("pool", steps(3, 7, 0, 5, false))
        .await
        .unwrap();
    assert!(c
        .fetch_group("pool", Duration::ZERO)
        .await
        .unwrap()
        .is_none());
    let g = info(&mut c, "pool").await.grouped.unwrap();
    assert_eq!((g.groups_open, g.groups_ready, g.steps_pending), (1, 0, 11));
    // Its actor stopped: CompleteTrajectory ends it and releases the group.
    assert!(c.complete_trajectory("pool", 3).await.unwrap());
    let group = c.fetch_group("pool", WAIT).await.unwrap().unwrap();
    assert_eq!(group.group_id(), 7);
    assert_eq!(verify_group(&group), vec![(1, 4), (2, 2), (3, 5)]);
    assert!(c
        .fetch_group("pool", Duration::ZERO)
        .await
        .unwrap()
        .is_none());
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_come_out_in_the_order_they_completed() {
    let server = serve(config(&[grouped_table("pool", 1000, 2, "")])).await;
    let mut c = client(&server).await;
    // Groups 10, 20, 30 open in that order; each has one trajectory done.
    for g in [10u64, 20, 30] {
        c.submit_steps("pool", steps(g, g, 0, 2, true))
            .await
            .unwrap();
    }
    // They complete 30, 10, 20 (the second trajectory of each).
    for g in [30u64, 10, 20] {
        let r = c
            .submit_steps("pool", steps(g + 1, g, 0, 3, true))
            .await
            .unwrap();
        assert_eq!(r.groups_completed, 1);
    }
    // A fetch that may be waiting already when group 40 completes gets it
    // after the three that completed before it.
    let mut waiter = client(&server).await;
    let waiting = tokio::spawn(async move {
        let mut order = Vec::new();
        for _ in 0..4 {
            // No deadline at all (`u64::MAX` ms on the wire).
            order.push(
                waiter
                    .fetch_group("pool", Duration::MAX)
                    .await
                    .unwrap()
                    .unwrap(),
            );
        }
        order
    });
    c.submit_steps("pool", steps(40, 40, 0, 1, true))
        .await
        .unwrap();
    c.submit_steps("pool", steps(41, 40, 0, 1, true))
        .await
        .unwrap();
    let order = waiting.await.unwrap();
    let ids: Vec<u64> = order.iter().map(|g| g.group_id()).collect();
    assert_eq!(ids, vec![30, 10, 20, 40]);
    for g in &order {
        verify_group(g);
    }
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lag_cap_drops_stale_groups_and_counts_them() {
    let server = serve(config(&[grouped_table(
        "pool",
        1000,
        1,
        r#", "policy_lag": {"max_lag": 2, "action": "drop"}"#,
    )]))
    .await;
    let mut c = client(&server).await;
    let versioned = |t: u64, versions: Vec<u64>| {
        let n = versions.len() as u64;
        steps(t, t, 0, n, true).policy_versions(versions).unwrap()
    };
    // Group 1: oldest step at version 1. Group 2: at 3.
    c.submit_steps("pool", versioned(1, vec![1, 3, 4]))
        .await
        .unwrap();
    c.submit_steps("pool", versioned(2, vec![3, 3]))
        .await
        .unwrap();
    // Version 4: group 1 lags by 3 > 2 and is dropped; group 2 (lag 1) stays.
    c.set_policy_version("pool", 4).await.unwrap();
    let g = info(&mut c, "pool").await.grouped.unwrap();
    assert_eq!(
        (g.groups_dropped_stale, g.groups_ready, g.steps_pending),
        (1, 1, 2)
    );
    // A group completing already stale is dropped at once.
    let r = c
        .submit_steps("pool", versioned(3, vec![1, 9]))
        .await
        .unwrap();
    assert_eq!(r.groups_completed, 0);
    // Lag exactly 2 is kept.
    c.submit_steps("pool", versioned(4, vec![2])).await.unwrap();
    let ids = [
        c.fetch_group("pool", WAIT).await.unwrap().unwrap(),
        c.fetch_group("pool", WAIT).await.unwrap().unwrap(),
    ];
    assert_eq!(ids[0].group_id(), 2);
    assert_eq!(ids[0].policy_versions(), &[3, 3]);
    assert_eq!(ids[1].group_id(), 4);
    assert!(c
        .fetch_group("pool", Duration::ZERO)
        .await
        .unwrap()
        .is_none());
    let g = info(&mut c, "pool").await.grouped.unwrap();
    assert_eq!(g.groups_dropped_stale, 2);
    assert_eq!(
        (g.groups_released, g.policy_version, g.max_lag),
        (2, 4, Some(2))
    );
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_capacity_the_oldest_ready_groups_are_dropped_and_open_ones_kept() {
    // 40 steps; groups of one trajectory.
    let server = serve(config(&[grouped_table("pool", 40, 1, "")])).await;
    let mut c = client(&server).await;
    // An open trajectory of 10 steps (group 100), then three ready groups
    // of 10: the table is full.
    c.submit_steps("pool", steps(100, 100, 0, 10, false))
        .await
        .unwrap();
    for g in 0..3u64 {
        let r = c
            .submit_steps("pool", steps(g, g, 0, 10, true))
            .await
            .unwrap();
        assert_eq!(r.groups_dropped_over_capacity, 0);
    }
    // 15 more steps: groups 0 and 1 (the oldest ready) make room; the open
    // group is kept.
    let r = c
        .submit_steps("pool", steps(3, 3, 0, 15, true))
        .await
        .unwrap();
    assert_eq!((r.groups_completed, r.groups_dropped_over_capacity), (1, 2));
    let g = info(&mut c, "pool").await.grouped.unwrap();
    assert_eq!(
        (
            g.groups_dropped_over_capacity,
            g.groups_ready,
            g.steps_pending
        ),
        (2, 2, 35)
    );
    // Open groups alone cannot be made room from: 31 steps are refused,
    // naming `rows`, and nothing is stored.
    let e = c
        .submit_steps("pool", steps(100, 100, 10, 31, false))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(Code::ResourceExhausted), "{e}");
    assert!(e.to_string().contains("`rows`"), "{e}");
    assert_eq!(
        info(&mut c, "pool").await.grouped.unwrap().steps_pending,
        35
    );
    // The open trajectory ends whole; groups come out 2, 3, 100.
    c.submit_steps("pool", steps(100, 100, 10, 2, true))
        .await
        .unwrap();
    let mut got = Vec::new();
    while let Some(g) = c.fetch_group("pool", Duration::ZERO).await.unwrap() {
        got.push((g.group_id(), verify_group(&g)));
    }
    assert_eq!(
        got,
        vec![
            (2, vec![(2, 10)]),
            (3, vec![(3, 15)]),
            (100, vec![(100, 12)])
        ]
    );
    // Group 100's last two steps fitted (37 of 40): nothing more dropped.
    let g = info(&mut c, "pool").await.grouped.unwrap();
    assert_eq!((g.groups_dropped_over_capacity, g.groups_released), (2, 3));
    server.stop().await.unwrap();
}

fn block(name: &str, dtype: FieldDtype, shape: &[u32], bytes: usize) -> FieldBlock {
    FieldBlock {
        name: name.into(),
        dtype: dtype as i32,
        shape: shape.to_vec(),
        data: Bytes::from(vec![0u8; bytes]),
        offsets: vec![],
    }
}

/// A well-formed request of `rows` steps of trajectory `t` in group `g`.
fn raw_steps(t: u64, g: u64, rows: u32) -> SubmitStepsRequest {
    let r = rows as usize;
    SubmitStepsRequest {
        table: "pool".into(),
        rows,
        fields: vec![
            block("obs", FieldDtype::F32, &[3, 4], r * 48),
            block("tag", FieldDtype::U64, &[4], r * 32),
        ],
        trajectory_ids: vec![t; r],
        group_ids: vec![g; r],
        policy_versions: vec![],
        is_last: vec![],
        ..SubmitStepsRequest::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_by_name_while_a_good_client_goes_on() {
    let server = serve(config(&[
        grouped_table("pool", 100_000, 2, ""),
        table_json("fixed", 64, r#""sampler": {"kind": "uniform"}"#),
    ]))
    .await;
    let url = server.url(false);
    // A good client submits and fetches groups 1000.. all along.
    let good = {
        let mut c = client(&server).await;
        tokio::spawn(async move {
            for g in 1000..1060u64 {
                let (a, b) = (g * 10, g * 10 + 1);
                c.submit_steps("pool", batch(&[(a, g, 0, false), (b, g, 0, false)]))
                    .await
                    .unwrap();
                c.submit_steps("pool", steps(a, g, 1, 2, true))
                    .await
                    .unwrap();
                c.submit_steps("pool", steps(b, g, 1, 1, true))
                    .await
                    .unwrap();
                let got = c.fetch_group("pool", WAIT).await.unwrap().unwrap();
                assert_eq!(got.group_id(), g);
                assert_eq!(verify_group(&got), vec![(a, 3), (b, 2)]);
            }
        })
    };
    let mut c = client(&server).await;
    // Stored before the bad requests: three steps of trajectory 1 (group 1,
    // open), and trajectory 2 ended (group 1).
    c.submit_steps("pool", steps(1, 1, 0, 3, false))
        .await
        .unwrap();
    c.submit_steps("pool", steps(2, 1, 0, 2, true))
        .await
        .unwrap();
    // A full group 5 (trajectories 50 and 51, open).
    c.submit_steps("pool", batch(&[(50, 5, 0, false), (51, 5, 0, false)]))
        .await
        .unwrap();

    let mut raw = RawClient::connect(url.clone()).await.unwrap();
    let with = |f: &dyn Fn(&mut SubmitStepsRequest)| {
        let mut r = raw_steps(1, 1, 2);
        f(&mut r);
        r
    };
    let cases: Vec<(SubmitStepsRequest, Code, &str)> = vec![
        (
            with(&|r| r.fields[0].name = "observation".into()),
            Code::InvalidArgument,
            "fields[0].name",
        ),
        (
            with(&|r| r.fields[0].dtype = FieldDtype::F64 as i32),
            Code::InvalidArgument,
            "fields[\"obs\"].dtype",
        ),
        (
            with(&|r| r.fields[0].shape = vec![4, 3]),
            Code::InvalidArgument,
            "fields[\"obs\"].shape",
        ),
        (
            with(&|r| r.fields[1].data = Bytes::from(vec![0u8; 63])),
            Code::InvalidArgument,
            "fields[\"tag\"].data",
        ),
        (
            with(&|r| {
                r.fields.remove(1);
            }),
            Code::InvalidArgument,
            "fields[\"tag\"]",
        ),
        (with(&|r| r.rows = 0), Code::InvalidArgument, "rows"),
        (
            with(&|r| r.group_ids = vec![1]),
            Code::InvalidArgument,
            "group_ids",
        ),
        (
            with(&|r| r.is_last = vec![true]),
            Code::InvalidArgument,
            "is_last",
        ),
        (
            with(&|r| r.policy_versions = vec![1, 2, 3]),
            Code::InvalidArgument,
            "policy_versions",
        ),
        // Trajectory 1 is in group 1, not 2.
        (
            with(&|r| r.group_ids = vec![2, 2]),
            Code::InvalidArgument,
            "group_ids[0]",
        ),
        // Two groups for one trajectory in one request.
        (
            with(&|r| {
                r.trajectory_ids = vec![9, 9];
                r.group_ids = vec![9, 8];
            }),
            Code::InvalidArgument,
            "group_ids[1]",
        ),
        // A step after the last one, in the same request ...
        (
            with(&|r| {
                r.trajectory_ids = vec![3, 3];
                r.group_ids = vec![3, 3];
                r.is_last = vec![true, false];
            }),
            Code::FailedPrecondition,
            "trajectory_ids[1]",
        ),
        // ... and in a later one: trajectory 2 has ended.
        (
            with(&|r| r.trajectory_ids = vec![2, 2]),
            Code::FailedPrecondition,
            "trajectory_ids[0]",
        ),
        // Group 5 has its two trajectories.
        (
            with(&|r| {
                r.trajectory_ids = vec![52, 52];
                r.group_ids = vec![5, 5];
            }),
            Code::FailedPrecondition,
            "group_ids[0]",
        ),
    ];
    for (bad, code, field) in cases {
        let status = raw.submit_steps(bad).await.unwrap_err();
        assert_eq!(status.code(), code, "{field}: {status:?}");
        assert!(
            status.message().contains(&format!("`{field}`")),
            "{field}: {}",
            status.message()
        );
    }
    for (t, why) in [(77u64, "unknown"), (2, "already complete")] {
        let status = raw
            .complete_trajectory(CompleteTrajectoryRequest {
                table: "pool".into(),
                trajectory_id: t,
                trajectory_uid: String::new(),
            })
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::FailedPrecondition, "{why}: {status:?}");
        assert!(
            status.message().contains("`trajectory_id`"),
            "{why}: {}",
            status.message()
        );
    }
    // The wrong kind of table, either way; an unknown one.
    let mut wrong = raw_steps(1, 1, 1);
    wrong.table = "fixed".into();
    let status = raw.submit_steps(wrong).await.unwrap_err();
    assert_eq!(status.code(), Code::FailedPrecondition, "{status:?}");
    assert!(status.message().contains("not grouped"), "{status:?}");
    let mut nope = raw_steps(1, 1, 1);
    nope.table = "nope".into();
    let status = raw.submit_steps(nope).await.unwrap_err();
    assert_eq!(status.code(), Code::NotFound, "{status:?}");
    assert!(status.message().contains("fixed, pool"), "{status:?}");
    let insert = InsertRequest {
        table: "pool".into(),
        rows: 1,
        ..InsertRequest::default()
    };
    let mut replies = raw
        .insert(tokio_stream::iter(vec![insert]))
        .await
        .unwrap()
        .into_inner();
    let status = replies.next().await.unwrap().unwrap_err();
    assert_eq!(status.code(), Code::FailedPrecondition, "{status:?}");
    assert!(status.message().contains("is grouped"), "{status:?}");

    good.await.unwrap();
    // Nothing stored before was lost: trajectory 1 goes on from step 3 and
    // group 1 comes out whole.
    c.submit_steps("pool", steps(1, 1, 3, 1, true))
        .await
        .unwrap();
    let g = c.fetch_group("pool", WAIT).await.unwrap().unwrap();
    assert_eq!(g.group_id(), 1);
    assert_eq!(verify_group(&g), vec![(1, 4), (2, 2)]);
    let i = info(&mut c, "pool").await;
    // 14 submits and 2 completions refused on `pool`.
    assert_eq!(i.rejected_requests, 16);
    assert_eq!(i.grouped.unwrap().groups_released, 61);
    server.stop().await.unwrap();
}
