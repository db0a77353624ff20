//! The replay server: tables built from a [`ServiceConfig`], served over
//! TCP by tonic with the options of [`ServerOptions`].
//!
//! [`start`] builds every table first (allocating and first-touching its
//! memory, reopening mapped directories, restoring checkpoints), then binds
//! and serves; a table that cannot be built stops the start with an error
//! naming it, before anything listens. The returned [`RunningServer`] knows
//! its real address (port 0 picks one) and stops on [`RunningServer::stop`].
//!
//! Pieces, one per file: [`table`] (a served buffer and its counters),
//! `closing` (the stop signal streams watch), `field_block` (a batch's
//! fields as the wire's blocks, for every reply that carries items),
//! `insert_request` (checks and
//! stores one insert), `block_check` (the field blocks of an insert or a
//! submit checked against the layout), `sample_stream` (the
//! producer of one sample stream, with its flow control), `sample_source`
//! (what that producer reads: a table or loaded shards), [`sharded_table`]
//! (mapped directories of other servers served as one read-only table),
//! [`service`] (the RPCs), `layout_info` (a layout as `Info` describes
//! it), `crate::token` and [`tls`] (the learner's security options).
//! Grouped tables: [`grouped_table`] (the trajectory pool), `step_request`
//! (checks and stages one `SubmitSteps`), `group_calls` (their RPCs).
//! [`in_process`]: the table calls without the network, for
//! `seed_rs.ReplayBuffer` (the Python package's in-process buffer).
//! [`running_server`]: binding, serving and stopping (used by `start` and
//! the mirror). Mirrors: `follow_stream` (the producer of one `Follow` stream),
//! [`mirror`] (a server copying another's tables through `Follow`).
mod block_check;
mod closing;
mod field_block;
mod follow_stream;
mod group_calls;
mod group_journal;
pub mod grouped_table;
pub mod in_process;
mod insert_request;
mod layout_info;
pub mod mirror;
pub mod pool_id;
mod reply_size;
pub mod running_server;
mod sample_source;
mod sample_stream;
pub mod service;
pub mod sharded_table;
mod step_request;
pub mod table;
pub mod tls;

use std::path::PathBuf;

use tracing::info;

pub use crate::token::TokenCheck;
pub use follow_stream::DEFAULT_FOLLOW_BATCH;
pub use grouped_table::GroupedTable;
pub use mirror::{start_mirror, MirrorOptions};
use running_server::serve;
pub use running_server::{RunningServer, ServerOptions, DEFAULT_LISTEN, STOP_GRACE};
pub use sample_stream::{DEFAULT_MAX_IN_FLIGHT, MAX_IN_FLIGHT};
pub use service::ReplayService;
pub use sharded_table::ShardedTable;
pub use table::Table;
pub use tls::ServerTls;

use crate::config::ServiceConfig;
use crate::error::ServeError;

/// Builds the tables and starts serving them.
pub async fn start(
    mut config: ServiceConfig,
    options: ServerOptions,
) -> Result<RunningServer, ServeError> {
    if let Some(dir) = &config.checkpoint_dir {
        std::fs::create_dir_all(dir).map_err(|e| {
            ServeError::Config(crate::error::ConfigError::Service {
                reason: format!("cannot create checkpoint_dir {}: {e}", dir.display()),
            })
        })?;
    }
    let checkpoint_dir: Option<PathBuf> = config.checkpoint_dir.clone();
    let grouped_specs = std::mem::take(&mut config.grouped);
    let restore = options.restore;
    // Building allocates and touches every table's memory: off the async
    // workers.
    // Tables with `load` are served from their shard directories.
    let (loaded, own): (Vec<_>, Vec<_>) =
        config.tables.into_iter().partition(|t| !t.load.is_empty());
    let (tables, sharded) = tokio::task::spawn_blocking(move || {
        let tables = own
            .into_iter()
            .map(|spec| Table::open(spec, checkpoint_dir.as_deref(), restore))
            .collect::<Result<Vec<_>, _>>()?;
        let sharded = loaded
            .into_iter()
            .map(ShardedTable::open)
            .collect::<Result<Vec<_>, _>>()?;
        Ok::<_, ServeError>((tables, sharded))
    })
    .await
    .map_err(|e| ServeError::Transport {
        reason: format!("building the tables failed: {e}"),
    })??;
    for t in &tables {
        info!(table = %t.name(), capacity = t.buffer().capacity(), items = t.buffer().len(),
            item_bytes = t.buffer().layout().item_bytes(), "table ready");
    }
    let grouped = grouped_specs
        .into_iter()
        .map(|spec| GroupedTable::new(spec, options.max_message_bytes))
        .collect::<Result<Vec<_>, _>>()?;
    for t in &sharded {
        info!(table = %t.name(), shards = t.shards().len(), items = t.len(), "loaded table ready (read-only)");
    }
    let service = ReplayService::new(tables, options.max_message_bytes)
        .with_grouped(grouped)
        .with_sharded(sharded);
    serve(service, &options).await
}
