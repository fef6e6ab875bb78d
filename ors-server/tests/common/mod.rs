//! Shared by the integration tests: two test environments written with the macros, an
//! in-process server on port 0, and a raw HTTP/1.1 client over `TcpStream` so the bytes on
//! the wire are what the tests check.

#![allow(dead_code)] // each test binary uses a different part of this module

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use ors_server::prelude::*;
use ors_server::{RunningServer, Server, ServerConfig};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

// ---------------------------------------------------------------------------------------
// Observations the environments record, keyed by a tag the test chooses, so tests running
// in parallel in one binary do not see each other.

fn events() -> &'static Mutex<HashMap<String, usize>> {
    static EVENTS: OnceLock<Mutex<HashMap<String, usize>>> = OnceLock::new();
    EVENTS.get_or_init(Default::default)
}

/// Count one occurrence of `key`.
pub fn record(key: &str) -> usize {
    let mut map = events().lock().unwrap_or_else(|p| p.into_inner());
    let n = map.entry(key.to_owned()).or_insert(0);
    *n += 1;
    *n
}

/// How many times `key` was recorded.
pub fn count(key: &str) -> usize {
    let map = events().lock().unwrap_or_else(|p| p.into_inner());
    map.get(key).copied().unwrap_or(0)
}

/// Wait (up to 10 s) until `key` was recorded `n` times; returns the final count.
pub async fn wait_count(key: &str, n: usize) -> usize {
    for _ in 0..1000 {
        if count(key) >= n {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    count(key)
}

// ---------------------------------------------------------------------------------------
// The test environments.

#[wire]
#[derive(Clone)]
pub struct LabTask {
    pub id: i64,
    pub answer: String,
    /// Label for observations (teardown, secrets).
    #[serde(default)]
    pub tag: Option<String>,
    /// Make setup take this long.
    #[serde(default)]
    pub setup_ms: Option<u64>,
    /// Make setup fail with this message (`"panic"` panics).
    #[serde(default)]
    pub fail_setup: Option<String>,
}

#[wire]
pub struct Text {
    /// The text.
    pub text: String,
}

#[wire]
pub struct Sleep {
    /// Milliseconds to sleep.
    pub ms: u64,
    /// Label counted once per execution.
    pub key: String,
}

#[wire]
pub struct Key {
    /// Label for observations.
    pub key: String,
}

#[wire]
pub struct Steps {
    /// How many progress events to send.
    pub steps: u32,
}

pub struct Lab {
    task: LabTask,
    counter: u64,
    secrets: Secrets,
}

#[environment(name = "lab")]
impl Environment for Lab {
    type Task = LabTask;

    fn splits() -> Vec<Split> {
        vec![Split::train("train"), Split::test("test"), "hard".into()]
    }

    async fn tasks(split: &str) -> Result<Vec<LabTask>, EnvError> {
        let (base, n) = match split {
            "train" => (0, 5),
            "test" => (100, 2),
            _ => (200, 1),
        };
        Ok((base..base + n)
            .map(|id| LabTask {
                id,
                answer: (2 * id).to_string(),
                tag: None,
                setup_ms: None,
                fail_setup: None,
            })
            .collect())
    }

    async fn new(task: LabTask, secrets: Secrets) -> Result<Self, EnvError> {
        if let Some(ms) = task.setup_ms {
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        match task.fail_setup.as_deref() {
            Some("panic") => panic!("setup exploded"),
            Some(msg) => return Err(EnvError::msg(msg)),
            None => {}
        }
        if let Some(tag) = &task.tag {
            record(&format!("{tag}:setup"));
        }
        Ok(Self {
            task,
            counter: 0,
            secrets,
        })
    }

    async fn prompt(&self) -> Result<Blocks, EnvError> {
        Ok(vec![Block::text(format!("What is {0}+{0}?", self.task.id))])
    }

    async fn teardown(&mut self) {
        if let Some(tag) = &self.task.tag {
            record(&format!("{tag}:teardown"));
        }
    }

    /// Echo the text back.
    #[tool]
    fn echo(&self, input: Text) -> ToolOutput {
        let mut meta = JsonObject::new();
        meta.insert("length".into(), json!(input.text.chars().count()));
        ToolOutput::text(input.text)
            .with_reward(0.0)
            .with_metadata(meta)
    }

    /// Count calls in this session.
    #[tool]
    fn counter(&mut self) -> String {
        self.counter += 1;
        self.counter.to_string()
    }

    /// Submit an answer.
    #[tool]
    fn submit(&self, input: Text) -> ToolOutput {
        if input.text == self.task.answer {
            ToolOutput::text("Correct!").with_reward(1.0).finish()
        } else {
            ToolOutput::text("Incorrect").with_reward(0.0).finish()
        }
    }

    /// Fail with the message.
    #[tool]
    fn fail(&self, input: Text) -> Result<String, String> {
        Err(input.text)
    }

    /// Panic.
    #[tool]
    fn boom(&self) -> String {
        panic!("the tool blew up")
    }

    /// Sleep, counting each execution under `key`.
    #[tool]
    async fn sleep(&mut self, input: Sleep) -> String {
        let n = record(&input.key);
        tokio::time::sleep(Duration::from_millis(input.ms)).await;
        self.counter += 1;
        format!("slept {n}")
    }

    /// Never return; record when the call's cancellation token fires.
    #[tool]
    async fn hang(&self, ctx: &ToolContext, input: Key) -> String {
        let ctx = ctx.clone();
        let key = input.key;
        record(&format!("{key}:started"));
        tokio::spawn(async move {
            ctx.cancelled().await;
            record(&format!("{key}:cancelled"));
        });
        std::future::pending::<()>().await;
        unreachable!()
    }

    /// Send progress events, then finish.
    #[tool]
    async fn progress(&self, ctx: &ToolContext, input: Steps) -> String {
        for step in 0..input.steps {
            ctx.progress(json!({ "step": step }));
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        "done".into()
    }

    /// Report progress, then answer without waiting.
    #[tool]
    fn announce(&self, ctx: &ToolContext) -> String {
        ctx.progress(json!("starting"));
        "announced".into()
    }

    /// The session and call ids.
    #[tool]
    fn whoami(&self, ctx: &ToolContext) -> String {
        format!("{} {}", ctx.session_id(), ctx.call_id())
    }

    /// The names of the secrets and the value of `API_KEY`.
    #[tool]
    fn secrets(&self) -> String {
        let names: Vec<&str> = self.secrets.keys().collect();
        format!(
            "{} {}",
            names.join(","),
            self.secrets.get("API_KEY").unwrap_or("-")
        )
    }

    /// A hint for this task only.
    #[tool(shared = false)]
    fn hint(&self) -> String {
        format!("The answer is {}", self.task.answer)
    }
}

#[wire]
#[derive(Clone)]
pub struct Empty {}

/// A second environment, to check routing by name and the default environment.
pub struct Other;

#[environment(name = "other")]
impl Environment for Other {
    type Task = Value;

    fn splits() -> Vec<Split> {
        vec![Split::train("train")]
    }

    async fn tasks(_split: &str) -> Result<Vec<Value>, EnvError> {
        Ok(vec![json!({"q": "other"})])
    }

    async fn new(_task: Value, _secrets: Secrets) -> Result<Self, EnvError> {
        Ok(Other)
    }

    async fn prompt(&self) -> Result<Blocks, EnvError> {
        Ok(vec![Block::text("other prompt")])
    }

    /// Say which environment this is.
    #[tool]
    fn which(&self) -> String {
        "other".into()
    }
}

// ---------------------------------------------------------------------------------------
// The server.

/// A server for `lab` (default) and `other` on a free port, with settings adjusted by `f`.
pub async fn start_with(f: impl FnOnce(&mut ServerConfig)) -> RunningServer {
    let mut config = ServerConfig {
        port: 0,
        ..ServerConfig::default()
    };
    f(&mut config);
    Server::with_config(config)
        .environment::<Lab>()
        .environment::<Other>()
        .bind()
        .await
        .expect("the test server binds")
}

/// A server with the default settings.
pub async fn start() -> RunningServer {
    start_with(|_| {}).await
}

// ---------------------------------------------------------------------------------------
// Raw HTTP.

/// A parsed HTTP response.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    /// The body, de-chunked.
    pub body: Vec<u8>,
    /// Whether the body came with `Transfer-Encoding: chunked`.
    pub chunked: bool,
}

impl Reply {
    /// A header's value (names compared without case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as text.
    pub fn text(&self) -> &str {
        std::str::from_utf8(&self.body).expect("the body is UTF-8")
    }

    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {:?}", self.text()))
    }

    /// The `detail` of an error body.
    pub fn detail(&self) -> String {
        self.json()["detail"]
            .as_str()
            .unwrap_or_else(|| panic!("no detail in {:?}", self.text()))
            .to_owned()
    }

    /// The SSE events of the body as (name, data) pairs, comments dropped.
    pub fn events(&self) -> Vec<(String, String)> {
        parse_events(self.text())
    }
}

/// Split an SSE text into (event, data) pairs; comment lines are dropped.
pub fn parse_events(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for block in text.split("\n\n") {
        let mut name = None;
        let mut data: Vec<&str> = Vec::new();
        for line in block.lines() {
            if let Some(v) = line.strip_prefix("event: ") {
                name = Some(v.to_owned());
            } else if let Some(v) = line.strip_prefix("data: ") {
                data.push(v);
            } else if line == "data:" {
                data.push("");
            }
        }
        if let Some(name) = name {
            out.push((name, data.join("\n")));
        }
    }
    out
}

/// The bytes of a request with `Connection: close` and a body when given.
pub fn raw_request(
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> Vec<u8> {
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if let Some(body) = body {
        req.push_str("Content-Type: application/json\r\n");
        req.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    } else {
        req.push_str("\r\n");
    }
    req.into_bytes()
}

/// Send raw bytes and read the whole response (the server closes the connection).
pub async fn send_raw(addr: SocketAddr, bytes: &[u8]) -> Reply {
    let raw = exchange(addr, bytes).await;
    parse_reply(&raw)
}

/// Send raw bytes and return the raw response bytes up to EOF.
pub async fn exchange(addr: SocketAddr, bytes: &[u8]) -> Vec<u8> {
    let fut = async {
        let mut stream = TcpStream::connect(addr).await.expect("connect");
        stream.write_all(bytes).await.expect("write request");
        let mut raw = Vec::new();
        let _ = stream.read_to_end(&mut raw).await;
        raw
    };
    tokio::time::timeout(Duration::from_secs(60), fut)
        .await
        .expect("the server answered within 60 s")
}

/// A request with headers and an optional JSON body.
pub async fn send(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> Reply {
    send_raw(addr, &raw_request(method, path, headers, body)).await
}

/// `GET path`.
pub async fn get(addr: SocketAddr, path: &str) -> Reply {
    send(addr, "GET", path, &[], None).await
}

/// `POST path` with a JSON body.
pub async fn post(addr: SocketAddr, path: &str, body: &str) -> Reply {
    send(addr, "POST", path, &[], Some(body)).await
}

/// `GET path` for a session.
pub async fn get_s(addr: SocketAddr, sid: &str, path: &str) -> Reply {
    send(addr, "GET", path, &[("X-Session-ID", sid)], None).await
}

/// `POST path` for a session with a JSON body.
pub async fn post_s(addr: SocketAddr, sid: &str, path: &str, body: &str) -> Reply {
    send(addr, "POST", path, &[("X-Session-ID", sid)], Some(body)).await
}

/// Parse a raw response: status line, headers, and a content-length or chunked body.
pub fn parse_reply(raw: &[u8]) -> Reply {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no end of head in {:?}", String::from_utf8_lossy(raw)));
    let head = std::str::from_utf8(&raw[..split]).expect("head is ASCII");
    let rest = &raw[split + 4..];
    let mut lines = head.split("\r\n");
    let status_line = lines.next().expect("status line");
    let status: u16 = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {status_line:?}"));
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    let body = if chunked {
        dechunk(rest)
    } else {
        let len = headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
            .map(|(_, v)| v.parse::<usize>().expect("content-length"))
            .unwrap_or(rest.len());
        rest[..len.min(rest.len())].to_vec()
    };
    Reply {
        status,
        headers,
        body,
        chunked,
    }
}

/// Decode a chunked body (a truncated one is returned as far as it goes).
pub fn dechunk(mut rest: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    while let Some(eol) = rest.windows(2).position(|w| w == b"\r\n") {
        let size_text = std::str::from_utf8(&rest[..eol]).expect("chunk size");
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .expect("hex chunk size");
        rest = &rest[eol + 2..];
        if size == 0 || rest.len() < size {
            break;
        }
        body.extend_from_slice(&rest[..size]);
        rest = &rest[(size + 2).min(rest.len())..];
    }
    body
}

// ---------------------------------------------------------------------------------------
// Protocol shortcuts.

/// A new session id from `create_session` (JSON form).
pub async fn new_sid(addr: SocketAddr) -> String {
    let r = post(addr, "/create_session", "").await;
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()["sid"].as_str().expect("sid").to_owned()
}

/// Create a `lab` episode for task `id` and return its session id.
pub async fn episode(addr: SocketAddr, task: Value) -> String {
    let sid = new_sid(addr).await;
    let body = json!({ "env_name": "lab", "task_spec": task }).to_string();
    let r = post_s(addr, &sid, "/create", &body).await;
    assert_eq!(r.status, 200, "{}", r.text());
    sid
}

/// A plain `lab` task.
pub fn task(id: i64) -> Value {
    json!({ "id": id, "answer": (2 * id).to_string() })
}

/// A `lab` task with a tag.
pub fn tagged(id: i64, tag: &str) -> Value {
    json!({ "id": id, "answer": (2 * id).to_string(), "tag": tag })
}

/// Call a tool and return the response.
pub async fn call(addr: SocketAddr, sid: &str, name: &str, input: Value) -> Reply {
    let body = json!({ "name": name, "input": input }).to_string();
    send(
        addr,
        "POST",
        "/lab/call",
        &[("X-Session-ID", sid), ("Accept", "text/event-stream")],
        Some(&body),
    )
    .await
}

/// The reassembled result JSON of a call stream (`chunk`s + `end`); panics on `error`.
pub fn result_of(reply: &Reply) -> Value {
    assert_eq!(reply.status, 200, "{}", reply.text());
    let mut json = String::new();
    for (name, data) in reply.events() {
        match name.as_str() {
            "chunk" => json.push_str(&data),
            "end" => {
                json.push_str(&data);
                return serde_json::from_str(&json).expect("end data is JSON");
            }
            "error" => panic!("error event: {data}"),
            _ => {}
        }
    }
    panic!("no end event in {:?}", reply.text())
}

/// The text of the first block of a successful call.
pub fn text_of(reply: &Reply) -> String {
    let v = result_of(reply);
    assert_eq!(v["ok"], true, "{v}");
    v["output"]["blocks"][0]["text"]
        .as_str()
        .expect("text block")
        .to_owned()
}

/// Start a call on a raw connection and read until its `task_id` event; returns the open
/// stream (drop it to disconnect), the task id, and the raw bytes read so far.
pub async fn open_call(addr: SocketAddr, sid: &str, body: &str) -> (TcpStream, String, Vec<u8>) {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let req = raw_request(
        "POST",
        "/lab/call",
        &[("X-Session-ID", sid), ("Accept", "text/event-stream")],
        Some(body),
    );
    stream.write_all(&req).await.expect("write");
    let mut raw = Vec::new();
    let fut = async {
        loop {
            let mut buf = [0u8; 4096];
            let n = stream.read(&mut buf).await.expect("read");
            assert!(
                n > 0,
                "closed before task_id: {:?}",
                String::from_utf8_lossy(&raw)
            );
            raw.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&raw);
            if let Some(i) = text.find("event: task_id\ndata: ") {
                let rest = &text[i + "event: task_id\ndata: ".len()..];
                if let Some(end) = rest.find('\n') {
                    return rest[..end].to_owned();
                }
            }
        }
    };
    let task_id = tokio::time::timeout(Duration::from_secs(30), fut)
        .await
        .expect("task_id within 30 s");
    (stream, task_id, raw)
}

/// Read the rest of an open response to EOF and parse the whole of it.
pub async fn finish(mut stream: TcpStream, mut raw: Vec<u8>) -> Reply {
    let fut = stream.read_to_end(&mut raw);
    tokio::time::timeout(Duration::from_secs(60), fut)
        .await
        .expect("the stream ended within 60 s")
        .expect("read");
    parse_reply(&raw)
}

/// A call body with a reconnect `task_id`.
pub fn reconnect_body(name: &str, task_id: &str) -> String {
    json!({"name": name, "input": {}, "task_id": task_id}).to_string()
}
