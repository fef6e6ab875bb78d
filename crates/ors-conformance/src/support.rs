//! What clauses share: the server under test, sessions, tool calls decoded with the core SSE
//! codec, the fixture's known data, and small assertion helpers.

use std::sync::Mutex;
use std::time::Duration;

use base64::Engine as _;
use ors_core::protocol::{
    routes, EVENT_CHUNK, EVENT_END, EVENT_ERROR, EVENT_STREAM, EVENT_TASK_ID,
};
use ors_core::sse::{CallEvent, CallStreamDecoder, CallStreamError, SseDecoder, SseEvent};
use ors_core::ErrorCode;
use serde_json::{json, Value};

use super::http::{Conn, Head, Request, Response, Target};
// JSON equality with numbers by value (`0` equals `0.0`), as JSON Schema's `const` compares.
use crate::check::schema::same;

/// Fail the clause with a formatted reason unless the condition holds.
macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(format!($($fmt)+));
        }
    };
}
pub(crate) use ensure;

/// `Ok(())` when the condition holds, else the formatted reason: a clause's last test, where
/// [`ensure!`] would be followed by `Ok(())`.
macro_rules! check {
    ($cond:expr, $($fmt:tt)+) => {
        if $cond {
            Ok(())
        } else {
            Err(format!($($fmt)+))
        }
    };
}
pub(crate) use check;

/// The outcome of one clause check.
pub type Check = Result<(), String>;

/// The server under test and the fixture environment's name.
pub struct Ctx {
    /// Where to send requests.
    pub target: Target,
    /// The fixture environment (`conformance` unless `--env` says otherwise).
    pub env: String,
    /// The server's keep-alive interval (the keep-alive clause sleeps a little longer).
    pub keepalive: Duration,
    skipped: Mutex<Option<String>>,
}

impl Ctx {
    /// A context for checking `target`, whose fixture environment is `env`.
    pub fn new(target: Target, env: String, keepalive: Duration) -> Self {
        Self {
            target,
            env,
            keepalive,
            skipped: Mutex::new(None),
        }
    }

    /// Mark the running clause as not applicable to this server (returns `Ok` to end it).
    pub fn skip(&self, why: impl Into<String>) -> Check {
        if let Ok(mut s) = self.skipped.lock() {
            *s = Some(why.into());
        }
        Ok(())
    }

    /// The skip reason of the clause that just ran, if it skipped.
    pub fn take_skip(&self) -> Option<String> {
        self.skipped.lock().ok().and_then(|mut s| s.take())
    }

    /// `/{env}{suffix}`.
    pub fn path(&self, suffix: &str) -> String {
        format!("/{}{}", self.env, suffix)
    }

    /// Send a request and read the whole response.
    pub fn send(&self, req: Request) -> Result<Response, String> {
        req.send(&self.target)
    }

    /// `GET path`.
    pub fn get(&self, path: &str) -> Result<Response, String> {
        self.send(Request::new("GET", path))
    }

    /// `POST path` with a JSON body.
    pub fn post_json(&self, path: &str, body: &Value) -> Result<Response, String> {
        self.send(Request::new("POST", path).json(body))
    }

    /// The environment names `GET /list_environments` lists.
    pub fn environments(&self) -> Result<Vec<String>, String> {
        let v = expect_ok_json(&self.get(routes::LIST_ENVIRONMENTS)?)?;
        let names = v.as_array().into_iter().flatten().filter_map(Value::as_str);
        Ok(names.map(str::to_owned).collect())
    }

    /// Fails unless `req` is answered with a JSON error of `status`.
    pub fn refused(&self, req: Request, status: u16) -> Check {
        expect_error(&self.send(req)?, status).map(drop)
    }

    /// A new session id from `POST /create_session`, in whichever of the two documented forms
    /// the server answers (SSE `task_id` event, or JSON `{"sid": ...}`).
    pub fn new_sid(&self) -> Result<String, String> {
        let r =
            self.send(Request::new("POST", routes::CREATE_SESSION).header("Accept", EVENT_STREAM))?;
        ensure!(
            r.status() == 200,
            "POST /create_session answered {}: {}",
            r.status(),
            r.snippet()
        );
        let ct = r.header("content-type").unwrap_or_default();
        if !ct.starts_with(EVENT_STREAM) {
            let v = r.json()?;
            return v["sid"]
                .as_str()
                .map(str::to_owned)
                .ok_or_else(|| format!("no \"sid\" in the create_session reply: {v}"));
        }
        let sid = r
            .events()
            .iter()
            .find(|e| e.event == EVENT_TASK_ID)
            .map(|e| e.data.trim().to_owned())
            .ok_or_else(|| {
                format!(
                    "no task_id event in the create_session stream: {}",
                    r.snippet()
                )
            })?;
        ensure!(!sid.is_empty(), "empty sid in the create_session stream");
        Ok(sid)
    }

    /// The `POST /create` request of session `sid` with `body`.
    pub fn create(&self, sid: &str, body: &Value) -> Request {
        Request::new("POST", routes::CREATE).sid(sid).json(body)
    }

    /// `POST /delete` of session `sid`.
    pub fn delete(&self, sid: &str) -> Result<Response, String> {
        self.send(Request::new("POST", routes::DELETE).sid(sid))
    }

    /// `create_session` then `create` with `body`; the session is deleted when dropped.
    pub fn session(&self, body: &Value) -> Result<Session<'_>, String> {
        let sid = self.new_sid()?;
        let r = self.send(self.create(&sid, body))?;
        ensure!(
            r.status() == 200,
            "POST /create {body} answered {}: {}",
            r.status(),
            r.snippet()
        );
        Ok(Session {
            ctx: self,
            sid,
            live: true,
        })
    }

    /// A session on task `index` of `split`.
    pub fn session_at(&self, split: &str, index: i64) -> Result<Session<'_>, String> {
        self.session(&json!({"env_name": self.env, "split": split, "index": index}))
    }

    /// The request of a session route without its session id: `ping`, `delete`,
    /// `delete_session`, `prompt`, `task_tools`, or `call` (of `counter`).
    pub fn session_route(&self, route: &str) -> Request {
        match route {
            "prompt" | "task_tools" => Request::new("GET", &self.path(&format!("/{route}"))),
            "call" => Request::new("POST", &self.path(routes::CALL))
                .header("Accept", EVENT_STREAM)
                .json(&json!({"name": "counter", "input": {}})),
            _ => Request::new("POST", &format!("/{route}")),
        }
    }

    /// The `POST /{env}/call` request for a tool call.
    pub fn call_request(&self, sid: &str, body: &Value) -> Request {
        self.raw_call_request(sid, body.to_string())
    }

    /// The `POST /{env}/call` request with a body sent as it is, labelled as JSON.
    pub fn raw_call_request(&self, sid: &str, body: impl Into<Vec<u8>>) -> Request {
        Request::new("POST", &self.path(routes::CALL))
            .sid(sid)
            .header("Accept", EVENT_STREAM)
            .header("Content-Type", "application/json")
            .body(body)
    }

    /// Send a call request and read its whole stream (with the target's timeout).
    pub fn call(&self, req: &Request) -> Result<Call, String> {
        self.call_with(req, self.target.timeout)
    }

    /// Send a call request and read its whole stream.
    pub fn call_with(&self, req: &Request, timeout: Duration) -> Result<Call, String> {
        let (mut conn, head) = req.open(&self.target, timeout)?;
        Call::read(&mut conn, head, &req.method)
    }
}

/// A live episode; deleted (best effort) when dropped.
pub struct Session<'a> {
    ctx: &'a Ctx,
    /// The session id.
    pub sid: String,
    live: bool,
}

impl Session<'_> {
    /// Call a tool and read the whole stream.
    pub fn call(&self, name: &str, input: Value) -> Result<Call, String> {
        self.call_timeout(name, input, self.ctx.target.timeout)
    }

    /// Call a tool with a specific read timeout.
    pub fn call_timeout(
        &self,
        name: &str,
        input: Value,
        timeout: Duration,
    ) -> Result<Call, String> {
        let req = self
            .ctx
            .call_request(&self.sid, &json!({"name": name, "input": input}));
        self.ctx.call_with(&req, timeout)
    }

    /// Call a tool that must succeed; its `output` object.
    pub fn ok(&self, name: &str, input: Value) -> Result<Value, String> {
        let call = self.call(name, input)?;
        call.output().map_err(|e| format!("{name}: {e}"))
    }

    /// The first text block of a successful call.
    pub fn text(&self, name: &str, input: Value) -> Result<String, String> {
        let out = self.ok(name, input)?;
        first_text(&out).map_err(|e| format!("{name}: {e}"))
    }

    /// `GET /{env}/<what>` with this session's id.
    pub fn get(&self, what: &str) -> Result<Response, String> {
        self.ctx
            .send(Request::new("GET", &self.ctx.path(what)).sid(&self.sid))
    }

    /// `POST /delete`; the drop will not delete again.
    pub fn delete(&mut self) -> Result<Response, String> {
        self.live = false;
        self.ctx.delete(&self.sid)
    }
}

impl Drop for Session<'_> {
    fn drop(&mut self) {
        if self.live {
            let _ = self.delete();
        }
    }
}

/// A tool-call response, decoded by the core SSE codec (both layers).
pub struct Call {
    /// Status and headers.
    pub head: Head,
    /// The body bytes, as received.
    pub raw: Vec<u8>,
    /// The SSE events, in order.
    pub events: Vec<SseEvent>,
    /// The call events (chunks joined to their `end`).
    pub typed: Vec<Result<CallEvent, CallStreamError>>,
}

impl Call {
    /// Read a whole call stream from `conn`.
    pub fn read(conn: &mut Conn, head: Head, method: &str) -> Result<Call, String> {
        let raw = conn.read_body(&head, method)?;
        Ok(Call::parse(head, raw))
    }

    /// A whole call stream received as `raw`, decoded.
    pub fn parse(head: Head, raw: Vec<u8>) -> Call {
        Call {
            events: SseDecoder::new().push(&raw),
            typed: CallStreamDecoder::new().push(&raw),
            head,
            raw,
        }
    }

    /// Fails unless the call was answered 200 with an event stream.
    pub fn expect_stream(&self) -> Check {
        ensure!(
            self.head.status == 200,
            "call answered {}: {}",
            self.head.status,
            super::http::snippet(&self.raw)
        );
        let ct = self.head.header("content-type").unwrap_or_default();
        ensure!(
            ct.starts_with(EVENT_STREAM),
            "call content-type is {ct:?}, not {EVENT_STREAM}"
        );
        Ok(())
    }

    /// The data of the first event called `name`, if there was one.
    fn event(&self, name: &str) -> Option<&str> {
        let e = self.events.iter().find(|e| e.event == name)?;
        Some(e.data.as_str())
    }

    /// The `task_id` event's data.
    pub fn task_id(&self) -> Option<&str> {
        self.event(EVENT_TASK_ID)
    }

    /// The data of the `error` event, if there was one.
    pub fn error_event(&self) -> Option<&str> {
        self.event(EVENT_ERROR)
    }

    /// Names of the events, in order.
    pub fn names(&self) -> Vec<&str> {
        self.events.iter().map(|e| e.event.as_str()).collect()
    }

    /// The result JSON: every `chunk` joined with the final `end`, parsed as it came on the
    /// wire (so key sets can be checked), after checking the core decoder accepts it too.
    pub fn result_json(&self) -> Result<Value, String> {
        self.expect_no_error()?;
        let ends = self.events.iter().filter(|e| e.event == EVENT_END).count();
        ensure!(
            ends == 1,
            "expected one end event, got events {:?}",
            self.names()
        );
        if let Some(Err(e)) = self.typed.iter().find(|t| t.is_err()) {
            return Err(format!("the core decoder rejects the stream: {e}"));
        }
        ensure!(
            self.typed
                .iter()
                .any(|t| matches!(t, Ok(CallEvent::Result(_)))),
            "the core decoder found no result"
        );
        serde_json::from_str(&self.data()).map_err(|e| format!("the result is not JSON ({e})"))
    }

    /// Fails unless the call was answered 200 with an event stream that has no `error` event.
    pub fn expect_no_error(&self) -> Check {
        self.expect_stream()?;
        self.error_event().map_or(Ok(()), |e| {
            Err(format!("the stream has an error event: {e:?}"))
        })
    }

    /// The data of the `chunk` events and the `end` event, joined.
    pub fn data(&self) -> String {
        self.events
            .iter()
            .filter(|e| e.event == EVENT_CHUNK || e.event == EVENT_END)
            .map(|e| e.data.as_str())
            .collect()
    }

    /// The `output` object of an `ok: true` result.
    pub fn output(&self) -> Result<Value, String> {
        let v = self.result_json()?;
        ensure!(v["ok"] == json!(true), "result is not ok: {v}");
        v.get("output")
            .cloned()
            .ok_or_else(|| format!("no output in {v}"))
    }

    /// The first block's text of an `ok: true` result.
    pub fn text(&self) -> Result<String, String> {
        first_text(&self.output()?)
    }

    /// The `reason` of an `ok: false` result (PROTOCOL_NOTES row `error-reason`), `None` when
    /// it has none.
    pub fn tool_error_reason(&self) -> Result<Option<String>, String> {
        Ok(self.failed()?["reason"].as_str().map(str::to_owned))
    }

    /// The `error` text of an `ok: false` result.
    pub fn tool_error(&self) -> Result<String, String> {
        let v = self.failed()?;
        v["error"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| format!("ok: false without an error string: {v}"))
    }

    /// The result JSON, which must be `ok: false`.
    fn failed(&self) -> Result<Value, String> {
        let v = self.result_json()?;
        check!(v["ok"] == json!(false), "expected ok: false, got {v}").map(|()| v)
    }
}

/// The blocks of an output (or a prompt) holding just `text`.
pub fn text_blocks(text: &str) -> Value {
    json!([{"text": text, "detail": null, "type": "text"}])
}

/// The first block's text of an output object.
pub fn first_text(output: &Value) -> Result<String, String> {
    output["blocks"][0]["text"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("no text block in {output}"))
}

/// Fails unless the text `what` gave is exactly `want`.
pub fn expect_text(what: &str, got: &str, want: &str) -> Check {
    check!(got == want, "{what} gave {got:?}, expected {want:?}")
}

/// Fails unless `got` equals `want` (numbers by value).
pub fn expect_json(what: &str, got: &Value, want: &Value) -> Check {
    check!(same(got, want), "{what}: expected {want}, got {got}")
}

/// Fails unless `got` is an object holding every field of `want` with equal values (numbers by
/// value); fields the protocol does not define (an `env_name` beside a task, PROTOCOL_NOTES
/// row `task-reply-env-name`) are not compared.
pub fn expect_fields(what: &str, got: &Value, want: &Value) -> Check {
    let (Some(got_obj), Some(want_obj)) = (got.as_object(), want.as_object()) else {
        return expect_json(what, got, want);
    };
    for (k, w) in want_obj {
        ensure!(
            got_obj.get(k).is_some_and(|g| same(g, w)),
            "{what}: expected {k} = {w}, got {got}"
        );
    }
    Ok(())
}

/// Fails unless the response has this status.
pub fn expect_status(r: &Response, status: u16) -> Check {
    check!(
        r.status() == status,
        "expected status {status}, got {}: {}",
        r.status(),
        r.snippet()
    )
}

/// Fails unless the response is a JSON error `{"detail": "<non-empty>"}` with this status;
/// returns the detail.
pub fn expect_error(r: &Response, status: u16) -> Result<String, String> {
    expect_status(r, status)?;
    let v = r.json()?;
    let detail = v["detail"]
        .as_str()
        .ok_or_else(|| format!("error body has no \"detail\" string: {v}"))?;
    ensure!(!detail.trim().is_empty(), "empty error detail");
    Ok(detail.to_owned())
}

/// Fails unless the response is a JSON error with this status and machine-readable `code`
/// (PROTOCOL_NOTES row `error-codes`) beside a non-empty `detail`.
pub fn expect_code(r: &Response, status: u16, code: ErrorCode) -> Check {
    expect_error(r, status)?;
    let got = r.code();
    check!(
        got.as_deref() == Some(code.as_str()),
        "expected code {:?} with status {status}, got {got:?}: {}",
        code.as_str(),
        r.snippet()
    )
}

/// Fails unless the response is 200 with a JSON body; returns it.
pub fn expect_ok_json(r: &Response) -> Result<Value, String> {
    expect_status(r, 200)?;
    r.json()
}

/// Task `i` of the fixture (its formula covers every split).
pub fn task(i: i64) -> Value {
    json!({"id": i, "question": format!("What is {i}+{i}?"), "answer": (2 * i).to_string()})
}

/// The fixture's splits: name, type, first task id, task count.
pub const SPLITS: [(&str, &str, i64, i64); 3] = [
    ("train", "train", 0, 25),
    ("test", "test", 100, 5),
    ("hard", "validation", 200, 3),
];

/// The tasks of a fixture split with ids `first..first + n`.
pub fn tasks(first: i64, n: i64) -> Value {
    Value::Array((first..first + n).map(task).collect())
}

/// The `X-Secrets` header value the reference client sends.
pub fn secrets_header(pairs: &[(&str, &str)]) -> String {
    let map = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), json!({"value": v})));
    base64::engine::general_purpose::STANDARD.encode(Value::Object(map.collect()).to_string())
}

/// Base64-decode (for image blocks).
pub fn b64_decode(s: &str) -> Result<Vec<u8>, String> {
    base64::engine::general_purpose::STANDARD
        .decode(s)
        .map_err(|e| format!("not base64: {e}"))
}

/// Lines of a raw SSE body that are comments (start with `:`), with their byte offsets.
/// This only locates keep-alives in the raw bytes; events are decoded by the core codec.
pub fn comment_offsets(raw: &[u8]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut start = 0;
    for line in raw.split_inclusive(|&b| b == b'\n') {
        // A last line without its line break is not a whole line yet.
        if line.starts_with(b":") && line.ends_with(b"\n") {
            out.push(start);
        }
        start += line.len();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_compare_by_value() {
        assert!(same(&json!({"a": [0, 1.5]}), &json!({"a": [0.0, 1.5]})));
        assert!(!same(&json!({"a": 1}), &json!({"a": 1, "b": null})));
        assert!(!same(&json!("1"), &json!(1)));
    }

    #[test]
    fn finds_comment_lines() {
        let raw = b"event: task_id\ndata: x\n\n: ping\n\nevent: end\ndata: {}\n\n";
        assert_eq!(comment_offsets(raw), vec![24]);
    }

    #[test]
    fn secrets_header_is_base64_json() {
        let h = secrets_header(&[("K", "V")]);
        let bytes = b64_decode(&h).expect("base64");
        let v: Value = serde_json::from_slice(&bytes).expect("json");
        assert_eq!(v, json!({"K": {"value": "V"}}));
    }
}
