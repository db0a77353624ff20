//! Prefetch threads: sample `B` unrolls from the replay buffer (in process,
//! or a remote table's sample stream: `crate::unroll_store`), collate them
//! time-major onto the training device, and keep a small bounded queue of
//! ready batches ahead of the trainer, so the trainer never waits on copies.
//!
//! The replay buffer hands out items batch-major (`[B, T+1, ...]` per field);
//! the model and the loss want time-major `[T+1, B, ...]`. [`Collator`]
//! transposes each field into one preallocated host buffer (one `memcpy` per
//! `(t, b)` row) and uploads it with a single `Tensor::from_raw_buffer` per
//! field: no per-unroll tensors, no `stack`.
//!
//! [`Prefetcher::next`] measures how long the trainer waits for a batch
//! (`train/wait_fraction` in the reports); a trainer that waits often is
//! starved by the actors, one that never waits is the bottleneck.
//!
//! Cost per batch: one sample (a copy of `B` items), one transpose copy, one
//! upload per field (8 to 10), one channel hand-off.
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use candle_core::{Device, Tensor};
use crossbeam::channel::{bounded, Receiver, RecvTimeoutError, SendTimeoutError, Sender};
use tracing::{debug, error};

use crate::error::LearnerError;
use crate::learn::unroll::{fields, UnrollSpec};
use crate::model::RecurrentState;
use crate::unroll_store::{SampleFailure, SampledUnrolls, UnrollSampler, UnrollStore};
use seed_replay::{DType, ItemKey, ItemLayout, ReplayError};

/// How often blocked prefetch threads re-check the stop flag.
const POLL: Duration = Duration::from_millis(50);

/// One collated batch of `B` unrolls on the training device, time-major.
#[derive(Debug, Clone)]
pub struct TrainBatch {
    /// `[T+1, B, ...obs_shape]`, u8 or f32.
    pub obs: Tensor,
    /// `[T+1, B]` u32 (categorical policies) or `[T+1, B, D]` f32
    /// (Gaussian policies: the unclipped samples).
    pub actions: Tensor,
    /// `[T+1, B]` f32.
    pub rewards: Tensor,
    /// `[T+1, B]` u8.
    pub terminated: Tensor,
    /// `[T+1, B]` u8.
    pub truncated: Tensor,
    /// `[T+1, B]` f32.
    pub episode_start: Tensor,
    /// `[T+1, B, P]` f32: the behaviour policy's distribution parameters
    /// (logits, or means then log-stds).
    pub behaviour_params: Tensor,
    /// `[B, H]` each, recurrent models only.
    pub initial_state: Option<RecurrentState>,
    /// `[B]` oldest policy version of each unroll.
    pub policy_versions: Vec<u64>,
    /// `[B]` replay keys of the unrolls (priority write-back).
    pub keys: Vec<ItemKey>,
    /// `[B]` importance weights (prioritized sampling; 1 otherwise).
    pub weights: Vec<f32>,
}

impl TrainBatch {
    /// Unrolls in the batch, `B`.
    pub fn len(&self) -> usize {
        self.policy_versions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.policy_versions.is_empty()
    }
}

/// Turns sampled batches (in-process or remote, [`SampledUnrolls`]) into
/// [`TrainBatch`]es, reusing its host buffers.
pub struct Collator {
    spec: UnrollSpec,
    /// `spec.layout()`: the sampled fields' shapes and dtypes (a remote
    /// table's were checked equal at start-up).
    layout: ItemLayout,
    device: Device,
    /// The fields that carry a time axis ([`UnrollSpec::time_fields`]).
    time_fields: [&'static str; 7],
    /// One time-major host buffer per field of `time_fields`, sized for
    /// `max_rows`.
    host: Vec<Vec<u8>>,
}

impl Collator {
    pub fn new(spec: UnrollSpec, device: Device, max_rows: usize) -> Result<Self, ReplayError> {
        let layout = spec.layout()?;
        let time_fields = spec.time_fields();
        let host = time_fields
            .iter()
            .map(|name| {
                let bytes = layout.field(name).map_or(0, |(_, f)| f.num_bytes());
                vec![0u8; bytes * max_rows]
            })
            .collect();
        Ok(Collator {
            spec,
            layout,
            device,
            time_fields,
            host,
        })
    }

    /// Collates the rows of `batch` (any count up to `max_rows`).
    pub fn collate(&mut self, batch: &dyn SampledUnrolls) -> Result<TrainBatch, CollateError> {
        let n = batch.rows();
        let s = self.spec.steps();
        let p = self.spec.action.param_width();
        let mut tensors = Vec::with_capacity(self.time_fields.len());
        for (i, &name) in self.time_fields.iter().enumerate() {
            let (_, f) = self
                .layout
                .field(name)
                .ok_or(CollateError::MissingField(name))?;
            let src = batch.field(name).ok_or(CollateError::MissingField(name))?;
            // Per-step row: everything after the time axis.
            let row = f.num_bytes() / s;
            let dst = &mut self.host[i][..n * s * row];
            if src.len() < n * s * row {
                return Err(CollateError::ShortField(name));
            }
            for b in 0..n {
                for t in 0..s {
                    let from = (b * s + t) * row;
                    let to = (t * n + b) * row;
                    dst[to..to + row].copy_from_slice(&src[from..from + row]);
                }
            }
            let mut shape = vec![s, n];
            shape.extend_from_slice(&f.shape()[1..]);
            let dtype = candle_dtype(f.dtype()).ok_or(CollateError::MissingField(name))?;
            tensors.push(Tensor::from_raw_buffer(dst, dtype, &shape, &self.device)?);
        }
        let initial_state = if self.spec.state_size > 0 {
            let h = self.spec.state_size;
            let load = |name: &'static str| -> Result<Tensor, CollateError> {
                let src = batch.field(name).ok_or(CollateError::MissingField(name))?;
                let src = src.get(..n * h * 4).ok_or(CollateError::ShortField(name))?;
                Ok(Tensor::from_raw_buffer(
                    src,
                    candle_core::DType::F32,
                    &[n, h],
                    &self.device,
                )?)
            };
            Some(RecurrentState {
                h: load(fields::INITIAL_H)?,
                c: load(fields::INITIAL_C)?,
            })
        } else {
            None
        };
        let mut it = tensors.into_iter();
        let mut next = || it.next().ok_or(CollateError::MissingField("?"));
        let out = TrainBatch {
            obs: next()?,
            actions: next()?,
            rewards: next()?,
            terminated: next()?,
            truncated: next()?,
            episode_start: next()?,
            behaviour_params: next()?,
            initial_state,
            policy_versions: batch.policy_versions().to_vec(),
            keys: batch.keys(),
            weights: batch.weights().to_vec(),
        };
        debug_assert_eq!(out.behaviour_params.dims(), &[s, n, p]);
        Ok(out)
    }
}

fn candle_dtype(d: DType) -> Option<candle_core::DType> {
    Some(match d {
        DType::U8 | DType::Bool => candle_core::DType::U8,
        DType::U32 => candle_core::DType::U32,
        DType::F32 => candle_core::DType::F32,
        DType::I64 => candle_core::DType::I64,
        DType::F64 => candle_core::DType::F64,
        DType::I32 | DType::U64 => return None,
    })
}

/// Why a batch could not be collated.
#[derive(Debug, thiserror::Error)]
pub enum CollateError {
    #[error("sampled batch lacks field `{0}`")]
    MissingField(&'static str),
    #[error("sampled field `{0}` is shorter than its layout")]
    ShortField(&'static str),
    #[error("upload: {0}")]
    Tensor(#[from] candle_core::Error),
}

/// Prefetch settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrefetchConfig {
    /// `B`: unrolls per training batch.
    pub batch_size: usize,
    /// Ready batches kept ahead of the trainer.
    pub queue_depth: usize,
    /// Prefetch threads.
    pub threads: usize,
}

/// Counters of the prefetch side (`prefetch/<name>`); Relaxed, reporting only.
#[derive(Debug, Default)]
pub struct PrefetchStats {
    /// Batches handed to the trainer.
    pub batches: AtomicU64,
    /// Microseconds the trainer spent waiting in [`Prefetcher::next`].
    pub trainer_wait_us: AtomicU64,
    /// Batches that came back short (lag-capped items dropped).
    pub short_batches: AtomicU64,
    /// Local batches sampled without waiting, and the microseconds their
    /// sampling took (the sampling cost alone; see `UnrollSampler`).
    pub timed_samples: AtomicU64,
    pub sample_us: AtomicU64,
}

/// Why [`Prefetcher::next`] returned no batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NextBatchError {
    #[error("no batch ready in time")]
    Timeout,
    #[error("the prefetch threads stopped")]
    Closed,
}

/// The running prefetch threads and the queue they fill.
pub struct Prefetcher {
    rx: Receiver<TrainBatch>,
    stop: Arc<AtomicBool>,
    /// Taken once by [`join`](Prefetcher::join); a mutex because the
    /// prefetcher is shared (trainer, reports) and joined by reference.
    handles: Mutex<Vec<JoinHandle<()>>>,
    pub stats: Arc<PrefetchStats>,
}

impl Prefetcher {
    /// Starts `config.threads` threads sampling `store` (whose layout is
    /// `spec.layout()`) onto `device`.
    pub fn spawn(
        store: &UnrollStore,
        spec: &UnrollSpec,
        device: &Device,
        config: PrefetchConfig,
    ) -> Result<Self, LearnerError> {
        let (tx, rx) = bounded(config.queue_depth.max(1));
        let stop = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(PrefetchStats::default());
        let mut handles = Vec::new();
        for index in 0..config.threads.max(1) {
            let collator = Collator::new(spec.clone(), device.clone(), config.batch_size)
                .map_err(|e| LearnerError::Config(format!("unroll layout: {e}")))?;
            let worker = PrefetchWorker {
                sampler: UnrollSampler::new(store, config.batch_size)
                    .map_err(|e| LearnerError::Config(format!("--replay-addr: {e}")))?,
                collator,
                batch_size: config.batch_size,
                tx: tx.clone(),
                stop: Arc::clone(&stop),
                stats: Arc::clone(&stats),
            };
            handles.push(
                std::thread::Builder::new()
                    .name(format!("prefetch-{index}"))
                    .spawn(move || worker.run())
                    .map_err(|source| LearnerError::Io {
                        what: "spawning a prefetch thread".into(),
                        source,
                    })?,
            );
        }
        Ok(Prefetcher {
            rx,
            stop,
            handles: Mutex::new(handles),
            stats,
        })
    }

    /// The next ready batch, waiting up to `timeout`; the wait is counted
    /// in `trainer_wait_us`.
    pub fn next(&self, timeout: Duration) -> Result<TrainBatch, NextBatchError> {
        let started = Instant::now();
        let r = self.rx.recv_timeout(timeout);
        self.stats
            .trainer_wait_us
            .fetch_add(started.elapsed().as_micros() as u64, Ordering::Relaxed);
        match r {
            Ok(b) => {
                self.stats.batches.fetch_add(1, Ordering::Relaxed);
                Ok(b)
            }
            Err(RecvTimeoutError::Timeout) => Err(NextBatchError::Timeout),
            Err(RecvTimeoutError::Disconnected) => Err(NextBatchError::Closed),
        }
    }

    /// Batches ready in the queue (`prefetch/queue_depth`).
    pub fn queue_len(&self) -> usize {
        self.rx.len()
    }

    /// Asks the threads to stop (they also stop when the buffer closes).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Stops and joins the threads (once; later calls return at once).
    pub fn join(&self) {
        self.stop();
        // Drain so no thread stays blocked on a full queue.
        while self.rx.try_recv().is_ok() {}
        let handles = std::mem::take(&mut *self.handles.lock().unwrap_or_else(|p| p.into_inner()));
        for h in handles {
            let _ = h.join();
        }
    }
}

struct PrefetchWorker {
    sampler: UnrollSampler,
    collator: Collator,
    batch_size: usize,
    tx: Sender<TrainBatch>,
    /// Relaxed: a plain request flag; the thread re-checks it every POLL.
    stop: Arc<AtomicBool>,
    stats: Arc<PrefetchStats>,
}

impl PrefetchWorker {
    fn run(mut self) {
        while !self.stop.load(Ordering::Relaxed) {
            let batch = match self.sampler.next(POLL) {
                Ok(b) => b,
                Err(SampleFailure::Closed) => break,
                Err(SampleFailure::NotYet) => continue,
                Err(SampleFailure::Failed(e)) => {
                    error!(error = %e, "prefetch: sampling failed; stopping");
                    break;
                }
            };
            if batch.rows() == 0 {
                continue;
            }
            if batch.rows() < self.batch_size {
                self.stats.short_batches.fetch_add(1, Ordering::Relaxed);
            }
            let collated = match self.collator.collate(batch) {
                Ok(b) => b,
                Err(e) => {
                    error!(error = %e, "prefetch: collation failed; stopping");
                    break;
                }
            };
            // Read after collation, which ends the batch's borrow of the sampler.
            if let Some(cost) = self.sampler.last_sample_cost() {
                self.stats.timed_samples.fetch_add(1, Ordering::Relaxed);
                self.stats
                    .sample_us
                    .fetch_add(cost.as_micros() as u64, Ordering::Relaxed);
            }
            let mut ready = collated;
            loop {
                match self.tx.send_timeout(ready, POLL) {
                    Ok(()) => break,
                    Err(SendTimeoutError::Timeout(b)) => {
                        if self.stop.load(Ordering::Relaxed) {
                            return;
                        }
                        ready = b;
                    }
                    Err(SendTimeoutError::Disconnected(_)) => return,
                }
            }
        }
        debug!("prefetch thread stopped");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use seed_replay::{FieldRef, ReplayBuffer, ReplayConfig, SamplerConfig, Values};
    use seed_shared::ObsDType;

    #[test]
    fn collation_is_time_major_and_keeps_every_value() {
        let spec = UnrollSpec {
            unroll_length: 2,
            obs_shape: vec![2],
            obs_dtype: ObsDType::U8,
            action: crate::model::ActionDistribution::Categorical { num_actions: 3 },
            state_size: 1,
            stride: 2,
        };
        let replay = ReplayBuffer::new(
            spec.layout().unwrap(),
            ReplayConfig::new(4, SamplerConfig::Fifo),
        )
        .unwrap();
        // Unroll b, step t: obs [10b+t, 100], action t, reward b, logits [b, t, 0].
        for b in 0..2u8 {
            let obs: Vec<u8> = (0..3).flat_map(|t| [10 * b + t, 100]).collect();
            let actions: Vec<u32> = (0..3).collect();
            let rewards = [f32::from(b); 3];
            let flags = [0u8; 3];
            let starts = [0f32; 3];
            let logits: Vec<f32> = (0..3).flat_map(|t| [f32::from(b), t as f32, 0.0]).collect();
            let h = [f32::from(b) + 0.5];
            replay
                .insert_ref(&[
                    FieldRef::new(&[3, 2], Values::U8(&obs)),
                    FieldRef::new(&[3], Values::U32(&actions)),
                    FieldRef::new(&[3], Values::F32(&rewards)),
                    FieldRef::new(&[3], Values::U8(&flags)),
                    FieldRef::new(&[3], Values::U8(&flags)),
                    FieldRef::new(&[3], Values::F32(&starts)),
                    FieldRef::new(&[3, 3], Values::F32(&logits)),
                    FieldRef::new(&[], Values::U64(&[u64::from(b) + 7])),
                    FieldRef::new(&[1], Values::F32(&h)),
                    FieldRef::new(&[1], Values::F32(&h)),
                ])
                .unwrap();
        }
        let mut sample = replay.new_batch(2);
        replay.sample_into(&mut sample, 2).unwrap();
        let mut c = Collator::new(spec, Device::Cpu, 2).unwrap();
        let tb = c.collate(&sample).unwrap();
        assert_eq!(tb.keys, sample.keys());
        assert_eq!(tb.obs.dims(), &[3, 2, 2]);
        let obs = tb.obs.to_vec3::<u8>().unwrap();
        assert_eq!(obs[2][1], vec![12, 100], "step 2 of unroll 1");
        assert_eq!(obs[1][0], vec![1, 100]);
        let rewards = tb.rewards.to_vec2::<f32>().unwrap();
        assert_eq!(rewards, vec![vec![0.0, 1.0]; 3]);
        let actions = tb.actions.to_vec2::<u32>().unwrap();
        assert_eq!(actions, vec![vec![0, 0], vec![1, 1], vec![2, 2]]);
        let logits = tb.behaviour_params.to_vec3::<f32>().unwrap();
        assert_eq!(logits[2][1], vec![1.0, 2.0, 0.0]);
        let h = tb.initial_state.unwrap().h.to_vec2::<f32>().unwrap();
        assert_eq!(h, vec![vec![0.5], vec![1.5]]);
        assert_eq!(tb.policy_versions, vec![7, 8]);
    }
}
