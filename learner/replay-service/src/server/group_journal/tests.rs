//! A grouped table with `storage_dir`, closed and reopened: what it held
//! comes back, through compactions, torn tails and layout changes.
use std::path::Path;

use bytes::Bytes;

use crate::config::ServiceConfig;
use crate::error::ServeError;
use crate::pb::{FieldBlock, FieldDtype, SubmitStepsRequest};
use crate::server::grouped_table::{GroupedStats, GroupedTable, ReleasedGroup};
use crate::server::step_request::stage;

const MESSAGE_BYTES: usize = 4 << 20;

fn table(dir: &Path, compact_min: u64, token_dtype: &str) -> Result<GroupedTable, ServeError> {
    let json = format!(
        r#"{{"tables": [{{"name": "pool", "capacity": 100000,
            "fields": [{{"name": "tokens", "dtype": "{token_dtype}", "shape": [-1], "max_len": 4096}},
                       {{"name": "reward", "dtype": "f32", "shape": []}}],
            "sampler": {{"kind": "grouped", "group_size": 2, "ids": "str"}},
            "storage_dir": {dir:?}}}]}}"#
    );
    let mut config = ServiceConfig::from_json(&json).expect("a good config");
    let spec = config.grouped.remove(0);
    GroupedTable::with_compaction(spec, MESSAGE_BYTES, compact_min)
}

/// Steps `steps` of trajectory `t` (in group `g`): step `s` has `s % 7 + 1`
/// tokens `t*1000 + s*10 + k`, reward `s`, metadata `"t/s"`.
fn steps(t: u32, g: u32, steps: std::ops::Range<u32>, last: bool) -> SubmitStepsRequest {
    let (mut tokens, mut offsets, mut rewards) = (Vec::new(), vec![0u64], Vec::new());
    let mut metadata = Vec::new();
    for s in steps.clone() {
        for k in 0..s % 7 + 1 {
            tokens.extend_from_slice(&((t * 1000 + s * 10 + k) as i32).to_le_bytes());
        }
        offsets.push(tokens.len() as u64 / 4);
        rewards.extend_from_slice(&(s as f32).to_le_bytes());
        metadata.push(Bytes::from(format!("{t}/{s}")));
    }
    let rows = steps.len();
    SubmitStepsRequest {
        table: "pool".into(),
        rows: rows as u32,
        fields: vec![
            FieldBlock {
                name: "tokens".into(),
                dtype: FieldDtype::I32 as i32,
                shape: vec![],
                data: tokens.into(),
                offsets,
            },
            FieldBlock {
                name: "reward".into(),
                dtype: FieldDtype::F32 as i32,
                shape: vec![],
                data: rewards.into(),
                offsets: vec![],
            },
        ],
        trajectory_uids: vec![format!("traj-{t}"); rows],
        group_uids: vec![format!("group-{g}"); rows],
        policy_versions: steps.clone().map(u64::from).collect(),
        is_last: (0..rows).map(|r| last && r + 1 == rows).collect(),
        metadata,
        ..SubmitStepsRequest::default()
    }
}

fn submit(table: &GroupedTable, req: &SubmitStepsRequest) {
    let staged = stage(&table.name, table.layout(), table.spec().ids, req).expect("a good request");
    table.submit(staged).expect("accepted");
}

/// A fetched group as plain values, to compare.
type Plain = (
    String,
    Vec<(String, Vec<Vec<u8>>, Vec<Vec<u64>>, Vec<u64>, Vec<u8>)>,
);

fn plain(g: ReleasedGroup) -> Plain {
    let trajectories = g
        .trajectories
        .into_iter()
        .map(|(id, t)| (id.uid().to_string(), t.data, t.lens, t.versions, t.metadata))
        .collect();
    (g.group.uid().to_string(), trajectories)
}

fn fetch(table: &GroupedTable) -> Option<Plain> {
    table.try_fetch().expect("fetch logged").map(plain)
}

fn gauges(s: GroupedStats) -> (u64, u64, u64, u64) {
    (
        s.groups_ready,
        s.groups_open,
        s.steps_pending,
        s.policy_version,
    )
}

fn journal_len(dir: &Path) -> u64 {
    std::fs::metadata(dir.join("journal")).unwrap().len()
}

#[test]
fn a_reopened_table_holds_every_acknowledged_call() {
    let dir = tempfile::tempdir().unwrap();
    let expected_ready;
    let stats;
    {
        let t = table(dir.path(), u64::MAX, "i32").unwrap();
        // Group 1 complete and fetched; group 2 half-written (trajectory 3
        // complete, 4 open); group 3 complete and waiting.
        submit(&t, &steps(1, 1, 0..3, true));
        submit(&t, &steps(3, 2, 0..2, false));
        submit(&t, &steps(2, 1, 0..4, true));
        submit(&t, &steps(4, 2, 0..5, false));
        submit(&t, &steps(5, 3, 0..1, true));
        t.complete_trajectory(&crate::server::pool_id::PoolId::Uid("traj-3".into()))
            .unwrap();
        submit(&t, &steps(6, 3, 0..6, true));
        assert_eq!(fetch(&t).unwrap().0, "group-1");
        t.set_policy_version(9).unwrap();
        stats = t.stats();
        // What group 3 holds, read from a twin table that is not closed.
        let twin_dir = tempfile::tempdir().unwrap();
        let twin = table(twin_dir.path(), u64::MAX, "i32").unwrap();
        submit(&twin, &steps(5, 3, 0..1, true));
        submit(&twin, &steps(6, 3, 0..6, true));
        expected_ready = fetch(&twin).unwrap();
    }
    let t = table(dir.path(), u64::MAX, "i32").unwrap();
    assert_eq!(
        t.stats(),
        stats,
        "counters and gauges as before the restart"
    );
    assert_eq!(gauges(t.stats()), (1, 1, 14, 9));
    assert_eq!(fetch(&t).unwrap(), expected_ready);
    assert!(fetch(&t).is_none());
    // Trajectory 4 goes on where it was: its first five steps came before
    // the restart.
    submit(&t, &steps(4, 2, 5..8, true));
    let (group, trajectories) = fetch(&t).unwrap();
    assert_eq!(group, "group-2");
    let (id, _, lens, versions, _) = &trajectories[1];
    assert_eq!(id, "traj-4");
    assert_eq!(versions, &(0..8).collect::<Vec<u64>>());
    assert_eq!(lens[0], (0..8).map(|s| s % 7 + 1).collect::<Vec<u64>>());
    // A completed trajectory stays complete.
    let refused =
        t.submit(stage(&t.name, t.layout(), t.spec().ids, &steps(4, 2, 8..9, false)).unwrap());
    assert!(
        refused.is_ok(),
        "group 2 was released: its ids are forgotten"
    );
}

#[test]
fn compaction_keeps_the_state_and_bounds_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let compact_min = 2 << 10;
    let mut written = 0u64;
    let mut max_len = 0;
    let expected;
    let stats;
    {
        let t = table(dir.path(), compact_min, "i32").unwrap();
        // Each round: a group of two trajectories made ready, and the
        // oldest of three waiting fetched; trajectory 0 stays open all along.
        submit(&t, &steps(0, 0, 0..1, false));
        for round in 1..=400u32 {
            for req in [
                steps(2 * round, round, 0..3, true),
                steps(2 * round + 1, round, 0..2, true),
            ] {
                written += req.fields.iter().map(|f| f.data.len() as u64).sum::<u64>();
                submit(&t, &req);
            }
            if round > 3 {
                fetch(&t).unwrap();
            }
            if round % 50 == 0 {
                submit(&t, &steps(0, 0, round..round + 1, false));
                t.set_policy_version(u64::from(round)).unwrap();
            }
            max_len = max_len.max(journal_len(dir.path()));
        }
        stats = t.stats();
        let twin_dir = tempfile::tempdir().unwrap();
        let twin = table(twin_dir.path(), u64::MAX, "i32").unwrap();
        for round in 398..=400u32 {
            submit(&twin, &steps(2 * round, round, 0..3, true));
            submit(&twin, &steps(2 * round + 1, round, 0..2, true));
        }
        expected = (0..3).map(|_| fetch(&twin).unwrap()).collect::<Vec<_>>();
    }
    assert!(
        written > 10 * compact_min,
        "the rounds wrote {written} bytes"
    );
    assert!(
        max_len < 4 * compact_min,
        "the journal grew to {max_len} bytes, bounded by twice its compacted size past {compact_min}"
    );
    let t = table(dir.path(), compact_min, "i32").unwrap();
    assert_eq!(t.stats(), stats);
    assert_eq!(t.stats().groups_released, 397);
    for e in expected {
        assert_eq!(fetch(&t).unwrap(), e);
    }
    // The open trajectory kept its nine steps (one, then one per 50 rounds).
    submit(&t, &steps(0, 0, 1000..1001, true));
    submit(&t, &steps(9999, 0, 0..1, true));
    let (_, trajectories) = fetch(&t).unwrap();
    assert_eq!(trajectories[0].3.len(), 10);
}

#[test]
fn a_torn_record_is_cut_off_and_the_journal_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    {
        let t = table(dir.path(), u64::MAX, "i32").unwrap();
        submit(&t, &steps(1, 1, 0..3, true));
        submit(&t, &steps(2, 1, 0..2, false));
    }
    let whole = journal_len(dir.path());
    // A record a kill cut short: its frame promises more than is there.
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(dir.path().join("journal"))
            .unwrap();
        f.write_all(&500u64.to_le_bytes()).unwrap();
        f.write_all(&[0u8; 4]).unwrap();
        f.write_all(&[1u8; 40]).unwrap();
    }
    {
        let t = table(dir.path(), u64::MAX, "i32").unwrap();
        assert_eq!(journal_len(dir.path()), whole, "the torn record is cut off");
        assert_eq!(gauges(t.stats()), (0, 1, 5, 0));
        submit(&t, &steps(2, 1, 2..3, true));
    }
    let t = table(dir.path(), u64::MAX, "i32").unwrap();
    let (_, trajectories) = fetch(&t).unwrap();
    assert_eq!(trajectories[1].3, vec![0, 1, 2]);
}

#[test]
fn a_journal_of_another_layout_is_refused_naming_both() {
    let dir = tempfile::tempdir().unwrap();
    {
        let t = table(dir.path(), u64::MAX, "i32").unwrap();
        submit(&t, &steps(1, 1, 0..1, true));
    }
    let err = table(dir.path(), u64::MAX, "u32").unwrap_err().to_string();
    assert!(err.contains("storage_dir"), "{err}");
    assert!(
        err.contains("tokens:I32") && err.contains("tokens:U32"),
        "{err}"
    );
    // And nothing was changed: the table of the old layout opens whole.
    let t = table(dir.path(), u64::MAX, "i32").unwrap();
    assert_eq!(t.stats().steps_pending, 1);
}

#[test]
fn a_file_that_is_not_a_journal_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("journal"), b"something else entirely").unwrap();
    let err = table(dir.path(), u64::MAX, "i32").unwrap_err().to_string();
    assert!(err.contains("is not a grouped table's journal"), "{err}");
}
