//! Unroll assembly: per env slot, the steps inference produced become
//! fixed-length trajectories ("unrolls") for the replay buffer.
//!
//! An unroll holds `T + 1` consecutive steps of one env (`[T+1, ...]` per
//! field, the wire's step-aligned convention; see `algo/transitions.rs`):
//! `T` transitions to train on plus the bootstrap step, whose value closes
//! the last one. Consecutive unrolls of a slot overlap by one step: the
//! bootstrap step of one is step 0 of the next, so no transition is lost.
//!
//! Trajectories are never glued: a row whose lease (a new actor stream on a
//! reused slot) or run id (a restarted env) differs from the builder's
//! restarts it, and a released slot drops its partial unroll. Episode ends
//! inside an unroll are fine; `terminated`/`truncated`/`episode_start` say
//! where they are.
//!
//! # Threads and ownership
//! [`UnrollSink`] implements the inference hook. With several inference
//! threads, steps of one slot may reach any of them, so the per-slot
//! builders live in one shared [`UnrollAssembler`]. A slot has at most one
//! step in flight (its claim bit in the state table), so two threads never
//! want the same builder at once; a per-slot ownership flag makes that
//! invariant checked rather than assumed, and orders one thread's writes
//! before the next one's reads. No mutex is taken on this path.
//!
//! # Backpressure
//! A completed unroll is inserted with the buffer's writer policy. A full
//! buffer under `Block` (the FIFO sampler) or a rate limiter that holds
//! inserts (the reusing samplers: samples per insert) makes the inference
//! thread wait, so actions come back later and actors slow to the trainer's
//! pace, as in SEED. An insert that times out drops the unroll
//! (`unroll/dropped_full`) instead of stalling the learner forever.
//! Inserts go through [`UnrollStore`]: with a remote table
//! (`--replay-addr`) the unroll is queued for a writer task instead, and
//! inference waits only for room in that queue while the server holds
//! inserts back (`crate::replay::remote_writer`).
//!
//! # Action kinds
//! A categorical policy's unrolls hold `actions` (`[T+1]` u32) and
//! `behaviour_logits` (`[T+1, A]`); a Gaussian policy's hold
//! `continuous_actions` (`[T+1, D]` f32, the unclipped samples) and
//! `behaviour_mean_log_std` (`[T+1, 2D]`): the behaviour policy's parameters,
//! from which the learner recomputes `log μ(a_t|x_t)` with the same code as
//! `log π` (`crate::model::distribution`). The other fields are shared.
//!
//! Cost per row: a copy of its observation, distribution parameters, action
//! and a few scalars into the slot's builder. Per completed unroll: one replay insert (a copy of
//! `T + 1` steps) and one copy of the bootstrap step to the front.
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_utils::Backoff;
use seed_shared::ObsDType;
use tracing::warn;

use crate::infer::sink::{InferenceSink, InferredBatch, InferredRow, SampledAction, SinkFactory};
use crate::infer::state_table::{EnvSlot, LeaseId};
use crate::model::weights::PolicyVersion;
use crate::model::ActionDistribution;
use crate::unroll_store::{InsertOutcome, UnrollStore};
use seed_replay::{DType, FieldRef, ItemLayout, ReplayError, Values};

/// Field names of an unroll in the replay buffer (and of the collated
/// training batch).
pub mod fields {
    /// `[T+1, ...obs_shape]`, u8 or f32 (raw observation bytes).
    pub const OBS: &str = "obs";
    /// `[T+1]` u32 (categorical policies): the action taken at each step
    /// (row `T` is the next unroll's first action; a step after truncation
    /// has a dummy action).
    pub const ACTIONS: &str = "actions";
    /// `[T+1, D]` f32 (Gaussian policies): the sampled, unclipped action of
    /// each step, as [`ACTIONS`] otherwise.
    pub const CONTINUOUS_ACTIONS: &str = "continuous_actions";
    /// `[T+1]` f32: reward received on the transition into each step.
    pub const REWARDS: &str = "rewards";
    /// `[T+1]` u8 (0/1): the transition into this step terminated.
    pub const TERMINATED: &str = "terminated";
    /// `[T+1]` u8 (0/1): this step is a truncated episode's final observation.
    pub const TRUNCATED: &str = "truncated";
    /// `[T+1]` f32 (0/1): the recurrent state was zeroed before this step.
    pub const EPISODE_START: &str = "episode_start";
    /// `[T+1, A]` f32 (categorical policies): logits of the policy that
    /// chose each action.
    pub const BEHAVIOUR_LOGITS: &str = "behaviour_logits";
    /// `[T+1, 2D]` f32 (Gaussian policies): mean (first `D`) and log-std
    /// (last `D`) of the policy that chose each action.
    pub const BEHAVIOUR_MEAN_LOG_STD: &str = "behaviour_mean_log_std";
    /// `[]` u64: the oldest policy version in the unroll.
    pub const POLICY_VERSION: &str = "policy_version";
    /// `[H]` f32 each: recurrent state before step 0 (recurrent models only).
    pub const INITIAL_H: &str = "initial_h";
    pub const INITIAL_C: &str = "initial_c";
}

/// Shape of the unrolls a learner builds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnrollSpec {
    /// `T`: transitions per unroll (the unroll holds `T + 1` steps).
    pub unroll_length: usize,
    pub obs_shape: Vec<usize>,
    pub obs_dtype: ObsDType,
    /// The policy's action distribution: which action and behaviour fields
    /// the unroll has, and their widths.
    pub action: ActionDistribution,
    /// Recurrent hidden size `H`; 0 for feed-forward models.
    pub state_size: usize,
    /// Steps between the starts of consecutive unrolls of one env slot, in
    /// `1..=T`: `T` (V-trace) shares only the bootstrap step; `T / 2`
    /// (R2D2) overlaps sequences by half.
    pub stride: usize,
}

impl UnrollSpec {
    /// Steps per unroll, `T + 1`.
    pub fn steps(&self) -> usize {
        self.unroll_length + 1
    }

    /// [`stride`](Self::stride) clamped into `1..=T`.
    pub fn clamped_stride(&self) -> usize {
        self.stride.clamp(1, self.unroll_length.max(1))
    }

    /// Elements in one observation.
    pub fn obs_len(&self) -> usize {
        self.obs_shape.iter().product()
    }

    /// Replay dtype of the observation field.
    pub fn obs_replay_dtype(&self) -> DType {
        match self.obs_dtype {
            ObsDType::U8 => DType::U8,
            ObsDType::F32 => DType::F32,
        }
    }

    /// Bytes in one observation.
    pub fn obs_bytes(&self) -> usize {
        self.obs_len() * self.obs_replay_dtype().size()
    }

    /// The field of the actions taken: [`fields::ACTIONS`] or
    /// [`fields::CONTINUOUS_ACTIONS`].
    pub fn action_field(&self) -> &'static str {
        match self.action {
            ActionDistribution::Categorical { .. } => fields::ACTIONS,
            ActionDistribution::Gaussian { .. } => fields::CONTINUOUS_ACTIONS,
        }
    }

    /// The field of the behaviour policy's parameters:
    /// [`fields::BEHAVIOUR_LOGITS`] or [`fields::BEHAVIOUR_MEAN_LOG_STD`].
    pub fn behaviour_field(&self) -> &'static str {
        match self.action {
            ActionDistribution::Categorical { .. } => fields::BEHAVIOUR_LOGITS,
            ActionDistribution::Gaussian { .. } => fields::BEHAVIOUR_MEAN_LOG_STD,
        }
    }

    /// The fields with a time axis (`[T+1, ...]`), in layout order.
    pub fn time_fields(&self) -> [&'static str; 7] {
        [
            fields::OBS,
            self.action_field(),
            fields::REWARDS,
            fields::TERMINATED,
            fields::TRUNCATED,
            fields::EPISODE_START,
            self.behaviour_field(),
        ]
    }

    /// The replay item layout of one unroll (field order = insert order).
    pub fn layout(&self) -> Result<ItemLayout, ReplayError> {
        let s = self.steps();
        let mut obs_shape = vec![s];
        obs_shape.extend(&self.obs_shape);
        let b = ItemLayout::builder().field(fields::OBS, self.obs_replay_dtype(), &obs_shape);
        let b = match self.action {
            ActionDistribution::Categorical { .. } => b.field(fields::ACTIONS, DType::U32, &[s]),
            ActionDistribution::Gaussian { dim } => {
                b.field(fields::CONTINUOUS_ACTIONS, DType::F32, &[s, dim])
            }
        };
        let mut b = b
            .field(fields::REWARDS, DType::F32, &[s])
            .field(fields::TERMINATED, DType::U8, &[s])
            .field(fields::TRUNCATED, DType::U8, &[s])
            .field(fields::EPISODE_START, DType::F32, &[s])
            .field(
                self.behaviour_field(),
                DType::F32,
                &[s, self.action.param_width()],
            )
            .field(fields::POLICY_VERSION, DType::U64, &[])
            .policy_version_field(fields::POLICY_VERSION);
        if self.state_size > 0 {
            b = b
                .field(fields::INITIAL_H, DType::F32, &[self.state_size])
                .field(fields::INITIAL_C, DType::F32, &[self.state_size]);
        }
        b.build()
    }
}

/// Collects one env slot's steps into unrolls of `T + 1` steps.
///
/// Feed it rows with [`push`](Self::push); when it reports a complete unroll,
/// read it with [`fields`](Self::fields) (insert it), then call
/// [`advance`](Self::advance), which keeps the last `T + 1 − stride` steps
/// (with `stride = T`: the bootstrap step) as the start of the next unroll,
/// with the recurrent state before its first step.
#[derive(Debug, Clone)]
pub struct UnrollBuilder {
    steps: usize,
    obs_bytes: usize,
    /// `P`: behaviour parameters per step.
    param_width: usize,
    /// `D`: floats per continuous action; 0 for a categorical policy.
    action_dim: usize,
    state_size: usize,
    /// Steps dropped from the front by [`advance`](Self::advance).
    stride: usize,
    /// Steps at the front that a previous unroll already held.
    carried: usize,
    obs_dtype: DType,
    /// Whose steps these are; a row of another lease or run restarts us.
    owner: Option<(LeaseId, u64)>,
    /// Steps filled, `0..=steps`.
    len: usize,
    obs: Vec<u8>,
    /// `[T+1]` (categorical) or empty.
    actions: Vec<u32>,
    /// `[T+1, D]` (Gaussian) or empty.
    continuous_actions: Vec<f32>,
    rewards: Vec<f32>,
    terminated: Vec<u8>,
    truncated: Vec<u8>,
    episode_start: Vec<f32>,
    /// `[T+1, P]`: the behaviour policy's distribution parameters.
    behaviour: Vec<f32>,
    versions: Vec<u64>,
    /// `[T+1, H]`: the recurrent state before each step; row 0 is stored
    /// with the unroll.
    states_h: Vec<f32>,
    states_c: Vec<f32>,
    /// `[oldest version]`, written when the unroll completes.
    version_out: [u64; 1],
    shapes: FieldShapes,
}

/// Item shapes (no batch dim) borrowed by [`FieldRef`]s.
#[derive(Debug, Clone)]
struct FieldShapes {
    obs: Vec<usize>,
    steps: [usize; 1],
    continuous_actions: [usize; 2],
    behaviour: [usize; 2],
    state: [usize; 1],
}

impl UnrollBuilder {
    pub fn new(spec: &UnrollSpec) -> Self {
        let s = spec.steps();
        let h = spec.state_size;
        let mut obs = vec![s];
        obs.extend(&spec.obs_shape);
        let (p, d) = (spec.action.param_width(), spec.action.continuous_dim());
        UnrollBuilder {
            steps: s,
            obs_bytes: spec.obs_bytes(),
            param_width: p,
            action_dim: d,
            state_size: h,
            stride: spec.clamped_stride(),
            carried: 0,
            obs_dtype: spec.obs_replay_dtype(),
            owner: None,
            len: 0,
            obs: vec![0; s * spec.obs_bytes()],
            actions: vec![0; if d == 0 { s } else { 0 }],
            continuous_actions: vec![0.0; s * d],
            rewards: vec![0.0; s],
            terminated: vec![0; s],
            truncated: vec![0; s],
            episode_start: vec![0.0; s],
            behaviour: vec![0.0; s * p],
            versions: vec![0; s],
            states_h: vec![0.0; s * h],
            states_c: vec![0.0; s * h],
            version_out: [0],
            shapes: FieldShapes {
                obs,
                steps: [s],
                continuous_actions: [s, d],
                behaviour: [s, p],
                state: [h],
            },
        }
    }

    /// Steps collected towards the current unroll.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Forgets the partial unroll (a released slot).
    pub fn reset(&mut self) {
        self.len = 0;
        self.carried = 0;
        self.owner = None;
    }

    /// Appends one step produced by policy `version`. Returns `true` when the
    /// unroll is complete (`T + 1` steps): read [`fields`](Self::fields), then
    /// call [`advance`](Self::advance) before the next push. A row of another
    /// lease or run than the steps before it restarts the builder from that
    /// row ([`PushOutcome::Restarted`] when real steps were lost).
    pub fn push(&mut self, row: &InferredRow<'_>, version: PolicyVersion) -> PushOutcome {
        let mut outcome = PushOutcome::Partial;
        let owner = Some((row.lease, row.run_id));
        if self.owner != owner {
            if self.len > self.carried.max(1) {
                // Steps carried from the previous unroll were already
                // stored; more than those is a lost partial.
                outcome = PushOutcome::Restarted {
                    discarded: self.len,
                };
            }
            self.len = 0;
            self.carried = 0;
            self.owner = owner;
        }
        debug_assert!(
            self.len < self.steps,
            "advance() not called after a complete unroll"
        );
        let i = self.len;
        let ob = self.obs_bytes;
        // A row of the wrong size is a bug upstream (the server validates
        // shapes); copy what fits rather than panic on the inference thread.
        let n = row.observation.len().min(ob);
        self.obs[i * ob..i * ob + n].copy_from_slice(&row.observation[..n]);
        match (row.action, self.action_dim) {
            (SampledAction::Discrete(a), 0) => self.actions[i] = a,
            (SampledAction::Continuous(xs), d) if d > 0 => {
                let dst = &mut self.continuous_actions[i * d..(i + 1) * d];
                let m = xs.len().min(d);
                dst[..m].copy_from_slice(&xs[..m]);
                dst[m..].fill(0.0);
            }
            // An action of the other kind is a bug upstream as well: record
            // a zero action.
            (_, 0) => self.actions[i] = 0,
            (_, d) => self.continuous_actions[i * d..(i + 1) * d].fill(0.0),
        }
        self.rewards[i] = row.reward;
        self.terminated[i] = row.terminated as u8;
        self.truncated[i] = row.truncated as u8;
        self.episode_start[i] = if row.episode_start { 1.0 } else { 0.0 };
        let p = self.param_width;
        let m = row.policy_params.len().min(p);
        self.behaviour[i * p..i * p + m].copy_from_slice(&row.policy_params[..m]);
        self.versions[i] = version.0;
        let h = self.state_size;
        if h > 0 {
            copy_state(&mut self.states_h[i * h..(i + 1) * h], row.recurrent_h);
            copy_state(&mut self.states_c[i * h..(i + 1) * h], row.recurrent_c);
        }
        self.len += 1;
        if self.len == self.steps {
            // The oldest version, so the measured lag is never underestimated.
            self.version_out[0] = self.versions.iter().copied().min().unwrap_or(version.0);
            return PushOutcome::Complete;
        }
        outcome
    }

    /// The oldest policy version of the complete unroll.
    pub fn policy_version(&self) -> PolicyVersion {
        PolicyVersion(self.version_out[0])
    }

    /// The complete unroll as replay fields, in [`UnrollSpec::layout`] order.
    /// Only meaningful right after `push` returned [`PushOutcome::Complete`].
    pub fn fields(&self) -> UnrollFields<'_> {
        let sh = &self.shapes;
        let mut refs = [FieldRef::new(&[], Values::U64(&[])); 10];
        refs[0] = FieldRef::new(
            &sh.obs,
            Values::Raw {
                dtype: self.obs_dtype,
                bytes: &self.obs,
            },
        );
        refs[1] = if self.action_dim == 0 {
            FieldRef::new(&sh.steps, Values::U32(&self.actions))
        } else {
            FieldRef::new(
                &sh.continuous_actions,
                Values::F32(&self.continuous_actions),
            )
        };
        refs[2] = FieldRef::new(&sh.steps, Values::F32(&self.rewards));
        refs[3] = FieldRef::new(&sh.steps, Values::U8(&self.terminated));
        refs[4] = FieldRef::new(&sh.steps, Values::U8(&self.truncated));
        refs[5] = FieldRef::new(&sh.steps, Values::F32(&self.episode_start));
        refs[6] = FieldRef::new(&sh.behaviour, Values::F32(&self.behaviour));
        refs[7] = FieldRef::new(&[], Values::U64(&self.version_out));
        let mut count = 8;
        if self.state_size > 0 {
            let h = self.state_size;
            refs[8] = FieldRef::new(&sh.state, Values::F32(&self.states_h[..h]));
            refs[9] = FieldRef::new(&sh.state, Values::F32(&self.states_c[..h]));
            count = 10;
        }
        UnrollFields { refs, count }
    }

    /// Starts the next unroll with steps `stride..=T` of this one as its
    /// first steps (with `stride = T`: the bootstrap step as step 0), and
    /// the recurrent state before step `stride` as its initial state.
    pub fn advance(&mut self) {
        if self.len < self.steps {
            return;
        }
        let (from, keep) = (self.stride, self.steps - self.stride);
        fn shift<T: Copy>(v: &mut [T], width: usize, from: usize) {
            if !v.is_empty() {
                v.copy_within(from * width.., 0);
            }
        }
        shift(&mut self.obs, self.obs_bytes, from);
        shift(&mut self.actions, 1, from);
        shift(&mut self.continuous_actions, self.action_dim, from);
        shift(&mut self.rewards, 1, from);
        shift(&mut self.terminated, 1, from);
        shift(&mut self.truncated, 1, from);
        shift(&mut self.episode_start, 1, from);
        shift(&mut self.behaviour, self.param_width, from);
        shift(&mut self.versions, 1, from);
        shift(&mut self.states_h, self.state_size, from);
        shift(&mut self.states_c, self.state_size, from);
        self.len = keep;
        self.carried = keep;
    }
}

fn copy_state(dst: &mut [f32], src: Option<&[f32]>) {
    match src {
        Some(s) if s.len() == dst.len() => dst.copy_from_slice(s),
        _ => dst.fill(0.0),
    }
}

/// What [`UnrollBuilder::push`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushOutcome {
    /// The step was added; the unroll is not complete yet.
    Partial,
    /// The step completed the unroll.
    Complete,
    /// The row belonged to another lease or run: the previous partial
    /// unroll (`discarded` steps) was dropped and the builder restarted
    /// from this row.
    Restarted { discarded: usize },
}

/// The fields of one complete unroll, ready for `ReplayBuffer::insert_ref`.
pub struct UnrollFields<'a> {
    refs: [FieldRef<'a>; 10],
    count: usize,
}

impl<'a> UnrollFields<'a> {
    pub fn as_slice(&self) -> &[FieldRef<'a>] {
        &self.refs[..self.count]
    }
}

/// Counters of unroll assembly (metric keys `unroll/<name>`). Relaxed:
/// independent monotonic counters, read only for reporting.
#[derive(Debug, Default)]
pub struct UnrollStats {
    /// Unrolls completed by builders.
    pub completed: AtomicU64,
    /// Unrolls the replay buffer accepted.
    pub inserted: AtomicU64,
    /// Unrolls dropped because the buffer stayed full for the whole timeout.
    pub dropped_full: AtomicU64,
    /// Unrolls dropped for any other insert error (closed buffer, ...).
    pub dropped_error: AtomicU64,
    /// Partial unrolls dropped (released slot, new lease or run id).
    pub dropped_partial: AtomicU64,
    /// Microseconds inference spent waiting in inserts (backpressure).
    pub insert_wait_us: AtomicU64,
}

/// One slot's builder and its ownership flag.
struct SlotBuilder {
    /// Set while one thread uses `builder`. Acquired with a CAS (Acquire)
    /// and cleared with a Release store, so one thread's writes to the
    /// builder happen before the next owner's reads.
    busy: AtomicBool,
    builder: UnsafeCell<Option<Box<UnrollBuilder>>>,
}

// SAFETY: `builder` is only touched between a successful Acquire CAS of
// `busy` from false to true and the Release store of false (`with_slot`).
unsafe impl Sync for SlotBuilder {}

/// The per-slot builders of a learner and where their unrolls go.
pub struct UnrollAssembler {
    spec: UnrollSpec,
    slots: Box<[SlotBuilder]>,
    store: UnrollStore,
    /// How long an insert waits for room (the `Block` writer or the rate
    /// limiter); `None`: the writer policy's own timeout.
    insert_timeout: Option<Duration>,
    pub stats: UnrollStats,
}

impl UnrollAssembler {
    /// Builders for `max_env_slots` slots (allocated on a slot's first step)
    /// feeding `store`, whose layout must be `spec.layout()`. An insert
    /// into the in-process buffer waits up to `insert_timeout` for room, in
    /// a full `Block` buffer or at the rate limiter (`None`: the writer
    /// policy's own timeout, so an overwriting buffer's limiter refuses at
    /// once); a remote table's insert never waits (`crate::unroll_store`).
    pub fn new(
        spec: UnrollSpec,
        max_env_slots: usize,
        store: UnrollStore,
        insert_timeout: Option<Duration>,
    ) -> Arc<Self> {
        Arc::new(UnrollAssembler {
            spec,
            slots: (0..max_env_slots)
                .map(|_| SlotBuilder {
                    busy: AtomicBool::new(false),
                    builder: UnsafeCell::new(None),
                })
                .collect(),
            store,
            insert_timeout,
            stats: UnrollStats::default(),
        })
    }

    pub fn spec(&self) -> &UnrollSpec {
        &self.spec
    }

    /// A factory making one [`UnrollSink`] per inference thread.
    pub fn sink_factory(self: &Arc<Self>) -> SinkFactory {
        let this = Arc::clone(self);
        Arc::new(move |_index| {
            Box::new(UnrollSink {
                assembler: Arc::clone(&this),
            }) as Box<dyn InferenceSink>
        })
    }

    /// Runs `f` on `slot`'s builder with exclusive access.
    fn with_slot<R>(
        &self,
        slot: EnvSlot,
        f: impl FnOnce(&mut Option<Box<UnrollBuilder>>) -> R,
    ) -> Option<R> {
        let cell = self.slots.get(slot.0 as usize)?;
        let backoff = Backoff::new();
        // Never contended in practice (one step in flight per slot); the
        // loop only covers the hand-off between two inference threads.
        while cell
            .busy
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            backoff.snooze();
        }
        // SAFETY: we own `busy` (module docs), so no one else touches the cell.
        let r = f(unsafe { &mut *cell.builder.get() });
        // Release: pairs with the Acquire CAS of the next owner.
        cell.busy.store(false, Ordering::Release);
        Some(r)
    }

    fn on_row(&self, row: &InferredRow<'_>, version: PolicyVersion) {
        let spec = &self.spec;
        let stats = &self.stats;
        let store = &self.store;
        let insert_timeout = self.insert_timeout;
        self.with_slot(row.slot, |b| {
            let b = b.get_or_insert_with(|| Box::new(UnrollBuilder::new(spec)));
            match b.push(row, version) {
                PushOutcome::Partial => {}
                PushOutcome::Restarted { .. } => {
                    stats.dropped_partial.fetch_add(1, Ordering::Relaxed);
                }
                PushOutcome::Complete => {
                    stats.completed.fetch_add(1, Ordering::Relaxed);
                    let started = Instant::now();
                    let outcome = store.insert(b.fields().as_slice(), insert_timeout);
                    stats
                        .insert_wait_us
                        .fetch_add(started.elapsed().as_micros() as u64, Ordering::Relaxed);
                    match outcome {
                        InsertOutcome::Stored => {
                            stats.inserted.fetch_add(1, Ordering::Relaxed);
                        }
                        // Counted by the remote table when acknowledged.
                        InsertOutcome::Queued => {}
                        InsertOutcome::DroppedFull => {
                            stats.dropped_full.fetch_add(1, Ordering::Relaxed);
                        }
                        InsertOutcome::DroppedClosed => {
                            stats.dropped_error.fetch_add(1, Ordering::Relaxed);
                        }
                        InsertOutcome::Refused(e) => {
                            if stats.dropped_error.fetch_add(1, Ordering::Relaxed) == 0 {
                                warn!(error = %e, "replay refused an unroll (logged once)");
                            }
                        }
                    }
                    b.advance();
                }
            }
        });
    }
}

/// The inference hook of one inference thread: routes rows to the shared
/// [`UnrollAssembler`].
pub struct UnrollSink {
    assembler: Arc<UnrollAssembler>,
}

impl InferenceSink for UnrollSink {
    fn on_batch(&mut self, batch: &InferredBatch<'_>) {
        for row in batch.rows() {
            self.assembler.on_row(&row, batch.policy_version);
        }
    }

    fn on_slot_released(&mut self, slot: EnvSlot, _lease: LeaseId) {
        let stats = &self.assembler.stats;
        self.assembler.with_slot(slot, |b| {
            if let Some(b) = b.as_mut() {
                if b.len() > 1 {
                    stats.dropped_partial.fetch_add(1, Ordering::Relaxed);
                }
                b.reset();
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use seed_replay::{ReplayBuffer, ReplayConfig, SamplerConfig};

    fn spec(t: usize, h: usize) -> UnrollSpec {
        UnrollSpec {
            unroll_length: t,
            obs_shape: vec![2],
            obs_dtype: ObsDType::F32,
            action: ActionDistribution::Categorical { num_actions: 2 },
            state_size: h,
            stride: t,
        }
    }

    /// Step `k` of a synthetic env: observation `[k, -k]`, action `k % 2`,
    /// reward `k`, logits `[k, 0]`, recurrent state `[k; H]`.
    struct Step {
        obs: Vec<u8>,
        logits: [f32; 2],
        h: Vec<f32>,
    }

    impl Step {
        fn new(k: u32, hsize: usize) -> Self {
            let mut obs = Vec::new();
            obs.extend((k as f32).to_le_bytes());
            obs.extend((-(k as f32)).to_le_bytes());
            Step {
                obs,
                logits: [k as f32, 0.0],
                h: vec![k as f32; hsize],
            }
        }

        fn row(&self, k: u32, lease: u64, run: u64) -> InferredRow<'_> {
            let hs = (!self.h.is_empty()).then_some(self.h.as_slice());
            InferredRow {
                slot: EnvSlot(0),
                lease: LeaseId(lease),
                run_id: run,
                observation: &self.obs,
                reward: k as f32,
                terminated: false,
                truncated: false,
                episode_start: k == 0,
                action: SampledAction::Discrete(k % 2),
                policy_params: &self.logits,
                value: 0.0,
                recurrent_h: hs,
                recurrent_c: hs,
            }
        }
    }

    fn buffer(spec: &UnrollSpec) -> Arc<ReplayBuffer> {
        Arc::new(
            ReplayBuffer::new(
                spec.layout().unwrap(),
                ReplayConfig::new(16, SamplerConfig::Fifo),
            )
            .unwrap(),
        )
    }

    fn f32s(bytes: &[u8]) -> Vec<f32> {
        bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    }

    #[test]
    fn consecutive_unrolls_overlap_by_one_step_and_carry_the_state() {
        let s = spec(3, 2);
        let replay = buffer(&s);
        let mut b = UnrollBuilder::new(&s);
        let mut completed = 0;
        for k in 0..7u32 {
            let step = Step::new(k, 2);
            // Versions rise with k, so the oldest is the first step's.
            if b.push(&step.row(k, 1, 5), PolicyVersion(10 + k as u64)) == PushOutcome::Complete {
                replay.insert_ref(b.fields().as_slice()).unwrap();
                b.advance();
                completed += 1;
            }
        }
        // Steps 0..=3 and 3..=6: two unrolls, one step (3) shared.
        assert_eq!(completed, 2);
        let mut batch = replay.new_batch(2);
        replay.sample_into(&mut batch, 2).unwrap();
        let rewards = f32s(batch.field(fields::REWARDS).unwrap());
        assert_eq!(rewards, [0.0, 1.0, 2.0, 3.0, 3.0, 4.0, 5.0, 6.0]);
        let obs = f32s(batch.field(fields::OBS).unwrap());
        assert_eq!(&obs[8..10], &[3.0, -3.0], "second unroll starts at step 3");
        assert_eq!(batch.policy_versions(), &[10, 13]);
        let h = f32s(batch.field(fields::INITIAL_H).unwrap());
        assert_eq!(h, [0.0, 0.0, 3.0, 3.0], "state before each unroll's step 0");
        let actions = batch.field(fields::ACTIONS).unwrap();
        assert_eq!(actions.len(), 2 * 4 * 4);
        let starts = f32s(batch.field(fields::EPISODE_START).unwrap());
        assert_eq!(starts, [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
    }

    /// R2D2's sequences: with `T = 4` and stride 2, consecutive unrolls
    /// share three steps, each stores the recurrent state before its own
    /// first step, and a lease change after a carried prefix loses nothing.
    #[test]
    fn half_stride_sequences_overlap_by_half_and_store_their_start_state() {
        let s = UnrollSpec {
            stride: 2,
            ..spec(4, 1)
        };
        let replay = buffer(&s);
        let mut b = UnrollBuilder::new(&s);
        let mut completed = 0;
        for k in 0..9u32 {
            let step = Step::new(k, 1);
            if b.push(&step.row(k, 1, 5), PolicyVersion(k as u64)) == PushOutcome::Complete {
                replay.insert_ref(b.fields().as_slice()).unwrap();
                b.advance();
                completed += 1;
            }
        }
        // Steps 0..=4, 2..=6, 4..=8.
        assert_eq!(completed, 3);
        let mut batch = replay.new_batch(3);
        replay.sample_into(&mut batch, 3).unwrap();
        let rewards = f32s(batch.field(fields::REWARDS).unwrap());
        let want: Vec<f32> = [0, 1, 2, 3, 4, 2, 3, 4, 5, 6, 4, 5, 6, 7, 8]
            .iter()
            .map(|&k| k as f32)
            .collect();
        assert_eq!(rewards, want);
        let h = f32s(batch.field(fields::INITIAL_H).unwrap());
        assert_eq!(
            h,
            [0.0, 2.0, 4.0],
            "the state before each sequence's first step"
        );
        assert_eq!(batch.policy_versions(), &[0, 2, 4]);
        // The builder now holds steps 6..=8 (carried); a new lease drops them
        // without counting a loss.
        let step = Step::new(0, 1);
        assert_eq!(
            b.push(&step.row(0, 2, 5), PolicyVersion(9)),
            PushOutcome::Partial
        );
    }

    #[test]
    fn oldest_version_is_reported_even_if_versions_are_not_monotonic() {
        let s = spec(2, 0);
        let mut b = UnrollBuilder::new(&s);
        let versions = [7, 5, 9];
        let mut out = PushOutcome::Partial;
        for (k, v) in versions.iter().enumerate() {
            let step = Step::new(k as u32, 0);
            out = b.push(&step.row(k as u32, 1, 1), PolicyVersion(*v));
        }
        assert_eq!(out, PushOutcome::Complete);
        assert_eq!(b.policy_version(), PolicyVersion(5));
    }

    #[test]
    fn a_new_run_id_or_lease_restarts_instead_of_gluing() {
        let s = spec(3, 0);
        let mut b = UnrollBuilder::new(&s);
        for k in 0..2u32 {
            let st = Step::new(k, 0);
            assert_eq!(
                b.push(&st.row(k, 1, 5), PolicyVersion(0)),
                PushOutcome::Partial
            );
        }
        let st = Step::new(2, 0);
        assert_eq!(
            b.push(&st.row(2, 1, 6), PolicyVersion(0)),
            PushOutcome::Restarted { discarded: 2 },
            "new run id"
        );
        assert_eq!(b.len(), 1);
        let st = Step::new(3, 0);
        assert_eq!(
            b.push(&st.row(3, 2, 6), PolicyVersion(0)),
            PushOutcome::Partial,
            "new lease with a single step behind it: nothing lost"
        );
        assert_eq!(b.len(), 1);
        // Three more steps of the new owner complete an unroll that starts at step 3.
        for k in 4..7u32 {
            let st = Step::new(k, 0);
            let out = b.push(&st.row(k, 2, 6), PolicyVersion(0));
            assert_eq!(out == PushOutcome::Complete, k == 6);
        }
        let f = b.fields();
        let rewards = match f.as_slice()[2].values {
            Values::F32(r) => r.to_vec(),
            _ => unreachable!(),
        };
        assert_eq!(rewards, [3.0, 4.0, 5.0, 6.0]);
    }

    #[test]
    fn layout_has_state_fields_only_when_recurrent() {
        assert!(spec(4, 0)
            .layout()
            .unwrap()
            .field(fields::INITIAL_H)
            .is_none());
        let l = spec(4, 8).layout().unwrap();
        assert_eq!(l.field(fields::INITIAL_C).unwrap().1.shape(), &[8]);
        assert_eq!(
            l.field(fields::BEHAVIOUR_LOGITS).unwrap().1.shape(),
            &[5, 2]
        );
    }

    #[test]
    fn gaussian_unrolls_carry_actions_and_behaviour_parameters() {
        let s = UnrollSpec {
            action: ActionDistribution::Gaussian { dim: 2 },
            ..spec(2, 0)
        };
        let l = s.layout().unwrap();
        assert!(l.field(fields::ACTIONS).is_none());
        assert!(l.field(fields::BEHAVIOUR_LOGITS).is_none());
        assert_eq!(
            l.field(fields::CONTINUOUS_ACTIONS).unwrap().1.shape(),
            &[3, 2]
        );
        assert_eq!(
            l.field(fields::BEHAVIOUR_MEAN_LOG_STD).unwrap().1.shape(),
            &[3, 4]
        );
        assert_eq!(s.time_fields()[1], fields::CONTINUOUS_ACTIONS);
        assert_eq!(s.time_fields()[6], fields::BEHAVIOUR_MEAN_LOG_STD);

        let replay = buffer(&s);
        let mut b = UnrollBuilder::new(&s);
        for k in 0..5u32 {
            let step = Step::new(k, 0);
            let x = k as f32;
            let action = [x, -x];
            let params = [x, 0.0, -1.0, -2.0];
            let row = InferredRow {
                action: SampledAction::Continuous(&action),
                policy_params: &params,
                ..step.row(k, 1, 1)
            };
            if b.push(&row, PolicyVersion(0)) == PushOutcome::Complete {
                replay.insert_ref(b.fields().as_slice()).unwrap();
                b.advance();
            }
        }
        let mut batch = replay.new_batch(2);
        replay.sample_into(&mut batch, 2).unwrap();
        let actions = f32s(batch.field(fields::CONTINUOUS_ACTIONS).unwrap());
        // Steps 0..=2 and 2..=4.
        let want: Vec<f32> = [0.0f32, 1.0, 2.0, 2.0, 3.0, 4.0]
            .iter()
            .flat_map(|&x| [x, -x])
            .collect();
        assert_eq!(actions, want);
        let behaviour = f32s(batch.field(fields::BEHAVIOUR_MEAN_LOG_STD).unwrap());
        assert_eq!(
            &behaviour[12..16],
            &[2.0, 0.0, -1.0, -2.0],
            "bootstrap step carried"
        );
    }

    #[test]
    fn assembler_drops_the_partial_unroll_of_a_released_slot() {
        let s = spec(2, 0);
        let replay = buffer(&s);
        let asm = UnrollAssembler::new(s, 4, UnrollStore::from(Arc::clone(&replay)), None);
        let mut sink = (asm.sink_factory())(0);
        let row_at = |asm: &UnrollAssembler, k: u32, lease: u64| {
            let st = Step::new(k, 0);
            asm.on_row(&st.row(k, lease, 1), PolicyVersion(0));
        };
        row_at(&asm, 0, 1);
        row_at(&asm, 1, 1);
        sink.on_slot_released(EnvSlot(0), LeaseId(1));
        assert_eq!(asm.stats.dropped_partial.load(Ordering::Relaxed), 1);
        // The same lease id cannot come back, but even if steps continued
        // the builder starts from scratch: two more steps are not enough.
        row_at(&asm, 2, 1);
        row_at(&asm, 3, 1);
        assert_eq!(replay.stats().inserted, 0);
        row_at(&asm, 4, 1);
        assert_eq!(replay.stats().inserted, 1);
        assert_eq!(asm.stats.inserted.load(Ordering::Relaxed), 1);
    }
}
