//! Tool calls. A call is one boxed [`Job`]: wait for the session's episode (exclusively, or
//! shared for a `#[tool(concurrent)]` tool: [`crate::session::EpisodeGate`]), run the tool or
//! the group scoring under the limits read once from the settings ([`Limits`]; its panic
//! caught, its time limit applied), record the result. The request polls the job
//! once in place: a tool that finishes without waiting is answered right there as one
//! complete SSE body. A job that has to wait moves to its own task, so a client that goes
//! away never cancels it, and the response streams its events. Either way the result lingers
//! for reconnects by `task_id` within its session ([`crate::results`]; PROTOCOL_NOTES rows
//! `tool-crash-error-event`, `task-id-bound-to-session`, `client-task-id`).
//!
//! A result is encoded once and kept; a reconnect sends that buffer itself. The answer of a
//! job that finished in place copies a small result (up to [`JOIN_AT_MOST`]) after the
//! `task_id` event into one piece, as hyper handles each piece of a body on its own; a larger
//! one goes out as the kept buffer, not a copy.

use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use futures_util::future::BoxFuture;
use futures_util::FutureExt as _;
use ors_core::sse;
use ors_core::types::{GroupCandidate, RunToolOutput, ScoreGroupOutput};
use ors_runtime::env::{CallInput, CallLink, DynSession, ToolContext};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::body::{sse_frames, sse_full, sse_stream, Resp, SseBody};
use crate::config::ServerConfig;
use crate::error::ApiError;
use crate::metrics::{CallOutcome, Metrics};
use crate::record::{CallId, CallRecord, STREAM_BUFFER};
use crate::results::{Found, ResultStore};
use crate::scope::CallScope;
use crate::session::Session;
use crate::util::{caught, lock, poll_once, sleep_until};

/// Longest `task_id` a client may choose (as long as a session id may be).
const MAX_TASK_ID_LEN: usize = ors_core::protocol::MAX_SESSION_ID_LEN;

/// The server state every call shares.
pub(crate) struct CallShared {
    pub(crate) keepalive: Duration,
    /// Where results wait for reconnects.
    pub(crate) results: Arc<ResultStore>,
    /// Fires when the server stops waiting for calls at shutdown.
    pub(crate) abort: CancellationToken,
    /// Calls running in the whole server (shutdown waits for them).
    pub(crate) active: AtomicUsize,
    /// Where finished calls are counted, when metrics are on.
    pub(crate) metrics: Option<Arc<Metrics>>,
}

/// What a call runs: a tool, or the scoring of a group of candidate answers, which goes
/// through the same gate, time limit, stream and results store (PROTOCOL_NOTES row
/// `score-group`).
pub(crate) enum Work {
    /// A `#[tool(concurrent)]` tool with this input, sharing the episode with the session's
    /// other concurrent calls.
    Concurrent(CallInput),
    /// Work that holds the episode to itself.
    Exclusive(Exclusive),
}

/// Work that holds the episode to itself.
pub(crate) enum Exclusive {
    /// Any other tool, with this input.
    Tool(CallInput),
    /// The episode's `score_group` with these candidates, and their share of the in-flight
    /// budget, given back when the scoring starts.
    ScoreGroup(Vec<GroupCandidate>, crate::request_body::Reserved),
}

impl Work {
    /// A call of a tool with `input`, concurrent or not as the environment says.
    pub(crate) fn tool(input: CallInput, concurrent: bool) -> Self {
        if concurrent {
            Work::Concurrent(input)
        } else {
            Work::Exclusive(Exclusive::Tool(input))
        }
    }
}

impl Exclusive {
    /// Its future on the episode: the tool's call, or the group's scoring.
    fn start<'a>(
        self,
        episode: &'a mut (dyn DynSession + 'static),
        name: &'a str,
        ctx: ToolContext,
    ) -> BoxFuture<'a, Outcome> {
        match self {
            Exclusive::Tool(input) => Box::pin(episode.call(ctx, name, input).map(Outcome::Result)),
            Exclusive::ScoreGroup(candidates, reserved) => {
                drop(reserved);
                Box::pin(episode.score_group(candidates).map(|r| match r {
                    Ok(scores) => Outcome::Scores(ScoreGroupOutput { scores }),
                    Err(e) => Outcome::Error(format!("{SCORE_GROUP} failed: {e}")),
                }))
            }
        }
    }
}

/// The name a group scoring goes by in logs, metrics, time limits and messages (no tool can
/// have it: it is a method of the `Environment` trait).
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

/// The limits one call is held to, all read from the server's settings here.
struct Limits {
    /// The call's time limit (the tool's own, else the server's).
    timeout: Option<Duration>,
    /// How long a call may go on after its session is deleted.
    grace: Duration,
    /// Largest result sent as it is.
    max_result_bytes: usize,
    /// Calls the session may have started and not finished.
    max_queued: usize,
    /// How long to wait for the session's setup before answering 503 starting.
    setup_wait: Duration,
}

impl Limits {
    fn of(config: &ServerConfig, name: &str) -> Self {
        Self {
            timeout: config.timeout_for(name),
            grace: config.shutdown_grace,
            max_result_bytes: config.max_result_bytes,
            max_queued: config.max_queued_calls,
            setup_wait: config.setup_wait,
        }
    }
}

/// A fresh call id: 32 hex digits like the reference's `uuid4().hex`, unique within the
/// process. A random key mixed with a counter through a bijection, so no system call per
/// call; ids need not be secret (a reconnect only works from the call's own session).
/// A client may choose its own instead (row `client-task-id`).
///
/// The counter is the process's, but each thread takes [`ID_BLOCK`] numbers of it at a time
/// and counts through them on its own, so threads share its cache line once per block, not
/// per call, and no number is used twice however many threads come and go.
fn new_task_id() -> Arc<str> {
    static KEY: OnceLock<(u64, u64)> = OnceLock::new();
    static TAKEN: AtomicU64 = AtomicU64::new(0);
    thread_local! {
        /// The thread's next number and the end of its block.
        static BLOCK: std::cell::Cell<(u64, u64)> = const { std::cell::Cell::new((0, 0)) };
    }
    let (k1, k2) = *KEY.get_or_init(|| uuid::Uuid::new_v4().as_u64_pair());
    let n = BLOCK.with(|block| {
        let (mut next, mut end) = block.get();
        if next == end {
            next = TAKEN.fetch_add(ID_BLOCK, Ordering::Relaxed);
            end = next.wrapping_add(ID_BLOCK);
        }
        block.set((next.wrapping_add(1), end));
        next
    });
    let id = uuid::Uuid::from_u64_pair(splitmix64(n ^ k1), splitmix64(n.wrapping_add(k2)));
    // Written in place and copied once into the `Arc`, not through a `String` first.
    Arc::from(&*id.simple().encode_lower(&mut uuid::Uuid::encode_buffer()))
}

/// Task ids a thread takes from the process's counter at once.
const ID_BLOCK: u64 = 1 << 16;

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
    config: &ServerConfig,
    shared: &Arc<CallShared>,
) -> Result<Resp, ApiError> {
    // The id is hashed here, once: every lookup below and the result's keeping use its key.
    let minted = call.task_id.is_none();
    let id = match call.task_id {
        None => CallId::new(new_task_id()),
        Some(id) => {
            check_task_id(&id)?;
            let id = CallId::new(id.into());
            let found = lock(&session.calls).find(&id);
            if !matches!(found, Found::Unknown) {
                return Ok(known(&session, found, &id, shared));
            }
            id
        }
    };
    let limits = Limits::of(config, &call.name);
    let max = limits.max_queued;
    if session.active_calls.load(Ordering::Acquire) >= max {
        return Err(ApiError::TooManyCalls {
            sid: Arc::clone(&session.id),
            max,
        });
    }
    session.ready_within(limits.setup_wait).await?;
    let record = {
        let mut table = lock(&session.calls);
        // An id this server minted is new by construction; a client's may have been taken
        // while this request waited for the session's setup.
        let found = if minted {
            Found::Unknown
        } else {
            table.find(&id)
        };
        if !matches!(found, Found::Unknown) {
            // The same request sent twice at once: the second one listens to the first.
            drop(table);
            return Ok(known(&session, found, &id, shared));
        }
        let record = Arc::new(CallRecord::new(id));
        table.insert(Arc::clone(&record));
        record
    };
    let job = Job {
        session,
        record,
        name: call.name,
        work: call.work,
        limits,
        shared: Arc::clone(shared),
    };
    Ok(job.start().await)
}

/// Bytes of the `task_id` event of `id` (one `data:` line: ids have no line breaks).
fn task_id_event_len(id: &str) -> usize {
    "event: \ndata: \n\n".len() + sse::EVENT_TASK_ID.len() + id.len()
}

/// A call as the request asks for it.
pub(crate) struct CallRequest {
    /// The tool's name ([`SCORE_GROUP`] for a group scoring).
    pub(crate) name: String,
    pub(crate) work: Work,
    /// The client's id for the call: a reconnect, or a new call under that id.
    pub(crate) task_id: Option<String>,
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

/// Largest result copied into one buffer with its `task_id` event when a call finishes in
/// its first poll; a larger one is sent as its own piece, sharing the stored copy's memory.
const JOIN_AT_MOST: usize = 16 * 1024;

/// One call on a ready session, from its first poll to its stored result.
struct Job {
    session: Arc<Session>,
    record: Arc<CallRecord>,
    /// The tool's name ([`SCORE_GROUP`] for a group scoring).
    name: String,
    work: Work,
    limits: Limits,
    shared: Arc<CallShared>,
}

/// What a finished job hands back to a request that polled it to completion in place: the
/// progress sent while no stream was attached (its result is in its record).
struct JobDone {
    unheard: Vec<Bytes>,
}

impl Job {
    /// Poll the call once in place, and answer with its complete events if it finished, else
    /// with a live stream while it goes on in its own task.
    async fn start(self) -> Resp {
        let keepalive = self.shared.keepalive;
        let (listener, record) = (Arc::clone(&self.session), Arc::clone(&self.record));
        let mut job = Box::pin(self.run());
        let Poll::Ready(done) = poll_once(&mut job).await else {
            // A stream of the running call (its record is ours and not finished).
            let resp = attach(&listener, &record, keepalive);
            tokio::spawn(job);
            return resp;
        };
        let id = record.id();
        let answer = record.with_events(|events| {
            if done.unheard.is_empty() && events.len() <= JOIN_AT_MOST {
                // One piece: hyper handles each piece of a body on its own. Written in place,
                // at its exact size (a `Bytes` of a `Vec` with spare room allocates).
                let mut joined = Vec::with_capacity(task_id_event_len(id) + events.len());
                sse::encode_event_into(&mut joined, sse::EVENT_TASK_ID, id);
                joined.extend_from_slice(events);
                Ok(Bytes::from(joined))
            } else {
                Err(events.clone())
            }
        });
        match answer {
            Some(Ok(joined)) => sse_full(joined),
            Some(Err(events)) => {
                let mut frames = Vec::with_capacity(done.unheard.len() + 2);
                frames.push(Bytes::from(sse::encode_task_id(id)));
                frames.extend(done.unheard);
                frames.push(events);
                sse_frames(frames)
            }
            // Not reached (the job finished its record), but a stream of the record is right
            // whatever its state.
            None => attach(&listener, &record, keepalive),
        }
    }

    /// The whole life of one call: take the episode as the work needs it, run the work under
    /// its limits, store and send the result.
    async fn run(self) -> JobDone {
        let Job {
            session,
            record,
            name,
            work,
            limits,
            shared,
        } = self;
        session.active_calls.fetch_add(1, Ordering::AcqRel);
        shared.active.fetch_add(1, Ordering::AcqRel);
        let call = Call {
            session: &session,
            record: &record,
            name: &name,
            limits,
            shared: &shared,
        };
        // The gate is asked in the job's first poll, before anything else can wait, so calls
        // queue in the order they arrived; it is let go (the arm's end) before the result is
        // stored.
        let (outcome, kind, started) = match work {
            Work::Concurrent(input) => {
                let slot = session.episode.shared().await;
                let (ctx, scope) = call.context();
                let tool = slot.as_deref().map(|e| {
                    e.call_concurrent(ctx, &name, input)
                        .map(Outcome::Result)
                        .boxed()
                });
                call.run(tool, &scope).await
            }
            Work::Exclusive(work) => {
                let mut slot = session.episode.lock().await;
                let (ctx, scope) = call.context();
                let tool = slot.as_deref_mut().map(|e| work.start(e, &name, ctx));
                call.run(tool, &scope).await
            }
        };
        // The one reading of the clock at the call's end: how long the tool ran, and where the
        // result's linger and the session's idle time start.
        let now = Instant::now();
        let events = outcome.encode();
        let size = events.len();
        let (listeners, unheard) = record.finish(events);
        shared.results.keep(&session, &record, size, now);
        session.touch_at(now);
        session.active_calls.fetch_sub(1, Ordering::AcqRel);
        shared.active.fetch_sub(1, Ordering::AcqRel);
        if let Some(m) = &shared.metrics {
            let reward = match &outcome {
                Outcome::Result(RunToolOutput::Success(out)) => out.reward,
                _ => None,
            };
            let ran = started.map_or(Duration::ZERO, |t| now.saturating_duration_since(t));
            m.call(session.env, &name, kind, ran, reward);
        }
        // Never awaited: a stalled stream (say, the half-open connection a client has already
        // reconnected from) must not hold the result back from the streams after it. Progress
        // always leaves the last slot free, so this cannot find the channel full.
        // The record's copy: cloned only when a stream listens (a clone allocates).
        if !listeners.is_empty() {
            if let Some(events) = record.with_events(Bytes::clone) {
                for tx in listeners {
                    let _ = tx.try_send(events.clone());
                }
            }
        }
        JobDone { unheard }
    }
}

/// A running job as its work sees it.
struct Call<'a> {
    session: &'a Arc<Session>,
    record: &'a Arc<CallRecord>,
    name: &'a str,
    limits: Limits,
    shared: &'a CallShared,
}

impl Call<'_> {
    /// The tool's context (its progress goes to the call's streams) and the scope that stops
    /// what the tool left running.
    fn context(&self) -> (ToolContext, Arc<CallScope>) {
        let scope = Arc::new(CallScope::new(self.session, Arc::clone(self.record)));
        let ctx = ToolContext::linked(
            Arc::clone(&self.session.id),
            Arc::clone(self.record.id()),
            Arc::clone(&scope) as Arc<dyn CallLink>,
        );
        (ctx, scope)
    }

    /// Run the work (`None`: the session was deleted before it could) under its time limit,
    /// its panic caught, giving up `grace` after the session is deleted and at once when the
    /// server aborts; how it ended, and when it started (for the metrics, which time it).
    async fn run(
        &self,
        work: Option<BoxFuture<'_, Outcome>>,
        scope: &CallScope,
    ) -> (Outcome, CallOutcome, Option<Instant>) {
        let (session, name) = (&**self.session, self.name);
        let Some(work) = work else {
            let msg = format!(
                "session '{}' was deleted before tool '{name}' could run",
                session.id
            );
            return (Outcome::Error(msg), CallOutcome::cancelled, None);
        };
        if self.shared.abort.is_cancelled() {
            // Shutdown stopped waiting for calls while this one waited its turn.
            let msg = format!("the server shut down before tool '{name}' could run");
            return (Outcome::Error(msg), CallOutcome::cancelled, None);
        }
        // Only the metrics read how long the tool ran.
        let started = self.shared.metrics.is_some().then(Instant::now);
        let mut work = caught(work);
        // Most tools answer in their first poll, which needs no timer, no watch on the session
        // or the server, and no room for them in the call's future.
        let (outcome, kind) = match poll_once(&mut work).await {
            Poll::Ready(r) => self.ended(r),
            // The tool's future is dropped in there, before its token fires below.
            Poll::Pending => Box::pin(self.watched(work)).await,
        };
        if matches!(kind, CallOutcome::timed_out | CallOutcome::cancelled) {
            // Anything the tool left running (spawned work holding its context) stops too.
            scope.stop();
        }
        (outcome, kind, started)
    }

    /// How the work ended on its own: its result held to the size limit, or its panic.
    fn ended(&self, r: Result<Outcome, String>) -> (Outcome, CallOutcome) {
        let (session, name) = (&**self.session, self.name);
        match r {
            Ok(Outcome::Result(out)) => {
                let out = crate::limits::check_result(name, out, self.limits.max_result_bytes);
                let kind = if out.is_ok() {
                    CallOutcome::ok
                } else {
                    CallOutcome::tool_error
                };
                (Outcome::Result(out), kind)
            }
            Ok(scores @ Outcome::Scores(_)) => (scores, CallOutcome::ok),
            Ok(failed @ Outcome::Error(_)) => (failed, CallOutcome::crashed),
            Err(msg) => {
                tracing::warn!(session = %session.id, tool = name, panic = %msg, "tool panicked");
                let msg = format!("tool '{name}' panicked: {msg}");
                (Outcome::Error(msg), CallOutcome::crashed)
            }
        }
    }

    /// Work that did not finish in its first poll, raced against its time limit, its
    /// session's deletion (and then `grace`) and the server's abort.
    async fn watched(
        &self,
        work: impl Future<Output = Result<Outcome, String>> + Unpin,
    ) -> (Outcome, CallOutcome) {
        let (session, name) = (&**self.session, self.name);
        // A limit too far to reach is none (as `tokio::time::sleep` takes it).
        let deadline = sleep_until(
            self.limits
                .timeout
                .and_then(|d| Instant::now().checked_add(d)),
        );
        let deleted = async {
            session.cancel().cancelled().await;
            tokio::time::sleep(self.limits.grace).await;
        };
        tokio::select! {
            biased;
            r = work => self.ended(r),
            _ = deadline => {
                let secs = self.limits.timeout.unwrap_or_default().as_secs_f64();
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
    }
}

/// Attach to a call the session knows: a stream of a running call, or the lingering result
/// (the stored events themselves, not a copy).
fn attach(session: &Arc<Session>, record: &CallRecord, keepalive: Duration) -> Resp {
    let first = Bytes::from(sse::encode_task_id(record.id()));
    let (tx, rx) = mpsc::channel(STREAM_BUFFER);
    match record.attach(tx) {
        Ok(()) => sse_stream(SseBody::new(first, rx, keepalive, Session::listen(session))),
        Err(events) => sse_frames(vec![first, events]),
    }
}

/// The answer to a call request naming a call its session knows (`found` is not
/// [`Found::Unknown`]), counted as a reconnect: a stream of the call or its lingering result,
/// or, when that result has gone, an `error` event saying so, and nothing runs.
fn known(session: &Arc<Session>, found: Found, id: &CallId, shared: &CallShared) -> Resp {
    if let Some(m) = &shared.metrics {
        m.sse_reconnects.inc();
    }
    let Found::Call(record) = found else {
        return sse_full(Bytes::from(sse::encode_error(&format!(
            "the result of call '{}' has expired (results are kept for {} s, less when the \
             server is short of memory); the call was not run again",
            id.text(),
            shared.results.linger().as_secs_f64()
        ))));
    };
    attach(session, &record, shared.keepalive)
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
            keepalive: Duration::from_secs(10),
            results: Arc::new(ResultStore::new(Duration::from_secs(60), 1 << 30, 1 << 30)),
            abort: CancellationToken::new(),
            active: AtomicUsize::new(0),
            metrics: None,
        })
    }

    fn request(task_id: Option<&str>) -> CallRequest {
        CallRequest {
            name: "big".into(),
            work: Work::tool(CallInput::empty(), false),
            task_id: task_id.map(str::to_owned),
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
        let Found::Call(record) = lock(&session.calls).find(&CallId::new(id.into())) else {
            panic!("call {id} is not kept");
        };
        let (tx, _rx) = mpsc::channel(1);
        record.attach(tx).expect_err("the call is done").as_ptr()
    }

    #[tokio::test]
    async fn a_result_is_sent_from_its_stored_buffer_not_a_copy() {
        let shared = shared();
        let config = ServerConfig::default();
        let session = Arc::new(Session::new("s".into(), 0, Arc::clone(&shared.results)));
        session.set_ready(Box::new(Big)).await;

        // The first response: the task_id event, then the stored result itself.
        let first = frames(
            serve(Arc::clone(&session), request(Some("c1")), &config, &shared)
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
            serve(Arc::clone(&session), request(Some("c1")), &config, &shared)
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(again, first);
        assert_eq!(again[1].as_ptr(), stored(&session, "c1"));
        assert_eq!(shared.results.bytes(), first[1].len(), "kept once");
    }

    #[tokio::test]
    async fn a_small_result_is_answered_in_one_piece_of_its_exact_size() {
        struct Small;
        impl DynSession for Small {
            fn prompt(&self) -> BoxFuture<'_, Result<Blocks, EnvError>> {
                Box::pin(async { Ok(Vec::new()) })
            }
            fn tools(&self) -> Vec<ToolSpec> {
                Vec::new()
            }
            fn call<'a>(&'a mut self, _: ToolContext, _: &'a str, _: CallInput) -> ToolFuture<'a> {
                Box::pin(async { RunToolOutput::Success(ToolOutput::text("small")) })
            }
            fn teardown(&mut self) -> BoxFuture<'_, ()> {
                Box::pin(async {})
            }
        }
        let shared = shared();
        let session = Arc::new(Session::new("s".into(), 0, Arc::clone(&shared.results)));
        session.set_ready(Box::new(Small)).await;
        let config = ServerConfig::default();
        for id in [None, Some("a-client-id")] {
            let resp = serve(Arc::clone(&session), request(id), &config, &shared);
            let got = frames(resp.await.unwrap()).await;
            assert_eq!(got.len(), 1, "one piece");
            let events = ors_core::sse::SseDecoder::new().push(&got[0]);
            assert_eq!(events[0].event, "task_id");
            assert_eq!(events[1].event, "end");
            let task_id = &events[0].data;
            // What the piece was sized for (a `Bytes` of a `Vec` with spare room allocates).
            assert_eq!(
                task_id_event_len(task_id),
                sse::encode_task_id(task_id).len()
            );
            if let Some(id) = id {
                assert_eq!(task_id, id);
            }
        }
    }

    #[test]
    fn task_ids_are_32_hex_digits_and_distinct() {
        // Minted on four threads at once: each counts on its own, none repeats another's.
        let minted = std::thread::scope(|scope| {
            let threads: Vec<_> = (0..4)
                .map(|_| scope.spawn(|| (0..2_500).map(|_| new_task_id()).collect::<Vec<_>>()))
                .collect();
            threads
                .into_iter()
                .flat_map(|t| t.join().unwrap())
                .collect::<Vec<_>>()
        });
        let ids: std::collections::HashSet<Arc<str>> = minted.into_iter().collect();
        assert_eq!(ids.len(), 10_000);
        assert!(ids
            .iter()
            .all(|id| id.len() == 32 && id.chars().all(|c| c.is_ascii_hexdigit())));
    }
}
