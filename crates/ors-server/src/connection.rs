//! One client connection's life beyond what hyper does for it: closing it when it sends no
//! request, and reaching it at shutdown.
//!
//! **No request** (`head_timeout`): a client that opens connections and sends nothing, or a
//! request head a byte at a time, must not hold the server's file descriptors. hyper can time
//! each request head itself, but it arms a timer for every request (a boxed sleep registered
//! with tokio's timer wheel and removed again when the head arrives: about 1,500 instructions
//! of a tool call's 34,000). Here a connection counts its requests instead, and one timer per
//! connection looks at the counts every half of the timeout: a connection that has been
//! answering nothing and started nothing for two half timeouts in a row is closed, so after
//! between one and one and a half times the timeout without a request.
//!
//! **Shutdown**: every open connection is in [`Connections`], and a stop is a flag and a
//! waker of the connection's own, looked at each time its task wakes. (hyper-util's graceful
//! watcher and a cancellation token each take a lock on every wake: about 600 instructions of
//! a call.)

use std::collections::HashMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures_util::task::AtomicWaker;
use hyper::body::{Body, Frame, SizeHint};
use hyper_util::server::graceful::GracefulConnection;
use tokio::sync::Notify;

use crate::body::RespBody;
use crate::util::{lock, wait_until};

/// One connection as its requests, its idle watch and shutdown see it.
#[derive(Default)]
pub(crate) struct Activity {
    /// Requests whose head has arrived, ever.
    started: AtomicUsize,
    /// Requests being answered: their response body has not been dropped yet.
    open: AtomicUsize,
    /// 0 (serve on), [`FINISH`] or [`CLOSE`].
    stop: AtomicU8,
    /// The connection's task, woken when `stop` changes.
    waker: AtomicWaker,
}

/// Answer the request in hand, then close (graceful shutdown).
const FINISH: u8 = 1;
/// Close now.
const CLOSE: u8 = 2;

impl Activity {
    /// A request's head arrived: it counts as being answered until the returned guard drops.
    // Relaxed: each count is one number on its own, read by a watch that looks every few
    // seconds.
    pub(crate) fn begin(self: &Arc<Self>) -> Answering {
        self.started.fetch_add(1, Ordering::Relaxed);
        self.open.fetch_add(1, Ordering::Relaxed);
        Answering(Arc::clone(self))
    }

    /// Resolves once the connection has gone `timeout` (up to one and a half times it)
    /// without starting a request and without one being answered.
    pub(crate) async fn idle_for(&self, timeout: Duration) {
        let look_every = timeout / 2;
        let mut seen = self.started.load(Ordering::Relaxed);
        let mut was_open = self.open.load(Ordering::Relaxed) > 0;
        let mut quiet_looks = 0;
        // A look is quiet when nothing started since the last one and nothing was being
        // answered at either: then the whole half timeout between them was idle.
        while quiet_looks < 2 {
            tokio::time::sleep(look_every).await;
            let started = self.started.load(Ordering::Relaxed);
            let open = self.open.load(Ordering::Relaxed) > 0;
            if started == seen && !open && !was_open {
                quiet_looks += 1;
            } else {
                quiet_looks = 0;
            }
            (seen, was_open) = (started, open);
        }
    }
    /// Ask the connection to stop: `FINISH` or `CLOSE` (a stop never goes back).
    fn stop(&self, how: u8) {
        self.stop.fetch_max(how, Ordering::AcqRel);
        self.waker.wake();
    }

    /// Drive `conn` until it ends, finishing gracefully when shutdown asks it to and
    /// returning at once when it is told to close.
    pub(crate) async fn serve<C>(&self, conn: C) -> Result<(), hyper::Error>
    where
        C: GracefulConnection<Error = hyper::Error>,
    {
        let mut conn = std::pin::pin!(conn);
        let mut finishing = false;
        std::future::poll_fn(|cx| {
            // Registered before the flag is read, so a stop set after the read wakes us.
            self.waker.register(cx.waker());
            match self.stop.load(Ordering::Acquire) {
                CLOSE => return Poll::Ready(Ok(())),
                FINISH if !finishing => {
                    finishing = true;
                    conn.as_mut().graceful_shutdown();
                }
                _ => {}
            }
            conn.as_mut().poll(cx)
        })
        .await
    }
}

/// Every open connection, for shutdown to reach.
#[derive(Default)]
pub(crate) struct Connections {
    open: Mutex<HashMap<u64, Arc<Activity>>>,
    next_id: AtomicU64,
    /// Told when the last connection closes.
    none_left: Notify,
}

impl Connections {
    /// Count a new connection until the returned guard drops (with its task).
    pub(crate) fn add(self: &Arc<Self>) -> (Arc<Activity>, Registered) {
        let activity = Arc::new(Activity::default());
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        lock(&self.open).insert(id, Arc::clone(&activity));
        (activity, Registered(Arc::clone(self), id))
    }

    /// Tell every open connection to answer the request in hand and close (`close`: to
    /// close now).
    pub(crate) fn stop_all(&self, close: bool) {
        let how = if close { CLOSE } else { FINISH };
        for activity in lock(&self.open).values() {
            activity.stop(how);
        }
    }

    /// Resolves once no connection is open.
    pub(crate) async fn closed(&self) {
        wait_until(&self.none_left, || lock(&self.open).is_empty()).await;
    }
}

/// A connection counted in [`Connections`] until this drops.
pub(crate) struct Registered(Arc<Connections>, u64);

impl Drop for Registered {
    fn drop(&mut self) {
        let mut open = lock(&self.0.open);
        open.remove(&self.1);
        if open.is_empty() {
            self.0.none_left.notify_waiters();
        }
    }
}

/// A request being answered, until its response body is dropped (sent in full, or given up).
pub(crate) struct Answering(Arc<Activity>);

impl Drop for Answering {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A response body that keeps its request counted as being answered while it lives.
pub(crate) struct Tracked {
    pub(crate) body: RespBody,
    pub(crate) _answering: Answering,
}

impl Body for Tracked {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_connection_is_idle_only_while_no_request_starts_or_is_answered() {
        let activity = Arc::new(Activity::default());
        let timeout = Duration::from_secs(30);
        let start = tokio::time::Instant::now();
        activity.idle_for(timeout).await;
        assert_eq!(start.elapsed(), timeout, "two quiet looks, 15 s apart");

        // A request answered for a minute keeps the connection; it is closed a timeout after
        // its answer ends, at most half a timeout more.
        let answering = activity.begin();
        let start = tokio::time::Instant::now();
        let watch = tokio::spawn({
            let activity = Arc::clone(&activity);
            async move { activity.idle_for(timeout).await }
        });
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(!watch.is_finished());
        drop(answering);
        watch.await.unwrap();
        let after_answer = start.elapsed() - Duration::from_secs(60);
        assert!(
            after_answer >= timeout && after_answer <= timeout * 3 / 2,
            "{after_answer:?}"
        );

        // Requests that start and end between two looks count too.
        let start = tokio::time::Instant::now();
        let watch = tokio::spawn({
            let activity = Arc::clone(&activity);
            async move { activity.idle_for(timeout).await }
        });
        for _ in 0..6 {
            tokio::time::sleep(Duration::from_secs(10)).await;
            drop(activity.begin());
        }
        watch.await.unwrap();
        assert!(start.elapsed() >= Duration::from_secs(50 + 30));
    }
}
