//! Inference threads: turn batches of step requests into actions.
//!
//! Per batch, each thread:
//! 1. gathers the observations of every request into one preallocated host
//!    buffer `[B, ...obs_shape]` (u8 frames stay u8, so an accelerator
//!    uploads bytes; f32 is decoded from little-endian);
//! 2. gathers the recurrent state `[B, H]` of the rows' env slots (zeroed
//!    where a new episode starts: after `terminated`, after a truncated step,
//!    or on a new run id), when the model is recurrent;
//! 3. runs the current policy snapshot (loaded once per batch): an f32
//!    model on the CPU as plain code on the gather buffers, no tensors
//!    ([`crate::model::host_forward`]); any other as one upload, one
//!    forward and one download of the `[B, P]` distribution parameters
//!    ([`crate::model::host_batch`]); then samples actions on the host
//!    (an index per row from a categorical's logits, or `D` unclipped floats
//!    per row from a Gaussian's mean and log-std, sent in
//!    `ActionBatch.continuous_actions`);
//! 4. writes the next recurrent state back, offers the whole batch to the
//!    optional [`InferenceSink`] (the unroll builder), releases the envs'
//!    claims and sends one `ActionBatch` per request straight into its
//!    stream's reply channel.
//!
//! The thread also recycles released env slots, telling the sink first.
//! Thread 0's worker is shared with [`InlineInference`]: a stream task whose
//! request would be flushed alone anyway runs it on that worker itself.
//! Cost per batch: one host copy of the observations, the forward (plus a
//! tensor upload and a parameter download off the CPU), one small `Vec`
//! per reply.
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Instant;

use candle_core::Device;
use seed_shared::codec::read_f32_le_into;
use seed_shared::{pb, EnvSpec, ObsDType};
use tracing::{debug, error};

use crate::error::LearnerError;
use crate::infer::batcher::{Batchable, DynamicBatcher, NextBatch};
use crate::infer::exploration::{EpsilonGreedy, EpsilonSchedule};
use crate::infer::sink::{InferenceSink, InferredBatch, SinkFactory};
use crate::infer::state_table::StateTable;
use crate::infer::step_request::StepRequest;
use crate::metrics::Metrics;
use crate::model::host_forward::{BatchOutputs, HostBatch, HostObs};
use crate::model::weights::WeightsHandle;
use crate::model::{ActionDistribution, ActionSampler};

/// What the inference threads share.
pub struct InferenceShared {
    pub batcher: Arc<DynamicBatcher<StepRequest>>,
    pub table: Arc<StateTable>,
    pub weights: Arc<WeightsHandle>,
    pub metrics: Arc<Metrics>,
    pub spec: EnvSpec,
    pub device: Device,
    pub seed: u64,
    pub sink: Option<SinkFactory>,
    /// Value-based agents (R2D2): ε-greedy on the model's action values per
    /// env slot instead of sampling its distribution.
    pub exploration: Option<EpsilonSchedule>,
}

/// Starts `threads` inference threads; they run until the batcher is closed
/// and drained. Thread 0 shares its worker with the returned
/// [`InlineInference`], which stream tasks use to answer small batches
/// themselves.
pub fn spawn_inference_threads(
    shared: Arc<InferenceShared>,
    threads: usize,
    inline_max_rows: usize,
) -> Result<(Vec<JoinHandle<()>>, InlineInference), LearnerError> {
    let first = Arc::new(Mutex::new(InferenceWorker::new(&shared, 0)));
    // A sink (the unroll builder) may wait on a full replay buffer; that
    // wait must never hold an I/O thread, so with one nothing runs inline.
    let inline_max_rows = if shared.sink.is_some() {
        0
    } else {
        inline_max_rows
    };
    let handles = (0..threads.max(1))
        .map(|index| {
            let shared = Arc::clone(&shared);
            let worker = if index == 0 {
                WorkerHandle::Shared(Arc::clone(&first))
            } else {
                WorkerHandle::Owned(Box::new(InferenceWorker::new(&shared, index)))
            };
            std::thread::Builder::new()
                .name(format!("inference-{index}"))
                .spawn(move || run_thread(&shared, index, worker))
                .map_err(|source| LearnerError::Io {
                    what: "spawning an inference thread".into(),
                    source,
                })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let inline = InlineInference {
        shared,
        worker: first,
        max_rows: inline_max_rows,
    };
    Ok((handles, inline))
}

/// Runs a step batch on the calling thread (a stream task) when that is
/// the fastest way to answer it and delays no one.
///
/// Why: with one actor holding every env slot (a single local actor, or the
/// latency benchmark's one actor x one env) each step batch is flushed alone
/// the moment it arrives, so the batcher only adds two thread hand-offs:
/// stream task -> inference thread, then inference thread -> tokio worker to
/// send the reply. Each costs a cross-core wake-up (27-42 us p50 on a 2-core
/// VM). Running the forward on the stream task removes both.
///
/// A request runs inline only when
/// - its stream holds every active env slot, so no other stream's request
///   can join its batch (the batcher's target is the active slot count less
///   the stream's rows not in the request: it would flush it alone);
/// - its stream has no earlier step batch unanswered (the stream task
///   checks this before calling: an earlier half still in the batcher
///   would otherwise be answered after this one);
/// - it has at most `max_rows` rows (`--inline-max-rows`; a tokio worker
///   blocked on a large forward would stall I/O for its other streams);
/// - there is no [`InferenceSink`] (no training: the unroll builder can
///   block on a full replay buffer, which must not hold an I/O thread);
/// - inference thread 0, whose worker it borrows, is not mid-batch.
///
/// Otherwise it is handed back for the batcher.
pub struct InlineInference {
    shared: Arc<InferenceShared>,
    worker: Arc<Mutex<InferenceWorker>>,
    max_rows: usize,
}

impl InlineInference {
    /// Answers `request` now (`None`), or hands it back when it must go
    /// through the batcher (`Some`).
    pub fn try_infer(&self, request: StepRequest) -> Option<StepRequest> {
        let rows = request.rows();
        if rows > self.max_rows
            || request.claim.lease().slots().len() < self.shared.table.active_slots()
            || self.shared.batcher.is_closed()
        {
            return Some(request);
        }
        // Busy (thread 0 is running a batch) or poisoned (it panicked): the
        // batcher path handles both.
        let Ok(mut worker) = self.worker.try_lock() else {
            return Some(request);
        };
        let mut requests = std::mem::take(&mut worker.inline_requests);
        requests.push(request);
        worker.answer(&self.shared, &mut requests);
        worker.inline_requests = requests;
        self.shared
            .metrics
            .inline_batches
            .fetch_add(1, Ordering::Relaxed);
        None
    }
}

/// An inference thread's worker: its own, or thread 0's, shared with
/// [`InlineInference`].
enum WorkerHandle {
    Owned(Box<InferenceWorker>),
    Shared(Arc<Mutex<InferenceWorker>>),
}

impl WorkerHandle {
    fn with<R>(&mut self, f: impl FnOnce(&mut InferenceWorker) -> R) -> R {
        match self {
            WorkerHandle::Owned(w) => f(w),
            // A panic inside `infer` left the buffers in an unknown state;
            // they are rewritten before every use, so carry on.
            WorkerHandle::Shared(w) => f(&mut w.lock().unwrap_or_else(PoisonError::into_inner)),
        }
    }
}

fn run_thread(shared: &InferenceShared, index: usize, mut worker: WorkerHandle) {
    let mut consumer = shared.batcher.consumer(index);
    let mut requests: Vec<StepRequest> = Vec::new();
    loop {
        worker.with(|w| w.recycle_released(shared));
        // Parking idle actors first makes the target count only envs that
        // can still report (see `infer::state_table`).
        let target = || {
            shared.table.park_idle(Instant::now());
            shared.table.active_slots()
        };
        match consumer.next_batch_with(&mut requests, target) {
            NextBatch::Closed => break,
            NextBatch::Woken => continue,
            NextBatch::Batch => worker.with(|w| w.answer(shared, &mut requests)),
        }
    }
    worker.with(|w| w.recycle_released(shared));
    debug!(thread = index, "inference thread stopped");
}

/// One inference thread's buffers, reused across batches.
struct InferenceWorker {
    index: usize,
    sink: Option<Box<dyn InferenceSink>>,
    sampler: ActionSampler,
    /// ε-greedy per env slot, when the model gives action values.
    exploration: Option<EpsilonGreedy>,
    /// The envs' action distribution (from the spec the actors announce).
    distribution: ActionDistribution,
    obs_len: usize,
    obs_f32: Vec<f32>,
    obs_u8: Vec<u8>,
    h: Vec<f32>,
    c: Vec<f32>,
    episode_start: Vec<bool>,
    /// `[B]` sampled indices (categorical).
    actions: Vec<u32>,
    /// `[B, D]` sampled floats (Gaussian).
    continuous_actions: Vec<f32>,
    /// The batch's distribution parameters, values and next state.
    out: BatchOutputs,
    /// Reused by [`InlineInference`] for its one-request batches.
    inline_requests: Vec<StepRequest>,
}

impl InferenceWorker {
    fn new(shared: &InferenceShared, index: usize) -> Self {
        let max_rows = shared.batcher.config().max_rows;
        let obs_len = shared.spec.obs_len();
        let (f32_cap, u8_cap) = match shared.spec.obs_dtype {
            ObsDType::F32 => (max_rows * obs_len, 0),
            ObsDType::U8 => (0, max_rows * obs_len),
        };
        let h = shared.table.state_size();
        let distribution = ActionDistribution::for_space(&shared.spec.action);
        InferenceWorker {
            index,
            sink: shared.sink.as_ref().map(|make| make(index)),
            sampler: ActionSampler::new(shared.seed.wrapping_add(index as u64)),
            exploration: shared
                .exploration
                .map(|e| EpsilonGreedy::new(e, shared.seed.wrapping_add(index as u64))),
            distribution,
            obs_len,
            obs_f32: vec![0.0; f32_cap],
            obs_u8: vec![0; u8_cap],
            h: vec![0.0; max_rows * h],
            c: vec![0.0; max_rows * h],
            episode_start: Vec::with_capacity(max_rows),
            actions: Vec::with_capacity(max_rows),
            continuous_actions: Vec::with_capacity(max_rows * distribution.continuous_dim()),
            out: BatchOutputs::default(),
            inline_requests: Vec::with_capacity(1),
        }
    }

    /// Infers `requests` and answers (then drains) them; on failure each
    /// of their streams gets an INTERNAL status.
    fn answer(&mut self, shared: &InferenceShared, requests: &mut Vec<StepRequest>) {
        if let Err(e) = self.infer(shared, requests) {
            error!(thread = self.index, error = %e, "inference failed; failing the batch's streams");
            let status = tonic::Status::internal(format!("inference failed: {e}"));
            for req in requests.drain(..) {
                let StepRequest { claim, reply, .. } = req;
                drop(claim);
                let _ = reply.send(Err(status.clone()));
            }
        }
    }

    fn recycle_released(&mut self, shared: &InferenceShared) {
        while let Some(released) = shared.table.take_released() {
            if let Some(sink) = self.sink.as_mut() {
                for &slot in released.slots.iter() {
                    sink.on_slot_released(slot, released.lease);
                }
            }
            shared.table.recycle(released);
        }
    }

    /// Runs one batch and answers (then drains) its requests.
    fn infer(
        &mut self,
        shared: &InferenceShared,
        requests: &mut Vec<StepRequest>,
    ) -> candle_core::Result<()> {
        let rows: usize = requests.iter().map(|r| r.batch.env_indices.len()).sum();
        let len = self.obs_len;
        let hsize = shared.table.state_size();
        let obs_bytes = shared.spec.obs_bytes();
        self.episode_start.clear();
        let mut reset_rows = 0u64;
        match shared.spec.obs_dtype {
            ObsDType::F32 if self.obs_f32.len() < rows * len => {
                self.obs_f32.resize(rows * len, 0.0)
            }
            ObsDType::U8 if self.obs_u8.len() < rows * len => self.obs_u8.resize(rows * len, 0),
            _ => {}
        }
        if self.h.len() < rows * hsize {
            self.h.resize(rows * hsize, 0.0);
            self.c.resize(rows * hsize, 0.0);
        }

        // 1-2. Gather observations and per-slot state.
        let mut row = 0;
        for req in requests.iter_mut() {
            let b = &req.batch;
            let k = b.env_indices.len();
            match shared.spec.obs_dtype {
                ObsDType::F32 => read_f32_le_into(
                    &b.observations,
                    &mut self.obs_f32[row * len..(row + k) * len],
                ),
                ObsDType::U8 => {
                    self.obs_u8[row * len..(row + k) * len].copy_from_slice(&b.observations)
                }
            }
            for j in 0..k {
                let state = req.claim.slot_state(b.env_indices[j]);
                let run_id = b.run_ids[j];
                if state.after_truncation {
                    reset_rows += 1;
                }
                let start =
                    b.terminated[j] || state.after_truncation || state.run_id != Some(run_id);
                state.run_id = Some(run_id);
                state.after_truncation = b.truncated[j];
                self.episode_start.push(start);
                if hsize > 0 {
                    let (h, c) = (
                        &mut self.h[(row + j) * hsize..(row + j + 1) * hsize],
                        &mut self.c[(row + j) * hsize..(row + j + 1) * hsize],
                    );
                    if start {
                        h.fill(0.0);
                        c.fill(0.0);
                    } else {
                        h.copy_from_slice(&state.recurrent[..hsize]);
                        c.copy_from_slice(&state.recurrent[hsize..]);
                    }
                }
            }
            row += k;
        }
        debug_assert_eq!(row, rows);

        // 3. The forward: plain code over the gather buffers for an f32
        // CPU model, one upload, forward and download otherwise
        // (`model::host_batch`).
        let policy = shared.weights.load();
        let obs = match shared.spec.obs_dtype {
            ObsDType::F32 => HostObs::F32(&self.obs_f32[..rows * len]),
            ObsDType::U8 => HostObs::U8(&self.obs_u8[..rows * len]),
        };
        let batch = HostBatch {
            obs,
            rows,
            h: &self.h[..rows * hsize],
            c: &self.c[..rows * hsize],
        };
        policy.forward_batch(&batch, &shared.device, self.sink.is_some(), &mut self.out)?;
        let distribution = self.distribution;
        if self.out.params.len() != rows * distribution.param_width() {
            candle_core::bail!(
                "the policy gave {} distribution parameters for {rows} rows of a {distribution}",
                self.out.params.len()
            );
        }
        self.actions.clear();
        self.continuous_actions.clear();
        match distribution {
            ActionDistribution::Categorical { num_actions } => match &mut self.exploration {
                None => {
                    self.actions.resize(rows, 0);
                    self.sampler
                        .sample(&self.out.params, num_actions, &mut self.actions);
                }
                Some(explore) => {
                    let mut rows = self.out.params.chunks_exact(num_actions);
                    for req in requests.iter() {
                        for &env in &req.batch.env_indices {
                            let q = rows.next().unwrap_or(&[]);
                            let slot = req.claim.slot(env).0 as usize;
                            self.actions.push(explore.choose(q, slot));
                        }
                    }
                }
            },
            ActionDistribution::Gaussian { dim } => {
                self.continuous_actions.resize(rows * dim, 0.0);
                self.sampler
                    .sample_gaussian(&self.out.params, dim, &mut self.continuous_actions);
            }
        }
        let dim = distribution.continuous_dim();

        // 4. Recurrent write-back, sink, replies.
        if hsize > 0 {
            let (h, c) = (&self.out.h, &self.out.c);
            let mut row = 0;
            for req in requests.iter_mut() {
                for j in 0..req.batch.env_indices.len() {
                    let state = req.claim.slot_state(req.batch.env_indices[j]);
                    let r = row + j;
                    state.recurrent[..hsize].copy_from_slice(&h[r * hsize..(r + 1) * hsize]);
                    state.recurrent[hsize..].copy_from_slice(&c[r * hsize..(r + 1) * hsize]);
                }
                row += req.batch.env_indices.len();
            }
        }
        if let Some(mut sink) = self.sink.take() {
            sink.on_batch(&InferredBatch {
                policy_version: policy.version,
                distribution,
                state_size: hsize,
                actions: &self.actions,
                continuous_actions: &self.continuous_actions,
                policy_params: &self.out.params,
                values: &self.out.values,
                episode_start: &self.episode_start,
                recurrent_h: &self.h[..rows * hsize],
                recurrent_c: &self.c[..rows * hsize],
                requests,
                obs_bytes,
            });
            self.sink = Some(sink);
        }

        let version = policy.version.0;
        let metrics = &shared.metrics;
        let now = Instant::now();
        let mut row = 0;
        let answered = requests.len() as u64;
        for req in requests.drain(..) {
            let StepRequest {
                batch,
                claim,
                reply,
                received_at,
            } = req;
            let k = batch.env_indices.len();
            // Release the envs before the actor can see their actions, so
            // its next step for them never finds them still claimed.
            drop(claim);
            // One of the two is empty: the other kind's buffer.
            let (actions, continuous_actions) = if dim == 0 {
                (self.actions[row..row + k].to_vec(), Vec::new())
            } else {
                (
                    Vec::new(),
                    self.continuous_actions[row * dim..(row + k) * dim].to_vec(),
                )
            };
            let msg = pb::LearnerMessage {
                kind: Some(pb::learner_message::Kind::Actions(pb::ActionBatch {
                    seq: batch.seq,
                    actions,
                    policy_version: version,
                    continuous_actions,
                })),
            };
            // A closed channel means the stream already ended; nothing to do.
            let _ = reply.send(Ok(msg));
            metrics
                .step_latency
                .record(now.saturating_duration_since(received_at).as_micros() as u64);
            row += k;
        }
        metrics
            .action_batches
            .fetch_add(answered, Ordering::Relaxed);
        metrics.inference_batches.fetch_add(1, Ordering::Relaxed);
        metrics
            .inference_rows
            .fetch_add(rows as u64, Ordering::Relaxed);
        metrics.inference_batch_rows.record(rows as u64);
        metrics
            .env_steps
            .fetch_add(rows as u64 - reset_rows, Ordering::Relaxed);
        metrics.policy_version.store(version, Ordering::Relaxed);
        Ok(())
    }
}
