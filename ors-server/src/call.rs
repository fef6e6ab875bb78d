//! Tool calls. A call is one boxed job: wait for the session's turn, lock the episode, run
//! the tool (panics caught, time limit applied), record the result. The request polls the job
//! once in place: a tool that finishes without waiting is answered right there as one
//! complete SSE body. A job that has to wait moves to its own task, so a client that goes
//! away never cancels it, and the response streams its events. Either way the result lingers
//! for reconnects by `task_id` within its session (PROTOCOL_NOTES rows `tool-crash-error-event`, `task-id-bound-to-session`, `client-task-id`).

use std::collections::{HashMap, VecDeque};
use std::future::Future as _;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::Poll;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::FutureExt as _;
use ors_core::sse;
use ors_core::types::RunToolOutput;
use ors_runtime::env::{DynSession, ProgressSink, ToolContext};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::body::{sse_full, sse_stream, Resp, SseBody};
use crate::session::Session;
use crate::util::{lock, panic_message};

/// Events buffered per stream; progress beyond this for a slow reader is dropped.
const STREAM_BUFFER: usize = 64;
/// Finished calls kept per session for reconnects, whatever their age.
const MAX_LINGERING: usize = 64;

/// The server settings and state every call shares.
pub(crate) struct CallShared {
    /// How long a call may go on after its session is deleted.
    pub(crate) grace: Duration,
    pub(crate) linger: Duration,
    pub(crate) keepalive: Duration,
    /// Fires when the server stops waiting for calls at shutdown.
    pub(crate) abort: CancellationToken,
    /// Calls running in the whole server (shutdown waits for them).
    pub(crate) active: AtomicUsize,
    /// Largest result sent as it is (`ServerConfig::max_result_bytes`).
    pub(crate) max_result_bytes: usize,
}

enum RecordState {
    Running {
        listeners: Vec<mpsc::Sender<Bytes>>,
        /// Progress sent before any stream attached (during the first, in-place poll).
        backlog: Vec<Bytes>,
    },
    Done {
        events: Bytes,
        at: Instant,
    },
}

/// One call: its id and either the streams waiting for it or its encoded result.
pub(crate) struct CallRecord {
    id: Arc<str>,
    state: Mutex<RecordState>,
}

impl CallRecord {
    fn new(id: Arc<str>) -> Self {
        Self {
            id,
            state: Mutex::new(RecordState::Running {
                listeners: Vec::new(),
                backlog: Vec::new(),
            }),
        }
    }

    fn progress(&self, value: &Value) {
        if let RecordState::Running { listeners, backlog } = &mut *lock(&self.state) {
            let event = Bytes::from(sse::encode_progress(value));
            if listeners.is_empty() {
                if backlog.len() < STREAM_BUFFER - 1 {
                    backlog.push(event);
                }
            } else {
                for tx in listeners.iter() {
                    // The last slot is the result's: progress to a stalled reader is dropped
                    // rather than ever making the result wait (see `run_job`).
                    if tx.capacity() > 1 {
                        let _ = tx.try_send(event.clone());
                    }
                }
            }
        }
    }

    /// Attach a stream to a running call (the backlog goes first); `Err` gives the result
    /// events of a call that has finished.
    fn attach(&self, tx: mpsc::Sender<Bytes>) -> Result<(), Bytes> {
        match &mut *lock(&self.state) {
            RecordState::Running { listeners, backlog } => {
                for event in backlog.drain(..) {
                    let _ = tx.try_send(event);
                }
                listeners.retain(|l| !l.is_closed());
                listeners.push(tx);
                Ok(())
            }
            RecordState::Done { events, .. } => Err(events.clone()),
        }
    }

    /// Store the result; returns the attached streams and any progress nobody received.
    fn finish(&self, events: Bytes) -> (Vec<mpsc::Sender<Bytes>>, Vec<Bytes>) {
        let done = RecordState::Done {
            events,
            at: Instant::now(),
        };
        match std::mem::replace(&mut *lock(&self.state), done) {
            RecordState::Running { listeners, backlog } => (listeners, backlog),
            RecordState::Done { .. } => (Vec::new(), Vec::new()),
        }
    }
}

/// Hashes a call id by its first 8 bytes. Ids in the table are ours (random hex from
/// [`new_task_id`]), so they are spread already and a client cannot choose colliding ones;
/// SipHash would cost more than the rest of the table's work per call.
#[derive(Default, Clone, Copy)]
pub(crate) struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut word = [0u8; 8];
        let n = bytes.len().min(8);
        word[..n].copy_from_slice(&bytes[..n]);
        // The multiply carries the bytes into the high bits hashbrown uses for its tags.
        self.0 =
            (self.0.rotate_left(5) ^ u64::from_le_bytes(word)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

type IdMap<V> = HashMap<Arc<str>, V, std::hash::BuildHasherDefault<IdHasher>>;

/// The calls of one session, finished ones in completion order for expiry.
#[derive(Default)]
pub(crate) struct CallTable {
    map: IdMap<Arc<CallRecord>>,
    finished: VecDeque<(Instant, Arc<str>)>,
}

impl CallTable {
    fn get(&self, id: &str, linger: Duration) -> Option<Arc<CallRecord>> {
        let record = self.map.get(id)?;
        if let RecordState::Done { at, .. } = &*lock(&record.state) {
            if at.elapsed() >= linger {
                return None;
            }
        }
        Some(Arc::clone(record))
    }

    fn mark_finished(&mut self, id: Arc<str>, linger: Duration) {
        let now = Instant::now();
        self.finished.push_back((now, id));
        while let Some((at, id)) = self.finished.front() {
            if now.duration_since(*at) >= linger || self.finished.len() > MAX_LINGERING {
                self.map.remove(id);
                self.finished.pop_front();
            } else {
                break;
            }
        }
    }
}

/// How a call ended, before encoding.
enum Outcome {
    /// A result for the `end` event (including `ok: false` ones).
    Result(RunToolOutput),
    /// An `error` event: the tool crashed, or its session went away.
    Error(String),
}

impl Outcome {
    fn encode(&self) -> Bytes {
        Bytes::from(match self {
            Outcome::Result(r) => sse::encode_result(r),
            Outcome::Error(m) => sse::encode_error(m),
        })
    }
}

/// A fresh call id: 32 hex digits like the reference's `uuid4().hex`, unique within the
/// process. A random key mixed with a counter through a bijection, so no system call per
/// call; ids need not be secret (a reconnect only works from the call's own session).
fn new_task_id() -> Arc<str> {
    static KEY: OnceLock<(u64, u64)> = OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let (k1, k2) = *KEY.get_or_init(|| uuid::Uuid::new_v4().as_u64_pair());
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let id = uuid::Uuid::from_u64_pair(splitmix64(n ^ k1), splitmix64(n.wrapping_add(k2)));
    id.simple().to_string().into()
}

/// The SplitMix64 finaliser: a bijection on `u64` that scatters consecutive inputs.
fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Start a call on a ready session: poll it once in place, and answer with its complete
/// events if it finished, else with a live stream while it goes on in its own task.
pub(crate) async fn start(
    session: Arc<Session>,
    name: String,
    input: Value,
    timeout: Option<Duration>,
    shared: Arc<CallShared>,
) -> Resp {
    let id = new_task_id();
    let record = Arc::new(CallRecord::new(Arc::clone(&id)));
    lock(&session.calls)
        .map
        .insert(Arc::clone(&id), Arc::clone(&record));
    let first = sse::encode_task_id(&id);
    let keepalive = shared.keepalive;
    let mut job = Box::pin(run_job(
        session,
        Arc::clone(&record),
        name,
        input,
        timeout,
        shared,
    ));
    // One poll with this request's waker; a job left pending is re-polled (and so
    // re-registers its wakers) by the task it moves to.
    let polled = std::future::poll_fn(|cx| Poll::Ready(job.as_mut().poll(cx))).await;
    if let Poll::Ready(done) = polled {
        // One allocation of the final size.
        let unheard: usize = done.unheard.iter().map(Bytes::len).sum();
        let mut body = Vec::with_capacity(first.len() + unheard + done.events.len());
        body.extend_from_slice(&first);
        for event in &done.unheard {
            body.extend_from_slice(event);
        }
        body.extend_from_slice(&done.events);
        return sse_full(Bytes::from(body));
    }
    let (tx, rx) = mpsc::channel(STREAM_BUFFER);
    if let Err(events) = record.attach(tx) {
        // Unreachable in practice (the job is ours and pending), but an answer either way.
        let mut body = first;
        body.extend_from_slice(&events);
        return sse_full(Bytes::from(body));
    }
    tokio::spawn(job);
    sse_stream(SseBody::new(Bytes::from(first), rx, keepalive))
}

/// What a finished job hands back to a request that polled it to completion in place.
struct JobDone {
    events: Bytes,
    /// Progress sent while no stream was attached.
    unheard: Vec<Bytes>,
}

/// The whole life of one call.
async fn run_job(
    session: Arc<Session>,
    record: Arc<CallRecord>,
    name: String,
    input: Value,
    timeout: Option<Duration>,
    shared: Arc<CallShared>,
) -> JobDone {
    // Taken before the first await, so turns follow the order calls arrived in.
    let (turn, previous) = session.take_turn();
    session.active_calls.fetch_add(1, Ordering::AcqRel);
    shared.active.fetch_add(1, Ordering::AcqRel);
    if let Some(previous) = previous {
        // Err means the previous call is done (its sender dropped): our turn.
        let _ = previous.await;
    }
    let outcome = {
        let mut slot = session.episode.lock().await;
        match slot.as_mut() {
            Some(episode) => {
                let call = Call {
                    session: &session,
                    record: &record,
                    name: &name,
                    timeout,
                    shared: &shared,
                };
                call.run(episode.as_mut(), input).await
            }
            None => Outcome::Error(format!(
                "session '{}' was deleted before tool '{name}' could run",
                session.id
            )),
        }
    };
    drop(turn);
    let events = outcome.encode();
    let (listeners, unheard) = record.finish(events.clone());
    lock(&session.calls).mark_finished(Arc::clone(&record.id), shared.linger);
    session.touch();
    session.active_calls.fetch_sub(1, Ordering::AcqRel);
    shared.active.fetch_sub(1, Ordering::AcqRel);
    // Never awaited: a stalled stream (say, the half-open connection a client has already
    // reconnected from) must not hold the result back from the streams after it. Progress
    // always leaves the last slot free, so this cannot find the channel full.
    for tx in listeners {
        let _ = tx.try_send(events.clone());
    }
    JobDone { events, unheard }
}

struct Call<'a> {
    session: &'a Session,
    record: &'a Arc<CallRecord>,
    name: &'a str,
    timeout: Option<Duration>,
    shared: &'a CallShared,
}

impl Call<'_> {
    /// Run the tool under its time limit, catching a panic, giving up `grace` after the
    /// session is deleted and at once when the server aborts.
    async fn run(&self, episode: &mut dyn DynSession, input: Value) -> Outcome {
        let (session, name) = (self.session, self.name);
        let cancel = session.cancel.child_token();
        let sink_record = Arc::clone(self.record);
        let sink: ProgressSink = Arc::new(move |v: Value| sink_record.progress(&v));
        let ctx = ToolContext::new(
            Arc::clone(&session.id),
            Arc::clone(&self.record.id),
            cancel.clone(),
            Some(sink),
        );
        let (outcome, stopped) = {
            let tool = AssertUnwindSafe(episode.call(ctx, name, input)).catch_unwind();
            let deadline = async {
                match self.timeout {
                    Some(d) => tokio::time::sleep(d).await,
                    None => std::future::pending().await,
                }
            };
            let deleted = async {
                session.cancel.cancelled().await;
                tokio::time::sleep(self.shared.grace).await;
            };
            tokio::select! {
                biased;
                r = tool => (match r {
                    Ok(out) => Outcome::Result(crate::limits::check_result(
                        name,
                        out,
                        self.shared.max_result_bytes,
                    )),
                    Err(panic) => {
                        let msg = panic_message(&*panic);
                        tracing::warn!(session = %session.id, tool = name, panic = %msg, "tool panicked");
                        Outcome::Error(format!("tool '{name}' panicked: {msg}"))
                    }
                }, false),
                _ = deadline => {
                    let secs = self.timeout.unwrap_or_default().as_secs_f64();
                    tracing::debug!(session = %session.id, tool = name, secs, "tool timed out");
                    let msg = format!("tool '{name}' timed out after {secs}s");
                    (Outcome::Result(RunToolOutput::Error(msg)), true)
                }
                _ = deleted => (Outcome::Error(format!(
                    "session '{}' was deleted while tool '{name}' was running", session.id
                )), true),
                _ = self.shared.abort.cancelled() => (Outcome::Error(format!(
                    "the server shut down while tool '{name}' was running"
                )), true),
            }
            // Whatever won, the tool's future is dropped here, before its token fires.
        };
        if stopped {
            // Anything the tool left running (spawned work holding its context) stops too.
            cancel.cancel();
        }
        outcome
    }
}

/// Answer a call that names a `task_id`: the lingering result, or a stream attached to the
/// running call; an id unknown to this session is an `error` event and runs nothing.
pub(crate) fn reconnect(session: &Session, task_id: &str, shared: &CallShared) -> Resp {
    let record = lock(&session.calls).get(task_id, shared.linger);
    let Some(record) = record else {
        return sse_full(Bytes::from(sse::encode_error(
            "unknown task_id: no call of this session has that id, or its result has expired",
        )));
    };
    let first = sse::encode_task_id(&record.id);
    let (tx, rx) = mpsc::channel(STREAM_BUFFER);
    match record.attach(tx) {
        Ok(()) => sse_stream(SseBody::new(Bytes::from(first), rx, shared.keepalive)),
        Err(events) => {
            let mut body = first;
            body.extend_from_slice(&events);
            sse_full(Bytes::from(body))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str) -> Arc<CallRecord> {
        Arc::new(CallRecord::new(id.into()))
    }

    #[test]
    fn finished_calls_linger_then_expire() {
        let mut table = CallTable::default();
        let r = record("a");
        table.map.insert("a".into(), Arc::clone(&r));
        assert!(table.get("a", Duration::ZERO).is_some()); // running: always found
        r.finish(Bytes::from_static(b"x"));
        table.mark_finished("a".into(), Duration::from_secs(60));
        assert!(table.get("a", Duration::from_secs(60)).is_some());
        assert!(table.get("a", Duration::ZERO).is_none());
    }

    #[test]
    fn at_most_max_lingering_results_are_kept() {
        let mut table = CallTable::default();
        for i in 0..(MAX_LINGERING + 10) {
            let id: Arc<str> = i.to_string().into();
            let r = record(&id);
            r.finish(Bytes::new());
            table.map.insert(Arc::clone(&id), r);
            table.mark_finished(id, Duration::from_secs(60));
        }
        assert_eq!(table.map.len(), MAX_LINGERING);
        assert!(table.get("0", Duration::from_secs(60)).is_none());
        let last = (MAX_LINGERING + 9).to_string();
        assert!(table.get(&last, Duration::from_secs(60)).is_some());
    }

    #[test]
    fn progress_before_a_listener_is_kept_then_delivered() {
        let r = record("a");
        r.progress(&serde_json::json!({"step": 0}));
        let (tx, mut rx) = mpsc::channel(4);
        r.attach(tx).unwrap();
        let got = rx.try_recv().unwrap();
        assert_eq!(&got[..], b"event: progress\ndata: {\"step\":0}\n\n");
        r.progress(&serde_json::json!(1));
        assert_eq!(&rx.try_recv().unwrap()[..], b"event: progress\ndata: 1\n\n");
        let (listeners, unheard) = r.finish(Bytes::from_static(b"end"));
        assert_eq!(listeners.len(), 1);
        assert!(unheard.is_empty());
        // Finished: progress goes nowhere, and attaching gives the result.
        r.progress(&serde_json::json!(2));
        assert!(rx.try_recv().is_err());
        let (tx, _rx) = mpsc::channel(4);
        assert_eq!(r.attach(tx).unwrap_err(), Bytes::from_static(b"end"));
    }

    #[test]
    fn task_ids_are_32_hex_digits_and_distinct() {
        let ids: std::collections::HashSet<Arc<str>> = (0..10_000).map(|_| new_task_id()).collect();
        assert_eq!(ids.len(), 10_000);
        assert!(ids
            .iter()
            .all(|id| id.len() == 32 && id.chars().all(|c| c.is_ascii_hexdigit())));
    }

    #[test]
    fn progress_with_no_listener_is_returned_on_finish() {
        let r = record("a");
        r.progress(&serde_json::json!(1));
        let (listeners, unheard) = r.finish(Bytes::new());
        assert!(listeners.is_empty());
        assert_eq!(unheard.len(), 1);
    }
}
