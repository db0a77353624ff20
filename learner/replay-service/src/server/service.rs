//! [`ReplayService`]: the tonic implementation of `seed.v1.Replay` over a
//! set of [`Table`]s.
//!
//! Each call looks its table up by name in a map built once at start-up
//! (no lock: tables are fixed for the server's life). A refused request
//! becomes a [`RequestError`] status for that call or stream only and is
//! counted in the table's `rejected_requests`; other clients never notice.
//!
//! Inserts run on the async workers when the table can never make them
//! wait (the common case: a copy of the bytes, microseconds); a table with
//! writer policy `Block` or a rate limiter first tries without waiting and,
//! when refused for room, waits on a blocking thread.
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};

use crate::error::RequestError;
use crate::pb::replay_server::Replay;
use crate::pb::{
    CheckpointReply, CheckpointRequest, FollowReply, FollowRequest, InfoReply, InfoRequest,
    InsertReply, InsertRequest, RateLimiterInfo, SampleReply, SampleRequest, SetPolicyVersionReply,
    SetPolicyVersionRequest, TableInfo, UpdatePrioritiesReply, UpdatePrioritiesRequest,
};
use crate::pb::{
    CompleteTrajectoryReply, CompleteTrajectoryRequest, FetchGroupReply, FetchGroupRequest,
    SubmitStepsReply, SubmitStepsRequest,
};
use crate::server::closing::stopping;
use crate::server::follow_stream;
use crate::server::group_calls;
use crate::server::grouped_table::GroupedTable;
use crate::server::insert_request;
use crate::server::layout_info;
use crate::server::sample_stream;
use crate::server::sharded_table::ShardedTable;
use crate::server::table::Table;

/// Insert replies buffered per stream before the stream task waits for the
/// client to read them.
const INSERT_REPLIES_BUFFERED: usize = 64;

/// The service over its tables.
#[derive(Debug, Clone)]
pub struct ReplayService {
    tables: Arc<HashMap<String, Arc<Table>>>,
    max_message_bytes: usize,
    /// Tables with sampler `grouped` (`server/grouped_table.rs`), apart
    /// from the fixed-shape ones so that their path stays untouched.
    grouped: Arc<HashMap<String, Arc<GroupedTable>>>,
    /// Tables loaded from shard directories (`load`), read-only; each RPC
    /// that serves them looks here first (`server/sharded_table.rs`).
    sharded: Arc<HashMap<String, Arc<ShardedTable>>>,
    /// Set by `close`: open insert and sample streams end with
    /// `UNAVAILABLE`, so a client holding a stream open cannot keep a
    /// stopping server waiting.
    closing: watch::Sender<bool>,
    /// The primary's address when this server is a mirror
    /// (`server/mirror.rs`): its tables refuse writes and `Follow`.
    mirror_of: Option<Arc<str>>,
}

impl ReplayService {
    pub fn new(tables: Vec<Table>, max_message_bytes: usize) -> Self {
        ReplayService {
            tables: Arc::new(
                tables
                    .into_iter()
                    .map(|t| (t.name.clone(), Arc::new(t)))
                    .collect(),
            ),
            max_message_bytes,
            grouped: Arc::new(HashMap::new()),
            sharded: Arc::default(),
            closing: watch::channel(false).0,
            mirror_of: None,
        }
    }

    /// The service with these grouped tables too.
    pub fn with_grouped(mut self, grouped: Vec<GroupedTable>) -> Self {
        self.grouped = Arc::new(
            grouped
                .into_iter()
                .map(|t| (t.name.clone(), Arc::new(t)))
                .collect(),
        );
        self
    }

    /// Adds tables loaded from shard directories.
    pub fn with_sharded(mut self, tables: Vec<ShardedTable>) -> Self {
        self.sharded = Arc::new(
            tables
                .into_iter()
                .map(|t| (t.name.clone(), Arc::new(t)))
                .collect(),
        );
        self
    }

    /// The grouped table called `name`.
    pub fn grouped_table(&self, name: &str) -> Option<Arc<GroupedTable>> {
        self.grouped.get(name).cloned()
    }

    fn lookup_grouped(&self, name: &str) -> Result<Arc<GroupedTable>, RequestError> {
        if self.tables.contains_key(name) {
            return Err(RequestError::Precondition {
                reason: format!(
                    "table `{name}` is not grouped: SubmitSteps, CompleteTrajectory and \
                     FetchGroup serve tables with sampler `grouped`; use Insert and Sample"
                ),
            });
        }
        self.grouped
            .get(name)
            .cloned()
            .ok_or_else(|| RequestError::UnknownTable {
                table: name.to_owned(),
                known: self.known(),
            })
    }

    /// The loaded table called `name`.
    pub fn sharded_table(&self, name: &str) -> Option<Arc<ShardedTable>> {
        self.sharded.get(name).cloned()
    }

    /// Makes this service a mirror of `upstream`: `Insert`,
    /// `UpdatePriorities` and `Follow` are refused on its tables.
    pub(crate) fn mirroring(mut self, upstream: &str) -> Self {
        self.mirror_of = Some(upstream.into());
        self
    }

    /// Refuses `rpc` on `table` when this service is a mirror.
    fn writable(&self, table: &Table, rpc: &str) -> Result<(), Status> {
        match &self.mirror_of {
            None => Ok(()),
            Some(upstream) => Err(refuse(table, mirror_refusal(upstream, &table.name, rpc))),
        }
    }

    /// The service's stop signal, for the mirror's follower tasks.
    pub(crate) fn closing(&self) -> watch::Receiver<bool> {
        self.closing.subscribe()
    }

    /// The table called `name`, by the service's own handle (tests, the
    /// benchmark's in-process figure).
    pub fn table(&self, name: &str) -> Option<Arc<Table>> {
        self.tables.get(name).cloned()
    }

    fn lookup(&self, name: &str) -> Result<Arc<Table>, RequestError> {
        if self.grouped.contains_key(name) {
            return Err(RequestError::Precondition {
                reason: format!(
                    "table `{name}` is grouped: use SubmitSteps, CompleteTrajectory and FetchGroup"
                ),
            });
        }
        if let Some(t) = self.sharded.get(name) {
            return Err(t.refuse_writes());
        }
        self.tables
            .get(name)
            .cloned()
            .ok_or_else(|| RequestError::UnknownTable {
                table: name.to_owned(),
                known: self.known(),
            })
    }

    fn known(&self) -> String {
        let mut names: Vec<&str> = self
            .tables
            .keys()
            .chain(self.grouped.keys())
            .chain(self.sharded.keys())
            .map(String::as_str)
            .collect();
        names.sort_unstable();
        names.join(", ")
    }

    /// Writes every mapped table's pages to its file (`msync`), so that
    /// what was acknowledged survives the machine as well as the process
    /// (an acknowledged item is in the page cache already: a stopped or
    /// killed server loses nothing). Blocking; errors are logged.
    pub fn flush_mapped(&self) {
        for t in self.tables.values().filter(|t| t.storage_dir().is_some()) {
            if let Err(e) = t.buffer.flush() {
                tracing::warn!(table = %t.name, "cannot flush the mapped table: {e}");
            }
        }
    }

    /// Closes every table: blocked and later calls get `UNAVAILABLE`.
    pub fn close(&self) {
        for t in self.tables.values() {
            t.buffer.close();
        }
        for g in self.grouped.values() {
            g.close();
        }
        for t in self.sharded.values() {
            t.close();
        }
        self.closing.send_replace(true);
    }
}

/// Counts a refusal against `table` and turns it into the call's status.
fn refuse(table: &Table, e: RequestError) -> Status {
    table.count_rejected();
    e.into()
}

/// Stores one request: without waiting on the worker, then, if the table
/// says "not now", waiting on a blocking thread.
async fn insert_one(table: &Arc<Table>, req: InsertRequest) -> Result<InsertReply, RequestError> {
    if !table.inserts_may_wait {
        return insert_request::insert(table, &req, Duration::ZERO);
    }
    match insert_request::insert(table, &req, Duration::ZERO) {
        Err(e) if insert_request::must_wait(&e) => {}
        done => return done,
    }
    let t = Arc::clone(table);
    tokio::task::spawn_blocking(move || insert_request::insert(&t, &req, t.insert_timeout))
        .await
        .unwrap_or_else(|e| {
            Err(RequestError::Precondition {
                reason: format!("insert failed: {e}"),
            })
        })
}

type ReplyStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

#[tonic::async_trait]
impl Replay for ReplayService {
    type InsertStream = ReplyStream<InsertReply>;
    type SampleStream = ReplyStream<SampleReply>;
    type FollowStream = ReplyStream<FollowReply>;
    type SubmitStepsStreamStream = ReplyStream<SubmitStepsReply>;

    async fn insert(
        &self,
        request: Request<Streaming<InsertRequest>>,
    ) -> Result<Response<Self::InsertStream>, Status> {
        let mut incoming = request.into_inner();
        // A task drains the request stream into a bounded channel of
        // replies (tonic's streaming pattern): a decode error or a
        // disconnect ends the task, and the reply stream then ends with it.
        let (tx, rx) = mpsc::channel(INSERT_REPLIES_BUFFERED);
        let service = self.clone();
        let mut closing = self.closing.subscribe();
        tokio::spawn(async move {
            let mut table: Option<Arc<Table>> = None;
            loop {
                let next = tokio::select! {
                    next = incoming.next() => next,
                    _ = stopping(&mut closing) => {
                        let _ = tx.send(Err(Status::unavailable("the replay server is stopping"))).await;
                        return;
                    }
                };
                let Some(next) = next else { return };
                let req = match next {
                    Ok(r) => r,
                    // Undecodable or oversize message: tonic's status says
                    // which; the client gets it on the reply stream.
                    Err(status) => {
                        if let Some(t) = &table {
                            t.count_rejected();
                        }
                        let _ = tx.send(Err(status)).await;
                        return;
                    }
                };
                let t = match &table {
                    Some(t) if t.name == req.table => Arc::clone(t),
                    Some(t) => {
                        let e = RequestError::invalid(
                            "table",
                            format!(
                                "`{}`, but this stream inserts into `{}` (one table per stream)",
                                req.table, t.name
                            ),
                        );
                        let _ = tx.send(Err(refuse(t, e))).await;
                        return;
                    }
                    None => match service.lookup(&req.table) {
                        Ok(t) => {
                            if let Err(status) = service.writable(&t, "Insert") {
                                let _ = tx.send(Err(status)).await;
                                return;
                            }
                            table = Some(Arc::clone(&t));
                            t
                        }
                        Err(e) => {
                            let _ = tx.send(Err(e.into())).await;
                            return;
                        }
                    },
                };
                let reply = insert_one(&t, req).await.map_err(|e| refuse(&t, e));
                if reply.is_ok() {
                    // Wakes the table's `Follow` streams.
                    t.published.notify_waiters();
                }
                let failed = reply.is_err();
                if tx.send(reply).await.is_err() || failed {
                    return;
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn sample(
        &self,
        request: Request<SampleRequest>,
    ) -> Result<Response<Self::SampleStream>, Status> {
        let req = request.into_inner();
        if let Some(t) = self.sharded_table(&req.table) {
            let plan = t.plan(&req, self.max_message_bytes)?;
            if let Some(reply) = sample_stream::sample_lone(&t, plan) {
                return Ok(Response::new(Box::pin(tokio_stream::once(reply))));
            }
            let rx = sample_stream::spawn(t, plan, self.closing.subscribe());
            return Ok(Response::new(Box::pin(ReceiverStream::new(rx))));
        }
        let table = self.lookup(&req.table)?;
        let plan = sample_stream::plan(&*table, &req, self.max_message_bytes)
            .map_err(|e| refuse(&table, e))?;
        if let Some(reply) = sample_stream::sample_lone(&table, plan) {
            return Ok(Response::new(Box::pin(tokio_stream::once(reply))));
        }
        let rx = sample_stream::spawn(table, plan, self.closing.subscribe());
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn follow(
        &self,
        request: Request<FollowRequest>,
    ) -> Result<Response<Self::FollowStream>, Status> {
        let req = request.into_inner();
        let table = self.lookup(&req.table)?;
        self.writable(&table, "Follow")?;
        let plan = follow_stream::plan(&table, &req, self.max_message_bytes)
            .map_err(|e| refuse(&table, e))?;
        let rx = follow_stream::spawn(table, plan, self.closing.subscribe());
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn update_priorities(
        &self,
        request: Request<UpdatePrioritiesRequest>,
    ) -> Result<Response<UpdatePrioritiesReply>, Status> {
        let req = request.into_inner();
        if let Some(t) = self.sharded_table(&req.table) {
            return t.update_priorities(&req).map(Response::new).map_err(|e| {
                t.count_rejected();
                e.into()
            });
        }
        let table = self.lookup(&req.table)?;
        self.writable(&table, "UpdatePriorities")?;
        let report = table
            .update_priorities(&req.keys, &req.priorities)
            .map_err(|e| refuse(&table, e))?;
        Ok(Response::new(UpdatePrioritiesReply {
            applied: report.applied as u32,
            stale: report.stale as u32,
            invalid: report.invalid as u32,
        }))
    }

    async fn set_policy_version(
        &self,
        request: Request<SetPolicyVersionRequest>,
    ) -> Result<Response<SetPolicyVersionReply>, Status> {
        let req = request.into_inner();
        if let Some(g) = self.grouped.get(&req.table) {
            g.set_policy_version(req.version).map_err(|e| {
                g.count_rejected();
                Status::from(e)
            })?;
            return Ok(Response::new(SetPolicyVersionReply {}));
        }
        if let Some(t) = self.sharded_table(&req.table) {
            t.set_policy_version(req.version);
            return Ok(Response::new(SetPolicyVersionReply {}));
        }
        let table = self.lookup(&req.table)?;
        table.buffer.set_policy_version(req.version);
        Ok(Response::new(SetPolicyVersionReply {}))
    }

    async fn info(&self, request: Request<InfoRequest>) -> Result<Response<InfoReply>, Status> {
        let req = request.into_inner();
        if let Some(g) = self.grouped.get(&req.table) {
            return Ok(Response::new(InfoReply {
                tables: vec![group_calls::table_info(g)],
            }));
        }
        if let Some(t) = self.sharded_table(&req.table) {
            let info = t.info(t.sampler_config().kind());
            return Ok(Response::new(InfoReply { tables: vec![info] }));
        }
        let mut tables: Vec<Arc<Table>> = if req.table.is_empty() {
            self.tables.values().cloned().collect()
        } else {
            vec![self.lookup(&req.table)?]
        };
        tables.sort_by(|a, b| a.name.cmp(&b.name));
        let mut infos: Vec<TableInfo> = tables.iter().map(|t| table_info(t)).collect();
        if req.table.is_empty() {
            infos.extend(self.grouped.values().map(|g| group_calls::table_info(g)));
            infos.extend(
                self.sharded
                    .values()
                    .map(|t| t.info(t.sampler_config().kind())),
            );
            infos.sort_by(|a, b| a.name.cmp(&b.name));
        }
        Ok(Response::new(InfoReply { tables: infos }))
    }

    async fn checkpoint(
        &self,
        request: Request<CheckpointRequest>,
    ) -> Result<Response<CheckpointReply>, Status> {
        let req = request.into_inner();
        let table = self.lookup(&req.table)?;
        // The buffer's checkpoint copies slot by slot without a lock:
        // writers and samplers go on; the blocking thread keeps the async
        // workers free.
        let t = Arc::clone(&table);
        let written = tokio::task::spawn_blocking(move || t.checkpoint())
            .await
            .map_err(|e| Status::internal(format!("checkpoint failed: {e}")))?;
        written.map(Response::new).map_err(|e| refuse(&table, e))
    }

    async fn submit_steps(
        &self,
        request: Request<SubmitStepsRequest>,
    ) -> Result<Response<SubmitStepsReply>, Status> {
        let req = request.into_inner();
        let table = self.lookup_grouped(&req.table)?;
        group_calls::submit_steps(&table, &req).map(Response::new)
    }

    async fn submit_steps_stream(
        &self,
        request: Request<Streaming<SubmitStepsRequest>>,
    ) -> Result<Response<Self::SubmitStepsStreamStream>, Status> {
        let mut incoming = request.into_inner();
        // As `insert`: a task answers the requests in order into a bounded
        // channel; a refusal, a decode error or a disconnect ends it.
        let (tx, rx) = mpsc::channel(INSERT_REPLIES_BUFFERED);
        let service = self.clone();
        let mut closing = self.closing.subscribe();
        tokio::spawn(async move {
            let mut table: Option<Arc<GroupedTable>> = None;
            loop {
                let next = tokio::select! {
                    next = incoming.next() => next,
                    _ = stopping(&mut closing) => {
                        let _ = tx.send(Err(Status::unavailable("the replay server is stopping"))).await;
                        return;
                    }
                };
                let Some(next) = next else { return };
                let reply = match next {
                    Ok(req) => {
                        let t = match &table {
                            Some(t) if t.name == req.table => Ok(Arc::clone(t)),
                            _ => service.lookup_grouped(&req.table).map_err(Status::from),
                        };
                        t.and_then(|t| {
                            let reply = group_calls::submit_steps(&t, &req);
                            table = Some(t);
                            reply
                        })
                    }
                    // Undecodable or oversize: tonic's status says which.
                    Err(status) => {
                        if let Some(t) = &table {
                            t.count_rejected();
                        }
                        Err(status)
                    }
                };
                let refused = reply.is_err();
                if tx.send(reply).await.is_err() || refused {
                    return;
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn complete_trajectory(
        &self,
        request: Request<CompleteTrajectoryRequest>,
    ) -> Result<Response<CompleteTrajectoryReply>, Status> {
        let req = request.into_inner();
        let table = self.lookup_grouped(&req.table)?;
        group_calls::complete_trajectory(&table, &req).map(Response::new)
    }

    async fn fetch_group(
        &self,
        request: Request<FetchGroupRequest>,
    ) -> Result<Response<FetchGroupReply>, Status> {
        let req = request.into_inner();
        let table = self.lookup_grouped(&req.table)?;
        group_calls::fetch_group(table, &req, self.closing.subscribe())
            .await
            .map(Response::new)
    }
}

/// A plain table's `Info` (also what `seed_rs.ReplayBuffer.info()` reads
/// in process).
pub fn table_info(t: &Table) -> TableInfo {
    let b = &t.buffer;
    let stats = b.stats();
    let layout = b.layout();
    let limiter = b.config().rate_limiter.map(|l| {
        let (inserts, samples) = stats
            .rate_limiter
            .map_or((0, 0), |c| (c.inserts, c.samples));
        RateLimiterInfo {
            inserts,
            samples,
            min_size_to_sample: l.min_size_to_sample as u64,
            samples_per_insert: l.samples_per_insert,
            min_diff: l.min_diff,
            max_diff: l.max_diff,
        }
    });
    TableInfo {
        name: t.name.clone(),
        sampler: b.config().sampler.kind().to_owned(),
        fields: layout_info::field_infos(layout),
        policy_version_field: layout_info::policy_version_field(layout),
        capacity: stats.capacity as u64,
        stored: stats.stored as u64,
        available: b.available() as u64,
        inserted: stats.inserted,
        sampled: stats.sampled,
        removed: stats.removed,
        evicted_unconsumed: stats.evicted_unconsumed,
        dropped_policy_lag: stats.dropped_policy_lag,
        stale_priority_updates: stats.stale_priority_updates,
        invalid_priority_updates: stats.invalid_priority_updates,
        rate_limiter: limiter,
        // Relaxed: statistics (see `Table`).
        sample_streams: t.sample_streams.load(Ordering::Relaxed),
        sample_flow_control_waits: t.flow_control_waits.load(Ordering::Relaxed),
        rejected_requests: t.rejected_requests.load(Ordering::Relaxed),
        storage_dir: t
            .storage_dir()
            .map(|d| d.display().to_string())
            .unwrap_or_default(),
        grouped: None,
        shards: Vec::new(),
    }
}

/// The refusal of a write (or `Follow`) on a mirror table.
pub(crate) fn mirror_refusal(upstream: &str, table: &str, rpc: &str) -> RequestError {
    RequestError::Precondition {
        reason: format!(
            "table `{table}` is a mirror of the replay server at {upstream}: {rpc} \
             goes to the primary"
        ),
    }
}
