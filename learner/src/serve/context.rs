//! What every stream task shares: [`ServiceContext`] (the service's
//! settings, the live streams, and the stages once installed) and
//! [`ServiceStages`] (where a stream task hands its work), with the bound on
//! step batches in flight.
use std::sync::{Arc, OnceLock};

use tokio::sync::watch;

use crate::infer::batcher::DynamicBatcher;
use crate::infer::inference::InlineInference;
use crate::infer::state_table::StateTable;
use crate::infer::step_request::StepRequest;
use crate::log_throttle::LogThrottle;
use crate::metrics::Metrics;
use crate::model::weights::WeightsHandle;
use crate::serve::registry::StreamRegistry;
use crate::serve::spec_gate::SpecGate;
use crate::serve::stream_error::StreamError;

/// Step batches a stream may have awaiting actions (see module docs).
pub const MAX_STEP_BATCHES_IN_FLIGHT: usize = 8;

/// The stages a stream task hands its work to, built by the composition
/// root ([`crate::app::Learner::start`]) and handed over with
/// `ServerHandle::install`: streams that arrive earlier wait for them
/// after their hello.
pub struct ServiceStages {
    pub table: Arc<StateTable>,
    pub batcher: Arc<DynamicBatcher<StepRequest>>,
    pub inline: InlineInference,
    pub weights: Arc<WeightsHandle>,
}

/// State shared by every stream task.
pub(super) struct ServiceContext {
    pub(super) spec: SpecGate,
    pub(super) token: Option<seed_shared::Token>,
    pub(super) max_message_bytes: usize,
    pub(super) metrics: Arc<Metrics>,
    /// Set once by `ServerHandle::install`.
    pub(super) stages: OnceLock<ServiceStages>,
    /// `true` once `stages` is set.
    pub(super) stages_set: watch::Sender<bool>,
    pub(super) streams: StreamRegistry,
    /// Rate limit of the "ending actor stream" warning (a misbehaving actor
    /// that reconnects at once would otherwise write one line per stream).
    pub(super) ended_log: LogThrottle,
}

impl ServiceContext {
    /// The stages, waiting until they are installed.
    pub(super) async fn stages(&self) -> Result<&ServiceStages, StreamError> {
        let mut set = self.stages_set.subscribe();
        // The sender lives in `self`; shutdown aborts waiting tasks.
        if set.wait_for(|s| *s).await.is_err() {
            return Err(StreamError::ShuttingDown);
        }
        self.stages.get().ok_or(StreamError::ShuttingDown)
    }
}
