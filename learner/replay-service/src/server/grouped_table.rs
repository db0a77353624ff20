//! [`GroupedTable`]: a table of trajectories released in whole groups, the
//! trajectory-pool (DataPool) pattern: actors submit steps of trajectories,
//! each trajectory in a group of the table's `group_size`; a group is
//! *complete* when it has `group_size` trajectories and every one is
//! complete (a step with `is_last`, or `CompleteTrajectory`). Complete
//! groups wait in a FIFO (by completion) and `FetchGroup` hands out the
//! oldest one whole, never a part of one.
//!
//! # Storage: steps appended per trajectory
//! A trajectory has any number of steps, so an item has a variable first
//! axis. Each open trajectory owns one growable byte array per field
//! (`[len, ...shape]`, steps appended as they come; a variable-length
//! field's values without padding, beside each step's length), its policy
//! versions and its steps' metadata; a completed group moves its
//! trajectories (no copy) into the ready queue, and a fetch concatenates
//! them into one block per field (one copy, outside the lock; none for a
//! group of one trajectory). A fetched group's memory is freed when its
//! reply is sent: nothing consumed stays behind to be compacted.
//!
//! With `storage_dir` the table is also on disk: every call that changes
//! it is appended to a journal under the lock, before it changes the
//! pool, and replayed through the same methods at start-up
//! (`server/group_journal.rs`; `Log` says which calls write).
//!
//! Why not the `seed-replay` ring buffer with its `grouped` sampler: the
//! ring gives slots in arrival order, so the steps of interleaved
//! trajectories would be scattered (a fetch would gather and sort them
//! step by step), and a full ring overwrites the *oldest steps*, which
//! may belong to a slow trajectory still being written, where a trajectory
//! pool must drop the oldest *ready groups* and keep open ones. The sampler
//! also has no trajectory order, length or completion to offer. Fixed-shape
//! tables keep the ring and its lock-free path untouched; this table is a
//! separate type the service looks up in its own map.
//!
//! # Ids
//! Trajectory and group ids are the writers' to choose (an actor's env
//! slot and episode, say; numbers or strings as the table declares,
//! [`PoolId`]). They name open trajectories and groups only:
//! once a group is released or dropped its ids are forgotten, and a later
//! step with one of them starts a new trajectory. While a group is open, a
//! step of a complete trajectory, a trajectory moving to another group, or
//! a trajectory joining a group that has its `group_size` already is
//! refused.
//!
//! # Capacity and staleness
//! `capacity` counts steps held (open and ready). A submit that would pass
//! it first drops the oldest ready groups (`groups_dropped_over_capacity`);
//! steps of open groups are never dropped, so when they alone would pass
//! it the submit is refused (`RESOURCE_EXHAUSTED`). With `max_queue_size`,
//! a group made ready while that many wait drops the oldest
//! (`groups_dropped_queue_full`). A group's policy version is its oldest
//! step's; with a lag cap, a complete group lagging the table's version
//! (`SetPolicyVersion`) by more than `max_lag` is dropped when it completes
//! or when the version moves (`groups_dropped_stale`), so `FetchGroup`
//! never returns one; with action `keep` it is released all the same
//! (`groups_released_stale`), the reply carrying the table's version so
//! the trainer weighs each step by its lag. A group must also fit in one
//! reply message: steps that would make it outgrow `max_message_bytes`
//! are refused (`RESOURCE_EXHAUSTED`) at submit, not found out at fetch.
//!
//! # Concurrency and cost
//! One mutex over the pool. Requests are checked and their bytes staged by
//! trajectory before it is taken; under it a submit appends the staged
//! bytes (one copy; none for a trajectory's first steps, moved in), a fetch
//! pops a group (pointer moves). The lock is held for O(request) work and
//! never across an await. Fetchers wait on a `Notify`, woken when a group
//! becomes ready or the table closes. Memory: the steps held, plus up to
//! as much again in the spare room of growing trajectory arrays.
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use seed_replay::ReplayError;
use tokio::sync::{watch, Notify};
use tracing::{info, warn};

use crate::config::grouped_table_spec::GroupedTableSpec;
use crate::config::step_layout::StepLayout;
use crate::error::{ConfigError, RequestError, ServeError};
use crate::server::closing::stopping;
use crate::server::group_journal::{
    GroupJournal, Record, SegmentRef, Snapshot, COMPACT_MIN_BYTES, COUNTERS,
};
use crate::server::pool_id::PoolId;
use crate::server::step_request::StagedSteps;

/// Bytes of a `FetchGroupReply` that are not step bytes, per field block
/// (name, dtype, shape, tags) and per trajectory (id, length); a string
/// id's own bytes are counted at submit. A step's are in
/// `Segment::reply_bytes`.
const REPLY_BYTES_PER_FIELD: usize = 256;
const REPLY_BYTES_PER_TRAJECTORY: usize = 24;
const REPLY_BYTES_FIXED: usize = 1024;

/// One trajectory: its steps so far.
#[derive(Debug)]
pub(crate) struct Trajectory {
    group: PoolId,
    complete: bool,
    /// Per layout field, the steps' bytes one after another.
    pub(crate) data: Vec<Vec<u8>>,
    /// Per layout field, each step's length in its variable last dimension
    /// (empty for fixed-shape fields).
    pub(crate) lens: Vec<Vec<u64>>,
    pub(crate) versions: Vec<u64>,
    /// The steps' metadata one after another, and each one's length.
    pub(crate) metadata: Vec<u8>,
    pub(crate) metadata_lens: Vec<u32>,
}

impl Trajectory {
    pub(crate) fn len(&self) -> usize {
        self.versions.len()
    }

    /// All its steps as one journal segment.
    fn segment<'a>(&'a self, id: &'a PoolId, last: bool) -> SegmentRef<'a> {
        SegmentRef {
            trajectory: id,
            group: &self.group,
            last,
            data: &self.data,
            lens: &self.lens,
            versions: &self.versions,
            metadata: &self.metadata,
            metadata_lens: &self.metadata_lens,
        }
    }
}

/// A group still collecting trajectories or steps.
#[derive(Debug, Default)]
struct OpenGroup {
    /// Its trajectories, in the order first seen.
    trajectories: Vec<PoolId>,
    complete: u32,
    steps: usize,
    /// What its fetch reply will hold, in bytes.
    reply_bytes: usize,
}

/// A complete group: what `FetchGroup` hands out.
#[derive(Debug)]
pub struct ReleasedGroup {
    pub group: PoolId,
    /// Its trajectories, in the order first seen.
    pub(crate) trajectories: Vec<(PoolId, Trajectory)>,
    pub steps: usize,
    /// The policy version of its oldest step.
    pub oldest_version: u64,
    /// The table's policy version when it was taken out.
    pub table_version: u64,
}

/// Counters of a grouped table, as `Info` reports them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroupedStats {
    pub policy_version: u64,
    pub groups_ready: u64,
    pub groups_open: u64,
    pub groups_released: u64,
    pub groups_dropped_stale: u64,
    pub groups_dropped_over_capacity: u64,
    pub groups_dropped_queue_full: u64,
    /// Groups past `max_lag` released anyway (action `keep`).
    pub groups_released_stale: u64,
    /// Steps held (open and ready groups).
    pub steps_pending: u64,
    /// Steps of ready groups.
    pub steps_ready: u64,
    pub steps_submitted: u64,
    pub steps_released: u64,
}

/// What one accepted submit did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SubmitOutcome {
    pub groups_completed: u32,
    pub groups_dropped_over_capacity: u32,
    pub groups_dropped_queue_full: u32,
}

/// Whether a call is written to the table's journal: `Skip` while the
/// journal itself is being replayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Log {
    Write,
    Skip,
}

#[derive(Debug, Default)]
struct Pool {
    /// With `storage_dir`: every call that changes the pool, written
    /// before it does (under this lock, so in the pool's order).
    journal: Option<GroupJournal>,
    policy_version: u64,
    trajectories: HashMap<PoolId, Trajectory>,
    open: HashMap<PoolId, OpenGroup>,
    ready: VecDeque<ReleasedGroup>,
    steps_open: usize,
    steps_ready: usize,
    stats: GroupedStats,
}

/// A served grouped table.
#[derive(Debug)]
pub struct GroupedTable {
    pub(crate) name: String,
    spec: GroupedTableSpec,
    /// The most bytes of steps one group may hold so that its fetch reply
    /// fits in one message.
    max_group_bytes: usize,
    pool: Mutex<Pool>,
    /// Woken (`notify_waiters`) when a group becomes ready or the table
    /// closes.
    ready: Notify,
    /// Set once by `close`; Release store, Acquire loads: a call that sees
    /// it refuses, nothing else is published by it.
    closed: AtomicBool,
    /// Requests refused for bad input. Relaxed: a statistic.
    pub(crate) rejected_requests: AtomicU64,
}

impl GroupedTable {
    /// An empty table; fails when one group of `group_size` one-step
    /// trajectories (of empty variable-length fields) would not fit in a
    /// message of `max_message_bytes`.
    ///
    /// With `storage_dir`, the table is rebuilt from the journal there
    /// (created when missing; `server/group_journal.rs`), and every later
    /// call that changes it is written there before it is acknowledged.
    pub fn new(spec: GroupedTableSpec, max_message_bytes: usize) -> Result<Self, ServeError> {
        Self::with_compaction(spec, max_message_bytes, COMPACT_MIN_BYTES)
    }

    /// `new`, rewriting the journal once it passes `compact_min` bytes
    /// (and has doubled since its last rewrite).
    pub(crate) fn with_compaction(
        spec: GroupedTableSpec,
        max_message_bytes: usize,
        compact_min: u64,
    ) -> Result<Self, ServeError> {
        let layout = &spec.layout;
        let overhead = REPLY_BYTES_FIXED
            + REPLY_BYTES_PER_FIELD * layout.fields().len()
            + REPLY_BYTES_PER_TRAJECTORY * spec.group_size as usize;
        let max_group_bytes = max_message_bytes.saturating_sub(overhead);
        let smallest_step = layout.fixed_step_bytes() + 64;
        if max_group_bytes / smallest_step < spec.group_size as usize {
            return Err(ServeError::Config(ConfigError::Table {
                table: spec.name.clone(),
                setting: "sampler",
                reason: format!(
                    "a group of {} one-step trajectories of {} bytes does not fit in a \
                     message of {max_message_bytes} bytes (--max-message-bytes)",
                    spec.group_size,
                    layout.fixed_step_bytes()
                ),
            }));
        }
        let table = GroupedTable {
            name: spec.name.clone(),
            spec,
            max_group_bytes,
            pool: Mutex::new(Pool::default()),
            ready: Notify::new(),
            closed: AtomicBool::new(false),
            rejected_requests: AtomicU64::new(0),
        };
        if let Some(dir) = table.spec.storage_dir.clone() {
            table.open_journal(&dir, compact_min)?;
        }
        Ok(table)
    }

    /// Replays the journal in `dir` into the (empty) pool and keeps it
    /// open for the calls to come.
    fn open_journal(&self, dir: &std::path::Path, compact_min: u64) -> Result<(), ServeError> {
        let started = std::time::Instant::now();
        let mut pool = self.lock();
        let (journal, summary) =
            GroupJournal::open(dir, self.fingerprint(), compact_min, |record| {
                self.apply(&mut pool, record).map_err(|e| {
                    format!(
                        "{e} (refused on replay: was the table's `capacity` or \
                         --max-message-bytes lowered since it was written?)"
                    )
                })
            })
            .map_err(|e| {
                ServeError::Config(ConfigError::Table {
                    table: self.name.clone(),
                    setting: "storage_dir",
                    reason: e.to_string(),
                })
            })?;
        if summary.torn_bytes > 0 {
            warn!(table = %self.name, bytes = summary.torn_bytes,
                "cut off the journal's last record, torn by a stop mid-write (it was never acknowledged)");
        }
        info!(table = %self.name, journal = %journal.path().display(), records = summary.records,
            journal_bytes = summary.bytes, groups_ready = pool.ready.len(),
            groups_open = pool.open.len(), steps = pool.steps_open + pool.steps_ready,
            ms = started.elapsed().as_millis() as u64, "grouped table rebuilt from its journal");
        pool.journal = Some(journal);
        Ok(())
    }

    /// What the journal's header must match: everything a record's
    /// meaning depends on.
    fn fingerprint(&self) -> String {
        let fields: Vec<String> = self
            .spec
            .layout
            .fields()
            .map(|(f, v)| {
                format!(
                    "{}:{:?}:{:?}{}",
                    f.name(),
                    f.dtype(),
                    f.shape(),
                    match v {
                        None => String::new(),
                        Some(v) => format!(":[-1] max_len {:?}", v.max_len),
                    }
                )
            })
            .collect();
        format!(
            "fields {}; ids {}; group_size {}",
            fields.join(", "),
            self.spec.ids.name(),
            self.spec.group_size
        )
    }

    /// One journal record, replayed through the calls that wrote it.
    fn apply(&self, p: &mut Pool, record: Record) -> Result<(), RequestError> {
        match record {
            Record::Submit(staged) => self.submit_in(p, staged, Log::Skip).map(drop),
            Record::Complete(id) => self.complete_in(p, &id, Log::Skip).map(drop),
            Record::Fetch => match self.fetch_in(p, Log::Skip)? {
                Some(_) => Ok(()),
                None => Err(RequestError::Precondition {
                    reason: "a fetch, but no group was ready".into(),
                }),
            },
            Record::Version(v) => self.version_in(p, v, Log::Skip),
            Record::Counters(c) => {
                let s = &mut p.stats;
                [
                    s.groups_released,
                    s.groups_dropped_stale,
                    s.groups_dropped_over_capacity,
                    s.groups_dropped_queue_full,
                    s.groups_released_stale,
                    s.steps_submitted,
                    s.steps_released,
                ] = c;
                Ok(())
            }
        }
    }

    /// Rewrites the journal when it has grown enough (after a logged
    /// call, under the lock). A failed rewrite leaves the old journal
    /// whole: logged, retried after as much growth again.
    fn maybe_compact(&self, p: &mut Pool) {
        let Some(mut journal) = p.journal.take() else {
            return;
        };
        if journal.wants_compaction() {
            let before = journal.path();
            if let Err(e) = journal.compact(|s| Self::snapshot(p, s)) {
                warn!(table = %self.name, journal = %before.display(), error = %e,
                    "could not rewrite the journal; it stays as it was");
            }
        }
        p.journal = Some(journal);
    }

    /// The records that rebuild `p`: ready groups in order, then open
    /// ones, then the version and the counters.
    fn snapshot(p: &Pool, s: &mut Snapshot) -> std::io::Result<()> {
        // The version first: a replayed group is judged stale against it
        // as the live one was.
        s.version(p.policy_version)?;
        for g in &p.ready {
            s.submit(g.trajectories.iter().map(|(id, t)| t.segment(id, true)))?;
        }
        for g in p.open.values() {
            s.submit(
                g.trajectories
                    .iter()
                    .filter_map(|id| p.trajectories.get(id).map(|t| t.segment(id, t.complete))),
            )?;
        }
        let c = &p.stats;
        let counters: [u64; COUNTERS] = [
            c.groups_released,
            c.groups_dropped_stale,
            c.groups_dropped_over_capacity,
            c.groups_dropped_queue_full,
            c.groups_released_stale,
            c.steps_submitted,
            c.steps_released,
        ];
        s.counters(counters)
    }

    fn journal_error(&self, j: &GroupJournal, op: &'static str, e: std::io::Error) -> RequestError {
        RequestError::Replay {
            table: self.name.clone(),
            source: ReplayError::Io {
                op,
                path: j.path(),
                source: e,
            },
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn spec(&self) -> &GroupedTableSpec {
        &self.spec
    }

    pub fn layout(&self) -> &StepLayout {
        &self.spec.layout
    }

    /// Bytes of steps one group may hold (its reply must fit in one
    /// message).
    pub fn max_group_bytes(&self) -> usize {
        self.max_group_bytes
    }

    fn lock(&self) -> MutexGuard<'_, Pool> {
        // Every method leaves the pool consistent before anything that
        // could panic, so a poisoned lock holds a usable pool.
        self.pool.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn check_open(&self) -> Result<(), RequestError> {
        // Acquire: pairs with the Release store in `close`.
        if self.closed.load(Ordering::Acquire) {
            return Err(self.closed_error());
        }
        Ok(())
    }

    fn closed_error(&self) -> RequestError {
        RequestError::Replay {
            table: self.name.clone(),
            source: ReplayError::Closed,
        }
    }

    /// Stores staged steps: checks them against the pool (trajectory in
    /// another group or already complete, group full, capacity), then
    /// drops the oldest ready groups for room, appends, and moves groups
    /// that became complete to the ready queue. All or nothing.
    pub(crate) fn submit(&self, staged: StagedSteps) -> Result<SubmitOutcome, RequestError> {
        self.check_open()?;
        let mut pool = self.lock();
        let outcome = self.submit_in(&mut pool, staged, Log::Write)?;
        self.maybe_compact(&mut pool);
        drop(pool);
        if outcome.groups_completed > 0 {
            self.ready.notify_waiters();
        }
        Ok(outcome)
    }

    /// `submit` on the locked pool; `log` says whether it is written to
    /// the journal (not when the journal is being replayed).
    fn submit_in(
        &self,
        p: &mut Pool,
        staged: StagedSteps,
        log: Log,
    ) -> Result<SubmitOutcome, RequestError> {
        let group_size = self.spec.group_size as usize;
        // Check everything first: nothing is stored unless all is well.
        let (trajectory_field, group_field) = match self.spec.ids {
            crate::config::grouped_table_spec::IdKind::U64 => ("trajectory_ids", "group_ids"),
            crate::config::grouped_table_spec::IdKind::Str => ("trajectory_uids", "group_uids"),
        };
        let mut new_per_group: HashMap<&PoolId, usize> = HashMap::new();
        let mut bytes_per_group: HashMap<&PoolId, usize> = HashMap::new();
        for seg in &staged.segments {
            let row = seg.first_row;
            match p.trajectories.get(&seg.trajectory) {
                Some(t) if t.group != seg.group => {
                    return Err(RequestError::invalid(
                        format!("{group_field}[{row}]"),
                        format!(
                            "{}, but trajectory {} is in group {}",
                            seg.group, seg.trajectory, t.group
                        ),
                    ))
                }
                Some(t) if t.complete => {
                    return Err(RequestError::Precondition {
                        reason: format!(
                            "field `{trajectory_field}[{row}]`: trajectory {} of table `{}` is \
                             complete (its last step came, or CompleteTrajectory)",
                            seg.trajectory, self.name
                        ),
                    })
                }
                Some(_) => {}
                None => {
                    let known = p.open.get(&seg.group).map_or(0, |g| g.trajectories.len());
                    let new = new_per_group.entry(&seg.group).or_insert(0);
                    *new += 1;
                    if known + *new > group_size {
                        return Err(RequestError::Precondition {
                            reason: format!(
                                "field `{group_field}[{row}]`: group {} of table `{}` already \
                                 has its {group_size} trajectories; trajectory {} cannot join it",
                                seg.group, self.name, seg.trajectory
                            ),
                        });
                    }
                }
            }
            let held = p.open.get(&seg.group).map_or(0, |g| g.reply_bytes);
            let adding = bytes_per_group.entry(&seg.group).or_insert(0);
            *adding += seg.reply_bytes() + seg.trajectory.uid().len();
            // A replayed group was let in once; a compacted journal counts
            // its reply bytes a little differently, so it is not asked again.
            if log == Log::Write && held + *adding > self.max_group_bytes {
                return Err(RequestError::Exhausted {
                    field: "rows".into(),
                    reason: format!(
                        "group {} would hold {} bytes of steps; one group may hold {} \
                         (its FetchGroup reply must fit in one message: --max-message-bytes)",
                        seg.group,
                        held + *adding,
                        self.max_group_bytes
                    ),
                });
            }
        }
        let capacity = self.spec.capacity_steps;
        if p.steps_open + staged.rows > capacity {
            return Err(RequestError::Exhausted {
                field: "rows".into(),
                reason: format!(
                    "{} more steps, but open groups of table `{}` hold {} of its capacity \
                     of {capacity} steps (only ready groups are dropped for room: \
                     complete or fetch groups)",
                    staged.rows, self.name, p.steps_open
                ),
            });
        }
        // Logged before anything changes: a refused write changes nothing.
        if log == Log::Write {
            if let Some(j) = p.journal.as_mut() {
                j.submit(&staged)
                    .map_err(|e| self.journal_error(j, "append a submit to", e))?;
            }
        }
        // Room: the oldest ready groups go first.
        let mut outcome = SubmitOutcome::default();
        while p.steps_open + p.steps_ready + staged.rows > capacity {
            let Some(old) = p.ready.pop_front() else {
                break;
            };
            p.steps_ready -= old.steps;
            p.stats.groups_dropped_over_capacity += 1;
            outcome.groups_dropped_over_capacity += 1;
        }
        let mut touched: Vec<PoolId> = Vec::new();
        let mut seen: HashSet<PoolId> = HashSet::new();
        for seg in staged.segments {
            let steps = seg.steps();
            let bytes = seg.reply_bytes() + seg.trajectory.uid().len();
            let group = p.open.entry(seg.group.clone()).or_default();
            group.steps += steps;
            group.reply_bytes += bytes;
            if seg.last {
                group.complete += 1;
            }
            match p.trajectories.get_mut(&seg.trajectory) {
                Some(t) => {
                    for (out, bytes) in t.data.iter_mut().zip(&seg.data) {
                        out.extend_from_slice(bytes);
                    }
                    for (out, lens) in t.lens.iter_mut().zip(&seg.lens) {
                        out.extend_from_slice(lens);
                    }
                    t.versions.extend_from_slice(&seg.versions);
                    t.metadata.extend_from_slice(&seg.metadata);
                    t.metadata_lens.extend_from_slice(&seg.metadata_lens);
                    t.complete = seg.last;
                }
                None => {
                    group.trajectories.push(seg.trajectory.clone());
                    p.trajectories.insert(
                        seg.trajectory,
                        Trajectory {
                            group: seg.group.clone(),
                            complete: seg.last,
                            data: seg.data,
                            lens: seg.lens,
                            versions: seg.versions,
                            metadata: seg.metadata,
                            metadata_lens: seg.metadata_lens,
                        },
                    );
                }
            }
            if seen.insert(seg.group.clone()) {
                touched.push(seg.group);
            }
        }
        p.steps_open += staged.rows;
        p.stats.steps_submitted += staged.rows as u64;
        for g in touched {
            if self.try_release(p, &g) {
                outcome.groups_completed += 1;
                outcome.groups_dropped_queue_full += self.trim_queue(p);
            }
        }
        Ok(outcome)
    }

    /// Marks `trajectory` complete; returns whether its group became
    /// complete.
    pub(crate) fn complete_trajectory(&self, trajectory: &PoolId) -> Result<bool, RequestError> {
        self.check_open()?;
        let mut pool = self.lock();
        let released = self.complete_in(&mut pool, trajectory, Log::Write)?;
        self.maybe_compact(&mut pool);
        drop(pool);
        if released {
            self.ready.notify_waiters();
        }
        Ok(released)
    }

    fn complete_in(
        &self,
        p: &mut Pool,
        trajectory: &PoolId,
        log: Log,
    ) -> Result<bool, RequestError> {
        let field = match trajectory {
            PoolId::Num(_) => "trajectory_id",
            PoolId::Uid(_) => "trajectory_uid",
        };
        let Some(t) = p.trajectories.get_mut(trajectory) else {
            return Err(RequestError::Precondition {
                reason: format!(
                    "field `{field}`: table `{}` has no open trajectory {trajectory} \
                     (never submitted, or its group was already released or dropped)",
                    self.name
                ),
            });
        };
        if t.complete {
            return Err(RequestError::Precondition {
                reason: format!(
                    "field `{field}`: trajectory {trajectory} of table `{}` is already \
                     complete",
                    self.name
                ),
            });
        }
        if log == Log::Write {
            if let Some(j) = p.journal.as_mut() {
                j.complete(trajectory)
                    .map_err(|e| self.journal_error(j, "append a completion to", e))?;
            }
        }
        let Some(t) = p.trajectories.get_mut(trajectory) else {
            return Ok(false);
        };
        t.complete = true;
        let group = t.group.clone();
        if let Some(g) = p.open.get_mut(&group) {
            g.complete += 1;
        }
        let released = self.try_release(p, &group);
        if released {
            self.trim_queue(p);
        }
        Ok(released)
    }

    /// Moves `group` to the ready queue (or drops it, stale) if it is
    /// complete; returns whether it became ready.
    fn try_release(&self, p: &mut Pool, group: &PoolId) -> bool {
        let size = self.spec.group_size;
        let complete = p
            .open
            .get(group)
            .is_some_and(|g| g.complete == size && g.trajectories.len() == size as usize);
        if !complete {
            return false;
        }
        let Some((group, g)) = p.open.remove_entry(group) else {
            return false;
        };
        let trajectories: Vec<(PoolId, Trajectory)> = g
            .trajectories
            .into_iter()
            .filter_map(|id| p.trajectories.remove(&id).map(|t| (id, t)))
            .collect();
        let oldest_version = trajectories
            .iter()
            .flat_map(|(_, t)| t.versions.iter().copied())
            .min()
            .unwrap_or(0);
        p.steps_open -= g.steps;
        if !self.spec.keep_stale && self.is_stale(p.policy_version, oldest_version) {
            p.stats.groups_dropped_stale += 1;
            return false;
        }
        p.steps_ready += g.steps;
        p.ready.push_back(ReleasedGroup {
            group,
            trajectories,
            steps: g.steps,
            oldest_version,
            table_version: 0,
        });
        true
    }

    /// Drops the oldest ready groups while more than `max_queue_size`
    /// wait; returns how many.
    fn trim_queue(&self, p: &mut Pool) -> u32 {
        let Some(max) = self.spec.max_queue_size else {
            return 0;
        };
        let mut dropped = 0;
        while p.ready.len() > max {
            let Some(old) = p.ready.pop_front() else {
                break;
            };
            p.steps_ready -= old.steps;
            p.stats.groups_dropped_queue_full += 1;
            dropped += 1;
        }
        dropped
    }

    fn is_stale(&self, current: u64, oldest: u64) -> bool {
        self.spec
            .max_lag
            .is_some_and(|max| current.saturating_sub(oldest) > max)
    }

    /// The oldest ready group, taken out of the table. Fails only when the
    /// table's journal cannot record it (the group stays).
    pub fn try_fetch(&self) -> Result<Option<ReleasedGroup>, RequestError> {
        let mut pool = self.lock();
        let g = self.fetch_in(&mut pool, Log::Write)?;
        if g.is_some() {
            self.maybe_compact(&mut pool);
        }
        Ok(g)
    }

    fn fetch_in(&self, p: &mut Pool, log: Log) -> Result<Option<ReleasedGroup>, RequestError> {
        if p.ready.is_empty() {
            return Ok(None);
        }
        if log == Log::Write {
            if let Some(j) = p.journal.as_mut() {
                j.fetch()
                    .map_err(|e| self.journal_error(j, "append a fetch to", e))?;
            }
        }
        let Some(mut g) = p.ready.pop_front() else {
            return Ok(None);
        };
        p.steps_ready -= g.steps;
        p.stats.groups_released += 1;
        p.stats.steps_released += g.steps as u64;
        g.table_version = p.policy_version;
        if self.is_stale(g.table_version, g.oldest_version) {
            // Only with `keep_stale`: otherwise a stale group was dropped.
            p.stats.groups_released_stale += 1;
        }
        Ok(Some(g))
    }

    /// The oldest ready group, waiting up to `timeout` for one; `None`
    /// when none came. Ends with `UNAVAILABLE` when the service closes.
    pub(crate) async fn fetch(
        &self,
        timeout: Duration,
        closing: &mut watch::Receiver<bool>,
    ) -> Result<Option<ReleasedGroup>, RequestError> {
        // A timeout too far to add (`u64::MAX` ms) waits without one.
        let deadline = tokio::time::Instant::now().checked_add(timeout);
        loop {
            // Registered before the check, so a group made ready between
            // the check and the wait still wakes this fetch.
            let notified = self.ready.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            self.check_open()?;
            if let Some(g) = self.try_fetch()? {
                return Ok(Some(g));
            }
            if timeout.is_zero() {
                return Ok(None);
            }
            tokio::select! {
                _ = &mut notified => {}
                _ = until(deadline) => return self.try_fetch(),
                _ = stopping(closing) => return Err(self.closed_error()),
            }
        }
    }

    /// Sets the table's policy version and drops ready groups it makes
    /// stale. Fails only when the table's journal cannot record it.
    pub fn set_policy_version(&self, version: u64) -> Result<(), RequestError> {
        let mut pool = self.lock();
        self.version_in(&mut pool, version, Log::Write)?;
        self.maybe_compact(&mut pool);
        Ok(())
    }

    fn version_in(&self, p: &mut Pool, version: u64, log: Log) -> Result<(), RequestError> {
        if log == Log::Write {
            if let Some(j) = p.journal.as_mut() {
                j.version(version)
                    .map_err(|e| self.journal_error(j, "append a version to", e))?;
            }
        }
        p.policy_version = version;
        if self.spec.max_lag.is_none() || self.spec.keep_stale {
            return Ok(());
        }
        let before = p.ready.len();
        let mut freed = 0;
        p.ready.retain(|g| {
            let stale = self.is_stale(version, g.oldest_version);
            if stale {
                freed += g.steps;
            }
            !stale
        });
        p.steps_ready -= freed;
        p.stats.groups_dropped_stale += (before - p.ready.len()) as u64;
        Ok(())
    }

    /// The table's counters now.
    pub fn stats(&self) -> GroupedStats {
        let p = self.lock();
        GroupedStats {
            policy_version: p.policy_version,
            groups_ready: p.ready.len() as u64,
            groups_open: p.open.len() as u64,
            steps_pending: (p.steps_open + p.steps_ready) as u64,
            steps_ready: p.steps_ready as u64,
            ..p.stats
        }
    }

    /// Refuses later calls with `UNAVAILABLE` and wakes waiting fetches.
    pub fn close(&self) {
        // Release: pairs with the Acquire load in `check_open`.
        self.closed.store(true, Ordering::Release);
        self.ready.notify_waiters();
    }

    pub(crate) fn count_rejected(&self) {
        // Relaxed: a statistic.
        self.rejected_requests.fetch_add(1, Ordering::Relaxed);
    }
}

/// Resolves at `deadline`, or never without one.
async fn until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}
