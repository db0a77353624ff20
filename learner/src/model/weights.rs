//! The policy that inference uses, behind a versioned, lock-free swappable
//! handle.
//!
//! Training publishes a frozen copy of its weights after each step; inference
//! loads the current snapshot once per batch. Both sides are wait-free for
//! each other: `load` is an `ArcSwap` read (no lock, no allocation) and
//! `publish` is one pointer swap, so a slow trainer never stalls inference and
//! inference never delays a publish. The old snapshot is freed when the last
//! batch using it finishes.
//!
//! The handle's dtype is fixed by the first snapshot (`--inference-dtype`):
//! publishers convert each new snapshot to [`WeightsHandle::dtype`].
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use arc_swap::ArcSwap;
use tracing::warn;

use crate::model::host_forward::HostForward;
use crate::model::ActorCritic;

/// Number of weight updates behind a policy; 0 is the initial network.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct PolicyVersion(pub u64);

impl std::fmt::Display for PolicyVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "v{}", self.0)
    }
}

/// A frozen network and the version that produced it.
pub struct PolicySnapshot {
    pub version: PolicyVersion,
    pub model: ActorCritic,
    /// The same network as loops for small CPU batches, built on first use.
    host: OnceLock<Option<HostForward>>,
}

impl PolicySnapshot {
    pub fn new(version: PolicyVersion, model: ActorCritic) -> Self {
        PolicySnapshot {
            version,
            model,
            host: OnceLock::new(),
        }
    }

    /// The snapshot's [`HostForward`], when its model has one; built (a
    /// copy of the weights) by the first caller.
    pub fn host_forward(&self) -> Option<&HostForward> {
        self.host
            .get_or_init(|| match HostForward::from_model(&self.model) {
                Ok(host) => host,
                Err(e) => {
                    // Not expected (the tensors are read as the model's own
                    // dtype); candle serves every batch instead.
                    warn!(error = %e, version = %self.version, "host forward unavailable");
                    None
                }
            })
            .as_ref()
    }
}

/// Shared between the trainer (one publisher) and inference threads (readers).
pub struct WeightsHandle {
    current: ArcSwap<PolicySnapshot>,
    /// Mirrors `current.version` for cheap reads by metrics; written only by
    /// `publish` after the swap (Release, pairs with Acquire in `version`).
    version: AtomicU64,
    /// The weights' dtype of every snapshot this handle serves.
    dtype: candle_core::DType,
}

impl WeightsHandle {
    pub fn new(model: ActorCritic, version: PolicyVersion) -> Self {
        WeightsHandle {
            dtype: model.dtype(),
            current: ArcSwap::from_pointee(PolicySnapshot::new(version, model)),
            version: AtomicU64::new(version.0),
        }
    }

    /// The dtype a published model must have (that of the first snapshot).
    pub fn dtype(&self) -> candle_core::DType {
        self.dtype
    }

    /// The snapshot to run the next batch with.
    pub fn load(&self) -> Arc<PolicySnapshot> {
        self.current.load_full()
    }

    /// Version of the latest published snapshot.
    pub fn version(&self) -> PolicyVersion {
        PolicyVersion(self.version.load(Ordering::Acquire))
    }

    /// Makes `model` the policy for every batch that starts after this call
    /// and returns its version (previous + 1). Single publisher: concurrent
    /// publishes would race on the version number.
    pub fn publish(&self, model: ActorCritic) -> PolicyVersion {
        debug_assert_eq!(model.dtype(), self.dtype, "publish a snapshot_as(dtype())");
        let version = PolicyVersion(self.version.load(Ordering::Acquire) + 1);
        self.current
            .store(Arc::new(PolicySnapshot::new(version, model)));
        self.version.store(version.0, Ordering::Release);
        version
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ModelConfig, TrainableModel};
    use candle_core::Device;
    use seed_shared::EnvSpec;

    #[test]
    fn publish_bumps_version_and_readers_keep_their_snapshot() -> candle_core::Result<()> {
        let cfg = ModelConfig::for_spec(&EnvSpec::cartpole());
        let m = TrainableModel::new(&cfg, &Device::Cpu, 1)?;
        let handle = WeightsHandle::new(m.snapshot()?, PolicyVersion(0));
        let held = handle.load();
        assert_eq!(held.version, PolicyVersion(0));
        let v = handle.publish(m.snapshot()?);
        assert_eq!(v, PolicyVersion(1));
        assert_eq!(handle.version(), PolicyVersion(1));
        assert_eq!(handle.load().version, PolicyVersion(1));
        assert_eq!(
            held.version,
            PolicyVersion(0),
            "an in-flight batch keeps its weights"
        );
        Ok(())
    }
}
