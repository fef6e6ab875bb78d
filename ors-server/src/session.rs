//! Sessions (episodes): their lifecycle (background setup, use, teardown), the concurrent
//! store that holds them, bounded tombstones of deleted ids, and the idle reaper.
//!
//! A session's episode sits behind an async mutex: a tool call holds it for the whole call,
//! `prompt` and `task_tools` briefly. Calls on one session also take a turn in a FIFO chain
//! when they arrive (see [`Session::take_turn`]), so they run one at a time in arrival order
//! (PROTOCOL_NOTES row `calls-serialized`) while different sessions run in parallel.

use std::future::Future;
use std::hash::BuildHasher as _;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use dashmap::DashMap;
use futures_util::FutureExt as _;
use ors_runtime::env::{DynSession, TaskError};
use tokio::sync::{oneshot, Notify};
use tokio_util::sync::CancellationToken;

use crate::call::CallTable;
use crate::error::{ApiError, SetupFailure};

const PENDING: u8 = 0;
const READY: u8 = 1;
const FAILED: u8 = 2;
const GONE: u8 = 3;

/// How long a deleted id answers 410 rather than 404 (PROTOCOL_NOTES row `gone-vs-not-found`).
const TOMBSTONE_TTL: Duration = Duration::from_secs(3600);
/// Most remembered deleted ids; past it the oldest half is forgotten.
const TOMBSTONE_CAP: usize = 100_000;

/// Session-map capacity below which it is never shrunk.
const SHRINK_FLOOR: usize = 4096;

/// Milliseconds on a process-wide monotonic clock (the clock of `last_seen`).
pub(crate) fn clock_ms() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_millis() as u64
}

/// Lock a std mutex, ignoring poisoning: every critical section here leaves its data valid.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The text of a panic payload.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_owned()
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
    /// The episode once set up; `None` before, after a failed setup, and after teardown.
    pub(crate) episode: tokio::sync::Mutex<Option<Box<dyn DynSession>>>,
    /// Fires on delete, reaping and shutdown; every call's token is a child of it.
    pub(crate) cancel: CancellationToken,
    /// Calls of this session, kept for reconnects while their results linger.
    pub(crate) calls: Mutex<CallTable>,
    order: Mutex<Option<oneshot::Receiver<()>>>,
    /// Calls started and not finished; the reaper leaves such a session alone.
    pub(crate) active_calls: AtomicUsize,
}

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
    pub(crate) fn new(id: Arc<str>, env: usize) -> Self {
        Self {
            id,
            env,
            last_seen: AtomicU64::new(clock_ms()),
            state: AtomicU8::new(PENDING),
            setup_done: Notify::new(),
            failure: OnceLock::new(),
            episode: tokio::sync::Mutex::new(None),
            cancel: CancellationToken::new(),
            calls: Mutex::new(CallTable::default()),
            order: Mutex::new(None),
            active_calls: AtomicUsize::new(0),
        }
    }

    /// Mark the session active now (any request naming it, and the end of a call).
    pub(crate) fn touch(&self) {
        self.last_seen.store(clock_ms(), Ordering::Relaxed);
    }

    /// Wait until background setup ends; its failure, or the session's deletion, is the error.
    pub(crate) async fn wait_ready(&self) -> Result<(), ApiError> {
        loop {
            let notified = self.setup_done.notified();
            tokio::pin!(notified);
            // Registered before the state is read, so a notification in between is not lost.
            notified.as_mut().enable();
            match self.state.load(Ordering::Acquire) {
                READY => return Ok(()),
                FAILED => {
                    let failure = self.failure.get().cloned().unwrap_or(SetupFailure {
                        bad_task: false,
                        message: "unknown setup error".into(),
                    });
                    return Err(ApiError::SetupFailed(failure));
                }
                GONE => return Err(ApiError::SessionGone(self.id.clone())),
                _ => notified.await,
            }
        }
    }

    fn settle(&self, state: u8) {
        let _ = self
            .state
            .compare_exchange(PENDING, state, Ordering::AcqRel, Ordering::Acquire);
        self.setup_done.notify_waiters();
    }

    /// Run the environment's constructor in the background; the session is usable when it
    /// succeeds. Deleting the session meanwhile drops the constructor.
    pub(crate) fn spawn_setup(
        self: &Arc<Self>,
        setup: impl Future<Output = Result<Box<dyn DynSession>, TaskError>> + Send + 'static,
    ) {
        let session = Arc::clone(self);
        tokio::spawn(async move {
            let started = Instant::now();
            let result = tokio::select! {
                biased;
                _ = session.cancel.cancelled() => None,
                r = AssertUnwindSafe(setup).catch_unwind() => Some(r),
            };
            match result {
                None => session.settle(GONE),
                Some(Ok(Ok(episode))) => {
                    let mut slot = session.episode.lock().await;
                    if session.cancel.is_cancelled() {
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
                }
                Some(Ok(Err(e))) => {
                    tracing::warn!(session = %session.id, error = %e, "session setup failed");
                    let _ = session.failure.set(SetupFailure::from(&e));
                    session.settle(FAILED);
                }
                Some(Err(panic)) => {
                    let message = format!("setup panicked: {}", panic_message(&*panic));
                    tracing::warn!(session = %session.id, error = %message, "session setup failed");
                    let _ = session.failure.set(SetupFailure {
                        bad_task: false,
                        message: message.into(),
                    });
                    session.settle(FAILED);
                }
            }
        });
    }

    /// Take this call's turn: the receiver resolves when the previous call is done, and
    /// dropping the returned sender lets the next one run.
    pub(crate) fn take_turn(&self) -> (oneshot::Sender<()>, Option<oneshot::Receiver<()>>) {
        let (tx, rx) = oneshot::channel();
        let previous = lock(&self.order).replace(rx);
        (tx, previous)
    }

    /// End the session: fire its token, wait for a running call to let go (the call gives up
    /// `grace` after the token fires), then tear the episode down (at most `grace` too).
    pub(crate) async fn close(&self, grace: Duration) {
        self.cancel.cancel();
        self.state.store(GONE, Ordering::Release);
        self.setup_done.notify_waiters();
        let episode = self.episode.lock().await.take();
        if let Some(episode) = episode {
            teardown(&self.id, episode, grace).await;
        }
    }
}

async fn teardown(sid: &str, mut episode: Box<dyn DynSession>, grace: Duration) {
    let fut = AssertUnwindSafe(episode.teardown()).catch_unwind();
    match tokio::time::timeout(grace, fut).await {
        Ok(Ok(())) => tracing::debug!(session = %sid, "session torn down"),
        Ok(Err(panic)) => {
            tracing::warn!(session = %sid, error = %panic_message(&*panic), "teardown panicked")
        }
        Err(_) => tracing::warn!(session = %sid, ?grace, "teardown did not finish in time"),
    }
}

/// A deleted id in 16 bytes: the UUID itself for ids in the canonical form `create_session`
/// hands out, else a keyed 64-bit hash (a collision would turn one 404 into a 410).
///
/// Tombstones must not keep the ids' own allocations alive: 100k of them, scattered through
/// the memory their sessions freed, kept that memory from going back to the system.
type TombKey = [u64; 2];

/// Marks a hashed key; a canonical UUID ending in it as well is astronomically unlikely.
const HASHED: u64 = 0x7ad7_f00d_dead_beef;

fn tomb_key(sid: &str) -> TombKey {
    static HASH: OnceLock<std::collections::hash_map::RandomState> = OnceLock::new();
    if is_canonical_uuid(sid) {
        if let Ok(u) = uuid::Uuid::try_parse(sid) {
            let (hi, lo) = u.as_u64_pair();
            return [hi, lo];
        }
    }
    let hash = HASH
        .get_or_init(std::collections::hash_map::RandomState::new)
        .hash_one(sid);
    [hash, HASHED]
}

/// Lower-case hyphenated (`8-4-4-4-12` hex digits): one text per UUID, so two different ids
/// never share a key.
fn is_canonical_uuid(sid: &str) -> bool {
    let b = sid.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, &c)| match i {
            8 | 13 | 18 | 23 => c == b'-',
            _ => matches!(c, b'0'..=b'9' | b'a'..=b'f'),
        })
}

/// Every live session by id, the deleted ids, and the live count.
pub(crate) struct SessionStore {
    map: DashMap<Arc<str>, Arc<Session>>,
    live: AtomicUsize,
    /// Deleted ids and when (ms on [`clock_ms`]); sized for the cap up front, so the table
    /// is one early allocation rather than reallocations among the sessions' memory.
    tombstones: DashMap<TombKey, u64>,
    // Kept by hand: `DashMap::len` locks every shard.
    tombstone_count: AtomicUsize,
    tombstone_cap: usize,
    max: usize,
}

impl SessionStore {
    pub(crate) fn new(max: usize) -> Self {
        Self {
            map: DashMap::new(),
            live: AtomicUsize::new(0),
            tombstones: DashMap::with_capacity(TOMBSTONE_CAP),
            tombstone_count: AtomicUsize::new(0),
            tombstone_cap: TOMBSTONE_CAP,
            max,
        }
    }

    /// Number of live sessions.
    pub(crate) fn len(&self) -> usize {
        self.live.load(Ordering::Relaxed)
    }

    /// Whether a new session would exceed the limit.
    pub(crate) fn is_full(&self) -> bool {
        self.len() >= self.max
    }

    pub(crate) fn contains(&self, sid: &str) -> bool {
        self.map.contains_key(sid)
    }

    /// The live session of an id, marking it active; 410 for a deleted id, else 404.
    pub(crate) fn get(&self, sid: &str) -> Result<Arc<Session>, ApiError> {
        match self.map.get(sid) {
            Some(s) => {
                s.touch();
                Ok(Arc::clone(&s))
            }
            None => Err(self.missing(sid)),
        }
    }

    /// The error for an id that is not live.
    pub(crate) fn missing(&self, sid: &str) -> ApiError {
        if self.tombstones.contains_key(&tomb_key(sid)) {
            ApiError::SessionGone(sid.into())
        } else {
            ApiError::SessionNotFound(sid.into())
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
        // A re-created id is live again, not deleted.
        if self.tombstones.remove(&tomb_key(&id)).is_some() {
            self.tombstone_count.fetch_sub(1, Ordering::AcqRel);
        }
        Ok(())
    }

    /// Remove a live session and remember its id as deleted.
    pub(crate) fn remove(&self, sid: &str) -> Option<Arc<Session>> {
        let (key, session) = self.map.remove(sid)?;
        self.removed();
        self.bury(key);
        Some(session)
    }

    /// Count a removal; after a bulk delete, give the map's tables back. They are the last
    /// big allocations made while sessions were created, so kept at full size they would
    /// sit on top of the freed sessions and keep the allocator from returning that memory.
    fn removed(&self) {
        let live = self.live.fetch_sub(1, Ordering::AcqRel) - 1;
        // `capacity` locks every shard: looked at once per 256 removals only.
        if live % 256 == 0 {
            let capacity = self.map.capacity();
            if capacity > SHRINK_FLOOR && capacity > 4 * live {
                self.map.shrink_to_fit();
            }
        }
    }

    /// Remove this exact session (not a newer one with the same id).
    fn remove_exact(&self, session: &Arc<Session>) -> bool {
        self.remove_exact_if(session, |_| true)
    }

    /// Remove `session` if it is still the one stored under its id and `keep_going` still
    /// holds, checked under the shard's write lock (so a request that touched the session
    /// after a scan saw it idle is not reaped from under it).
    fn remove_exact_if(
        &self,
        session: &Arc<Session>,
        keep_going: impl Fn(&Session) -> bool,
    ) -> bool {
        let removed = self
            .map
            .remove_if(&session.id, |_, s| Arc::ptr_eq(s, session) && keep_going(s));
        match removed {
            Some((key, _)) => {
                self.removed();
                self.bury(key);
                true
            }
            None => false,
        }
    }

    fn bury(&self, sid: Arc<str>) {
        if self.tombstones.insert(tomb_key(&sid), clock_ms()).is_none()
            && self.tombstone_count.fetch_add(1, Ordering::AcqRel) >= self.tombstone_cap
        {
            self.sweep_tombstones();
            if self.tombstones.len() > self.tombstone_cap {
                // Still full of recent ids: forget the older half.
                let mut times: Vec<u64> = self.tombstones.iter().map(|e| *e.value()).collect();
                let mid = times.len() / 2;
                let (_, cutoff, _) = times.select_nth_unstable(mid);
                let cutoff = *cutoff;
                self.tombstones.retain(|_, t| *t > cutoff);
                self.tombstone_count
                    .store(self.tombstones.len(), Ordering::Release);
            }
        }
    }

    /// Forget deleted ids older than an hour.
    pub(crate) fn sweep_tombstones(&self) {
        let ttl = TOMBSTONE_TTL.as_millis() as u64;
        let now = clock_ms();
        self.tombstones.retain(|_, t| now.saturating_sub(*t) < ttl);
        self.tombstone_count
            .store(self.tombstones.len(), Ordering::Release);
    }

    /// Remove the sessions idle longer than `timeout` with no call running; returns them.
    pub(crate) fn take_stale(&self, timeout: Duration) -> Vec<Arc<Session>> {
        let now = clock_ms();
        let limit = timeout.as_millis() as u64;
        let is_stale = |s: &Session| {
            now.saturating_sub(s.last_seen.load(Ordering::Relaxed)) > limit
                && s.active_calls.load(Ordering::Acquire) == 0
        };
        let stale: Vec<Arc<Session>> = self
            .map
            .iter()
            .filter(|e| is_stale(e.value()))
            .map(|e| Arc::clone(e.value()))
            .collect();
        stale
            .into_iter()
            .filter(|s| self.remove_exact_if(s, is_stale))
            .collect()
    }

    /// Remove every session (shutdown).
    pub(crate) fn drain(&self) -> Vec<Arc<Session>> {
        let all: Vec<Arc<Session>> = self.map.iter().map(|e| Arc::clone(e.value())).collect();
        all.into_iter().filter(|s| self.remove_exact(s)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(id: &str, _store: &SessionStore) -> Arc<Session> {
        Arc::new(Session::new(id.into(), 0))
    }

    #[test]
    fn insert_get_remove_and_tombstones() {
        let store = SessionStore::new(10);
        store.insert(session("a", &store)).unwrap();
        assert!(store.get("a").is_ok());
        let dup = store.insert(session("a", &store)).unwrap_err();
        assert_eq!(dup.status(), 400);
        assert_eq!(store.get("never").unwrap_err().status(), 404);
        assert!(store.remove("a").is_some());
        assert_eq!(store.get("a").unwrap_err().status(), 410);
        assert_eq!(store.len(), 0);
        // The id can be used again, and is then live.
        store.insert(session("a", &store)).unwrap();
        assert!(store.get("a").is_ok());
    }

    #[test]
    fn tombstones_are_bounded() {
        let mut store = SessionStore::new(10);
        store.tombstone_cap = 100;
        for i in 0..1000 {
            let id = format!("s{i}");
            store.insert(session(&id, &store)).unwrap();
            store.remove(&id);
        }
        assert!(store.tombstones.len() <= 100, "{}", store.tombstones.len());
        // The most recent ids are still remembered.
        assert_eq!(store.get("s999").unwrap_err().status(), 410);
    }

    #[test]
    fn the_limit_is_enforced() {
        let store = SessionStore::new(2);
        store.insert(session("a", &store)).unwrap();
        store.insert(session("b", &store)).unwrap();
        assert!(store.is_full());
        let err = store.insert(session("c", &store)).unwrap_err();
        assert_eq!(err.status(), 503);
        store.remove("a");
        store.insert(session("c", &store)).unwrap();
    }

    #[test]
    fn stale_sessions_are_taken_unless_a_call_runs() {
        let store = SessionStore::new(10);
        let busy = session("busy", &store);
        busy.active_calls.store(1, Ordering::Release);
        store.insert(busy).unwrap();
        store.insert(session("idle", &store)).unwrap();
        std::thread::sleep(Duration::from_millis(5));
        let taken = store.take_stale(Duration::from_millis(1));
        assert_eq!(taken.len(), 1);
        assert_eq!(&*taken[0].id, "idle");
        assert_eq!(store.get("idle").unwrap_err().status(), 410);
        assert!(store.get("busy").is_ok());
    }

    #[tokio::test]
    async fn turns_are_taken_in_order() {
        let s = session("a", &SessionStore::new(1));
        let (first, none) = s.take_turn();
        assert!(none.is_none());
        let (_second, after_first) = s.take_turn();
        let mut after_first = after_first.unwrap();
        assert!(after_first.try_recv().is_err());
        drop(first);
        assert!(after_first.await.is_err()); // closed: the turn has passed
    }

    #[tokio::test]
    async fn closing_wakes_waiters_with_gone() {
        let store = SessionStore::new(1);
        let s = session("a", &store);
        let waiter = {
            let s = Arc::clone(&s);
            tokio::spawn(async move { s.wait_ready().await })
        };
        tokio::task::yield_now().await;
        s.close(Duration::from_secs(1)).await;
        let err = waiter.await.unwrap().unwrap_err();
        assert_eq!(err.status(), 410);
    }
}
