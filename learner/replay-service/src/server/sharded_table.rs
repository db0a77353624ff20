//! [`ShardedTable`]: several mapped table directories (shards), written by
//! different servers, served as one read-only table.
//!
//! # Loading
//! A table with `load: [DIR, ...]` in the config (or `--load [TABLE=]DIR`)
//! opens each directory with `ReplayBuffer::open_mapped` (items, keys and
//! the consumed marks survive; priorities restart at the maximum: see the
//! buffer's docs). Before anything is mapped, each directory's header is
//! checked against the config: every field's name, dtype and shape, the
//! policy-version field and the capacity must agree, and a difference stops
//! the start with an error naming the table, the shard, its directory and
//! the field. A directory is one shard only once (by its canonical path).
//!
//! # Sampling across shards
//! A batch of `n` is split between the shards in proportion to their mass
//! with systematic sampling (one uniform offset, `n` equally spaced points
//! over the shards' cumulative mass), so shard `i` gets `n * m_i / M`
//! items rounded up or down, never a lopsided draw; each shard then samples
//! its share with its own sampler. The rows of a batch come shard by shard
//! (shard 0's first). The mass `m_i` is:
//! - `uniform`: the items stored in shard `i`, so every stored item of the
//!   union is equally likely;
//! - `recent { window }`: `min(window, stored_i)`. The window is **per
//!   shard**: each shard's `window` newest items, and uniform over the
//!   union of those windows. Why per shard: items carry no clock, and the
//!   shards' keys count separately from 0, so "newest over the union"
//!   has no meaning the data supports; shards written side by side (one per
//!   collector, RLinf's per-rank buffers) have windows from the same stretch
//!   of time, which is what a recent window is for.
//! - `prioritized`: the shard's priority mass `sum p^alpha`
//!   (`ReplayBuffer::priority_mass`), so `P(i) = p_i^alpha / sum` over the
//!   union, and each shard's importance weights are rescaled by
//!   `(min_all / min_shard)^beta` so they share one normalisation (the
//!   smallest priority over all shards), as one buffer's would.
//!
//! # Keys
//! A key is `shard << 56 | local key`: unique across shards, stable, and
//! `UpdatePriorities` routes each key to its shard by its top 8 bits (hence
//! at most 256 shards; a local key needs 2^56 inserts to overflow, and a
//! sampled one that would is refused rather than mislabelled).
//!
//! # Read-only
//! A loaded table refuses `Insert` and `Checkpoint` (`FAILED_PRECONDITION`):
//! its directories belong to the runs that wrote them, and appending to one
//! of them would change another run's data. Priorities (kept in memory,
//! not in the directories), the policy version for the lag cap, and the
//! counters are the only state that changes. The directories must not be
//! served by another process at the same time (one process per mapped
//! directory, as for any mapped table).
//!
//! Cost: per batch, one mass read per shard (a lock of the sum tree for
//! prioritized, a load otherwise), the shards' own samples into one reused
//! scratch batch, and one copy of the rows into the reply.
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use seed_replay::{ItemKey, ItemLayout, ReplayBuffer, ReplayError, SampleBatch, SamplerConfig};
use tracing::info;

use crate::config::TableSpec;
use crate::error::{RequestError, ServeError};
use crate::pb::{
    SampleReply, ShardInfo, TableInfo, UpdatePrioritiesReply, UpdatePrioritiesRequest,
};
use crate::server::field_block::field_block_with_offsets;
use crate::server::layout_info;
use crate::server::reply_size::{max_item_bytes, reply_bytes, too_big, OFFSET_BYTES};
use crate::server::sample_source::SampleSource;
use crate::server::sample_stream::{self, SamplePlan};
use crate::wire_dtype;

/// The shard index sits above this bit of a key.
pub const SHARD_KEY_SHIFT: u32 = 56;
const LOCAL_KEY_MASK: u64 = (1 << SHARD_KEY_SHIFT) - 1;

/// The key a client sees for `local` of shard `shard`, or `None` when the
/// local key does not fit below the shard bits.
pub fn shard_key(shard: usize, local: u64) -> Option<u64> {
    (local <= LOCAL_KEY_MASK).then_some(((shard as u64) << SHARD_KEY_SHIFT) | local)
}

/// (shard, local key) of a key a client sent.
pub fn split_key(key: u64) -> (usize, u64) {
    ((key >> SHARD_KEY_SHIFT) as usize, key & LOCAL_KEY_MASK)
}

/// One loaded directory.
#[derive(Debug)]
pub struct Shard {
    pub dir: PathBuf,
    pub buffer: ReplayBuffer,
}

/// Loaded shards served as one read-only table.
#[derive(Debug)]
pub struct ShardedTable {
    pub(crate) name: String,
    shards: Vec<Shard>,
    layout: ItemLayout,
    sampler: SamplerConfig,
    /// Draws of the split's random offset (a splitmix64 sequence): Relaxed
    /// `fetch_add`, each draw needs only a distinct counter value.
    draws: AtomicU64,
    seed: u64,
    pub(crate) sample_streams: AtomicU64,
    pub(crate) flow_control_waits: AtomicU64,
    pub(crate) rejected_requests: AtomicU64,
}

impl ShardedTable {
    /// Checks every directory's header against `spec`, then opens them all.
    pub fn open(spec: TableSpec) -> Result<ShardedTable, ServeError> {
        let shard_err = |shard: usize, dir: &Path, reason: String| ServeError::Shard {
            table: spec.name.clone(),
            shard,
            dir: dir.to_owned(),
            reason,
        };
        let mut seen: Vec<PathBuf> = Vec::with_capacity(spec.load.len());
        for (i, dir) in spec.load.iter().enumerate() {
            let (layout, capacity) =
                ReplayBuffer::mapped_layout(dir).map_err(|e| shard_err(i, dir, e.to_string()))?;
            if let Some(d) = layout_difference(&spec.layout, &layout) {
                return Err(shard_err(i, dir, d));
            }
            if capacity != spec.replay.capacity {
                return Err(shard_err(
                    i,
                    dir,
                    format!(
                        "`capacity`: {capacity} in the directory, {} in the config",
                        spec.replay.capacity
                    ),
                ));
            }
            let canonical = dir
                .canonicalize()
                .map_err(|e| shard_err(i, dir, e.to_string()))?;
            if let Some(j) = seen.iter().position(|c| *c == canonical) {
                return Err(shard_err(
                    i,
                    dir,
                    format!("the same directory as shard {j}"),
                ));
            }
            seen.push(canonical);
        }
        let mut shards = Vec::with_capacity(spec.load.len());
        for (i, dir) in spec.load.iter().enumerate() {
            let config = spec
                .replay
                .clone()
                .with_seed(spec.replay.seed.wrapping_add(i as u64));
            let buffer = ReplayBuffer::open_mapped(dir, config)
                .map_err(|e| shard_err(i, dir, e.to_string()))?;
            info!(table = %spec.name, shard = i, dir = %dir.display(), items = buffer.len(), "loaded shard");
            shards.push(Shard {
                dir: dir.clone(),
                buffer,
            });
        }
        Ok(ShardedTable {
            name: spec.name,
            shards,
            layout: spec.layout,
            sampler: spec.replay.sampler,
            draws: AtomicU64::new(0),
            seed: spec.replay.seed,
            sample_streams: AtomicU64::new(0),
            flow_control_waits: AtomicU64::new(0),
            rejected_requests: AtomicU64::new(0),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn shards(&self) -> &[Shard] {
        &self.shards
    }

    /// Items stored over all shards.
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.buffer.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A scratch batch for samples of up to `max_rows` items.
    pub fn new_sharded_batch(&self, max_rows: usize) -> ShardedBatch {
        ShardedBatch {
            scratch: SampleBatch::new(&self.layout, max_rows),
            fields: self
                .layout
                .fields()
                .iter()
                .map(|f| Vec::with_capacity(max_rows * f.num_bytes()))
                .collect(),
            offsets: self
                .layout
                .fields()
                .iter()
                .map(|f| f.is_variable().then(|| vec![0]))
                .collect(),
            keys: Vec::with_capacity(max_rows),
            weights: Vec::with_capacity(max_rows),
            policy_versions: Vec::with_capacity(max_rows),
            masses: vec![(0.0, 0.0); self.shards.len()],
            counts: vec![0; self.shards.len()],
        }
    }

    /// Samples `n` items across the shards into `batch` (module docs).
    /// `NotEnoughItems` when every shard is empty.
    pub fn sample_into(&self, batch: &mut ShardedBatch, n: usize) -> Result<(), ReplayError> {
        batch.clear();
        if n > batch.scratch.max_rows() {
            return Err(ReplayError::TooLarge {
                requested: n,
                limit: batch.scratch.max_rows(),
            });
        }
        for (m, s) in batch.masses.iter_mut().zip(&self.shards) {
            *m = self.mass(&s.buffer);
        }
        let total: f64 = batch.masses.iter().map(|m| m.0).sum();
        if total <= 0.0 || n == 0 {
            return Err(ReplayError::NotEnoughItems {
                requested: n,
                available: 0,
            });
        }
        self.split(batch, n, total);
        let min_all = batch
            .masses
            .iter()
            .filter(|m| m.0 > 0.0)
            .map(|m| m.1)
            .fold(f64::INFINITY, f64::min);
        for (i, shard) in self.shards.iter().enumerate() {
            let count = batch.counts[i];
            if count == 0 {
                continue;
            }
            match shard.buffer.sample_into(&mut batch.scratch, count) {
                Ok(()) => {}
                // Emptied since its mass was read (it cannot be: nothing
                // removes items; kept for the general case).
                Err(ReplayError::NotEnoughItems { .. }) => continue,
                Err(e) => return Err(e),
            }
            let rescale = match self.sampler {
                SamplerConfig::Prioritized(p) if batch.masses[i].1 > 0.0 => {
                    (min_all / batch.masses[i].1).powf(p.beta) as f32
                }
                _ => 1.0,
            };
            batch.append(i, rescale);
        }
        if batch.keys.is_empty() {
            return Err(ReplayError::NotEnoughItems {
                requested: n,
                available: 0,
            });
        }
        Ok(())
    }

    /// (mass, smallest item mass) of one shard for the split.
    fn mass(&self, b: &ReplayBuffer) -> (f64, f64) {
        match self.sampler {
            SamplerConfig::Prioritized(_) => b
                .priority_mass()
                .map_or((0.0, 0.0), |m| (m.total, m.min_positive)),
            SamplerConfig::Recent { window } => (b.len().min(window) as f64, 1.0),
            _ => (b.len() as f64, 1.0),
        }
    }

    /// Systematic split of `n` draws over the shards' masses.
    fn split(&self, batch: &mut ShardedBatch, n: usize, total: f64) {
        batch.counts.iter_mut().for_each(|c| *c = 0);
        // Relaxed: each draw only needs its own counter value.
        let draw = self.draws.fetch_add(1, Ordering::Relaxed);
        let offset = unit_f64(splitmix64(
            self.seed ^ draw.wrapping_mul(0x9e37_79b9_7f4a_7c15),
        ));
        let step = total / n as f64;
        let mut shard = 0;
        let mut end = batch.masses[0].0;
        for j in 0..n {
            let t = (j as f64 + offset) * step;
            while t >= end && shard + 1 < batch.masses.len() {
                shard += 1;
                end += batch.masses[shard].0;
            }
            // Rounding at the top end can leave the last point past `end`
            // of an empty last shard: give it to the last non-empty one.
            let mut s = shard;
            while batch.masses[s].0 <= 0.0 && s > 0 {
                s -= 1;
            }
            batch.counts[s] += 1;
        }
    }

    /// Routes each key to its shard; a key naming no shard is refused
    /// (nothing is applied).
    pub fn update_priorities(
        &self,
        req: &UpdatePrioritiesRequest,
    ) -> Result<UpdatePrioritiesReply, RequestError> {
        if !matches!(self.sampler, SamplerConfig::Prioritized(_)) {
            return Err(RequestError::Precondition {
                reason: format!(
                    "table `{}` is not prioritized: it has no priorities to update",
                    self.name
                ),
            });
        }
        if req.keys.len() != req.priorities.len() {
            return Err(RequestError::invalid(
                "priorities",
                format!(
                    "{} values for {} keys",
                    req.priorities.len(),
                    req.keys.len()
                ),
            ));
        }
        let mut by_shard: HashMap<usize, (Vec<ItemKey>, Vec<f32>)> = HashMap::new();
        for (j, (&key, &p)) in req.keys.iter().zip(&req.priorities).enumerate() {
            let (shard, local) = split_key(key);
            if shard >= self.shards.len() {
                return Err(RequestError::invalid(
                    format!("keys[{j}]"),
                    format!(
                        "{key} names shard {shard} (its top 8 bits), table `{}` has {}",
                        self.name,
                        self.shards.len()
                    ),
                ));
            }
            let e = by_shard.entry(shard).or_default();
            e.0.push(ItemKey(local));
            e.1.push(p);
        }
        let mut reply = UpdatePrioritiesReply::default();
        for (shard, (keys, priorities)) in by_shard {
            let r = self.shards[shard]
                .buffer
                .update_priorities(&keys, &priorities)
                .map_err(|source| RequestError::Replay {
                    table: self.name.clone(),
                    source,
                })?;
            reply.applied += r.applied as u32;
            reply.stale += r.stale as u32;
            reply.invalid += r.invalid as u32;
        }
        Ok(reply)
    }

    /// Tells every shard the learner's policy version (lag cap).
    pub fn set_policy_version(&self, version: u64) {
        for s in &self.shards {
            s.buffer.set_policy_version(version);
        }
    }

    /// Closes every shard: later samples get `UNAVAILABLE`.
    pub fn close(&self) {
        for s in &self.shards {
            s.buffer.close();
        }
    }

    pub fn sampler_config(&self) -> SamplerConfig {
        self.sampler
    }

    /// The refusal of `Insert` and `Checkpoint` (module docs: read-only).
    pub(crate) fn refuse_writes(&self) -> RequestError {
        self.count_rejected();
        RequestError::Precondition {
            reason: format!(
                "table `{}` is loaded from {} shard directories (`load`) and is read-only: \
                 it takes no inserts or checkpoints and cannot be followed (its directories are its storage)",
                self.name,
                self.shards.len()
            ),
        }
    }

    /// Checks a sample request: the general checks of every table, and an
    /// empty loaded table is refused now (no item will ever arrive).
    pub(crate) fn plan(
        &self,
        req: &crate::pb::SampleRequest,
        max_message_bytes: usize,
    ) -> Result<SamplePlan, RequestError> {
        let checked = sample_stream::plan(self, req, max_message_bytes).and_then(|plan| {
            if self.is_empty() {
                Err(RequestError::Precondition {
                    reason: format!(
                        "table `{}`: its {} shard directories hold no items",
                        self.name,
                        self.shards.len()
                    ),
                })
            } else {
                Ok(plan)
            }
        });
        checked.inspect_err(|_| self.count_rejected())
    }

    pub(crate) fn count_rejected(&self) {
        // Relaxed: a statistic.
        self.rejected_requests.fetch_add(1, Ordering::Relaxed);
    }

    /// `Info`: the shards' counters summed, and each shard listed.
    pub(crate) fn info(&self, sampler: &str) -> TableInfo {
        let mut t = TableInfo {
            name: self.name.clone(),
            sampler: sampler.to_owned(),
            fields: layout_info::field_infos(&self.layout),
            policy_version_field: layout_info::policy_version_field(&self.layout),
            // Relaxed: statistics.
            sample_streams: self.sample_streams.load(Ordering::Relaxed),
            sample_flow_control_waits: self.flow_control_waits.load(Ordering::Relaxed),
            rejected_requests: self.rejected_requests.load(Ordering::Relaxed),
            ..TableInfo::default()
        };
        for s in &self.shards {
            let st = s.buffer.stats();
            t.capacity += st.capacity as u64;
            t.stored += st.stored as u64;
            t.available += s.buffer.available() as u64;
            t.inserted += st.inserted;
            t.sampled += st.sampled;
            t.removed += st.removed;
            t.evicted_unconsumed += st.evicted_unconsumed;
            t.dropped_policy_lag += st.dropped_policy_lag;
            t.stale_priority_updates += st.stale_priority_updates;
            t.invalid_priority_updates += st.invalid_priority_updates;
            t.shards.push(ShardInfo {
                dir: s.dir.display().to_string(),
                capacity: st.capacity as u64,
                stored: st.stored as u64,
                sampled: st.sampled,
            });
        }
        t
    }
}

/// What one sample stream of a loaded table reuses: a scratch batch the
/// shards sample into, and the rows gathered from all of them.
#[derive(Debug)]
pub struct ShardedBatch {
    scratch: SampleBatch,
    /// One buffer per field, `[rows, ...shape]` bytes (a variable-length
    /// field: its rows' values one after another).
    fields: Vec<Vec<u8>>,
    /// Per field, a variable-length field's `rows + 1` offsets.
    offsets: Vec<Option<Vec<u64>>>,
    keys: Vec<u64>,
    weights: Vec<f32>,
    policy_versions: Vec<u64>,
    /// Per shard: (mass, smallest item mass), read for this batch.
    masses: Vec<(f64, f64)>,
    /// Per shard: items it samples for this batch.
    counts: Vec<usize>,
}

impl ShardedBatch {
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Keys as the client sees them (`shard << 56 | local`); `u64::MAX`
    /// marks a local key too large for the shard bits (refused in the
    /// reply).
    pub fn keys(&self) -> &[u64] {
        &self.keys
    }

    pub fn weights(&self) -> &[f32] {
        &self.weights
    }

    pub fn field_bytes(&self, index: usize) -> Option<&[u8]> {
        self.fields.get(index).map(Vec::as_slice)
    }

    /// A variable-length field's `len + 1` offsets (`None`: fixed-shape).
    pub fn field_offsets(&self, index: usize) -> Option<&[u64]> {
        self.offsets.get(index)?.as_deref()
    }

    /// Bytes the fields take in a reply (values and offsets).
    fn field_reply_bytes(&self) -> usize {
        let values: usize = self.fields.iter().map(Vec::len).sum();
        let offsets: usize = self
            .offsets
            .iter()
            .flatten()
            .map(|o| o.len() * OFFSET_BYTES)
            .sum();
        values + offsets
    }

    fn clear(&mut self) {
        self.fields.iter_mut().for_each(Vec::clear);
        for o in self.offsets.iter_mut().flatten() {
            o.clear();
            o.push(0);
        }
        self.keys.clear();
        self.weights.clear();
        self.policy_versions.clear();
    }

    /// Moves the scratch batch's rows (from shard `shard`) to the end.
    fn append(&mut self, shard: usize, rescale: f32) {
        let s = &self.scratch;
        for (i, out) in self.fields.iter_mut().enumerate() {
            out.extend_from_slice(s.field_bytes(i).unwrap_or_default());
        }
        for (i, offsets) in self.offsets.iter_mut().enumerate() {
            let (Some(offsets), Some(theirs)) = (offsets, s.field_offsets(i)) else {
                continue;
            };
            // The shard's offsets from 0, after this batch's rows so far.
            let base = offsets.last().copied().unwrap_or(0);
            offsets.extend(theirs.iter().skip(1).map(|o| base + o));
        }
        self.keys.extend(
            s.keys()
                .iter()
                .map(|k| shard_key(shard, k.0).unwrap_or(u64::MAX)),
        );
        self.weights.extend(s.weights().iter().map(|w| w * rescale));
        self.policy_versions.extend_from_slice(s.policy_versions());
    }
}

impl SampleSource for ShardedTable {
    type Batch = ShardedBatch;

    fn name(&self) -> &str {
        &self.name
    }
    fn item_bytes(&self) -> usize {
        max_item_bytes(&self.layout)
    }
    fn consume_once_capacity(&self) -> Option<usize> {
        None
    }
    fn new_batch(&self, max_rows: usize) -> ShardedBatch {
        self.new_sharded_batch(max_rows)
    }
    fn sample_now(&self, batch: &mut ShardedBatch, n: usize) -> Result<(), ReplayError> {
        self.sample_into(batch, n)
    }
    /// Nothing arrives in a loaded table: the same as `sample_now`.
    fn sample_waiting(
        &self,
        batch: &mut ShardedBatch,
        n: usize,
        _timeout: Duration,
    ) -> Result<(), ReplayError> {
        self.sample_into(batch, n)
    }
    fn can_grow(&self) -> bool {
        false
    }
    fn reply(
        &self,
        batch: &ShardedBatch,
        max_message_bytes: usize,
    ) -> Result<SampleReply, RequestError> {
        let bytes = batch.field_reply_bytes();
        if self.layout.has_variable() && reply_bytes(batch.len(), bytes) > max_message_bytes {
            return Err(too_big(batch.len(), bytes, max_message_bytes));
        }
        if batch.keys.contains(&u64::MAX) {
            return Err(RequestError::Precondition {
                reason: format!(
                    "table `{}`: a shard holds a key at or above 2^{SHARD_KEY_SHIFT}, which \
                     its shard index cannot be put above",
                    self.name
                ),
            });
        }
        Ok(SampleReply {
            rows: batch.len() as u32,
            fields: self
                .layout
                .fields()
                .iter()
                .zip(batch.fields.iter().zip(&batch.offsets))
                .map(|(spec, (data, offsets))| {
                    field_block_with_offsets(
                        spec,
                        Bytes::copy_from_slice(data),
                        offsets.clone().unwrap_or_default(),
                    )
                })
                .collect(),
            keys: batch.keys.clone(),
            weights: batch.weights.clone(),
            policy_versions: batch.policy_versions.clone(),
        })
    }
    fn sample_streams(&self) -> &AtomicU64 {
        &self.sample_streams
    }
    fn flow_control_waits(&self) -> &AtomicU64 {
        &self.flow_control_waits
    }
}

/// How a shard's layout differs from the config's, naming the field; `None`
/// when they agree.
pub fn layout_difference(config: &ItemLayout, dir: &ItemLayout) -> Option<String> {
    let names = |l: &ItemLayout| {
        l.fields()
            .iter()
            .map(|f| f.name().to_owned())
            .collect::<Vec<_>>()
            .join(", ")
    };
    if config.fields().len() != dir.fields().len() {
        return Some(format!(
            "`fields`: the config has {} ({}), the directory {} ({})",
            config.fields().len(),
            names(config),
            dir.fields().len(),
            names(dir)
        ));
    }
    for (i, (c, d)) in config.fields().iter().zip(dir.fields()).enumerate() {
        if c.name() != d.name() {
            return Some(format!(
                "`fields[{i}]`: `{}` in the config, `{}` in the directory",
                c.name(),
                d.name()
            ));
        }
        if c.dtype() != d.dtype() {
            return Some(format!(
                "field `{}`: dtype {} in the config, {} in the directory",
                c.name(),
                wire_dtype::name(c.dtype()),
                wire_dtype::name(d.dtype())
            ));
        }
        if c.shape() != d.shape() {
            return Some(format!(
                "field `{}`: shape {:?} in the config, {:?} in the directory",
                c.name(),
                c.shape(),
                d.shape()
            ));
        }
        if c.variable() != d.variable() {
            let says = |v: Option<seed_replay::VariableLength>| match v {
                None => "fixed-shape".to_owned(),
                Some(v) => match v.max_len {
                    None => "variable-length".to_owned(),
                    Some(m) => format!("variable-length (max_len {m})"),
                },
            };
            return Some(format!(
                "field `{}`: {} in the config, {} in the directory",
                c.name(),
                says(c.variable()),
                says(d.variable())
            ));
        }
    }
    let pv = |l: &ItemLayout| {
        l.policy_version_field()
            .map(|i| l.fields()[i].name().to_owned())
    };
    if pv(config) != pv(dir) {
        return Some(format!(
            "`policy_version_field`: {:?} in the config, {:?} in the directory",
            pv(config),
            pv(dir)
        ));
    }
    None
}

fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A uniform draw in `[0, 1)` from 53 random bits.
fn unit_f64(bits: u64) -> f64 {
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_carry_their_shard_in_the_top_bits() {
        let k = shard_key(3, 41).unwrap();
        assert_eq!(split_key(k), (3, 41));
        assert_eq!(
            shard_key(255, LOCAL_KEY_MASK).map(split_key),
            Some((255, LOCAL_KEY_MASK))
        );
        assert_eq!(shard_key(0, LOCAL_KEY_MASK + 1), None);
    }

    #[test]
    fn a_layout_difference_names_the_field() {
        let a = ItemLayout::builder()
            .field("obs", seed_replay::DType::F32, &[3, 4])
            .field("v", seed_replay::DType::U64, &[])
            .build()
            .unwrap();
        let shape = ItemLayout::builder()
            .field("obs", seed_replay::DType::F32, &[4, 3])
            .field("v", seed_replay::DType::U64, &[])
            .build()
            .unwrap();
        let dtype = ItemLayout::builder()
            .field("obs", seed_replay::DType::F32, &[3, 4])
            .field("v", seed_replay::DType::I64, &[])
            .build()
            .unwrap();
        let pv = ItemLayout::builder()
            .field("obs", seed_replay::DType::F32, &[3, 4])
            .field("v", seed_replay::DType::U64, &[])
            .policy_version_field("v")
            .build()
            .unwrap();
        assert_eq!(layout_difference(&a, &a), None);
        let d = layout_difference(&a, &shape).unwrap();
        assert!(
            d.contains("field `obs`: shape [3, 4]") && d.contains("[4, 3]"),
            "{d}"
        );
        let d = layout_difference(&a, &dtype).unwrap();
        assert!(
            d.contains("field `v`: dtype u64") && d.contains("i64"),
            "{d}"
        );
        let d = layout_difference(&a, &pv).unwrap();
        assert!(d.contains("`policy_version_field`"), "{d}");
    }
}
