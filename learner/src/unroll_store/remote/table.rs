//! [`RemoteTable`]: a table of a replay server (`replay-server`, crate
//! `seed-replay-service`) used as the learner's replay buffer.
//!
//! # Start-up
//! [`RemoteTable::connect`] reaches the server and reads the table's `Info`:
//! an unreachable address, a refused token or a missing table is an error
//! at once, naming `--replay-addr`. [`RemoteTable::check`] then compares the
//! table with the unrolls this learner writes (`table_layout`) and the agent
//! with the table's sampler (R2D2 writes priorities: it needs a prioritized
//! table or, on a uniform one, simply writes none; V-trace refuses a
//! prioritized table, whose priorities nobody would update).
//! [`RemoteTable::start`] starts the writer task (`writer`) and the
//! table watcher below.
//!
//! # While training
//! - inserts: inference queues encoded unrolls; one task streams them in
//!   batches with several in flight (`writer`). Inference never
//!   makes a network call: it waits only for room in the queue, and only
//!   while the server is connected and holding inserts back (backpressure,
//!   as with the in-process buffer); otherwise a full queue drops the
//!   unroll, counted;
//! - samples: each prefetch thread keeps its own `Sample` stream
//!   (`sampler`), whose flow control lets the server prepare the
//!   next batches while the trainer works;
//! - priorities (R2D2): [`RemoteTable::update_priorities`], one
//!   `UpdatePriorities` call by key per training step, on the trainer's
//!   thread (a loopback round trip is tens of microseconds, a step
//!   milliseconds);
//! - policy version: [`RemoteTable::set_policy_version`] only stores the
//!   number; the watcher task sends the latest one (`SetPolicyVersion`, so
//!   the table's lag cap measures against this learner) and refreshes the
//!   cached `Info` counters about once a second. The trainer never waits
//!   for it.
//!
//! Cost: one connection (HTTP/2, calls multiplexed), one runtime thread.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use seed_replay::{FieldRef, ItemKey, ItemLayout};
use seed_replay_service::client::ClientOptions;
use seed_replay_service::pb::TableInfo;
use seed_replay_service::{ClientError, ReplayClient};
use tokio::sync::{mpsc, watch};
use tracing::{info, warn};

use crate::log_throttle::{LogThrottle, WARN_INTERVAL};
use crate::unroll_store::remote::client_runtime::ClientRuntime;
use crate::unroll_store::remote::config::RemoteReplayConfig;
use crate::unroll_store::remote::error::RemoteReplayError;
use crate::unroll_store::remote::stats::RemoteStats;
use crate::unroll_store::remote::table_layout::check_layout;
use crate::unroll_store::remote::writer::{self, stop_requested, EncodedUnroll};

/// How often the watcher refreshes the cached `Info` counters.
const INFO_EVERY: Duration = Duration::from_secs(1);

/// A connected remote table (see the module docs).
pub struct RemoteTable {
    config: RemoteReplayConfig,
    runtime: ClientRuntime,
    client: ReplayClient,
    /// The table as `Info` described it at connect time.
    info: TableInfo,
    pub stats: Arc<RemoteStats>,
    /// Inference's end of the writer queue; `None` before `start`.
    queue: Option<mpsc::Sender<EncodedUnroll>>,
    /// Bytes of one unroll (set by `start`).
    item_bytes: usize,
    /// Set by `close`; inference then drops unrolls at once. Relaxed: a
    /// request flag, nothing is published through it.
    closed: AtomicBool,
    /// The trainer's latest policy version, for the watcher.
    version: watch::Sender<u64>,
    /// Whether the writer's insert stream is open (set by the writer).
    connected: Arc<AtomicBool>,
    /// Set by `close`, watched by the writer and the watcher.
    stop: watch::Sender<bool>,
    call_warnings: LogThrottle,
}

impl std::fmt::Debug for RemoteTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteTable")
            .field("table", &self.config.display())
            .finish_non_exhaustive()
    }
}

impl RemoteTable {
    /// Connects and reads the table's `Info` (see the module docs).
    pub async fn connect(config: RemoteReplayConfig) -> Result<Self, RemoteReplayError> {
        let runtime = ClientRuntime::new()?;
        let addr = config.display();
        let options = ClientOptions {
            token: config.token.clone(),
            tls_ca: config.tls_ca.clone(),
            tls_domain: config.tls_domain.clone(),
            tls_identity: config.tls_identity.clone(),
            max_message_bytes: config.max_message_bytes,
            connect_timeout: config.call_timeout,
        };
        let (endpoint, table, timeout) = (
            config.endpoint.clone(),
            config.table.clone(),
            config.call_timeout,
        );
        // On the client's runtime, so the connection's tasks live there.
        let connected = runtime
            .handle()
            .spawn(async move {
                let mut client = ReplayClient::connect(&endpoint, options).await?;
                let infos = tokio::time::timeout(timeout, client.info(None))
                    .await
                    .map_err(|_| ClientError::Connect {
                        addr: endpoint.clone(),
                        reason: format!("no answer to Info within {timeout:?}"),
                    })??;
                Ok::<_, ClientError>((client, infos))
            })
            .await
            .map_err(|e| RemoteReplayError::Runtime(e.to_string()))?;
        let (client, infos) = connected.map_err(|e| match e {
            ClientError::Connect { reason, .. } | ClientError::Address { reason, .. } => {
                RemoteReplayError::Unreachable {
                    addr: addr.clone(),
                    reason,
                }
            }
            ClientError::Status {
                code: tonic::Code::Unauthenticated,
                message,
            } => RemoteReplayError::Unauthenticated {
                addr: addr.clone(),
                message,
            },
            ClientError::Status {
                code: tonic::Code::Unavailable,
                message,
            } => RemoteReplayError::Unreachable {
                addr: addr.clone(),
                reason: message,
            },
            source => RemoteReplayError::Call {
                addr: addr.clone(),
                source,
            },
        })?;
        let Some(info) = infos.iter().find(|t| t.name == table).cloned() else {
            let mut known: Vec<&str> = infos.iter().map(|t| t.name.as_str()).collect();
            known.sort_unstable();
            return Err(RemoteReplayError::NoTable {
                addr,
                table,
                known: known.join(", "),
            });
        };
        info!(table = %addr, sampler = %info.sampler, capacity = info.capacity,
            stored = info.stored, "remote replay table reached");
        Ok(RemoteTable {
            config,
            runtime,
            client,
            info,
            stats: Arc::new(RemoteStats::default()),
            queue: None,
            item_bytes: 0,
            closed: AtomicBool::new(false),
            connected: Arc::new(AtomicBool::new(false)),
            version: watch::channel(0).0,
            stop: watch::channel(false).0,
            call_warnings: LogThrottle::new(WARN_INTERVAL),
        })
    }

    /// The table as `Info` described it at connect time.
    pub fn info(&self) -> &TableInfo {
        &self.info
    }

    /// `ENDPOINT/TABLE`.
    pub fn address(&self) -> String {
        self.config.display()
    }

    /// Whether the table samples by priority.
    pub fn prioritized(&self) -> bool {
        self.info.sampler == "prioritized"
    }

    /// Checks the table against `layout` (the learner's unrolls) and the
    /// agent (`writes_priorities`: R2D2).
    pub fn check(
        &self,
        layout: &ItemLayout,
        writes_priorities: bool,
    ) -> Result<(), RemoteReplayError> {
        if let Some(detail) = check_layout(layout, &self.info) {
            return Err(RemoteReplayError::Layout {
                addr: self.address(),
                table: self.info.name.clone(),
                detail,
            });
        }
        if self.prioritized() && !writes_priorities {
            return Err(RemoteReplayError::Sampler {
                addr: self.address(),
                table: self.info.name.clone(),
                reason: "a prioritized table needs --algo r2d2 (V-trace writes no priorities \
                         back, so every unroll would keep its initial priority)"
                    .into(),
            });
        }
        if self.info.sampler == "grouped" {
            return Err(RemoteReplayError::Sampler {
                addr: self.address(),
                table: self.info.name.clone(),
                reason: "a grouped table releases trajectory groups, not unrolls".into(),
            });
        }
        Ok(())
    }

    /// Starts the writer (queue of `insert_queue` unrolls) and the watcher,
    /// starting from `version`.
    pub fn start(&mut self, layout: ItemLayout, version: u64) {
        self.version.send_replace(version);
        self.item_bytes = layout.item_bytes();
        let (tx, rx) = mpsc::channel(self.config.insert_queue.max(1));
        self.queue = Some(tx);
        self.runtime.handle().spawn(writer::run(
            writer::WriterSetup {
                client: self.client.clone(),
                table: self.config.table.clone(),
                layout: Arc::new(layout),
                max_rows: writer::max_batch_rows(&self.info),
                stats: Arc::clone(&self.stats),
                connected: Arc::clone(&self.connected),
            },
            rx,
            self.stop.subscribe(),
        ));
        self.runtime.handle().spawn(watch_table(
            self.client.clone(),
            self.config.table.clone(),
            self.version.subscribe(),
            self.stop.subscribe(),
            Arc::clone(&self.stats),
        ));
    }

    /// Queues one unroll (its fields in layout order) for the writer.
    /// When the queue is full while the server is connected (it holds
    /// inserts back: its rate limiter or a `block` writer), waits up to
    /// `wait` for room, like an insert into a full in-process buffer;
    /// with the server unreachable, or after `wait`, the unroll is
    /// dropped. `false` when dropped (counted).
    pub fn enqueue(&self, fields: &[FieldRef<'_>], wait: Duration) -> bool {
        // Relaxed: see `closed`.
        if self.closed.load(Ordering::Relaxed) {
            return false;
        }
        let Some(queue) = &self.queue else {
            return false;
        };
        let unroll = EncodedUnroll::encode(fields, self.item_bytes);
        let unroll = match queue.try_send(unroll) {
            Ok(()) => {
                RemoteStats::add(&self.stats.queued, 1);
                return true;
            }
            Err(mpsc::error::TrySendError::Full(u)) => u,
            Err(mpsc::error::TrySendError::Closed(_)) => return false,
        };
        // Relaxed: a hint; a wrong guess costs one wait or one drop.
        if wait.is_zero() || !self.connected.load(Ordering::Relaxed) {
            RemoteStats::add(&self.stats.dropped_queue_full, 1);
            return false;
        }
        RemoteStats::add(&self.stats.queue_full_waits, 1);
        // `close` ends the wait at once, as closing the in-process buffer
        // wakes a blocked insert.
        let mut stop = self.stop.subscribe();
        let sent = self.runtime.block_on(async {
            tokio::select! {
                sent = tokio::time::timeout(wait, queue.send(unroll)) => matches!(sent, Ok(Ok(()))),
                _ = stop_requested(&mut stop) => false,
            }
        });
        if sent {
            RemoteStats::add(&self.stats.queued, 1);
            true
        } else {
            RemoteStats::add(&self.stats.dropped_queue_full, 1);
            false
        }
    }

    /// Sets the priorities of `keys` by key; returns how many the server
    /// applied (0 when the call failed: logged, counted, training goes on).
    pub fn update_priorities(&self, keys: &[ItemKey], priorities: &[f32]) -> usize {
        let keys: Vec<u64> = keys.iter().map(|k| k.0).collect();
        let mut client = self.client.clone();
        let table = &self.config.table;
        let timeout = self.config.call_timeout;
        let result = self.runtime.block_on(async {
            tokio::time::timeout(timeout, client.update_priorities(table, &keys, priorities)).await
        });
        match result {
            Ok(Ok(report)) => {
                RemoteStats::add(&self.stats.priorities_applied, u64::from(report.applied));
                RemoteStats::add(&self.stats.priorities_stale, u64::from(report.stale));
                report.applied as usize
            }
            Ok(Err(e)) => {
                self.call_failed("priority write-back", &e.to_string());
                0
            }
            Err(_) => {
                self.call_failed("priority write-back", &format!("no answer in {timeout:?}"));
                0
            }
        }
    }

    /// Records the trainer's policy version; the watcher sends it.
    pub fn set_policy_version(&self, version: u64) {
        self.version.send_replace(version);
    }

    /// Stops the writer and the watcher; later unrolls are dropped.
    pub fn close(&self) {
        // Relaxed: see `closed`.
        self.closed.store(true, Ordering::Relaxed);
        self.stop.send_replace(true);
    }

    /// Whether `close` was called.
    pub fn is_closed(&self) -> bool {
        // Relaxed: see `closed`.
        self.closed.load(Ordering::Relaxed)
    }

    /// Bytes of one unroll (0 before `start`).
    pub(crate) fn item_bytes(&self) -> usize {
        self.item_bytes
    }

    pub(crate) fn config(&self) -> &RemoteReplayConfig {
        &self.config
    }

    pub(crate) fn table_name(&self) -> &str {
        &self.config.table
    }

    pub(crate) fn runtime(&self) -> &ClientRuntime {
        &self.runtime
    }

    fn call_failed(&self, what: &str, reason: &str) {
        RemoteStats::add(&self.stats.failed_calls, 1);
        if let Some(n) = self.call_warnings.hit() {
            warn!(table = %self.address(), occurrences = n, "{what} failed: {reason}");
        }
    }
}

/// Sends the latest policy version whenever it changes and refreshes the
/// cached `Info` counters every [`INFO_EVERY`], until `stop`.
async fn watch_table(
    mut client: ReplayClient,
    table: String,
    mut version: watch::Receiver<u64>,
    mut stop: watch::Receiver<bool>,
    stats: Arc<RemoteStats>,
) {
    let mut sent: Option<u64> = None;
    let mut tick = tokio::time::interval(INFO_EVERY);
    let warnings = LogThrottle::new(WARN_INTERVAL);
    loop {
        let wanted = *version.borrow_and_update();
        if sent != Some(wanted) {
            match client.set_policy_version(&table, wanted).await {
                Ok(()) => sent = Some(wanted),
                Err(e) => {
                    RemoteStats::add(&stats.failed_calls, 1);
                    if let Some(n) = warnings.hit() {
                        warn!(%table, occurrences = n, error = %e, "SetPolicyVersion failed; retrying");
                    }
                }
            }
        }
        tokio::select! {
            _ = stop_requested(&mut stop) => return,
            changed = version.changed() => if changed.is_err() { return },
            _ = tick.tick() => {
                if let Ok(infos) = client.info(Some(&table)).await {
                    if let Some(i) = infos.first() {
                        stats.stored.store(i.stored, Ordering::Relaxed);
                        stats
                            .table_stale_priority_updates
                            .store(i.stale_priority_updates, Ordering::Relaxed);
                    }
                }
            }
        }
    }
}
