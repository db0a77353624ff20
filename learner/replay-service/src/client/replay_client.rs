//! [`ReplayClient`]: one connection to a replay server and the calls over
//! it; [`Inserter`] and [`SampleStream`], the two long-lived streams.
//!
//! Errors: the server's refusals come back as [`ClientError::Status`] with
//! the gRPC code and the server's message (which names the field); a
//! stream that ended on an error stays ended, open a new one. Cost per
//! call: one HTTP/2 stream (tens of microseconds on loopback); the streams
//! amortise that over many batches.
use std::time::Duration;

use seed_shared::{error_chain, Token};
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};
use tonic::Streaming;

use crate::client::insert_batch::InsertBatch;
use crate::client::ordered_stream::{self, OrderedStream};
use crate::client::sampled_batch::SampledBatch;
use crate::error::ClientError;
use crate::pb;
use crate::pb::replay_client::ReplayClient as RawClient;
use crate::token::AddToken;

/// How a client connects.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// The server's token, sent with every call.
    pub token: Option<Token>,
    /// CA certificates (PEM) to verify a TLS server with; `https://`
    /// addresses need it.
    pub tls_ca: Option<seed_shared::tls::PemFile>,
    /// The name the server's certificate is for (default: the address's
    /// host).
    pub tls_domain: Option<String>,
    /// Client certificate and key (PEM) for mutual TLS.
    pub tls_identity: Option<(seed_shared::tls::PemFile, seed_shared::tls::PemFile)>,
    /// Largest message sent or accepted.
    pub max_message_bytes: usize,
    pub connect_timeout: Duration,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            token: None,
            tls_ca: None,
            tls_domain: None,
            tls_identity: None,
            max_message_bytes: seed_shared::DEFAULT_MAX_MESSAGE_BYTES,
            connect_timeout: Duration::from_secs(10),
        }
    }
}

/// Keys given to one inserted batch: `first .. first + count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InsertedKeys {
    pub first: u64,
    pub count: u32,
}

impl InsertedKeys {
    pub fn iter(&self) -> impl Iterator<Item = u64> {
        self.first..self.first + u64::from(self.count)
    }
}

/// What a priority update did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PriorityReport {
    pub applied: u32,
    /// Keys whose item was already overwritten.
    pub stale: u32,
    pub invalid: u32,
}

/// A sample stream's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleOptions {
    pub batch_size: u32,
    /// Batches to receive; 0: until the stream is dropped.
    pub max_batches: u64,
    /// Batches the server may prepare ahead (0: its default, 2; at most 16).
    pub max_in_flight: u32,
    /// How long the server waits for items for one batch; `None`: for ever.
    pub timeout: Option<Duration>,
}

impl SampleOptions {
    /// Batches of `batch_size` until dropped, server defaults otherwise.
    pub fn new(batch_size: u32) -> Self {
        SampleOptions {
            batch_size,
            max_batches: 0,
            max_in_flight: 0,
            timeout: None,
        }
    }
}

/// A connection to a replay server. Cheap to clone (the clones share the
/// connection).
#[derive(Debug, Clone)]
pub struct ReplayClient {
    raw: RawClient<InterceptedService<Channel, AddToken>>,
}

impl ReplayClient {
    /// Connects to `addr` (`http://HOST:PORT`, `https://HOST:PORT`, or
    /// `HOST:PORT` for plain HTTP/2).
    pub async fn connect(addr: &str, options: ClientOptions) -> Result<Self, ClientError> {
        let url = if addr.contains("://") {
            addr.to_owned()
        } else {
            format!("http://{addr}")
        };
        let address_err = |reason: String| ClientError::Address {
            addr: addr.to_owned(),
            reason,
        };
        let mut endpoint = Endpoint::from_shared(url.clone())
            .map_err(|e| address_err(e.to_string()))?
            .tcp_nodelay(true)
            .connect_timeout(options.connect_timeout);
        if url.starts_with("https://") {
            let mut tls = ClientTlsConfig::new();
            if let Some(ca) = &options.tls_ca {
                tls = tls.ca_certificate(Certificate::from_pem(&ca.pem));
            }
            if let Some(d) = &options.tls_domain {
                tls = tls.domain_name(d.clone());
            }
            if let Some((cert, key)) = &options.tls_identity {
                tls = tls.identity(Identity::from_pem(&cert.pem, &key.pem));
            }
            endpoint = endpoint
                .tls_config(tls)
                .map_err(|e| address_err(format!("TLS: {e}")))?;
        }
        let channel = endpoint.connect().await.map_err(|e| ClientError::Connect {
            addr: addr.to_owned(),
            reason: error_chain(&e),
        })?;
        let token = AddToken::new(options.token.as_ref()).map_err(|e| ClientError::Batch {
            field: "token".into(),
            reason: e.to_string(),
        })?;
        let raw = RawClient::with_interceptor(channel, token)
            .max_decoding_message_size(options.max_message_bytes)
            .max_encoding_message_size(options.max_message_bytes);
        Ok(ReplayClient { raw })
    }

    /// Inserts one batch (a stream of its own; for many batches keep an
    /// [`Inserter`]).
    pub async fn insert(
        &mut self,
        table: &str,
        batch: InsertBatch,
    ) -> Result<InsertedKeys, ClientError> {
        let mut inserter = self.inserter(table).await?;
        inserter.insert(batch).await
    }

    /// Opens an insert stream into `table`.
    pub async fn inserter(&mut self, table: &str) -> Result<Inserter, ClientError> {
        let (tx, requests) = ordered_stream::requests();
        let replies = self.raw.insert(requests).await?.into_inner();
        Ok(Inserter {
            table: table.to_owned(),
            stream: OrderedStream::new(tx, replies),
        })
    }

    /// One batch of `batch_size` items, waiting for items as long as it
    /// takes.
    pub async fn sample(
        &mut self,
        table: &str,
        batch_size: u32,
    ) -> Result<SampledBatch, ClientError> {
        let mut options = SampleOptions::new(batch_size);
        options.max_batches = 1;
        let mut stream = self.sample_stream(table, options).await?;
        let batch = stream.next().await?.ok_or(ClientError::StreamClosed)?;
        // Read the stream to its end (the trailers follow the batch) rather
        // than dropping it: a dropped stream is reset, and HTTP/2 servers
        // close connections that reset streams rapidly (hyper's rapid-reset
        // guard answers thousands of `sample` calls with GOAWAY).
        if stream.next().await?.is_some() {
            return Err(ClientError::Protocol {
                reason: "a one-batch sample stream sent a second batch".into(),
            });
        }
        Ok(batch)
    }

    /// Opens a sample stream.
    pub async fn sample_stream(
        &mut self,
        table: &str,
        options: SampleOptions,
    ) -> Result<SampleStream, ClientError> {
        let replies = self
            .raw
            .sample(pb::SampleRequest {
                table: table.to_owned(),
                batch_size: options.batch_size,
                max_batches: options.max_batches,
                max_in_flight: options.max_in_flight,
                timeout_ms: options.timeout.map_or(0, |t| (t.as_millis() as u64).max(1)),
            })
            .await?
            .into_inner();
        Ok(SampleStream { replies })
    }

    /// Sets the priorities of `keys` (prioritized tables).
    pub async fn update_priorities(
        &mut self,
        table: &str,
        keys: &[u64],
        priorities: &[f32],
    ) -> Result<PriorityReport, ClientError> {
        let r = self
            .raw
            .update_priorities(pb::UpdatePrioritiesRequest {
                table: table.to_owned(),
                keys: keys.to_vec(),
                priorities: priorities.to_vec(),
            })
            .await?
            .into_inner();
        Ok(PriorityReport {
            applied: r.applied,
            stale: r.stale,
            invalid: r.invalid,
        })
    }

    /// Tells `table` the learner's current policy version (its lag cap).
    pub async fn set_policy_version(
        &mut self,
        table: &str,
        version: u64,
    ) -> Result<(), ClientError> {
        self.raw
            .set_policy_version(pb::SetPolicyVersionRequest {
                table: table.to_owned(),
                version,
            })
            .await?;
        Ok(())
    }

    /// Every table's info (`None`) or one table's.
    pub async fn info(&mut self, table: Option<&str>) -> Result<Vec<pb::TableInfo>, ClientError> {
        Ok(self
            .raw
            .info(pb::InfoRequest {
                table: table.unwrap_or_default().to_owned(),
            })
            .await?
            .into_inner()
            .tables)
    }

    /// Has the server write `table`'s checkpoint into its checkpoint
    /// directory; returns when the file is complete.
    pub async fn checkpoint(&mut self, table: &str) -> Result<pb::CheckpointReply, ClientError> {
        Ok(self
            .raw
            .checkpoint(pb::CheckpointRequest {
                table: table.to_owned(),
            })
            .await?
            .into_inner())
    }

    /// The generated client, for calls this type does not wrap.
    pub fn raw(&mut self) -> &mut RawClient<InterceptedService<Channel, AddToken>> {
        &mut self.raw
    }
}

/// An insert stream into one table. [`Inserter::send`] queues a batch and
/// [`Inserter::ack`] takes the next acknowledgement (in order), so several
/// batches can be in flight; [`Inserter::insert`] does both.
#[derive(Debug)]
pub struct Inserter {
    table: String,
    stream: OrderedStream<pb::InsertRequest, pb::InsertReply>,
}

impl Inserter {
    /// Queues `batch` (waits while the queue is full).
    pub async fn send(&mut self, batch: InsertBatch) -> Result<(), ClientError> {
        self.stream.send(batch.into_request(&self.table)).await
    }

    /// The keys of the oldest batch not yet acknowledged.
    pub async fn ack(&mut self) -> Result<InsertedKeys, ClientError> {
        let r = self.stream.ack().await?;
        Ok(InsertedKeys {
            first: r.first_key,
            count: r.count,
        })
    }

    /// Sends `batch` and waits for its keys.
    pub async fn insert(&mut self, batch: InsertBatch) -> Result<InsertedKeys, ClientError> {
        self.send(batch).await?;
        self.ack().await
    }

    /// Batches sent and not yet acknowledged.
    pub fn pending(&self) -> usize {
        self.stream.pending()
    }
}

/// A sample stream: batches as the server prepares them.
#[derive(Debug)]
pub struct SampleStream {
    replies: Streaming<pb::SampleReply>,
}

impl SampleStream {
    /// The next batch; `None` when the stream ended after its
    /// `max_batches`.
    pub async fn next(&mut self) -> Result<Option<SampledBatch>, ClientError> {
        Ok(self.replies.message().await?.map(SampledBatch::new))
    }
}
