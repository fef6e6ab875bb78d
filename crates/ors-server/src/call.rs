//! Tool calls. A call is one boxed job: wait for the session's episode (exclusively, or shared
//! for a `#[tool(concurrent)]` tool: [`crate::session::EpisodeGate`]), run the tool (panics
//! caught, time limit applied), record the result. The request polls the job
//! once in place: a tool that finishes without waiting is answered right there as one
//! complete SSE body. A job that has to wait moves to its own task, so a client that goes
//! away never cancels it, and the response streams its events. Either way the result lingers
//! for reconnects by `task_id` within its session ([`crate::results`]; PROTOCOL_NOTES rows
//! `tool-crash-error-event`, `task-id-bound-to-session`, `client-task-id`).
//!
//! A result is encoded once, and that one buffer is what every response sends: the `task_id`
//! event and the result go out as separate frames, never joined into a copy.

use std::future::Future as _;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use futures_util::future::BoxFuture;
use futures_util::FutureExt as _;
use ors_core::sse;
use ors_core::types::{GroupCandidate, RunToolOutput, ScoreGroupOutput};
use ors_runtime::env::{CallInput, DynSession, ProgressSink, ToolContext};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::body::{sse_frames, sse_full, sse_stream, Resp, SseBody};
use crate::error::ApiError;
use crate::metrics::{CallOutcome, Metrics};
use crate::results::{Found, ResultStore};
use crate::session::Session;
use crate::util::{lock, panic_message};

/// Events buffered per stream; progress beyond this for a slow reader is dropped.
const STREAM_BUFFER: usize = 64;
/// Longest `task_id` a client may choose (as long as a session id may be).
const MAX_TASK_ID_LEN: usize = ors_core::protocol::MAX_SESSION_ID_LEN;

/// The server settings and state every call shares.
pub(crate) struct CallShared {
    /// How long a call may go on after its session is deleted.
    pub(crate) grace: Duration,
    pub(crate) keepalive: Duration,
    /// Where results wait for reconnects.
    pub(crate) results: Arc<ResultStore>,
    /// Fires when the server stops waiting for calls at shutdown.
    pub(crate) abort: CancellationToken,
    /// Calls running in the whole server (shutdown waits for them).
    pub(crate) active: AtomicUsize,
    /// Largest result sent as it is (`ServerConfig::max_result_bytes`).
    pub(crate) max_result_bytes: usize,
    /// Where finished calls are counted, when metrics are on.
    pub(crate) metrics: Option<Arc<Metrics>>,
}

enum RecordState {
    Running {
        listeners: Vec<mpsc::Sender<Bytes>>,
        /// Progress sent before any stream attached (during the first, in-place poll).
        backlog: Vec<Bytes>,
    },
    Done {
        events: Bytes,
    },
}

/// One call: its id and either the streams waiting for it or its encoded result.
pub(crate) struct CallRecord {
    id: Arc<str>,
    state: Mutex<RecordState>,
}

impl CallRecord {
    pub(crate) fn new(id: Arc<str>) -> Self {
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
            RecordState::Done { events } => Err(events.clone()),
        }
    }

    /// The call's id.
    pub(crate) fn id(&self) -> &Arc<str> {
        &self.id
    }

    /// Store the result; returns the attached streams and any progress nobody received.
    pub(crate) fn finish(&self, events: Bytes) -> (Vec<mpsc::Sender<Bytes>>, Vec<Bytes>) {
        let done = RecordState::Done { events };
        match std::mem::replace(&mut *lock(&self.state), done) {
            RecordState::Running { listeners, backlog } => (listeners, backlog),
            RecordState::Done { .. } => (Vec::new(), Vec::new()),
        }
    }
}

/// What a call runs: a tool, or the scoring of a group of candidate answers, which goes
/// through the same gate, time limit, stream and results store (PROTOCOL_NOTES row
/// `score-group`).
pub(crate) enum Work {
    /// The named tool with this input.
    Tool(CallInput),
    /// The episode's `score_group` with these candidates (holding the episode exclusively).
    ScoreGroup(Vec<GroupCandidate>),
}

/// The name a group scoring goes by in logs, metrics and messages (no tool can have it: it is
/// a method of the `Environment` trait).
pub(crate) const SCORE_GROUP: &str = "score_group";

/// How a call ended, before encoding.
enum Outcome {
    /// A result for the `end` event (including `ok: false` ones).
    Result(RunToolOutput),
    /// The scores of a group, for the `end` event.
    Scores(ScoreGroupOutput),
    /// An `error` event: the tool crashed, or its session went away.
    Error(String),
}

impl Outcome {
    fn encode(&self) -> Bytes {
        Bytes::from(match self {
            Outcome::Result(r) => sse::encode_result(r),
            Outcome::Scores(s) => match serde_json::to_string(s) {
                Ok(json) => sse::encode_result_json(&json),
                Err(e) => sse::encode_error(&format!("the scores cannot be encoded: {e}")),
            },
            Outcome::Error(m) => sse::encode_error(m),
        })
    }
}

/// A fresh call id: 32 hex digits like the reference's `uuid4().hex`, unique within the
/// process. A random key mixed with a counter through a bijection, so no system call per
/// call; ids need not be secret (a reconnect only works from the call's own session).
/// A client may choose its own instead (row `client-task-id`).
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

/// Answer a call request: a new call (under the client's `task_id` when it sent one the
/// session has never seen), or, for a `task_id` the session knows, a reconnect to that call,
/// or the news that its result has expired (PROTOCOL_NOTES row `client-task-id`).
pub(crate) async fn serve(
    session: Arc<Session>,
    call: CallRequest,
    shared: &Arc<CallShared>,
) -> Result<Resp, ApiError> {
    let id: Arc<str> = match call.task_id {
        None => new_task_id(),
        Some(id) => {
            check_task_id(&id)?;
            let found = lock(&session.calls).find(&id);
            if !matches!(found, Found::Unknown) {
                reconnected(shared);
            }
            match found {
                Found::Call(record) => return Ok(attach(&session, &record, shared)),
                Found::Expired => return Ok(expired(&id, shared)),
                Found::Unknown => id.into(),
            }
        }
    };
    let max = call.max_queued;
    if session.active_calls.load(Ordering::Acquire) >= max {
        return Err(ApiError::TooManyCalls {
            sid: Arc::clone(&session.id),
            max,
        });
    }
    session.ready_within(call.setup_wait).await?;
    let record = {
        let mut table = lock(&session.calls);
        match table.find(&id) {
            Found::Unknown => {
                let record = Arc::new(CallRecord::new(id));
                table.insert(Arc::clone(&record));
                record
            }
            // The same request sent twice at once: the second one listens to the first.
            Found::Call(record) => {
                drop(table);
                reconnected(shared);
                return Ok(attach(&session, &record, shared));
            }
            Found::Expired => {
                reconnected(shared);
                return Ok(expired(&id, shared));
            }
        }
    };
    Ok(start(
        session,
        record,
        call.name,
        call.work,
        call.timeout,
        Arc::clone(shared),
    )
    .await)
}

/// A call as the request asks for it, with the limits that apply.
pub(crate) struct CallRequest {
    /// The tool's name ([`SCORE_GROUP`] for a group scoring).
    pub(crate) name: String,
    pub(crate) work: Work,
    /// The client's id for the call: a reconnect, or a new call under that id.
    pub(crate) task_id: Option<String>,
    /// The tool's time limit.
    pub(crate) timeout: Option<Duration>,
    /// Calls the session may have started and not finished.
    pub(crate) max_queued: usize,
    /// How long to wait for the session's setup before answering 503 starting.
    pub(crate) setup_wait: Duration,
}

/// A client-chosen id must fit where ids go: 1 to 128 printable ASCII characters.
fn check_task_id(id: &str) -> Result<(), ApiError> {
    if id.is_empty() || id.len() > MAX_TASK_ID_LEN || !id.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(ApiError::BadRequest(format!(
            "invalid field 'task_id': it must be 1 to {MAX_TASK_ID_LEN} printable ASCII \
             characters without spaces"
        )));
    }
    Ok(())
}

/// Start a call on a ready session: poll it once in place, and answer with its complete
/// events if it finished, else with a live stream while it goes on in its own task.
async fn start(
    session: Arc<Session>,
    record: Arc<CallRecord>,
    name: String,
    work: Work,
    timeout: Option<Duration>,
    shared: Arc<CallShared>,
) -> Resp {
    let first = Bytes::from(sse::encode_task_id(&record.id));
    let keepalive = shared.keepalive;
    let listener = Arc::clone(&session);
    let mut job = Box::pin(run_job(
        session,
        Arc::clone(&record),
        name,
        work,
        timeout,
        shared,
    ));
    // One poll with this request's waker; a job left pending is re-polled (and so
    // re-registers its wakers) by the task it moves to.
    let polled = std::future::poll_fn(|cx| Poll::Ready(job.as_mut().poll(cx))).await;
    if let Poll::Ready(done) = polled {
        let mut frames = Vec::with_capacity(done.unheard.len() + 2);
        frames.push(first);
        frames.extend(done.unheard);
        frames.push(done.events);
        return sse_frames(frames);
    }
    let (tx, rx) = mpsc::channel(STREAM_BUFFER);
    if let Err(events) = record.attach(tx) {
        // Unreachable in practice (the job is ours and pending), but an answer either way.
        return sse_frames(vec![first, events]);
    }
    tokio::spawn(job);
    sse_stream(SseBody::new(
        first,
        rx,
        keepalive,
        Session::listen(&listener),
    ))
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
    work: Work,
    timeout: Option<Duration>,
    shared: Arc<CallShared>,
) -> JobDone {
    let concurrent = matches!(work, Work::Tool(_)) && session.is_concurrent(&name);
    session.active_calls.fetch_add(1, Ordering::AcqRel);
    shared.active.fetch_add(1, Ordering::AcqRel);
    // The gate is asked in the job's first poll, before anything else can wait, so calls
    // queue in the order they arrived.
    let mut gate = if concurrent {
        Held::Shared(session.episode.shared().await)
    } else {
        Held::Exclusive(session.episode.lock().await)
    };
    let episode = match &mut gate {
        Held::Shared(slot) => slot.as_deref().map(Episode::Shared),
        Held::Exclusive(slot) => slot.as_deref_mut().map(Episode::Exclusive),
    };
    let mut ran = std::time::Duration::ZERO;
    let (outcome, kind) = match episode {
        // Shutdown stopped waiting for calls while this one waited its turn.
        Some(_) if shared.abort.is_cancelled() => (
            Outcome::Error(format!(
                "the server shut down before tool '{name}' could run"
            )),
            CallOutcome::cancelled,
        ),
        Some(episode) => {
            let call = Call {
                session: &session,
                record: &record,
                name: &name,
                timeout,
                shared: &shared,
            };
            let started = std::time::Instant::now();
            let done = call
                .run(|ctx| -> BoxFuture<'_, Outcome> {
                    match (episode, work) {
                        (Episode::Exclusive(e), Work::Tool(input)) => {
                            Box::pin(e.call(ctx, &name, input).map(Outcome::Result))
                        }
                        (Episode::Shared(e), Work::Tool(input)) => {
                            Box::pin(e.call_concurrent(ctx, &name, input).map(Outcome::Result))
                        }
                        (Episode::Exclusive(e), Work::ScoreGroup(candidates)) => {
                            Box::pin(e.score_group(candidates).map(|r| match r {
                                Ok(scores) => Outcome::Scores(ScoreGroupOutput { scores }),
                                Err(e) => Outcome::Error(format!("{SCORE_GROUP} failed: {e}")),
                            }))
                        }
                        // Not reached: a scoring always takes the gate exclusively (above).
                        (Episode::Shared(_), Work::ScoreGroup(_)) => Box::pin(std::future::ready(
                            Outcome::Error(format!("{SCORE_GROUP} needs the episode to itself")),
                        )),
                    }
                })
                .await;
            ran = started.elapsed();
            done
        }
        None => (
            Outcome::Error(format!(
                "session '{}' was deleted before tool '{name}' could run",
                session.id
            )),
            CallOutcome::cancelled,
        ),
    };
    drop(gate);
    let events = outcome.encode();
    let (listeners, unheard) = record.finish(events.clone());
    shared.results.keep(&session, &record, events.len());
    session.touch();
    session.active_calls.fetch_sub(1, Ordering::AcqRel);
    shared.active.fetch_sub(1, Ordering::AcqRel);
    if let Some(m) = &shared.metrics {
        let reward = match &outcome {
            Outcome::Result(RunToolOutput::Success(out)) => out.reward,
            _ => None,
        };
        m.call(session.env, &name, kind, ran, reward);
    }
    // Never awaited: a stalled stream (say, the half-open connection a client has already
    // reconnected from) must not hold the result back from the streams after it. Progress
    // always leaves the last slot free, so this cannot find the channel full.
    for tx in listeners {
        let _ = tx.try_send(events.clone());
    }
    JobDone { events, unheard }
}

/// The session's episode slot as a call holds it.
enum Held<'a> {
    Exclusive(crate::session::EpisodeMut<'a>),
    Shared(tokio::sync::RwLockReadGuard<'a, Option<Box<dyn DynSession>>>),
}

/// The episode as a call may use it.
enum Episode<'a> {
    Exclusive(&'a mut (dyn DynSession + 'static)),
    Shared(&'a (dyn DynSession + 'static)),
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
    /// session is deleted and at once when the server aborts; how it ended, for the metrics.
    async fn run<'e>(
        &self,
        tool: impl FnOnce(ToolContext) -> BoxFuture<'e, Outcome>,
    ) -> (Outcome, CallOutcome) {
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
        let (outcome, kind) = {
            let tool = AssertUnwindSafe(tool(ctx)).catch_unwind();
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
                r = tool => match r {
                    Ok(Outcome::Result(out)) => {
                        let out = crate::limits::check_result(name, out, self.shared.max_result_bytes);
                        let kind = if out.is_ok() { CallOutcome::ok } else { CallOutcome::tool_error };
                        (Outcome::Result(out), kind)
                    }
                    Ok(scores @ Outcome::Scores(_)) => (scores, CallOutcome::ok),
                    Ok(failed @ Outcome::Error(_)) => (failed, CallOutcome::crashed),
                    Err(panic) => {
                        let msg = panic_message(&*panic);
                        tracing::warn!(session = %session.id, tool = name, panic = %msg, "tool panicked");
                        (Outcome::Error(format!("tool '{name}' panicked: {msg}")), CallOutcome::crashed)
                    }
                },
                _ = deadline => {
                    let secs = self.timeout.unwrap_or_default().as_secs_f64();
                    tracing::debug!(session = %session.id, tool = name, secs, "tool timed out");
                    let msg = format!("tool '{name}' timed out after {secs}s");
                    (Outcome::Result(RunToolOutput::error(msg)), CallOutcome::timed_out)
                }
                _ = deleted => (Outcome::Error(format!(
                    "session '{}' was deleted while tool '{name}' was running", session.id
                )), CallOutcome::cancelled),
                _ = self.shared.abort.cancelled() => (Outcome::Error(format!(
                    "the server shut down while tool '{name}' was running"
                )), CallOutcome::cancelled),
            }
            // Whatever won, the tool's future is dropped here, before its token fires.
        };
        if matches!(kind, CallOutcome::timed_out | CallOutcome::cancelled) {
            // Anything the tool left running (spawned work holding its context) stops too.
            cancel.cancel();
        }
        (outcome, kind)
    }
}

/// Attach to a call the session knows: a stream of a running call, or the lingering result
/// (the stored events themselves, not a copy).
fn attach(session: &Arc<Session>, record: &CallRecord, shared: &CallShared) -> Resp {
    let first = Bytes::from(sse::encode_task_id(&record.id));
    let (tx, rx) = mpsc::channel(STREAM_BUFFER);
    match record.attach(tx) {
        Ok(()) => sse_stream(SseBody::new(
            first,
            rx,
            shared.keepalive,
            Session::listen(session),
        )),
        Err(events) => sse_frames(vec![first, events]),
    }
}

/// Count a call request naming a call its session already knows.
fn reconnected(shared: &CallShared) {
    if let Some(m) = &shared.metrics {
        m.sse_reconnect();
    }
}

/// The answer to a reconnect whose result has gone: an `error` event, and nothing runs.
fn expired(id: &str, shared: &CallShared) -> Resp {
    sse_full(Bytes::from(sse::encode_error(&format!(
        "the result of call '{id}' has expired (results are kept for {} s, less when the \
         server is short of memory); the call was not run again",
        shared.results.linger().as_secs_f64()
    ))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::future::BoxFuture;
    use http_body_util::BodyExt as _;
    use ors_core::types::{Blocks, ToolOutput, ToolSpec};
    use ors_runtime::env::{EnvError, ToolFuture};

    /// An episode whose every tool returns a result of 100 kB.
    struct Big;

    impl DynSession for Big {
        fn prompt(&self) -> BoxFuture<'_, Result<Blocks, EnvError>> {
            Box::pin(async { Ok(Vec::new()) })
        }
        fn tools(&self) -> Vec<ToolSpec> {
            Vec::new()
        }
        fn call<'a>(&'a mut self, _: ToolContext, _: &'a str, _: CallInput) -> ToolFuture<'a> {
            Box::pin(async { RunToolOutput::Success(ToolOutput::text("x".repeat(100_000))) })
        }
        fn teardown(&mut self) -> BoxFuture<'_, ()> {
            Box::pin(async {})
        }
    }

    fn shared() -> Arc<CallShared> {
        Arc::new(CallShared {
            grace: Duration::from_secs(1),
            keepalive: Duration::from_secs(10),
            results: Arc::new(ResultStore::new(Duration::from_secs(60), 1 << 30, 1 << 30)),
            abort: CancellationToken::new(),
            active: AtomicUsize::new(0),
            max_result_bytes: 1 << 30,
            metrics: None,
        })
    }

    fn request(task_id: Option<&str>) -> CallRequest {
        CallRequest {
            name: "big".into(),
            work: Work::Tool(CallInput::empty()),
            task_id: task_id.map(str::to_owned),
            timeout: None,
            max_queued: 8,
            setup_wait: Duration::from_secs(60),
        }
    }

    /// The frames of a complete response.
    async fn frames(resp: Resp) -> Vec<Bytes> {
        let mut body = resp.into_body();
        let mut frames = Vec::new();
        while let Some(frame) = body.frame().await {
            if let Ok(data) = frame.unwrap().into_data() {
                frames.push(data);
            }
        }
        frames
    }

    /// Where the stored result of call `id` lives in memory.
    fn stored(session: &Session, id: &str) -> *const u8 {
        let Found::Call(record) = lock(&session.calls).find(id) else {
            panic!("call {id} is not kept");
        };
        let (tx, _rx) = mpsc::channel(1);
        record.attach(tx).expect_err("the call is done").as_ptr()
    }

    #[tokio::test]
    async fn a_result_is_sent_from_its_stored_buffer_not_a_copy() {
        let shared = shared();
        let session = Arc::new(Session::new("s".into(), 0, Arc::clone(&shared.results)));
        session.set_ready(Box::new(Big)).await;

        // The first response: the task_id event, then the stored result itself.
        let first = frames(
            serve(Arc::clone(&session), request(Some("c1")), &shared)
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(first.len(), 2);
        assert_eq!(&first[0][..], b"event: task_id\ndata: c1\n\n");
        assert!(first[1].len() > 100_000);
        assert_eq!(first[1].as_ptr(), stored(&session, "c1"));

        // A reconnect: the same buffer again.
        let again = frames(
            serve(Arc::clone(&session), request(Some("c1")), &shared)
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(again, first);
        assert_eq!(again[1].as_ptr(), stored(&session, "c1"));
        assert_eq!(shared.results.bytes(), first[1].len(), "kept once");
    }

    fn record(id: &str) -> Arc<CallRecord> {
        Arc::new(CallRecord::new(id.into()))
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
