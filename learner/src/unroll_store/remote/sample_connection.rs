//! [`SampleConnection`]: the connection the prefetch threads' `Sample`
//! streams use, with a small HTTP/2 stream window.
//!
//! Why a connection of its own: a sample stream is flow-controlled by
//! HTTP/2, and the client's default stream window (2 MiB in hyper) lets the
//! server push that much ahead of the trainer: for CartPole's 8 KiB batches
//! about 240 batches, each one a step older than the last, which showed as
//! a policy lag of ~230 versions against ~24 in process. This connection
//! announces a window of about [`WINDOW_BATCHES`] batches (at least
//! [`MIN_WINDOW`]), so what waits between server and trainer stays a few
//! batches (a larger reply still goes through, in window-sized pieces).
//! Inserts and unary calls keep the main connection and its large window.
//! Cost: one more TCP connection per learner.
use seed_replay_service::pb;
use seed_replay_service::pb::replay_client::ReplayClient as RawClient;
use seed_replay_service::token::AddToken;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

use crate::unroll_store::remote::config::RemoteReplayConfig;

/// Sample batches the stream window holds.
pub const WINDOW_BATCHES: u32 = 2;
/// The smallest window announced (bytes).
pub const MIN_WINDOW: u32 = 16 * 1024;

/// The sampling connection's generated client.
pub type SampleConnection = RawClient<InterceptedService<Channel, AddToken>>;

/// Connects lazily (on the first call) to `config`'s server with a stream
/// window of [`WINDOW_BATCHES`] replies of `reply_bytes`. Must run inside
/// the client's runtime (the channel's task is spawned there).
pub fn connect(
    config: &RemoteReplayConfig,
    reply_bytes: usize,
) -> Result<SampleConnection, String> {
    let window = (reply_bytes as u64 * u64::from(WINDOW_BATCHES))
        .clamp(u64::from(MIN_WINDOW), 1 << 30) as u32;
    let mut endpoint = Endpoint::from_shared(config.endpoint.clone())
        .map_err(|e| e.to_string())?
        .tcp_nodelay(true)
        .connect_timeout(config.call_timeout)
        .initial_stream_window_size(window);
    if config.endpoint.starts_with("https://") {
        let mut tls = ClientTlsConfig::new();
        if let Some(ca) = &config.tls_ca {
            tls = tls.ca_certificate(Certificate::from_pem(&ca.pem));
        }
        if let Some(d) = &config.tls_domain {
            tls = tls.domain_name(d.clone());
        }
        if let Some((cert, key)) = &config.tls_identity {
            tls = tls.identity(Identity::from_pem(&cert.pem, &key.pem));
        }
        endpoint = endpoint.tls_config(tls).map_err(|e| e.to_string())?;
    }
    let token = AddToken::new(config.token.as_ref()).map_err(|e| format!("--replay-token {e}"))?;
    Ok(RawClient::with_interceptor(endpoint.connect_lazy(), token)
        .max_decoding_message_size(config.max_message_bytes)
        .max_encoding_message_size(config.max_message_bytes))
}

/// The request for an endless stream of batches of `batch_size`, at most
/// `max_in_flight` prepared ahead on the server.
pub fn request(table: &str, batch_size: u32, max_in_flight: u32) -> pb::SampleRequest {
    pb::SampleRequest {
        table: table.to_owned(),
        batch_size,
        max_batches: 0,
        max_in_flight,
        timeout_ms: 0,
    }
}
