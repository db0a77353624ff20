//! The service's stop signal as open streams see it: a `watch` channel the
//! service sets once when it closes. Insert streams and sample producers
//! that wait on their client select on [`stopping`], so a client holding a
//! stream open cannot keep a stopping server waiting. Cost: one channel
//! per service, one subscription per stream.
use tokio::sync::watch;

/// Resolves once the service is closing (never, if it was dropped).
pub(crate) async fn stopping(closing: &mut watch::Receiver<bool>) {
    // The borrow ends before each await: a `Ref` must not live across one
    // (it would make the stream's task not `Send`).
    while !*closing.borrow_and_update() {
        if closing.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}
