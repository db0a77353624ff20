//! A listening replay server: how it listens ([`ServerOptions`]), the
//! handle that stops it ([`RunningServer`]), and `serve`, which binds and
//! serves a built [`ReplayService`]. Both `start` (tables from a config)
//! and the mirror (tables copied from a primary) end here.
use std::net::SocketAddr;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::server::TcpIncoming;
use tracing::info;

use crate::error::ServeError;
use crate::pb::replay_server::ReplayServer;
use crate::server::service::ReplayService;
use crate::server::tls::ServerTls;
use crate::token::TokenCheck;

/// Default listen address (loopback: nothing is exposed by accident).
pub const DEFAULT_LISTEN: &str = "127.0.0.1:50061";

/// How long `stop` waits for running calls to finish.
pub const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// How the server listens and whom it lets in.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    pub listen: SocketAddr,
    /// Shared secret every call must carry; `None`: no check.
    pub token: Option<seed_shared::Token>,
    pub tls: Option<ServerTls>,
    /// Largest message accepted or sent (an insert batch, a sample reply).
    pub max_message_bytes: usize,
    /// Restore in-memory tables from their checkpoints in
    /// `checkpoint_dir`, where one exists.
    pub restore: bool,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            token: None,
            tls: None,
            max_message_bytes: seed_shared::DEFAULT_MAX_MESSAGE_BYTES,
            restore: false,
        }
    }
}

/// A serving replay server.
#[derive(Debug)]
pub struct RunningServer {
    addr: SocketAddr,
    service: ReplayService,
    shutdown: watch::Sender<bool>,
    serve: tokio::task::JoinHandle<Result<(), tonic::transport::Error>>,
}

impl RunningServer {
    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ADDR` (or `https://` with TLS) for a client.
    pub fn url(&self, tls: bool) -> String {
        format!("{}://{}", if tls { "https" } else { "http" }, self.addr)
    }

    /// The service, for in-process access to its tables.
    pub fn service(&self) -> &ReplayService {
        &self.service
    }

    /// Closes the tables (blocked calls and open streams end with
    /// `UNAVAILABLE`), stops accepting calls and waits for the server task,
    /// at most [`STOP_GRACE`] for calls still running, then flushes mapped
    /// tables to their files.
    pub async fn stop(mut self) -> Result<(), ServeError> {
        self.service.close();
        let _ = self.shutdown.send(true);
        let finished = tokio::time::timeout(STOP_GRACE, &mut self.serve).await;
        let service = self.service.clone();
        let _ = tokio::task::spawn_blocking(move || service.flush_mapped()).await;
        let Ok(finished) = finished else {
            self.serve.abort();
            tracing::warn!(grace = ?STOP_GRACE, "calls still running at stop were cut off");
            return Ok(());
        };
        match finished {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(ServeError::Transport {
                reason: e.to_string(),
            }),
            Err(e) => Err(ServeError::Transport {
                reason: e.to_string(),
            }),
        }
    }

    /// Waits until the server task ends (it ends on `stop` or an error).
    pub async fn wait(&mut self) -> Result<(), ServeError> {
        match (&mut self.serve).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(ServeError::Transport {
                reason: e.to_string(),
            }),
            Err(e) => Err(ServeError::Transport {
                reason: e.to_string(),
            }),
        }
    }
}

/// Binds `options.listen` and serves `service` (the tables are built).
pub(crate) async fn serve(
    service: ReplayService,
    options: &ServerOptions,
) -> Result<RunningServer, ServeError> {
    let listener = TcpListener::bind(options.listen)
        .await
        .map_err(|source| ServeError::Bind {
            addr: options.listen.to_string(),
            source,
        })?;
    let addr = listener.local_addr().map_err(|source| ServeError::Bind {
        addr: options.listen.to_string(),
        source,
    })?;
    let grpc = ReplayServer::new(service.clone())
        .max_decoding_message_size(options.max_message_bytes)
        .max_encoding_message_size(options.max_message_bytes);
    let check = TokenCheck::new(options.token.clone());
    let intercepted = InterceptedService::new(grpc, move |r| check.check(r));
    let mut builder = tonic::transport::Server::builder();
    if let Some(tls) = &options.tls {
        builder = builder
            .tls_config(tls.tonic_config())
            .map_err(|e| ServeError::Transport {
                reason: format!("cannot configure TLS (--tls-cert): {e}"),
            })?;
    }
    let (shutdown, mut stop) = watch::channel(false);
    let router = builder.add_service(intercepted);
    let serve = tokio::spawn(router.serve_with_incoming_shutdown(
        TcpIncoming::from(listener).with_nodelay(Some(true)),
        async move {
            let _ = stop.wait_for(|s| *s).await;
        },
    ));
    info!(%addr, tls = options.tls.is_some(), token = options.token.is_some(), "replay server listening");
    Ok(RunningServer {
        addr,
        service,
        shutdown,
        serve,
    })
}
