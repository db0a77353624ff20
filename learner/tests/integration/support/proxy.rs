//! A TCP proxy between a client and the learner whose connections can be
//! frozen: a frozen connection stops forwarding bytes in both directions but
//! keeps both sockets open. That is what the other end sees of a SIGSTOPped
//! peer or a half-open connection (a host gone without a FIN): nothing
//! arrives, nothing is answered, nothing is closed.
//!
//! It also counts HTTP/2 PING frames on the plaintext connections it
//! forwards (the learner's pings, the client's acks), so a test can wait for
//! keepalive rounds instead of for time.
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// HTTP/2 PING frames seen, over all connections.
#[derive(Default)]
pub struct PingCounts {
    /// PINGs (not acks) the learner sent.
    pub from_learner: AtomicU64,
    /// PING acks the client sent.
    pub acks_from_client: AtomicU64,
    /// PINGs (not acks) the client sent.
    pub from_client: AtomicU64,
}

pub struct FreezableProxy {
    addr: SocketAddr,
    /// One freeze switch per connection accepted so far.
    switches: Arc<Mutex<Vec<watch::Sender<bool>>>>,
    pub pings: Arc<PingCounts>,
    accept: tokio::task::JoinHandle<()>,
}

impl FreezableProxy {
    /// Listens on an ephemeral loopback port and forwards each connection
    /// to `upstream`.
    pub async fn start(upstream: SocketAddr) -> FreezableProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("proxy binds");
        let addr = listener.local_addr().expect("proxy address");
        let switches = Arc::new(Mutex::new(Vec::new()));
        let pings = Arc::new(PingCounts::default());
        let accept = {
            let switches = Arc::clone(&switches);
            let pings = Arc::clone(&pings);
            tokio::spawn(async move {
                while let Ok((client, _)) = listener.accept().await {
                    let Ok(learner) = TcpStream::connect(upstream).await else {
                        continue;
                    };
                    let (switch, frozen) = watch::channel(false);
                    switches
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(switch);
                    let (client_read, client_write) = client.into_split();
                    let (learner_read, learner_write) = learner.into_split();
                    tokio::spawn(pump(
                        client_read,
                        learner_write,
                        frozen.clone(),
                        FrameCounter::client_to_server(Arc::clone(&pings)),
                    ));
                    tokio::spawn(pump(
                        learner_read,
                        client_write,
                        frozen,
                        FrameCounter::server_to_client(Arc::clone(&pings)),
                    ));
                }
            })
        };
        FreezableProxy {
            addr,
            switches,
            pings,
            accept,
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://` URI of the proxy.
    pub fn uri(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Freezes every connection accepted so far; later ones flow.
    pub fn freeze(&self) {
        for switch in self
            .switches
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            let _ = switch.send(true);
        }
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.switches
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len()
    }

    pub fn learner_pings(&self) -> u64 {
        self.pings.from_learner.load(Ordering::Relaxed)
    }

    pub fn client_acks(&self) -> u64 {
        self.pings.acks_from_client.load(Ordering::Relaxed)
    }

    pub fn client_pings(&self) -> u64 {
        self.pings.from_client.load(Ordering::Relaxed)
    }
}

impl Drop for FreezableProxy {
    fn drop(&mut self) {
        self.accept.abort();
        // Dropping the switches ends the pumps, which closes the sockets.
        self.switches
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }
}

/// Forwards `from` to `to` while not frozen. Frozen, it neither reads nor
/// writes (a chunk already read is held back), so bytes pile up in the
/// kernel's buffers and the peer's pings go unanswered.
async fn pump(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    mut frozen: watch::Receiver<bool>,
    mut frames: FrameCounter,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        if frozen.wait_for(|f| !*f).await.is_err() {
            return;
        }
        let n = tokio::select! {
            read = from.read(&mut buf) => match read {
                Ok(0) | Err(_) => return, // dropping `to` closes its side
                Ok(n) => n,
            },
            // Reading is cancel-safe: nothing was consumed.
            _ = frozen.wait_for(|f| *f) => continue,
        };
        frames.feed(&buf[..n]);
        if frozen.wait_for(|f| !*f).await.is_err() {
            return;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// Splits a plaintext HTTP/2 byte stream into frames and counts PINGs.
struct FrameCounter {
    /// Client connection preface bytes still to skip (24 on the client's side).
    preface: usize,
    header: Vec<u8>,
    /// Payload bytes of the current frame still to skip.
    skip: usize,
    from_server: bool,
    pings: Arc<PingCounts>,
}

impl FrameCounter {
    const PREFACE: usize = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".len();
    const PING: u8 = 0x6;
    const ACK: u8 = 0x1;

    fn client_to_server(pings: Arc<PingCounts>) -> Self {
        FrameCounter {
            preface: Self::PREFACE,
            header: Vec::with_capacity(9),
            skip: 0,
            from_server: false,
            pings,
        }
    }

    fn server_to_client(pings: Arc<PingCounts>) -> Self {
        FrameCounter {
            preface: 0,
            from_server: true,
            ..Self::client_to_server(pings)
        }
    }

    fn feed(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            if self.preface > 0 {
                let n = self.preface.min(bytes.len());
                self.preface -= n;
                bytes = &bytes[n..];
            } else if self.skip > 0 {
                let n = self.skip.min(bytes.len());
                self.skip -= n;
                bytes = &bytes[n..];
            } else {
                let n = (9 - self.header.len()).min(bytes.len());
                self.header.extend_from_slice(&bytes[..n]);
                bytes = &bytes[n..];
                if self.header.len() == 9 {
                    let h = &self.header;
                    self.skip = (h[0] as usize) << 16 | (h[1] as usize) << 8 | h[2] as usize;
                    if h[3] == Self::PING {
                        let ack = h[4] & Self::ACK != 0;
                        let counter = match (self.from_server, ack) {
                            (true, false) => Some(&self.pings.from_learner),
                            (false, true) => Some(&self.pings.acks_from_client),
                            (false, false) => Some(&self.pings.from_client),
                            (true, true) => None,
                        };
                        if let Some(c) = counter {
                            c.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    self.header.clear();
                }
            }
        }
    }
}
