//! Where finished calls' results wait for reconnects: kept for the linger time and no longer
//! (a timer expires them whatever else happens on the server), within a byte bound per
//! session and one server-wide (the oldest go first). The ids of results that went are
//! remembered, bounded, so a late reconnect is told its result expired instead of starting
//! the call again (PROTOCOL_NOTES row `client-task-id`).
//!
//! Each session's [`CallTable`] holds its calls, running and lingering; the server-wide
//! [`ResultStore`] counts the bytes and keeps one timer entry per session with lingering
//! results, at the time its oldest one expires. A session table and the store's queue are
//! never locked at the same time.

use std::collections::{BinaryHeap, HashMap, HashSet, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::record::{CallId, CallRecord, Key};
use crate::util::{lock, sleep_until};

/// Most results one session keeps at once, whatever their size.
const MAX_LINGERING: usize = 1024;
/// Ids of gone results one session remembers: more than the calls it may have queued, so any
/// call a client may still be waiting for is answered "expired" rather than run again.
const MAX_FORGOTTEN: usize = 512;

/// The server-wide side: bytes of all lingering results, and the expiry timer's queue.
pub(crate) struct ResultStore {
    linger: Duration,
    max_bytes: usize,
    max_session_bytes: usize,
    bytes: AtomicUsize,
    queue: Mutex<BinaryHeap<Due>>,
    wake: Notify,
}

/// What holds a [`CallTable`]: a session. The store's queue names it without keeping it
/// alive, and through this trait, so the table need not know what a session is.
pub(crate) trait HasCalls: Send + Sync {
    /// Its calls.
    fn calls(&self) -> &Mutex<CallTable>;
}

/// A session with lingering results, due when its oldest expires (or earlier, when that one
/// went before its time: the timer then finds nothing due and queues the session again).
struct Due {
    at: Instant,
    session: Weak<dyn HasCalls>,
}

impl PartialEq for Due {
    fn eq(&self, other: &Self) -> bool {
        self.at == other.at
    }
}
impl Eq for Due {}
impl PartialOrd for Due {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Due {
    // Reversed: the heap's top is the earliest.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other.at.cmp(&self.at)
    }
}

impl ResultStore {
    pub(crate) fn new(linger: Duration, max_bytes: usize, max_session_bytes: usize) -> Self {
        Self {
            linger,
            max_bytes,
            max_session_bytes,
            bytes: AtomicUsize::new(0),
            queue: Mutex::new(BinaryHeap::new()),
            wake: Notify::new(),
        }
    }

    /// How long a result is kept.
    pub(crate) fn linger(&self) -> Duration {
        self.linger
    }

    /// Bytes of lingering results, server-wide.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Acquire)
    }

    /// Keep the result of `record`, finished at `finished` with `size` bytes of events, for
    /// reconnects; then make room server-wide if that went over the bound.
    pub(crate) fn keep<S: HasCalls + 'static>(
        &self,
        session: &Arc<S>,
        record: &Arc<CallRecord>,
        size: usize,
        finished: Instant,
    ) {
        let queue_at = lock(session.calls()).keep(record, size, finished);
        if let Some(at) = queue_at {
            self.enqueue(at, Arc::downgrade(session) as Weak<dyn HasCalls>);
        }
        while self.bytes() > self.max_bytes {
            let Some(due) = lock(&self.queue).pop() else {
                break;
            };
            self.revisit(due, |t, store| t.drop_oldest(store));
        }
    }

    /// The session of `due`, unless it is gone: `visit` its tables, and queue it again for
    /// when it is next due, if it still has results.
    fn revisit(&self, due: Due, visit: impl FnOnce(&mut Tables, &ResultStore)) {
        let Some(session) = due.session.upgrade() else {
            return;
        };
        let next = lock(session.calls()).revisit(visit);
        if let Some(at) = next {
            self.enqueue(at, Arc::downgrade(&session));
        }
    }

    fn enqueue(&self, at: Instant, session: Weak<dyn HasCalls>) {
        let mut queue = lock(&self.queue);
        let first = queue.peek().is_none_or(|top| at < top.at);
        queue.push(Due { at, session });
        drop(queue);
        if first {
            self.wake.notify_one();
        }
    }

    /// Expire results on time until `stop`: the timer of the whole server.
    pub(crate) async fn run_expiry(self: Arc<Self>, stop: CancellationToken) {
        loop {
            let next = lock(&self.queue).peek().map(|d| d.at);
            let wake = self.wake.notified();
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = wake => continue,
                _ = sleep_until(next) => {}
            }
            self.expire_due(Instant::now());
        }
    }

    /// Expire every result due by `now`.
    fn expire_due(&self, now: Instant) {
        loop {
            let due = {
                let mut queue = lock(&self.queue);
                match queue.peek() {
                    Some(top) if top.at <= now => queue.pop(),
                    _ => None,
                }
            };
            let Some(due) = due else {
                return;
            };
            self.revisit(due, |t, store| t.drop_due(store, now));
        }
    }
}

/// Hashes a [`Key`] as itself: keys are keyed hashes already, uniform and unknown to clients.
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        // Only `u64` keys are hashed (below); anything else is folded in, FNV-1a style.
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

type ByKey<V> = HashMap<Key, V, BuildHasherDefault<KeyHasher>>;

/// A result kept for reconnects.
struct Kept {
    key: Key,
    finished: Instant,
    size: usize,
}

/// What a session knows of a call id.
pub(crate) enum Found {
    /// A running call, or one whose result still lingers.
    Call(Arc<CallRecord>),
    /// A call that finished and whose result is gone: nothing runs again.
    Expired,
    /// Never seen (or forgotten long ago).
    Unknown,
}

/// The calls of one session: running ones and lingering results by id, the lingering ones
/// in the order they finished, and the ids of results that went. A session that never made
/// a call (an idle one) holds no tables, only this handle.
pub(crate) struct CallTable {
    tables: Option<Box<Tables>>,
    store: Arc<ResultStore>,
}

#[derive(Default)]
struct Tables {
    records: ByKey<Arc<CallRecord>>,
    kept: VecDeque<Kept>,
    bytes: usize,
    forgotten: ForgottenIds,
    /// Whether the store's queue has an entry for this session.
    queued: bool,
}

impl CallTable {
    pub(crate) fn new(store: Arc<ResultStore>) -> Self {
        Self {
            tables: None,
            store,
        }
    }

    /// The tables (made on first use) and the store, borrowed apart.
    fn parts(&mut self) -> (&mut Tables, &ResultStore) {
        (self.tables.get_or_insert_with(Box::default), &self.store)
    }

    /// What this session knows of `id`. A result past its linger time that the timer has not
    /// reached yet is expired here.
    pub(crate) fn find(&mut self, id: &CallId) -> Found {
        let Some(t) = self.tables.as_deref_mut() else {
            return Found::Unknown;
        };
        t.drop_due(&self.store, Instant::now());
        match t.records.get(&id.key()) {
            Some(record) if record.id() == id.text() => Found::Call(Arc::clone(record)),
            Some(_) => Found::Unknown,
            None if t.forgotten.contains(id.key()) => Found::Expired,
            None => Found::Unknown,
        }
    }

    /// Register a call that is starting under its id (unknown to this table).
    pub(crate) fn insert(&mut self, record: Arc<CallRecord>) {
        let key = record.call_id().key();
        self.parts().0.records.insert(key, record);
    }

    /// Keep a finished call's result; returns when the store must look at this session, if
    /// it has no entry in the store's queue yet.
    fn keep(
        &mut self,
        record: &Arc<CallRecord>,
        size: usize,
        finished: Instant,
    ) -> Option<Instant> {
        let key = record.call_id().key();
        let (t, store) = self.parts();
        if store.linger.is_zero() {
            t.forget(key);
            return None;
        }
        t.kept.push_back(Kept {
            key,
            finished,
            size,
        });
        t.bytes += size;
        // At steady state each result kept pushes an old one out: the server-wide count
        // changes once, by the difference (a line of memory every thread writes).
        let mut freed = 0;
        while t.bytes > store.max_session_bytes || t.kept.len() > MAX_LINGERING {
            freed += t.pop_oldest();
        }
        match size.cmp(&freed) {
            std::cmp::Ordering::Greater => store.bytes.fetch_add(size - freed, Ordering::AcqRel),
            std::cmp::Ordering::Less => store.bytes.fetch_sub(freed - size, Ordering::AcqRel),
            std::cmp::Ordering::Equal => 0,
        };
        t.schedule(store)
    }

    /// The store's visit (the timer's, or making room server-wide): `visit` forgets results;
    /// returns when this session is next due, if it still has results.
    fn revisit(&mut self, visit: impl FnOnce(&mut Tables, &ResultStore)) -> Option<Instant> {
        let t = self.tables.as_deref_mut()?;
        t.queued = false;
        visit(t, &self.store);
        t.schedule(&self.store)
    }

    /// Bytes of this session's lingering results.
    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.tables.as_ref().map_or(0, |t| t.bytes)
    }
}

impl Tables {
    fn drop_due(&mut self, store: &ResultStore, now: Instant) {
        while self
            .kept
            .front()
            .is_some_and(|k| now.duration_since(k.finished) >= store.linger)
        {
            self.drop_oldest(store);
        }
    }

    /// When the store should look at this session next, if it must be queued for it.
    fn schedule(&mut self, store: &ResultStore) -> Option<Instant> {
        if self.queued {
            return None;
        }
        let oldest = self.kept.front()?;
        self.queued = true;
        Some(oldest.finished + store.linger)
    }

    fn drop_oldest(&mut self, store: &ResultStore) {
        let freed = self.pop_oldest();
        store.bytes.fetch_sub(freed, Ordering::AcqRel);
    }

    /// Forget the oldest result; the bytes it held, which the caller takes off the store's
    /// count.
    fn pop_oldest(&mut self) -> usize {
        let Some(kept) = self.kept.pop_front() else {
            return 0;
        };
        self.bytes -= kept.size;
        self.forget(kept.key);
        kept.size
    }

    fn forget(&mut self, key: Key) {
        self.records.remove(&key);
        self.forgotten.insert(key);
    }
}

impl Drop for CallTable {
    // The session is gone: its results no longer count against the server's bound.
    fn drop(&mut self) {
        if let Some(t) = &self.tables {
            self.store.bytes.fetch_sub(t.bytes, Ordering::AcqRel);
        }
    }
}

/// Ids of results that went, by key (a collision would answer one new call "expired": odds
/// of one in 2^55 per call), the oldest forgotten first.
#[derive(Default)]
struct ForgottenIds {
    set: HashSet<Key, BuildHasherDefault<KeyHasher>>,
    order: VecDeque<Key>,
}

impl ForgottenIds {
    fn insert(&mut self, key: Key) {
        if self.set.insert(key) {
            self.order.push_back(key);
            if self.order.len() > MAX_FORGOTTEN {
                if let Some(old) = self.order.pop_front() {
                    self.set.remove(&old);
                }
            }
        }
    }

    fn contains(&self, key: Key) -> bool {
        self.set.contains(&key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::key;
    use crate::session::Session;
    use bytes::Bytes;

    const LINGER: Duration = Duration::from_secs(60);

    fn store(max: usize, per_session: usize) -> Arc<ResultStore> {
        Arc::new(ResultStore::new(LINGER, max, per_session))
    }

    fn session(id: &str, store: &Arc<ResultStore>) -> Arc<Session> {
        Arc::new(Session::new(id.into(), 0, Arc::clone(store)))
    }

    /// A finished call of `size` result bytes, kept.
    fn finish(store: &ResultStore, session: &Arc<Session>, id: &str, size: usize) {
        let record = Arc::new(CallRecord::new(CallId::new(id.into())));
        lock(&session.calls).insert(Arc::clone(&record));
        record.finish(Bytes::from(vec![b'x'; size]));
        store.keep(session, &record, size, Instant::now());
    }

    fn found(session: &Session, id: &str) -> &'static str {
        match lock(&session.calls).find(&CallId::new(id.into())) {
            Found::Call(_) => "call",
            Found::Expired => "expired",
            Found::Unknown => "unknown",
        }
    }

    #[tokio::test(start_paused = true)]
    async fn results_expire_on_the_timer_without_other_activity() {
        let store = store(usize::MAX, usize::MAX);
        let stop = CancellationToken::new();
        tokio::spawn(Arc::clone(&store).run_expiry(stop.clone()));
        let s = session("s", &store);
        finish(&store, &s, "a", 100);
        tokio::time::sleep(LINGER / 2).await;
        finish(&store, &s, "b", 10);
        assert_eq!(store.bytes(), 110);
        tokio::time::sleep(LINGER / 2 + Duration::from_millis(1)).await;
        // "a" went on time; "b" lingers on.
        assert_eq!(store.bytes(), 10);
        assert_eq!(found(&s, "a"), "expired");
        assert_eq!(found(&s, "b"), "call");
        tokio::time::sleep(LINGER).await;
        assert_eq!(store.bytes(), 0);
        assert_eq!(found(&s, "b"), "expired");
        assert_eq!(found(&s, "never"), "unknown");
        stop.cancel();
    }

    #[tokio::test]
    async fn a_session_keeps_at_most_its_bound_oldest_going_first() {
        let store = store(usize::MAX, 250);
        let s = session("s", &store);
        for id in ["a", "b", "c"] {
            finish(&store, &s, id, 100);
        }
        assert_eq!(lock(&s.calls).bytes(), 200);
        assert_eq!(store.bytes(), 200);
        assert_eq!(found(&s, "a"), "expired");
        assert_eq!(found(&s, "c"), "call");
        // A result larger than the bound is not kept at all.
        finish(&store, &s, "huge", 300);
        assert_eq!(found(&s, "huge"), "expired");
        assert_eq!(store.bytes(), 0);
    }

    #[tokio::test]
    async fn the_server_keeps_at_most_its_bound_oldest_session_first() {
        let store = store(250, usize::MAX);
        let one = session("one", &store);
        let two = session("two", &store);
        finish(&store, &one, "a", 100);
        tokio::time::sleep(Duration::from_millis(2)).await;
        finish(&store, &two, "b", 100);
        finish(&store, &two, "c", 100);
        assert_eq!(store.bytes(), 200);
        assert_eq!(found(&one, "a"), "expired");
        assert_eq!(found(&two, "b"), "call");
        assert_eq!(found(&two, "c"), "call");
        // A session's results stop counting when it goes.
        drop(two);
        assert_eq!(store.bytes(), 0);
    }

    #[test]
    fn forgotten_ids_are_bounded_and_keep_the_newest() {
        let mut f = ForgottenIds::default();
        for i in 0..(MAX_FORGOTTEN + 10) {
            f.insert(key(&i.to_string()));
        }
        assert_eq!(f.set.len(), MAX_FORGOTTEN);
        assert!(!f.contains(key("0")));
        assert!(f.contains(key(&(MAX_FORGOTTEN + 9).to_string())));
    }

    #[test]
    fn a_session_without_calls_holds_no_tables() {
        let store = store(usize::MAX, usize::MAX);
        let s = session("s", &store);
        assert_eq!(found(&s, "x"), "unknown");
        assert!(lock(&s.calls).tables.is_none());
        finish(&store, &s, "a", 1);
        assert!(lock(&s.calls).tables.is_some());
        assert_eq!(found(&s, "a"), "call");
    }
}
