//! The `--metrics-addr` HTTP endpoint: `GET /metrics` answers the
//! OpenMetrics text of a [`Metrics`] snapshot taken at that moment (see
//! [`crate::report::prometheus`]); any other path is 404, any other method 405.
//!
//! HTTP/1.1 on hyper, one task per connection on the learner's tokio
//! runtime; nothing here touches the step path. [`MetricsEndpoint::shutdown`]
//! stops accepting and closes connections gracefully; one still busy after
//! [`SHUTDOWN_GRACE`] is cut.
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::header::{HeaderValue, ALLOW, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};
use tracing::{debug, info, warn};

use crate::error::LearnerError;
use crate::metrics::Metrics;
use crate::report::prometheus::{MetricsExposition, CONTENT_TYPE as OPENMETRICS};

/// The one path served.
pub const METRICS_PATH: &str = "/metrics";
/// How long [`MetricsEndpoint::shutdown`] waits for open connections.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);
/// A client must send its request headers within this time.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Pause after a failed `accept` (e.g. out of file descriptors), so the
/// accept loop does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// A running metrics endpoint.
pub struct MetricsEndpoint {
    addr: SocketAddr,
    shutdown: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl MetricsEndpoint {
    /// Listens on `addr` (port 0: an ephemeral port, see
    /// [`local_addr`](Self::local_addr)) and serves `metrics` until
    /// [`shutdown`](Self::shutdown). Must run inside a tokio runtime.
    pub async fn bind(addr: SocketAddr, metrics: Arc<Metrics>) -> Result<Self, LearnerError> {
        let bind_err = |cause| LearnerError::MetricsBind { addr, cause };
        let listener = TcpListener::bind(addr).await.map_err(bind_err)?;
        let local = listener.local_addr().map_err(bind_err)?;
        let exposition = Arc::new(MetricsExposition::new(metrics));
        let (shutdown, stop) = watch::channel(false);
        let task = tokio::spawn(accept_loop(listener, exposition, stop));
        info!(addr = %local, path = METRICS_PATH, "metrics endpoint listening");
        Ok(MetricsEndpoint {
            addr: local,
            shutdown,
            task,
        })
    }

    /// The address actually listened on (ephemeral port resolved).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting, lets open connections finish their current request
    /// (up to [`SHUTDOWN_GRACE`]), then returns; the port is free after.
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        let mut task = self.task;
        if tokio::time::timeout(SHUTDOWN_GRACE, &mut task)
            .await
            .is_err()
        {
            // Aborting drops the JoinSet, which aborts the connections.
            task.abort();
            let _ = task.await;
        }
    }
}

async fn accept_loop(
    listener: TcpListener,
    exposition: Arc<MetricsExposition>,
    mut stop: watch::Receiver<bool>,
) {
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            _ = stopped(&mut stop) => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    debug!(%peer, "metrics connection");
                    connections.spawn(serve_connection(
                        http.clone(),
                        stream,
                        Arc::clone(&exposition),
                        stop.clone(),
                    ));
                }
                Err(e) => {
                    warn!(error = %e, "metrics endpoint: accept failed");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
            },
            // Reap finished connections so the set stays small.
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listener);
    while connections.join_next().await.is_some() {}
}

async fn serve_connection(
    http: http1::Builder,
    stream: TcpStream,
    exposition: Arc<MetricsExposition>,
    mut stop: watch::Receiver<bool>,
) {
    let service = service_fn(move |req: Request<Incoming>| {
        let response = respond(&req, &exposition);
        async move { Ok::<_, Infallible>(response) }
    });
    let conn = http.serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    let result = tokio::select! {
        r = conn.as_mut() => r,
        _ = stopped(&mut stop) => {
            conn.as_mut().graceful_shutdown();
            conn.as_mut().await
        }
    };
    if let Err(e) = result {
        debug!(error = %e, "metrics connection ended with an error");
    }
}

/// Resolves once shutdown is requested (or the endpoint handle is gone).
/// A function, so the channel's read guard is dropped before the caller's
/// next `.await` (it is not `Send`).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// The answer to one request.
fn respond(req: &Request<Incoming>, exposition: &MetricsExposition) -> Response<String> {
    if req.uri().path() != METRICS_PATH {
        return plain(
            StatusCode::NOT_FOUND,
            "not found; metrics are at GET /metrics\n",
        );
    }
    if req.method() != Method::GET {
        let mut r = plain(StatusCode::METHOD_NOT_ALLOWED, "only GET is served\n");
        r.headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET"));
        return r;
    }
    match exposition.render() {
        Ok(text) => {
            let mut r = Response::new(text);
            r.headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static(OPENMETRICS));
            r
        }
        Err(e) => {
            warn!(error = %e, "rendering metrics failed");
            plain(
                StatusCode::INTERNAL_SERVER_ERROR,
                "rendering metrics failed\n",
            )
        }
    }
}

fn plain(status: StatusCode, body: &str) -> Response<String> {
    let mut r = Response::new(body.to_string());
    *r.status_mut() = status;
    r.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}
