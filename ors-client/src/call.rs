//! One tool call: the SSE stream decoded with the core codec, reconnects by `task_id` after a
//! dropped connection, the heartbeat timeout, and progress events.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use http::header::CONTENT_TYPE;
use http_body_util::BodyExt;
use ors_core::sse::{CallEvent, CallStreamDecoder, CallStreamError};
use ors_core::{RunToolOutput, ToolCall};
use serde_json::Value;

use crate::error::{Error, Result};
use crate::http::{decode_json, status_failure, Failure, Http, Req};

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

/// What one tool call needs.
pub(crate) struct CallSpec<'a> {
    pub path: String,
    pub sid: &'a str,
    pub name: &'a str,
    pub input: &'a Value,
    pub progress: Option<&'a ProgressFn>,
}

/// How one connection of a call ended, when it did not give a result.
enum StreamFail {
    /// Give up with this error.
    Fatal(Error),
    /// Safe to try again (reconnect with the `task_id`, or the server refused the request).
    Retry(Error, Option<Duration>),
}

/// Run a call to its result, reconnecting as allowed; bounded by the configured call timeout.
pub(crate) async fn run_call(http: &Http, spec: CallSpec<'_>) -> Result<RunToolOutput> {
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

async fn call_loop(http: &Http, spec: &CallSpec<'_>) -> Result<RunToolOutput> {
    let mut task_id: Option<String> = None;
    let mut failures = 0u32;
    let mut streamed = 0u32;
    loop {
        let body = ToolCall {
            name: spec.name.to_owned(),
            input: spec.input.clone(),
            task_id: task_id.clone(),
        };
        let req = Req::post(&spec.path)
            .sid(spec.sid)
            .accept(ors_core::protocol::EVENT_STREAM)
            .json(&body)?;
        let started = std::time::Instant::now();
        match one_stream(http, &req, spec, &mut task_id, &mut streamed).await {
            Ok(result) => return Ok(result),
            Err(StreamFail::Fatal(e)) => return Err(e),
            Err(StreamFail::Retry(e, retry_after)) => {
                let frames = std::mem::take(&mut streamed);
                if frames >= 2 && started.elapsed() >= http.cfg.heartbeat_timeout {
                    // That connection kept streaming for a while (keep-alives or progress after
                    // the task id; a proxy cutting long streams, say): the budget bounds
                    // consecutive failures, not a long call's lifetime. A server that drops or
                    // goes silent right after answering still runs the budget out.
                    failures = 0;
                }
                if failures >= http.cfg.reconnect_attempts {
                    return Err(gave_up(e, failures));
                }
                let delay = http.delay(failures, retry_after);
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

/// One connection: send (or resend with the `task_id`) and read events until the result.
async fn one_stream(
    http: &Http,
    req: &Req,
    spec: &CallSpec<'_>,
    task_id: &mut Option<String>,
    streamed: &mut u32,
) -> std::result::Result<RunToolOutput, StreamFail> {
    let resp = match http.send_once(req, http.cfg.request_timeout).await {
        Ok(r) => r,
        Err(f) => return Err(classify(f, task_id.is_some())),
    };
    let (parts, mut body) = resp.into_parts();
    if !parts.status.is_success() {
        let bytes = match tokio::time::timeout(http.cfg.request_timeout, body.collect()).await {
            Ok(Ok(c)) => c.to_bytes(),
            _ => bytes::Bytes::new(),
        };
        let f = status_failure(parts.status, &parts.headers, &bytes);
        return Err(classify(f, task_id.is_some()));
    }
    let json_reply = parts
        .headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("application/json"));
    if json_reply {
        // Not the documented form, but unambiguous: a server that answers the result as plain
        // JSON instead of a stream.
        let bytes = match tokio::time::timeout(http.cfg.request_timeout, body.collect()).await {
            Ok(Ok(c)) => c.to_bytes(),
            Ok(Err(e)) => return Err(dropped(task_id, Error::transport(&e))),
            Err(_) => {
                return Err(dropped(
                    task_id,
                    Error::Timeout("the JSON reply to a call did not arrive in time".into()),
                ))
            }
        };
        return decode_json(&req.path, &bytes).map_err(StreamFail::Fatal);
    }

    let heartbeat = http.cfg.heartbeat_timeout;
    let mut decoder = CallStreamDecoder::new();
    loop {
        let frame = match tokio::time::timeout(heartbeat, body.frame()).await {
            Err(_) => {
                let e = Error::Timeout(format!(
                    "no data from the server for {heartbeat:?} during tool '{}' (heartbeat timeout)",
                    spec.name
                ));
                return Err(dropped(task_id, e));
            }
            Ok(None) => {
                let e = Error::Transport(format!(
                    "the stream of tool '{}' ended before its result",
                    spec.name
                ));
                return Err(dropped(task_id, e));
            }
            Ok(Some(Err(e))) => return Err(dropped(task_id, Error::transport(&e))),
            Ok(Some(Ok(frame))) => frame,
        };
        let Ok(data) = frame.into_data() else {
            continue; // trailers carry nothing ORS uses
        };
        if !data.is_empty() {
            *streamed += 1;
        }
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
                Ok(CallEvent::Result(result)) => return Ok(result),
                Ok(CallEvent::Error(message)) => {
                    return Err(StreamFail::Fatal(Error::ToolCrashed { message }))
                }
                Err(CallStreamError::BadProgress(e)) => {
                    // A malformed report must not cost the call its result.
                    tracing::warn!(tool = spec.name, error = %e, "ignoring a malformed progress event");
                }
                Err(e) => return Err(StreamFail::Fatal(Error::Protocol(e.to_string()))),
            }
        }
    }
}

/// Whether a failed attempt may be repeated: always when the server certainly did not start
/// the tool (no connection, 429, 503); with a `task_id` also after any other transient failure,
/// because a reconnect asks for the existing result instead of running the tool again.
fn classify(f: Failure, have_task_id: bool) -> StreamFail {
    let retry_after = f.retry_after();
    let repeat = match &f {
        Failure::Connect(_) => true,
        Failure::Status { status, .. } => {
            *status == 429 || *status == 503 || (have_task_id && *status >= 500)
        }
        Failure::Broken(_) | Failure::Timeout(_) => have_task_id,
    };
    match f {
        _ if repeat => StreamFail::Retry(f.into_error(), retry_after),
        Failure::Broken(e) | Failure::Timeout(e) => StreamFail::Fatal(annotate(e, NOT_RETRIED)),
        _ => StreamFail::Fatal(f.into_error()),
    }
}

const NOT_RETRIED: &str = "(not retried: the connection broke before the call's task_id arrived, \
                           and the tool may already have run)";

/// A connection that broke mid-stream: reconnect when the `task_id` is known; otherwise the
/// tool may already be running and sending the call again could run it twice.
fn dropped(task_id: &Option<String>, e: Error) -> StreamFail {
    if task_id.is_some() {
        StreamFail::Retry(e, None)
    } else {
        StreamFail::Fatal(annotate(e, NOT_RETRIED))
    }
}

fn annotate(e: Error, note: impl fmt::Display) -> Error {
    match e {
        Error::Transport(m) => Error::Transport(format!("{m} {note}")),
        Error::Timeout(m) => Error::Timeout(format!("{m} {note}")),
        other => other,
    }
}

fn gave_up(e: Error, reconnects: u32) -> Error {
    annotate(e, format_args!("(gave up after {reconnects} reconnects)"))
}
