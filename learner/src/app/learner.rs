//! [`Learner::start`]: the composition root. The one place the stages are
//! built, wired to each other and started; the returned [`Learner`] owns
//! their lifecycle and stops them in the right order.
//!
//! # Order
//! Stages are built along the data flow (server → batcher → inference →
//! unroll → replay → prefetch → train → weights), with one rule on top: a
//! stage gets work only once everything it pushes into exists. So:
//! 1. the listener (and, when it serves TLS to remote actors while local
//!    actors run, the local actors' private plaintext socket) and the
//!    metrics endpoint, bound before any thread starts so that a busy port
//!    leaves nothing behind; then the service, which accepts streams but
//!    welcomes none until step 4. Without `--env` (`config.env` `None`)
//!    the first actor's hello fixes the env spec here
//!    ([`SpecGate`](crate::serve::SpecGate)), since the model is built
//!    from it;
//! 2. the learning side's objects ([`TrainingSetup`]: model and weights,
//!    replay buffer, unroll builder), since inference pushes into the unroll
//!    builder and reads the weights (a fresh network when not training);
//! 3. the state table and the batcher (what stream tasks push into);
//! 4. the inference threads, then the stages go to the service (waiting
//!    streams are welcomed from here on);
//! 5. prefetch and the training thread.
//!
//! Stopping runs the other way: training first (closing the replay buffer
//! frees an inference thread blocked on backpressure), then the service, the
//! metrics endpoint, and the inference threads once the batcher is drained.
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use seed_shared::EnvSpec;
use tracing::info;

use crate::app::config::LearnerConfig;
use crate::app::training::{Training, TrainingSetup, TrainingTarget};
use crate::error::LearnerError;
use crate::infer::batcher::DynamicBatcher;
use crate::infer::inference::{spawn_inference_threads, InferenceShared};
use crate::infer::sink::SinkFactory;
use crate::infer::state_table::StateTable;
use crate::infer::step_request::StepRequest;
use crate::learn::checkpoint::EnvDescription;
use crate::metrics::Metrics;
use crate::model::weights::{PolicyVersion, WeightsHandle};
use crate::model::{ModelConfig, TrainableModel};
use crate::report::metrics_endpoint::MetricsEndpoint;
use crate::serve::server::{Listeners, Server, ServerHandle, ServiceConfig, ServiceStages};
use crate::serve::transport::{self, ListenAddr};
use crate::serve::SpecGate;
use crate::unroll_store::RemoteTable;

/// A running learner: serving, inferring and (unless `--no-train`) training.
pub struct Learner {
    server: Option<ServerHandle>,
    addr: ListenAddr,
    /// Where local actors connect: `addr`, or the private plaintext socket
    /// when `addr` serves TLS.
    local_actor_addr: ListenAddr,
    metrics: Arc<Metrics>,
    weights: Arc<WeightsHandle>,
    batcher: Arc<DynamicBatcher<StepRequest>>,
    inference_threads: Vec<JoinHandle<()>>,
    metrics_endpoint: Option<MetricsEndpoint>,
    training: Option<Training>,
}

impl Learner {
    /// Builds and starts every stage `config` describes (see the module
    /// docs for the order). Must run inside a tokio runtime. Without an env
    /// (`config.env` `None`) this waits for the first actor's hello; use
    /// [`Learner::bind`] to learn the address before that.
    pub async fn start(config: &LearnerConfig) -> Result<Learner, LearnerError> {
        Self::bind(config).await?.start().await
    }

    /// Step 1 only: binds the sockets and starts the service (see the
    /// module docs). [`BoundLearner::start`] does the rest.
    pub async fn bind(config: &LearnerConfig) -> Result<BoundLearner, LearnerError> {
        Self::bind_with(config, None).await
    }

    /// Serves with the caller's inference sink instead of the trainer: for
    /// embedding (and tests) that consume inferred batches themselves.
    /// `config.train` must be `None`.
    pub async fn start_with_sink(
        config: &LearnerConfig,
        sink: SinkFactory,
    ) -> Result<Learner, LearnerError> {
        if config.train.is_some() {
            return Err(LearnerError::Config(
                "a caller's inference sink replaces training: set `train` to None (--no-train)"
                    .into(),
            ));
        }
        Self::bind_with(config, Some(sink)).await?.start().await
    }

    async fn bind_with(
        config: &LearnerConfig,
        external_sink: Option<SinkFactory>,
    ) -> Result<BoundLearner, LearnerError> {
        config.validate()?;
        let device = config.inference.device.open()?;
        let metrics = Arc::new(Metrics::new());
        // A remote replay table is reached first: an unreachable server or
        // a missing table is reported before anything listens.
        let remote_replay = match config.train.as_ref().and_then(|t| t.replay.remote.clone()) {
            Some(remote) => Some(RemoteTable::connect(remote).await?),
            None => None,
        };

        // 1. The sockets, before any thread starts, then the service: it
        // accepts streams from here on and welcomes them once step 4 has
        // installed the stages.
        let (listener, local) =
            transport::bind(&config.serve.listen, config.serve.fallback_to_ephemeral).await?;
        let private = match (&config.serve.tls, config.run.local_actors) {
            (Some(_), 1..) => Some(transport::bind_private_socket()?),
            _ => None,
        };
        let local_actor_addr = private
            .as_ref()
            .map_or_else(|| local.clone(), |p| p.addr.clone());
        let metrics_endpoint = match config.serve.metrics_addr {
            Some(addr) => Some(MetricsEndpoint::bind(addr, Arc::clone(&metrics)).await?),
            None => None,
        };
        let gate = match &config.env {
            Some(env) => SpecGate::fixed(env.spec()),
            None => SpecGate::adopting(),
        };
        let server = Server::serve(
            Listeners {
                public: listener,
                public_addr: local.clone(),
                private,
            },
            ServiceConfig {
                spec: gate,
                metrics: Arc::clone(&metrics),
                token: config.serve.token.clone(),
                max_message_bytes: config.serve.max_message_bytes,
                keepalive: config.serve.keepalive,
                tls: config.serve.tls.clone(),
            },
        )
        .await?;
        Ok(BoundLearner {
            config: config.clone(),
            external_sink,
            remote_replay,
            device,
            metrics,
            server,
            local,
            local_actor_addr,
            metrics_endpoint,
        })
    }
}

/// A learner whose sockets are bound and whose service accepts streams, but
/// which has not built its model yet ([`Learner::bind`]).
pub struct BoundLearner {
    config: LearnerConfig,
    external_sink: Option<SinkFactory>,
    /// The connected remote replay table (`--replay-addr`), if any.
    remote_replay: Option<RemoteTable>,
    device: candle_core::Device,
    metrics: Arc<Metrics>,
    server: ServerHandle,
    local: ListenAddr,
    local_actor_addr: ListenAddr,
    metrics_endpoint: Option<MetricsEndpoint>,
}

impl BoundLearner {
    /// The address actually listened on (ephemeral port resolved).
    pub fn local_addr(&self) -> &ListenAddr {
        &self.local
    }

    /// Steps 2 to 5 (see the module docs), once the env spec is fixed: at
    /// once with `config.env`, else when the first actor with a usable spec
    /// says hello (this waits for it). On error the service stops.
    pub async fn start(self) -> Result<Learner, LearnerError> {
        let BoundLearner {
            config,
            external_sink,
            remote_replay,
            device,
            metrics,
            server,
            local,
            local_actor_addr,
            metrics_endpoint,
        } = self;
        if config.env.is_none() {
            info!(addr = %local, "waiting for the first actor's hello to fix the env spec \
                (--local-actors 0 without --env)");
        }
        let spec = server.env_spec().await;
        let built = Self::build(
            &config,
            external_sink,
            remote_replay,
            &device,
            &metrics,
            &server,
            &spec,
        );
        let (setup, weights, batcher, inference_threads) = match built {
            Ok(b) => b,
            Err(e) => {
                let _ = server.shutdown().await;
                return Err(e);
            }
        };
        // 5. Prefetch and training, counting on from a resumed run.
        let training = match setup {
            Some(s) => {
                let resumed = s.resumed;
                metrics
                    .env_steps
                    .store(resumed.env_steps, Ordering::Relaxed);
                metrics.episodes.store(resumed.episodes, Ordering::Relaxed);
                Some(s.start(Arc::clone(&metrics))?)
            }
            None => None,
        };
        Ok(Learner {
            server: Some(server),
            addr: local,
            local_actor_addr,
            metrics,
            weights,
            batcher,
            inference_threads,
            metrics_endpoint,
            training,
        })
    }

    /// Steps 2 to 4, for `spec`.
    #[allow(clippy::type_complexity)]
    fn build(
        config: &LearnerConfig,
        external_sink: Option<SinkFactory>,
        remote_replay: Option<RemoteTable>,
        device: &candle_core::Device,
        metrics: &Arc<Metrics>,
        server: &ServerHandle,
        spec: &EnvSpec,
    ) -> Result<
        (
            Option<TrainingSetup>,
            Arc<WeightsHandle>,
            Arc<DynamicBatcher<StepRequest>>,
            Vec<JoinHandle<()>>,
        ),
        LearnerError,
    > {
        let model = ModelConfig::new(spec, &config.model);

        // 2. The learning side (or a fresh network to serve).
        let setup = match &config.train {
            Some(train) => Some(TrainingSetup::new(
                train,
                TrainingTarget {
                    model: model.clone(),
                    spec: spec.clone(),
                    env: EnvDescription::of(config.env.as_ref(), spec),
                    device: device.clone(),
                    inference_dtype: config.inference.dtype,
                    seed: config.seed,
                    max_env_slots: config.serve.max_env_slots,
                    run_dir: config.run_dir().cloned(),
                    remote_replay,
                },
            )?),
            None => None,
        };
        let (weights, sink) = match &setup {
            Some(s) => (Arc::clone(&s.weights), Some(Arc::clone(&s.sink))),
            None => {
                let model = TrainableModel::new(&model, device, config.seed)?;
                let weights = Arc::new(WeightsHandle::new(
                    model.snapshot_as(config.inference.dtype.dtype())?,
                    PolicyVersion(0),
                ));
                (weights, external_sink)
            }
        };

        // 3. What stream tasks push into.
        let state_size = weights.load().model.state_size();
        let table = StateTable::with_idle_threshold(
            config.serve.max_env_slots,
            state_size,
            config.inference.actor_idle,
        );
        let batcher = Arc::new(DynamicBatcher::new(
            config.inference.batcher,
            config.inference.threads.max(1),
        ));
        {
            let batcher = Arc::clone(&batcher);
            table.set_release_hook(Box::new(move || batcher.wake()));
        }
        {
            let live = Arc::clone(&table);
            metrics.attach_live_slots(Box::new(move || live.live_slots()));
            let active = Arc::clone(&table);
            metrics.attach_active_slots(Box::new(move || active.active_slots()));
            let batcher = Arc::clone(&batcher);
            metrics.attach_batcher_queued(Box::new(move || batcher.queued()));
        }
        metrics
            .policy_version
            .store(weights.version().0, Ordering::Relaxed);

        // 4. Inference, then the stages go to the service.
        let (inference_threads, inline) = spawn_inference_threads(
            Arc::new(InferenceShared {
                batcher: Arc::clone(&batcher),
                table: Arc::clone(&table),
                weights: Arc::clone(&weights),
                metrics: Arc::clone(metrics),
                spec: spec.clone(),
                device: device.clone(),
                seed: config.seed,
                sink,
                exploration: config
                    .train
                    .as_ref()
                    .and_then(|t| t.trainer.agent.exploration()),
            }),
            config.inference.threads,
            config.inference.inline_max_rows,
        )?;
        server.install(ServiceStages {
            table,
            batcher: Arc::clone(&batcher),
            inline,
            weights: Arc::clone(&weights),
        });

        Ok((setup, weights, batcher, inference_threads))
    }
}

impl Learner {
    /// The address actually listened on (ephemeral port resolved).
    pub fn local_addr(&self) -> &ListenAddr {
        &self.addr
    }

    /// Where local actors connect: [`Self::local_addr`], or, when that
    /// serves TLS and local actors run (`config.run.local_actors > 0`), a
    /// plaintext unix socket in a private directory (mode 0700) that only
    /// this user can reach, so local actors need no certificate.
    pub fn local_actor_addr(&self) -> &ListenAddr {
        &self.local_actor_addr
    }

    /// A URI for a tonic client: `http://IP:PORT` (TCP only).
    pub fn http_uri(&self) -> Option<String> {
        match &self.addr {
            ListenAddr::Tcp(a) => Some(format!("http://{a}")),
            ListenAddr::Unix(_) => None,
        }
    }

    /// Where `GET /metrics` is served, when `--metrics-addr` was set.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_endpoint
            .as_ref()
            .map(MetricsEndpoint::local_addr)
    }

    /// The learner's counters.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// The weights inference uses.
    pub fn weights(&self) -> &Arc<WeightsHandle> {
        &self.weights
    }

    /// How long training has run; `None` when not training.
    pub fn training_elapsed(&self) -> Option<Duration> {
        self.training.as_ref().map(Training::elapsed)
    }

    /// Stops training: joins its threads and writes the final checkpoint
    /// (with a run directory). Serving goes on. Does nothing when not
    /// training or already stopped.
    pub async fn stop_training(&mut self) -> Result<(), LearnerError> {
        let Some(training) = self.training.take() else {
            return Ok(());
        };
        tokio::task::spawn_blocking(move || training.stop())
            .await
            .map_err(|e| LearnerError::Config(format!("the training stop panicked: {e}")))?
    }

    /// Stops everything (see the module docs for the order): the port or
    /// socket is free and every thread joined when this returns. An error
    /// (training's first, the final checkpoint included, then the server's)
    /// is returned after everything has stopped.
    pub async fn shutdown(mut self) -> Result<(), LearnerError> {
        let trained = self.stop_training().await;
        let served = match self.server.take() {
            Some(server) => server.shutdown().await,
            None => Ok(()),
        };
        if let Some(endpoint) = self.metrics_endpoint.take() {
            endpoint.shutdown().await;
        }
        self.batcher.close();
        let threads = std::mem::take(&mut self.inference_threads);
        let _ = tokio::task::spawn_blocking(move || {
            for t in threads {
                let _ = t.join();
            }
        })
        .await;
        trained.and(served)
    }
}
