//! Inference threads: turn batches of step requests into actions.
//!
//! Per batch, each thread:
//! 1. gathers the observations of every request into one preallocated host
//!    buffer (u8 frames stay u8, so an accelerator uploads bytes; f32 is
//!    decoded from little-endian) and makes one tensor `[B, ...obs_shape]`
//!    on the device;
//! 2. gathers the recurrent state `[B, H]` of the rows' env slots (zeroed
//!    where a new episode starts: after `terminated`, after a truncated step,
//!    or on a new run id), when the model is recurrent;
//! 3. runs the current policy snapshot (loaded once per batch), downloads the
//!    `[B, A]` logits once and samples actions on the host;
//! 4. writes the next recurrent state back, offers the whole batch to the
//!    optional [`InferenceSink`] (the unroll builder), releases the envs'
//!    claims and sends one `ActionBatch` per request straight into its
//!    stream's reply channel.
//!
//! The thread also recycles released env slots, telling the sink first.
//! Cost per batch: one host copy of the observations, one tensor upload, one
//! forward, one logits download, one small `Vec` per reply.
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use candle_core::{Device, Tensor};
use seed_shared::codec::read_f32_le_into;
use seed_shared::{pb, EnvSpec, ObsDType};
use tracing::{debug, error};

use crate::batcher::{DynamicBatcher, NextBatch};
use crate::error::LearnerError;
use crate::metrics::Metrics;
use crate::model::{ActionSampler, RecurrentState};
use crate::state_table::{EnvSlot, LeaseId, StateTable};
use crate::step_request::StepRequest;
use crate::weights::{PolicyVersion, WeightsHandle};

/// Receives every inferred batch and every slot release, on the inference
/// thread, before the actions are sent. The unroll builder implements it.
///
/// With `--inference-threads N` there is one sink per thread (see
/// [`SinkFactory`]); rows of one env slot may reach any of them (in step
/// order: a slot never has two steps in flight), and a slot's release is
/// delivered to one sink only, so multi-threaded sinks share per-slot state.
/// Rows carry the slot's [`LeaseId`], which changes whenever the slot is
/// leased again, so stale per-slot data is always detectable.
pub trait InferenceSink: Send {
    /// Called once per batch, after actions are chosen.
    fn on_batch(&mut self, batch: &InferredBatch<'_>);
    /// `slot`'s lease `lease` ended (its stream is gone): drop partial data.
    /// Called before the slot can be leased again.
    fn on_slot_released(&mut self, slot: EnvSlot, lease: LeaseId);
}

/// Makes the sink of inference thread `index`.
pub type SinkFactory = Arc<dyn Fn(usize) -> Box<dyn InferenceSink> + Send + Sync>;

/// One inferred batch, as offered to an [`InferenceSink`].
pub struct InferredBatch<'a> {
    pub policy_version: PolicyVersion,
    pub num_actions: usize,
    /// Recurrent hidden size `H` (0: feed-forward).
    pub state_size: usize,
    /// `[B]` sampled actions.
    pub actions: &'a [u32],
    /// `[B, A]` logits of the behaviour policy.
    pub logits: &'a [f32],
    /// `[B]` value estimates.
    pub values: &'a [f32],
    /// `[B]` this row starts a new episode (its recurrent state was zeroed).
    pub episode_start: &'a [bool],
    /// `[B, H]` recurrent `h` and `c` before the step (empty when feed-forward).
    pub recurrent_h: &'a [f32],
    pub recurrent_c: &'a [f32],
    requests: &'a [StepRequest],
    obs_bytes: usize,
}

/// One env's step within an [`InferredBatch`].
#[derive(Debug, Clone, Copy)]
pub struct InferredRow<'a> {
    pub slot: EnvSlot,
    pub lease: LeaseId,
    pub run_id: u64,
    /// The raw observation bytes as received (little-endian).
    pub observation: &'a [u8],
    pub reward: f32,
    pub terminated: bool,
    pub truncated: bool,
    pub episode_start: bool,
    pub action: u32,
    /// `[A]`
    pub logits: &'a [f32],
    pub value: f32,
    /// `[H]` each, before the step; `None` when feed-forward.
    pub recurrent_h: Option<&'a [f32]>,
    pub recurrent_c: Option<&'a [f32]>,
}

impl<'a> InferredBatch<'a> {
    /// Env rows in the batch.
    pub fn len(&self) -> usize {
        self.actions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.actions.is_empty()
    }

    /// The rows, in batch order (requests in order, then their env indices).
    pub fn rows(&self) -> impl Iterator<Item = InferredRow<'a>> + '_ {
        let (a, h) = (self.num_actions, self.state_size);
        let this: &InferredBatch<'a> = self;
        self.requests
            .iter()
            .flat_map(|req| (0..req.batch.env_indices.len()).map(move |j| (req, j)))
            .enumerate()
            .map(move |(row, (req, j))| {
                let b = &req.batch;
                let env = b.env_indices[j];
                InferredRow {
                    slot: req.claim.slot(env),
                    lease: req.claim.lease().id(),
                    run_id: b.run_ids[j],
                    observation: &b.observations[j * this.obs_bytes..(j + 1) * this.obs_bytes],
                    reward: b.rewards[j],
                    terminated: b.terminated[j],
                    truncated: b.truncated[j],
                    episode_start: this.episode_start[row],
                    action: this.actions[row],
                    logits: &this.logits[row * a..(row + 1) * a],
                    value: this.values[row],
                    recurrent_h: (h > 0).then(|| &this.recurrent_h[row * h..(row + 1) * h]),
                    recurrent_c: (h > 0).then(|| &this.recurrent_c[row * h..(row + 1) * h]),
                }
            })
    }
}

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
}

/// Starts `threads` inference threads; they run until the batcher is closed
/// and drained.
pub fn spawn_inference_threads(
    shared: Arc<InferenceShared>,
    threads: usize,
) -> Result<Vec<JoinHandle<()>>, LearnerError> {
    (0..threads.max(1))
        .map(|index| {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name(format!("inference-{index}"))
                .spawn(move || InferenceWorker::new(&shared, index).run())
                .map_err(|source| LearnerError::Io {
                    what: "spawning an inference thread".into(),
                    source,
                })
        })
        .collect()
}

/// One inference thread's buffers, reused across batches.
struct InferenceWorker<'a> {
    shared: &'a InferenceShared,
    index: usize,
    sink: Option<Box<dyn InferenceSink>>,
    sampler: ActionSampler,
    obs_len: usize,
    /// `[B, ...obs_shape]` with the batch dimension rewritten per batch.
    dims: Vec<usize>,
    obs_f32: Vec<f32>,
    obs_u8: Vec<u8>,
    h: Vec<f32>,
    c: Vec<f32>,
    episode_start: Vec<bool>,
    actions: Vec<u32>,
}

impl<'a> InferenceWorker<'a> {
    fn new(shared: &'a InferenceShared, index: usize) -> Self {
        let max_rows = shared.batcher.config().max_rows;
        let obs_len = shared.spec.obs_len();
        let (f32_cap, u8_cap) = match shared.spec.obs_dtype {
            ObsDType::F32 => (max_rows * obs_len, 0),
            ObsDType::U8 => (0, max_rows * obs_len),
        };
        let h = shared.table.state_size();
        let mut dims = vec![0];
        dims.extend(&shared.spec.obs_shape);
        InferenceWorker {
            shared,
            index,
            sink: shared.sink.as_ref().map(|make| make(index)),
            sampler: ActionSampler::new(shared.seed.wrapping_add(index as u64)),
            obs_len,
            dims,
            obs_f32: vec![0.0; f32_cap],
            obs_u8: vec![0; u8_cap],
            h: vec![0.0; max_rows * h],
            c: vec![0.0; max_rows * h],
            episode_start: Vec::with_capacity(max_rows),
            actions: Vec::with_capacity(max_rows),
        }
    }

    fn run(mut self) {
        let mut consumer = self.shared.batcher.consumer(self.index);
        let mut requests: Vec<StepRequest> = Vec::new();
        loop {
            self.recycle_released();
            let target = self.shared.table.live_slots();
            match consumer.next_batch(&mut requests, target) {
                NextBatch::Closed => break,
                NextBatch::Woken => continue,
                NextBatch::Batch => {
                    if let Err(e) = self.infer(&mut requests) {
                        error!(error = %e, "inference failed; failing the batch's streams");
                        let status = tonic::Status::internal(format!("inference failed: {e}"));
                        for req in requests.drain(..) {
                            let StepRequest { claim, reply, .. } = req;
                            drop(claim);
                            let _ = reply.send(Err(status.clone()));
                        }
                    }
                }
            }
        }
        self.recycle_released();
        debug!(thread = self.index, "inference thread stopped");
    }

    fn recycle_released(&mut self) {
        while let Some(released) = self.shared.table.take_released() {
            if let Some(sink) = self.sink.as_mut() {
                for &slot in released.slots.iter() {
                    sink.on_slot_released(slot, released.lease);
                }
            }
            self.shared.table.recycle(released);
        }
    }

    /// Runs one batch and answers (then drains) its requests.
    fn infer(&mut self, requests: &mut Vec<StepRequest>) -> candle_core::Result<()> {
        let shared = self.shared;
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

        // 3. One upload, one forward, one download.
        self.dims[0] = rows;
        let obs = match shared.spec.obs_dtype {
            ObsDType::F32 => Tensor::from_slice(
                &self.obs_f32[..rows * len],
                self.dims.as_slice(),
                &shared.device,
            )?,
            ObsDType::U8 => Tensor::from_slice(
                &self.obs_u8[..rows * len],
                self.dims.as_slice(),
                &shared.device,
            )?,
        };
        let state = if hsize > 0 {
            Some(RecurrentState {
                h: Tensor::from_slice(&self.h[..rows * hsize], (rows, hsize), &shared.device)?,
                c: Tensor::from_slice(&self.c[..rows * hsize], (rows, hsize), &shared.device)?,
            })
        } else {
            None
        };
        let policy = shared.weights.load();
        let step = policy.model.step(&obs, state.as_ref())?;
        let num_actions = shared.spec.num_actions as usize;
        let logits = step.logits.flatten_all()?.to_vec1::<f32>()?;
        self.actions.clear();
        self.actions.resize(rows, 0);
        self.sampler.sample(&logits, num_actions, &mut self.actions);

        // 4. Recurrent write-back, sink, replies.
        if let Some(next) = &step.state {
            let h = next.h.flatten_all()?.to_vec1::<f32>()?;
            let c = next.c.flatten_all()?.to_vec1::<f32>()?;
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
            let values = step.values.to_vec1::<f32>()?;
            sink.on_batch(&InferredBatch {
                policy_version: policy.version,
                num_actions,
                state_size: hsize,
                actions: &self.actions,
                logits: &logits,
                values: &values,
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
            let msg = pb::LearnerMessage {
                kind: Some(pb::learner_message::Kind::Actions(pb::ActionBatch {
                    seq: batch.seq,
                    actions: self.actions[row..row + k].to_vec(),
                    policy_version: version,
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
