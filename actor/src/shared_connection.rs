//! [`SharedConnection`]: one HTTP/2 connection to the learner that several
//! actors in one process multiplex their streams over.
//!
//! Why: each actor opens its own connection by default, and the learner's
//! CPU per message grows with the number of connections it holds (at
//! thousands, each message lands on a connection whose socket, buffers and
//! HTTP/2 state have gone cold in the caches; `benches/results/cluster.md`).
//! A process that runs many actors (a load generator, a Rust user spawning
//! several [`run_actor`](crate::run_actor)s) can give them one
//! `SharedConnection`: the learner then holds one connection for all their
//! streams, reads several streams' frames per socket read and answers
//! several in one write.
//!
//! Cost: the streams share one TCP connection, so a slow reader or a lost
//! packet holds all of them, and a connection that drops ends every stream
//! on it at once (each reconnects through its own backoff as before; the
//! channel redials on the first call after the drop). The first actor to
//! connect dials, with its own endpoint settings (keepalive, TLS identity),
//! which then serve every actor on the connection; one whose learner
//! address or TLS mode (on or off) differs is refused with a config error
//! naming `connection`.

use std::sync::Arc;

use tokio::sync::Mutex;
use tonic::transport::Channel;

use crate::error::ActorError;
use crate::learner_address::{Dialer, LearnerAddress};

/// A connection to the learner shared by the actors given clones of it
/// (see the module docs). Empty until the first of them connects.
#[derive(Clone, Default)]
pub struct SharedConnection {
    /// The dialled channel and the address and TLS mode it was dialled
    /// with. Held across the dial so that actors starting together wait for
    /// one connection instead of each opening its own.
    channel: Arc<Mutex<Option<Dialled>>>,
}

struct Dialled {
    address: LearnerAddress,
    tls: bool,
    channel: Channel,
}

/// Why a shared channel could not be had.
pub(crate) enum SharedConnectError {
    /// The actor's learner or TLS differs from the connection's.
    Mismatch(ActorError),
    /// Dialling failed (transient: retry).
    Dial(tonic::transport::Error),
}

impl SharedConnection {
    /// An empty connection; the first actor that uses it dials.
    pub fn new() -> Self {
        Self::default()
    }

    /// The shared channel, dialled with `dialer` if nobody has yet.
    pub(crate) async fn channel(&self, dialer: &Dialer) -> Result<Channel, SharedConnectError> {
        let mut slot = self.channel.lock().await;
        if let Some(d) = slot.as_ref() {
            if &d.address != dialer.address() || d.tls != dialer.tls() {
                return Err(SharedConnectError::Mismatch(ActorError::Config {
                    field: "connection",
                    reason: format!(
                        "shared with actors of learner {} (tls {}), but this actor's is {} (tls {})",
                        d.address,
                        d.tls,
                        dialer.address(),
                        dialer.tls()
                    ),
                }));
            }
            return Ok(d.channel.clone());
        }
        let channel = dialer.connect().await.map_err(SharedConnectError::Dial)?;
        *slot = Some(Dialled {
            address: dialer.address().clone(),
            tls: dialer.tls(),
            channel: channel.clone(),
        });
        Ok(channel)
    }
}

impl std::fmt::Debug for SharedConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedConnection")
            .field("holders", &Arc::strong_count(&self.channel))
            .finish()
    }
}

/// Equal when they are the same connection (clones of one).
impl PartialEq for SharedConnection {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.channel, &other.channel)
    }
}
