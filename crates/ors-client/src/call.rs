//! One tool call: the SSE stream decoded with the core codec within the result limit,
//! reconnects by `task_id` after a dropped connection, the heartbeat timeout, and progress
//! events.

use std::fmt;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

use http::header::CONTENT_TYPE;
use ors_core::sse::{CallEvent, CallStreamDecoder, CallStreamError, DecodeLimits, SseError};
use ors_core::types::{GroupCandidate, ScoreGroup};
use ors_core::ToolCall;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::time::Instant;

use crate::body::BodyReader;
use crate::config::SizeLimit;
use crate::error::{Error, Result};
use crate::http::{
    decode_json, preview, random, status_failure, Failure, Http, Req, Retry, Starting,
    MAX_ERROR_BODY,
};

/// A progress report from a running tool (the SSE `progress` event).
#[derive(Debug, Clone, Copy)]
pub struct Progress<'a> {
    /// The tool that reported it.
    pub tool: &'a str,
    /// The call's id, once the server has sent it.
    pub task_id: Option<&'a str>,
    /// What the tool reported.
    pub value: &'a Value,
}

/// A callback receiving the progress reports of tool calls.
pub type ProgressFn = Arc<dyn Fn(&Progress<'_>) + Send + Sync>;

/// `input` as a call's input: a JSON object (`null` means no input), else the kind of JSON
/// it is.
pub(crate) fn object_input(input: Value) -> std::result::Result<Value, &'static str> {
    match input {
        Value::Null => Ok(Value::Object(Default::default())),
        Value::Object(_) => Ok(input),
        other => Err(ors_core::types::json_kind(&other)),
    }
}

/// What one tool call needs.
pub(crate) struct CallSpec<'a> {
    /// The POST of the session's route (the body and `Accept` are set per attempt).
    pub req: Req,
    /// The tool's name (`score_group` for a group scoring), for the body and messages.
    pub name: &'a str,
    pub payload: Payload<'a>,
    pub progress: Option<&'a ProgressFn>,
}

/// What a call sends: a tool's input, or the candidates of a group scoring, which streams
/// like a call (PROTOCOL_NOTES row `score-group`).
pub(crate) enum Payload<'a> {
    Tool(&'a Value),
    ScoreGroup(&'a [GroupCandidate]),
}

impl CallSpec<'_> {
    /// The request of one attempt, under `task_id` when there is one.
    fn request(&self, task_id: Option<String>) -> Result<Req> {
        let req = Req {
            accept: ors_core::protocol::EVENT_STREAM,
            ..self.req.clone()
        };
        match self.payload {
            Payload::Tool(input) => req.json(&ToolCall {
                name: self.name.to_owned(),
                input: input.clone(),
                task_id,
            }),
            Payload::ScoreGroup(candidates) => req.json(&ScoreGroup {
                candidates: candidates.to_vec(),
                task_id,
            }),
        }
    }
}

/// How one connection of a call ended, when it did not give a result.
enum StreamFail {
    /// Give up with this error.
    Fatal(Error),
    /// Safe to try again (reconnect with the `task_id`, or the server refused the request).
    Retry(Error, Option<Duration>),
    /// The session's setup is still running: ask again after the delay, not a failure.
    Starting(Error, Option<Duration>),
}

/// Run a call to its result, reconnecting as allowed; bounded by the configured call timeout.
pub(crate) async fn run_call<T: DeserializeOwned>(http: &Http, spec: CallSpec<'_>) -> Result<T> {
    match http.cfg.call_timeout {
        None => call_loop(http, &spec).await,
        Some(limit) => tokio::time::timeout(limit, call_loop(http, &spec))
            .await
            .unwrap_or_else(|_| {
                Err(Error::Timeout(format!(
                    "tool '{}' gave no result within {limit:?}",
                    spec.name
                )))
            }),
    }
}

async fn call_loop<T: DeserializeOwned>(http: &Http, spec: &CallSpec<'_>) -> Result<T> {
    // A server that takes client ids runs the call once under this one however often it is
    // sent, so from the first attempt any failure may be retried. Otherwise the server's id,
    // once its task_id event arrives, is what makes a reconnect safe.
    let mut task_id = http.client_task_ids.load(Relaxed).then(new_call_id);
    let mut failures = 0u32;
    let mut starting = Starting::default();
    loop {
        let req = spec.request(task_id.clone())?;
        let started = Instant::now();
        let mut seen = Seen::default();
        match one_stream(http, &req, spec, &mut task_id, &mut seen).await {
            Ok(result) => return Ok(result),
            Err(StreamFail::Starting(_, retry_after))
                if starting.keep_waiting(http.cfg.starting_wait) =>
            {
                let delay = http.backoff().delay(0, retry_after);
                tracing::debug!(
                    tool = spec.name,
                    ?delay,
                    "session still starting; asking again"
                );
                tokio::time::sleep(delay).await;
            }
            Err(StreamFail::Fatal(e) | StreamFail::Starting(e, _)) => return Err(e),
            Err(StreamFail::Retry(e, retry_after)) => {
                if seen.lines >= 2
                    && !seen.chunks
                    && started.elapsed() >= http.cfg.heartbeat_timeout
                {
                    // That connection kept streaming for a while (keep-alives or progress after
                    // the task id; a proxy cutting long streams, say): the budget bounds
                    // consecutive failures, not a long call's lifetime. A server that drops or
                    // goes silent right after answering still runs the budget out, and so
                    // does one that breaks off its result (chunks without an end) each time.
                    failures = 0;
                }
                if failures >= http.cfg.reconnect_attempts {
                    let note = format_args!("(gave up after {failures} reconnects)");
                    return Err(annotate(e, note));
                }
                let delay = http.backoff().delay(failures, retry_after);
                tracing::debug!(
                    tool = spec.name, task_id = task_id.as_deref(), attempt = failures + 1,
                    ?delay, error = %e, "call stream failed; reconnecting"
                );
                tokio::time::sleep(delay).await;
                failures += 1;
            }
        }
    }
}

/// A fresh id for a call: 32 hex digits hashed under keys the OS drew at random, so ids of
/// concurrent clients on one session do not meet.
fn new_call_id() -> String {
    format!("{:016x}{:016x}", random(), random())
}

/// What one connection of a call delivered before it failed.
#[derive(Debug, Default)]
struct Seen {
    /// Times the stream made progress: a complete line arrived (an event, a keep-alive).
    lines: u32,
    /// Whether pieces of a result arrived.
    chunks: bool,
}

/// How long the end of a stream is awaited after its `end` event (to see that nothing
/// follows it and to give the connection back to the pool); the result stands either way.
const END_GRACE: Duration = Duration::from_millis(500);

/// How much of a body that is not an event stream is read to show in the error.
const PREVIEW_BYTES: usize = 300;

/// One connection: send (or resend with the `task_id`) and read events until the result.
async fn one_stream<T: DeserializeOwned>(
    http: &Http,
    req: &Req,
    spec: &CallSpec<'_>,
    task_id: &mut Option<String>,
    seen: &mut Seen,
) -> std::result::Result<T, StreamFail> {
    let resp = match http.send_once(req, http.cfg.request_timeout).await {
        Ok(r) => r,
        Err(f) => return Err(classify(f, task_id.is_some())),
    };
    let (parts, body) = resp.into_parts();
    let mut reader = BodyReader::new(&parts.headers, body);
    if !parts.status.is_success() {
        let detail =
            tokio::time::timeout(http.cfg.request_timeout, reader.read_prefix(MAX_ERROR_BODY));
        let bytes = detail.await.unwrap_or_default();
        let f = status_failure(parts.status, &parts.headers, &bytes);
        return Err(classify(f, task_id.is_some()));
    }
    let content_type = parts
        .headers
        .get(CONTENT_TYPE)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).to_ascii_lowercase());
    match content_type.as_deref() {
        Some(ct) if ct.starts_with("text/event-stream") => {}
        Some(ct) if ct.starts_with("application/json") => {
            // Not the documented form, but unambiguous: a server that answers the result as
            // plain JSON instead of a stream.
            let max = http.cfg.max_result_bytes;
            let read =
                tokio::time::timeout(http.cfg.request_timeout, reader.read_all(max, &http.meter));
            let bytes = match read.await {
                Ok(read) => read.map_err(|e| {
                    let what = format!("the JSON result of tool '{}'", spec.name);
                    e.into_error(&what, max, SizeLimit::Result)
                }),
                Err(_) => Err(Error::Timeout(
                    "the JSON reply to a call did not arrive in time".into(),
                )),
            };
            let bytes = bytes.map_err(|e| dropped(task_id, e))?;
            return decode_json(&req.path, &bytes).map_err(StreamFail::Fatal);
        }
        other => {
            let start = tokio::time::timeout(
                Duration::from_secs(1).min(http.cfg.request_timeout),
                reader.read_prefix(PREVIEW_BYTES),
            );
            let body = start.await.unwrap_or_default();
            return Err(StreamFail::Fatal(Error::Protocol(format!(
                "the call of tool '{}' was answered {} with Content-Type {}, not an event \
                 stream (body: {})",
                spec.name,
                parts.status,
                other.map_or_else(|| "(none)".to_owned(), |ct| format!("{ct:?}")),
                preview(&body)
            ))));
        }
    }

    let heartbeat = http.cfg.heartbeat_timeout;
    let max = http.cfg.max_result_bytes;
    let mut decoder = CallStreamDecoder::<T>::for_result(DecodeLimits::bounded(max));
    let mut lines = 0u64;
    let mut deadline = Instant::now() + heartbeat;
    let mut result: Option<T> = None;
    loop {
        let next = tokio::time::timeout_at(deadline, reader.next()).await;
        let data = match (next, result.take()) {
            // After `end`: the stream closed, broke, or lingered; the result stands.
            (Ok(Ok(None)) | Ok(Err(_)) | Err(_), Some(r)) => return Ok(r),
            (Ok(Ok(Some(data))), r) => {
                result = r;
                data
            }
            (Err(_), None) => {
                let e = Error::Timeout(format!(
                    "no complete line from the server for {heartbeat:?} during tool '{}' \
                     (heartbeat timeout)",
                    spec.name
                ));
                return Err(dropped(task_id, e));
            }
            (Ok(Ok(None)), None) => {
                let e = match decoder.pending_result_bytes() {
                    0 => Error::Transport(format!(
                        "the stream of tool '{}' ended before its result",
                        spec.name
                    )),
                    n => Error::Protocol(format!(
                        "the stream of tool '{}' ended after {n} bytes of chunks without its \
                         end event",
                        spec.name
                    )),
                };
                return Err(dropped(task_id, e));
            }
            (Ok(Err(e)), None) => {
                let what = format!("the stream of tool '{}'", spec.name);
                let e = e.into_error(&what, max, SizeLimit::Result);
                return Err(dropped(task_id, e));
            }
        };
        for event in decoder.push(&data) {
            match event {
                Ok(CallEvent::TaskId(id)) => *task_id = Some(id.trim().to_owned()),
                Ok(CallEvent::Progress(value)) => {
                    if let Some(cb) = spec.progress {
                        cb(&Progress {
                            tool: spec.name,
                            task_id: task_id.as_deref(),
                            value: &value,
                        });
                    }
                }
                Ok(CallEvent::Result(r)) => {
                    result = Some(r);
                    deadline = Instant::now() + END_GRACE.min(heartbeat);
                }
                Ok(CallEvent::Error(message)) => {
                    return Err(StreamFail::Fatal(Error::ToolCrashed { message }))
                }
                Err(CallStreamError::BadProgress(e)) => {
                    // A malformed report must not cost the call its result.
                    tracing::warn!(tool = spec.name, error = %e, "ignoring a malformed progress event");
                }
                Err(e) if e.is_limit() => {
                    http.meter.note(decoder.high_water());
                    return Err(StreamFail::Fatal(too_large(spec.name, &e, max)));
                }
                Err(e) => {
                    return Err(StreamFail::Fatal(Error::Protocol(format!(
                        "the stream of tool '{}': {e}",
                        spec.name
                    ))))
                }
            }
        }
        http.meter.note(decoder.high_water());
        seen.chunks |= decoder.pending_result_bytes() > 0;
        if decoder.lines() != lines && result.is_none() {
            lines = decoder.lines();
            seen.lines = seen.lines.saturating_add(1);
            deadline = Instant::now() + heartbeat;
        }
    }
}

/// The error for a call stream past the result limit.
fn too_large(tool: &str, e: &CallStreamError, limit: usize) -> Error {
    let what = match e {
        CallStreamError::Sse(SseError::LineTooLong { .. }) => {
            format!("a line of the stream of tool '{tool}' (no line break)")
        }
        CallStreamError::Sse(_) => format!("an event of the stream of tool '{tool}'"),
        _ => format!("the result of tool '{tool}'"),
    };
    Error::ResponseTooLarge {
        what,
        limit,
        kind: SizeLimit::Result,
    }
}

/// Whether a failed attempt may be repeated: always when the server certainly did not start
/// the tool (no connection, 429, 503); with a `task_id` (the server's, or our own where the
/// server takes client ids) also after any other transient failure, because the request asks
/// for that call, which runs at most once.
fn classify(f: Failure, have_task_id: bool) -> StreamFail {
    let retry_after = f.retry_after();
    if f.starting() {
        return StreamFail::Starting(f.into_error(), retry_after);
    }
    // With a task id a resend is as harmless as repeating an idempotent request.
    let retry = if have_task_id {
        Retry::Idempotent
    } else {
        Retry::Refused
    };
    match f {
        _ if f.retryable(retry) => StreamFail::Retry(f.into_error(), retry_after),
        Failure::Broken(e) => StreamFail::Fatal(annotate(e, NOT_RETRIED)),
        _ => StreamFail::Fatal(f.into_error()),
    }
}

const NOT_RETRIED: &str = "(not retried: the connection broke before the call's task_id arrived, \
                           the tool may already have run, and this server does not take \
                           client-chosen task ids)";

/// A connection that broke mid-stream: reconnect when the call has a `task_id`; otherwise the
/// tool may already be running and sending the call again could run it twice. An answer too
/// large is never asked for again (it would be just as large).
fn dropped(task_id: &Option<String>, e: Error) -> StreamFail {
    match e {
        Error::ResponseTooLarge { .. } => StreamFail::Fatal(e),
        e if task_id.is_some() => StreamFail::Retry(e, None),
        e => StreamFail::Fatal(annotate(e, NOT_RETRIED)),
    }
}

fn annotate(e: Error, note: impl fmt::Display) -> Error {
    match e {
        Error::Transport(m) => Error::Transport(format!("{m} {note}")),
        Error::Timeout(m) => Error::Timeout(format!("{m} {note}")),
        Error::Protocol(m) => Error::Protocol(format!("{m} {note}")),
        other => other,
    }
}
