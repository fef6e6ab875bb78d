//! Small helpers shared by the session store and the call machinery: the monotonic clock of
//! `last_seen` and tombstones, poison-free locking, the server's one panic boundary, and the
//! one poll in place that calls and setups get before they would need a task, and the one
//! way to wait on a [`Notify`] for a condition.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::task::Poll;
use std::time::Duration;

use futures_util::FutureExt as _;
use tokio::sync::Notify;

/// Milliseconds on tokio's monotonic clock, as the server's timers read it: tests pause and
/// advance it (`start_paused`, `tokio::time::advance`) to age sessions without waiting.
///
/// Counted from a day before the first reading, since a paused runtime's clock starts where
/// std's was when that runtime was built, which may be before another runtime's first reading.
pub(crate) fn clock_ms() -> u64 {
    ms_at(tokio::time::Instant::now())
}

/// [`clock_ms`] at `now`, for a caller that reads the clock for something else too.
pub(crate) fn ms_at(now: tokio::time::Instant) -> u64 {
    static EPOCH: OnceLock<std::time::Instant> = OnceLock::new();
    let epoch = EPOCH.get_or_init(|| {
        let now = std::time::Instant::now();
        now.checked_sub(Duration::from_secs(86_400)).unwrap_or(now)
    });
    now.into_std().saturating_duration_since(*epoch).as_millis() as u64
}

/// Lock a std mutex, ignoring poisoning: every critical section here leaves its data valid.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The server's one panic boundary: what `fut` gives, or the text of the panic that ended it.
/// Every piece of environment code the server runs (setup, a tool call or group scoring, a
/// listing, the prompt, teardown) runs inside it, so a panicking environment fails one
/// request, never a server thread.
/// (`Unpin` when `fut` is, so a caller may poll it in place and move it on.)
pub(crate) fn caught<F: Future>(fut: F) -> impl Future<Output = Result<F::Output, String>> {
    AssertUnwindSafe(fut)
        .catch_unwind()
        .map(|r| r.map_err(|panic| panic_message(&*panic)))
}

/// The text of a panic payload.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic payload".to_owned())
}

/// Wait until `done` holds, looked at again each time `notify` wakes its waiters. The wait
/// is registered before each look, so a wake-up between the look and the wait is not lost.
pub(crate) async fn wait_until(notify: &Notify, done: impl Fn() -> bool) {
    loop {
        let mut notified = std::pin::pin!(notify.notified());
        notified.as_mut().enable();
        if done() {
            return;
        }
        notified.await;
    }
}

/// Sleep until `at`; never, without one.
pub(crate) async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Poll `fut` once with the caller's waker. What finishes here costs no task and no wake-up;
/// what is left pending is moved to a task by the caller, whose first poll registers its own
/// wakers in place of the caller's.
pub(crate) async fn poll_once<F: Future + Unpin>(fut: &mut F) -> Poll<F::Output> {
    std::future::poll_fn(|cx| Poll::Ready(std::pin::Pin::new(&mut *fut).poll(cx))).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panic_messages_of_both_string_kinds() {
        let p = std::panic::catch_unwind(|| panic!("static")).unwrap_err();
        assert_eq!(panic_message(&*p), "static");
        let n = 3;
        let p = std::panic::catch_unwind(|| panic!("formatted {n}")).unwrap_err();
        assert_eq!(panic_message(&*p), "formatted 3");
        let p = std::panic::catch_unwind(|| std::panic::panic_any(7u8)).unwrap_err();
        assert_eq!(panic_message(&*p), "non-string panic payload");
    }
}
