//! Sessions (episodes): their lifecycle (background setup, use, teardown), the concurrent
//! store that holds them (with the [`Tombstones`] of ended ids), and what the idle reaper
//! takes.
//!
//! A session's episode sits behind an [`EpisodeGate`]: a tool call holds it for the whole
//! call, exclusively, `prompt` and `task_tools` briefly. The gate queues in arrival order, so
//! calls on one session run one at a time in the order they came (PROTOCOL_NOTES row
//! `calls-serialized`) while different sessions run in parallel. A `#[tool(concurrent)]` call
//! holds it shared, beside other concurrent calls (row `tool-concurrency`).

use std::future::Future;
use std::sync::atomic::{fence, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use dashmap::DashMap;
use ors_runtime::env::{DynSession, TaskError};
use tokio::sync::{Notify, RwLock, RwLockReadGuard, RwLockWriteGuard};
use tokio_util::sync::CancellationToken;

use crate::body::{Listener, Listening};
use crate::error::{ApiError, SetupFailure};
use crate::results::{CallTable, HasCalls, ResultStore};
use crate::sid::{Origin, SessionIds};
use crate::tombstones::{Burial, Tombstones, TOMBSTONE_CAP};
use crate::util::{caught, clock_ms, ms_at, poll_once, wait_until};

const PENDING: u8 = 0;
const READY: u8 = 1;
const FAILED: u8 = 2;
const GONE: u8 = 3;

/// Session-map capacity below which it is never shrunk.
const SHRINK_FLOOR: usize = 4096;

/// Why a session ended; decides what a request still naming it is told.
pub(crate) enum Ending {
    /// `/delete` (410 `session_deleted`).
    Deleted,
    /// The inactivity reaper, after this much idle time (404 `session_timed_out`).
    TimedOut(Duration),
    /// The server is shutting down (503 `shutting_down`).
    Shutdown,
}

/// The episode slot of a session (`None` before setup, after a failed one and after
/// teardown), as a readers-writer gate: a concurrent tool's call holds it shared, everything
/// else exclusively.
///
/// tokio's `RwLock` queues every acquisition in one FIFO line, and a writer at the head of the
/// line holds back every reader behind it. So an exclusive call waits for the calls in flight
/// (concurrent ones included) and is never starved by a stream of concurrent calls that
/// arrive after it (writer preference, as openreward's `_ExclusiveGate`); and as long as
/// nothing is concurrent, calls run one at a time in arrival order.
pub(crate) struct EpisodeGate(RwLock<Option<Box<dyn DynSession>>>);

/// The episode held exclusively.
pub(crate) type EpisodeMut<'a> = RwLockWriteGuard<'a, Option<Box<dyn DynSession>>>;

impl EpisodeGate {
    /// Wait for the episode to ourselves: behind every call queued before, concurrent or not.
    pub(crate) async fn lock(&self) -> EpisodeMut<'_> {
        self.0.write().await
    }

    /// Wait to share the episode with other concurrent calls: behind any exclusive call
    /// queued before.
    pub(crate) async fn shared(&self) -> RwLockReadGuard<'_, Option<Box<dyn DynSession>>> {
        self.0.read().await
    }
}

/// One episode of one environment.
pub(crate) struct Session {
    pub(crate) id: Arc<str>,
    /// Index of its environment in the server's list.
    pub(crate) env: usize,
    /// [`clock_ms`] at the last request naming this session.
    last_seen: AtomicU64,
    state: AtomicU8,
    setup_done: Notify,
    failure: OnceLock<SetupFailure>,
    /// Set once, when the session is closed.
    ending: OnceLock<Ending>,
    /// The episode once set up; `None` before, after a failed setup, and after teardown.
    pub(crate) episode: EpisodeGate,
    /// Fires on delete, reaping and shutdown; every call's token is a child of it. Made by
    /// the first call (or the close): an idle session holds no token, which is an allocation
    /// of 112 bytes (see [`Session::cancel`]).
    cancel: OnceLock<CancellationToken>,
    /// Calls of this session, kept for reconnects while their results linger.
    pub(crate) calls: Mutex<CallTable>,
    /// Calls started and not finished.
    pub(crate) active_calls: AtomicUsize,
    /// Open call streams of this session: while a client listens, the reaper leaves the
    /// session alone, however long its call runs. 32 bits keep a `Session` in jemalloc's
    /// 256-byte class with its `Arc` counts (a call stream is a connection: far fewer than
    /// 2^32).
    listeners: AtomicU32,
}

/// Counts a session's open call streams (see [`Session::listen`]); when the last one closes,
/// the session's idle time starts counting.
impl Listener for Session {
    fn stream_closed(&self) {
        self.touch();
        self.listeners.fetch_sub(1, Ordering::AcqRel);
    }
}

impl HasCalls for Session {
    fn calls(&self) -> &Mutex<CallTable> {
        &self.calls
    }
}

#[cfg(test)]
impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.id)
            .field("env", &self.env)
            .field("state", &self.state.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Session {
    pub(crate) fn new(id: Arc<str>, env: usize, results: Arc<ResultStore>) -> Self {
        Self {
            id,
            env,
            last_seen: AtomicU64::new(clock_ms()),
            state: AtomicU8::new(PENDING),
            setup_done: Notify::new(),
            failure: OnceLock::new(),
            ending: OnceLock::new(),
            episode: EpisodeGate(RwLock::new(None)),
            cancel: OnceLock::new(),
            calls: Mutex::new(CallTable::new(results)),
            active_calls: AtomicUsize::new(0),
            listeners: AtomicU32::new(0),
        }
    }

    /// Count a call stream that is open to a client, until the returned guard drops.
    pub(crate) fn listen(session: &Arc<Self>) -> Listening {
        session.listeners.fetch_add(1, Ordering::AcqRel);
        Listening(Arc::clone(session) as Arc<dyn Listener>)
    }

    /// The session's cancellation: fires on delete, reaping and shutdown. Made by the first
    /// call that needs it; a session closed without one never makes it (deleting 100,000 idle
    /// sessions allocates nothing more). A call making it as the session closes still sees it
    /// fire: each side writes (the token here, the ending in [`Session::close`]), fences, then
    /// reads the other's, so at least one of them sees both and cancels.
    pub(crate) fn cancel(&self) -> &CancellationToken {
        if let Some(token) = self.cancel.get() {
            return token;
        }
        let token = self.cancel.get_or_init(CancellationToken::new);
        fence(Ordering::SeqCst);
        if self.is_closed() {
            token.cancel();
        }
        token
    }

    /// Whether the session has been closed (deleted, reaped or shut down).
    fn is_closed(&self) -> bool {
        self.ending.get().is_some()
    }

    /// Resolves once the session is closed: [`Session::close`] sets the ending, then wakes
    /// `setup_done`'s waiters. Setup waits on this rather than on the token, so that an idle
    /// session never makes one.
    async fn closed(&self) {
        wait_until(&self.setup_done, || self.is_closed()).await;
    }

    /// Mark the session active now (any request naming it, and the end of a call).
    pub(crate) fn touch(&self) {
        self.last_seen.store(clock_ms(), Ordering::Relaxed);
    }

    /// [`Session::touch`] with the clock already read.
    pub(crate) fn touch_at(&self, now: tokio::time::Instant) {
        self.last_seen.store(ms_at(now), Ordering::Relaxed);
    }

    /// Wait until background setup ends; its failure, or the session's deletion, is the error.
    pub(crate) async fn wait_ready(&self) -> Result<(), ApiError> {
        // A state never goes back to PENDING.
        let state = || self.state.load(Ordering::Acquire);
        wait_until(&self.setup_done, || state() != PENDING).await;
        match state() {
            READY => Ok(()),
            FAILED => {
                let failure = self.failure.get().cloned().unwrap_or(SetupFailure {
                    bad_task: false,
                    message: "unknown setup error".into(),
                });
                Err(ApiError::SetupFailed(failure))
            }
            _ => Err(self.gone()),
        }
    }

    /// [`Session::wait_ready`] for at most `wait`; a setup still running then is 503
    /// `session_starting` (PROTOCOL_NOTES row `slow-setup`), for the client to ask again.
    pub(crate) async fn ready_within(&self, wait: Duration) -> Result<(), ApiError> {
        // Every call asks this of a session that is long ready: answered without a timer (a
        // timeout reads the clock and the runtime's handle: about 500 instructions a call).
        if self.state.load(Ordering::Acquire) == READY {
            return Ok(());
        }
        match tokio::time::timeout(wait, self.wait_ready()).await {
            Ok(ready) => ready,
            Err(_) => {
                tracing::debug!(session = %self.id, "setup still running: 503 starting");
                Err(ApiError::SessionStarting(Arc::clone(&self.id)))
            }
        }
    }

    fn settle(&self, state: u8) {
        let _ = self
            .state
            .compare_exchange(PENDING, state, Ordering::AcqRel, Ordering::Acquire);
        self.setup_done.notify_waiters();
    }

    /// Run the environment's constructor; the session is usable when it succeeds. It is
    /// polled once here, so a constructor with nothing to wait for has made the session ready
    /// before `/create` answers, with no task and no wake-up; one that waits goes on in a task
    /// of its own. Deleting the session meanwhile drops the constructor.
    pub(crate) async fn start_setup(
        self: &Arc<Self>,
        setup: impl Future<Output = Result<Box<dyn DynSession>, TaskError>> + Send + 'static,
    ) {
        let session = Arc::clone(self);
        let mut run = Box::pin(async move {
            let started = Instant::now();
            let result = tokio::select! {
                biased;
                _ = session.closed() => None,
                r = caught(setup) => Some(r),
            };
            let failure = match result {
                None => return session.settle(GONE),
                Some(Ok(Ok(episode))) => {
                    let mut slot = session.episode.lock().await;
                    if session.is_closed() {
                        // Deleted while the constructor ran: nobody else will tear this down.
                        drop(slot);
                        teardown(&session.id, episode, Duration::from_secs(10)).await;
                        session.settle(GONE);
                    } else {
                        *slot = Some(episode);
                        drop(slot);
                        session.settle(READY);
                        tracing::debug!(session = %session.id, setup_ms = started.elapsed().as_millis() as u64, "session ready");
                    }
                    return;
                }
                Some(Ok(Err(e))) => SetupFailure::from(&e),
                Some(Err(panic)) => SetupFailure {
                    bad_task: false,
                    message: format!("setup panicked: {panic}").into(),
                },
            };
            tracing::warn!(session = %session.id, error = %failure.message, "session setup failed");
            let _ = session.failure.set(failure);
            session.settle(FAILED);
        });
        if poll_once(&mut run).await.is_pending() {
            tokio::spawn(run);
        }
    }

    /// Make the session ready with `episode`, as a finished setup would (for unit tests that
    /// drive calls without an environment type).
    #[cfg(test)]
    pub(crate) async fn set_ready(&self, episode: Box<dyn DynSession>) {
        *self.episode.lock().await = Some(episode);
        self.settle(READY);
    }

    /// The answer to a request naming this session after it ended.
    pub(crate) fn gone(&self) -> ApiError {
        match self.ending.get() {
            Some(Ending::TimedOut(after)) => ApiError::SessionTimedOut {
                sid: self.id.clone(),
                after: *after,
            },
            Some(Ending::Shutdown) => ApiError::ShuttingDown,
            Some(Ending::Deleted) | None => ApiError::SessionDeleted(self.id.clone()),
        }
    }

    /// End the session: fire its token, wait for a running call to let go (the call gives up
    /// `grace` after the token fires), then tear the episode down (at most `grace` too).
    pub(crate) async fn close(&self, why: Ending, grace: Duration) {
        let _ = self.ending.set(why);
        fence(Ordering::SeqCst);
        if let Some(token) = self.cancel.get() {
            token.cancel();
        }
        self.state.store(GONE, Ordering::Release);
        self.setup_done.notify_waiters();
        let episode = self.episode.lock().await.take();
        if let Some(episode) = episode {
            teardown(&self.id, episode, grace).await;
        }
    }
}

async fn teardown(sid: &str, mut episode: Box<dyn DynSession>, grace: Duration) {
    match tokio::time::timeout(grace, caught(episode.teardown())).await {
        Ok(Ok(())) => tracing::debug!(session = %sid, "session torn down"),
        Ok(Err(panic)) => tracing::warn!(session = %sid, error = %panic, "teardown panicked"),
        Err(_) => tracing::warn!(session = %sid, ?grace, "teardown did not finish in time"),
    }
}

/// Every live session by id, the ended ids, the live count, and how ids are issued.
pub(crate) struct SessionStore {
    map: DashMap<Arc<str>, Arc<Session>>,
    live: AtomicUsize,
    pub(crate) tombstones: Tombstones,
    pub(crate) ids: SessionIds,
    max: usize,
    /// The reaper's idle limit, named in the answer about a reaped id.
    idle_timeout: Duration,
}

impl SessionStore {
    pub(crate) fn new(max: usize, idle_timeout: Duration, ids: SessionIds) -> Self {
        Self {
            map: DashMap::new(),
            live: AtomicUsize::new(0),
            tombstones: Tombstones::new(TOMBSTONE_CAP),
            ids,
            max,
            idle_timeout,
        }
    }

    /// Number of live sessions.
    pub(crate) fn len(&self) -> usize {
        self.live.load(Ordering::Relaxed)
    }

    /// Live sessions by environment index, for `n` environments (a scrape of `/metrics`
    /// walks the map, so creating and deleting sessions keeps no per-environment count).
    pub(crate) fn count_by_env(&self, n: usize) -> Vec<usize> {
        let mut counts = vec![0; n];
        for entry in self.map.iter() {
            if let Some(c) = counts.get_mut(entry.value().env) {
                *c += 1;
            }
        }
        counts
    }

    /// Whether a new session would exceed the limit.
    pub(crate) fn is_full(&self) -> bool {
        self.len() >= self.max
    }

    pub(crate) fn contains(&self, sid: &str) -> bool {
        self.map.contains_key(sid)
    }

    /// The live session of an id, marking it active; else why not (row `gone-vs-not-found`).
    pub(crate) fn get(&self, sid: &str) -> Result<Arc<Session>, ApiError> {
        match self.map.get(sid) {
            Some(s) => {
                s.touch();
                Ok(Arc::clone(&s))
            }
            None => Err(self.missing(sid)),
        }
    }

    /// The error for an id that is not live: deleted within the hour (410), reaped (404
    /// `session_timed_out`), issued but never created (404 `no_episode_yet`), or never seen
    /// (404 `session_not_found`).
    pub(crate) fn missing(&self, sid: &str) -> ApiError {
        match self.tombstones.get(sid) {
            Some(Burial::Deleted) => ApiError::SessionDeleted(sid.into()),
            Some(Burial::TimedOut) => ApiError::SessionTimedOut {
                sid: sid.into(),
                after: self.idle_timeout,
            },
            None if self.ids.origin(sid) == Origin::Issued => ApiError::NoEpisodeYet(sid.into()),
            None => ApiError::SessionNotFound(sid.into()),
        }
    }

    /// Add a new session: 400 if the id is live, 503 if the store is full.
    pub(crate) fn insert(&self, session: Arc<Session>) -> Result<(), ApiError> {
        let id = Arc::clone(&session.id);
        match self.map.entry(Arc::clone(&id)) {
            dashmap::Entry::Occupied(_) => return Err(ApiError::SessionExists(id)),
            dashmap::Entry::Vacant(slot) => {
                if self.live.fetch_add(1, Ordering::AcqRel) >= self.max {
                    self.live.fetch_sub(1, Ordering::AcqRel);
                    return Err(ApiError::TooManySessions { max: self.max });
                }
                slot.insert(session);
            }
        }
        // A re-created id is live again, not ended.
        self.tombstones.unbury(&id);
        Ok(())
    }

    /// Remove a live session and remember its id as deleted.
    pub(crate) fn remove(&self, sid: &str) -> Option<Arc<Session>> {
        let (key, session) = self.map.remove(sid)?;
        self.removed(&key, Burial::Deleted);
        Some(session)
    }

    /// Count the removal of `sid` and remember how it ended; after a bulk delete, give the
    /// map's tables back. They are the last big allocations made while sessions were created,
    /// so kept at full size they would sit on top of the freed sessions and keep the allocator
    /// from returning that memory.
    fn removed(&self, sid: &str, burial: Burial) {
        self.tombstones.bury(sid, burial);
        let live = self.live.fetch_sub(1, Ordering::AcqRel) - 1;
        // `capacity` locks every shard: looked at once per 256 removals only.
        if live % 256 == 0 {
            let capacity = self.map.capacity();
            if capacity > SHRINK_FLOOR && capacity > 4 * live {
                self.map.shrink_to_fit();
            }
        }
    }

    /// Remove the sessions idle longer than the idle timeout that no client listens to, and
    /// remember them as timed out; returns them. A running call does not keep a session: one
    /// whose client stopped listening (a hung tool nobody waits for) is taken like any other.
    pub(crate) fn take_stale(&self) -> Vec<Arc<Session>> {
        let now = clock_ms();
        let limit = self.idle_timeout.as_millis() as u64;
        self.take_where(Burial::TimedOut, |s| {
            now.saturating_sub(s.last_seen.load(Ordering::Relaxed)) > limit
                && s.listeners.load(Ordering::Acquire) == 0
        })
    }

    /// Remove every session (shutdown).
    pub(crate) fn drain(&self) -> Vec<Arc<Session>> {
        self.take_where(Burial::Deleted, |_| true)
    }

    /// Remove the sessions `take` holds for and remember them as ended by `burial`; returns
    /// them. Each goes only if it is still the one stored under its id (not a newer one with
    /// the same id) and `take` still holds, checked under its shard's write lock (so a request
    /// that touched a session after the scan saw it idle is not reaped from under it).
    fn take_where(&self, burial: Burial, take: impl Fn(&Session) -> bool) -> Vec<Arc<Session>> {
        let found: Vec<Arc<Session>> = self
            .map
            .iter()
            .filter(|e| take(e.value()))
            .map(|e| Arc::clone(e.value()))
            .collect();
        found
            .into_iter()
            .filter(|session| {
                let exact = |_: &Arc<str>, s: &Arc<Session>| Arc::ptr_eq(s, session) && take(s);
                let removed = self.map.remove_if(&session.id, exact);
                if let Some((key, _)) = &removed {
                    self.removed(key, burial);
                }
                removed.is_some()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::FutureExt as _;
    use ors_core::ErrorCode;

    const IDLE: Duration = Duration::from_secs(900);

    fn session(id: &str) -> Arc<Session> {
        let results = Arc::new(ResultStore::new(Duration::from_secs(60), 1 << 20, 1 << 20));
        Arc::new(Session::new(id.into(), 0, results))
    }

    fn any_id() -> SessionIds {
        SessionIds::new(&crate::config::SessionKey::Off, None).unwrap()
    }

    fn code(err: ApiError) -> (u16, ErrorCode) {
        (err.status().as_u16(), err.code())
    }

    #[test]
    fn insert_get_remove_and_tombstones() {
        let store = SessionStore::new(10, IDLE, any_id());
        store.insert(session("a")).unwrap();
        assert!(store.get("a").is_ok());
        let dup = store.insert(session("a")).unwrap_err();
        assert_eq!(code(dup), (400, ErrorCode::SessionExists));
        assert_eq!(
            code(store.get("never").unwrap_err()),
            (404, ErrorCode::SessionNotFound)
        );
        assert!(store.remove("a").is_some());
        assert_eq!(
            code(store.get("a").unwrap_err()),
            (410, ErrorCode::SessionDeleted)
        );
        assert_eq!(store.len(), 0);
        // The id can be used again, and is then live.
        store.insert(session("a")).unwrap();
        assert!(store.get("a").is_ok());
    }

    #[test]
    fn tombstones_are_bounded() {
        let mut store = SessionStore::new(10, IDLE, any_id());
        store.tombstones = Tombstones::new(100);
        for i in 0..1000 {
            let id = format!("s{i}");
            store.insert(session(&id)).unwrap();
            store.remove(&id);
        }
        assert!(store.tombstones.len() <= 100, "{}", store.tombstones.len());
        // The most recent ids are still remembered.
        assert_eq!(store.get("s999").unwrap_err().status(), 410);
    }

    #[test]
    fn the_limit_is_enforced() {
        let store = SessionStore::new(2, IDLE, any_id());
        store.insert(session("a")).unwrap();
        store.insert(session("b")).unwrap();
        assert!(store.is_full());
        let err = store.insert(session("c")).unwrap_err();
        assert_eq!(code(err), (503, ErrorCode::TooManySessions));
        store.remove("a");
        store.insert(session("c")).unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn stale_sessions_are_taken_unless_a_client_listens_and_answer_timed_out() {
        let store = SessionStore::new(10, Duration::from_millis(1), any_id());
        let busy = session("busy");
        let listening = Session::listen(&busy);
        store.insert(busy).unwrap();
        let hung = session("hung");
        // A call runs, but nobody listens to it.
        hung.active_calls.store(1, Ordering::Release);
        store.insert(hung).unwrap();
        store.insert(session("idle")).unwrap();
        tokio::time::advance(Duration::from_millis(5)).await;
        let mut taken: Vec<&str> = Vec::new();
        let stale = store.take_stale();
        taken.extend(stale.iter().map(|s| &*s.id));
        taken.sort_unstable();
        assert_eq!(taken, ["hung", "idle"]);
        let err = store.get("idle").unwrap_err();
        assert_eq!(
            err.to_string(),
            "session 'idle' timed out after 0.001 s of inactivity"
        );
        assert_eq!(code(err), (404, ErrorCode::SessionTimedOut));
        assert!(store.get("busy").is_ok());
        // The idle time of a session counts from when its last listener left.
        drop(listening);
        assert!(store.take_stale().is_empty());
        tokio::time::advance(Duration::from_millis(5)).await;
        assert_eq!(store.take_stale().len(), 1);
    }

    fn unknown_split() -> TaskError {
        TaskError::UnknownSplit {
            split: "nope".into(),
            known: vec!["train".into()],
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_setup_with_nothing_to_wait_for_has_settled_when_start_returns() {
        let s = session("a");
        s.start_setup(async { Err(unknown_split()) }).await;
        // Settled in place: on a current-thread runtime no spawned task could have run yet.
        assert_eq!(s.state.load(Ordering::Acquire), FAILED);

        let s = session("b");
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        s.start_setup(async move {
            let _ = rx.await;
            Err(unknown_split())
        })
        .await;
        assert_eq!(s.state.load(Ordering::Acquire), PENDING);
        tx.send(()).unwrap();
        // The setup goes on in a task of its own, woken by the send.
        let err = s.wait_ready().await.unwrap_err();
        assert!(matches!(err, ApiError::SetupFailed(_)), "{err:?}");
    }

    #[tokio::test]
    async fn an_exclusive_holder_waits_for_shared_ones_and_holds_back_later_ones() {
        let s = session("a");
        let (one, two) = (s.episode.shared().await, s.episode.shared().await);
        let mut exclusive = Box::pin(s.episode.lock());
        assert!(
            (&mut exclusive).now_or_never().is_none(),
            "shared ones inside"
        );
        // Queued behind the exclusive one, a shared one waits although only shared ones hold.
        let mut late = Box::pin(s.episode.shared());
        assert!((&mut late).now_or_never().is_none(), "writer preference");
        drop((one, two));
        let held = exclusive.await;
        assert!((&mut late).now_or_never().is_none());
        drop(held);
        assert!(late.now_or_never().is_some());
    }

    #[tokio::test]
    async fn an_idle_session_makes_no_token_and_a_late_one_has_fired() {
        let s = session("a");
        s.close(Ending::Deleted, Duration::from_secs(1)).await;
        assert!(
            s.cancel.get().is_none(),
            "closed without a call: no token made"
        );
        // A call that reaches for the token only now still sees the session cancelled.
        assert!(s.cancel().is_cancelled());
        assert!(s.cancel().child_token().is_cancelled());

        let s = session("b");
        let token = s.cancel().clone();
        assert!(!token.is_cancelled());
        s.close(Ending::Deleted, Duration::from_secs(1)).await;
        assert!(
            token.is_cancelled(),
            "a token made by a call fires on close"
        );
    }

    #[tokio::test]
    async fn closing_wakes_waiters_with_the_reason() {
        for (ending, expected) in [
            (Ending::Deleted, (410, ErrorCode::SessionDeleted)),
            (Ending::TimedOut(IDLE), (404, ErrorCode::SessionTimedOut)),
            (Ending::Shutdown, (503, ErrorCode::ShuttingDown)),
        ] {
            let s = session("a");
            let waiter = {
                let s = Arc::clone(&s);
                tokio::spawn(async move { s.wait_ready().await })
            };
            tokio::task::yield_now().await;
            s.close(ending, Duration::from_secs(1)).await;
            let err = waiter.await.unwrap().unwrap_err();
            assert_eq!(code(err), expected);
        }
    }
}
