//! The fixtures every module shares: two test environments written with the macros, an
//! in-process server on port 0, and async shortcuts over the workspace's one raw HTTP/1.1
//! client (`ors_conformance::http`, run in `spawn_blocking`) so the bytes on the wire are
//! what the tests check.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use ors_conformance::http::{Conn, Head, OpenBody, Request, Response, Target};
use ors_server::prelude::*;
use ors_server::{RunningServer, Server, ServerConfig};
use serde_json::{json, Value};

// ---------------------------------------------------------------------------------------
// Observations the environments record, keyed by a tag the test chooses, so tests running
// in parallel in one binary do not see each other.

fn events() -> &'static Mutex<HashMap<String, usize>> {
    static EVENTS: OnceLock<Mutex<HashMap<String, usize>>> = OnceLock::new();
    EVENTS.get_or_init(Default::default)
}

/// Woken at every [`record`], for [`wait_count`] to wait on events rather than time.
fn recorded() -> &'static tokio::sync::Notify {
    static RECORDED: OnceLock<tokio::sync::Notify> = OnceLock::new();
    RECORDED.get_or_init(Default::default)
}

/// Count one occurrence of `key`.
pub fn record(key: &str) -> usize {
    let n = {
        let mut map = events().lock().unwrap_or_else(|p| p.into_inner());
        let n = map.entry(key.to_owned()).or_insert(0);
        *n += 1;
        *n
    };
    recorded().notify_waiters();
    n
}

/// Records `key` when dropped: a future holding one says it was dropped.
pub struct RecordOnDrop(pub String);

impl Drop for RecordOnDrop {
    fn drop(&mut self) {
        record(&self.0);
    }
}

/// How many times `key` was recorded.
pub fn count(key: &str) -> usize {
    let map = events().lock().unwrap_or_else(|p| p.into_inner());
    map.get(key).copied().unwrap_or(0)
}

/// Wait until `key` was recorded `n` times, woken by each record (10 s at most, so a record
/// that never comes fails the test instead of hanging it); returns the final count.
pub async fn wait_count(key: &str, n: usize) -> usize {
    let reached = async {
        loop {
            let notified = recorded().notified();
            tokio::pin!(notified);
            // Registered before the count is read, so a record in between is not missed.
            notified.as_mut().enable();
            if count(key) >= n {
                return;
            }
            notified.await;
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(10), reached).await;
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
    /// Make setup record `{tag}:setup-started`, then wait until it is dropped, which records
    /// `{tag}:setup-dropped`.
    #[serde(default)]
    pub hold_setup: bool,
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
                hold_setup: false,
                fail_setup: None,
            })
            .collect())
    }

    async fn new(task: LabTask, secrets: Secrets) -> Result<Self, EnvError> {
        if let Some(ms) = task.setup_ms {
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        if task.hold_setup {
            let tag = task.tag.as_deref().unwrap_or("untagged");
            let _dropped = RecordOnDrop(format!("{tag}:setup-dropped"));
            record(&format!("{tag}:setup-started"));
            std::future::pending::<()>().await;
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

    /// Wait for the call's cancellation, then answer `ok: false`.
    #[tool]
    async fn patient(&self, ctx: &ToolContext) -> Result<String, String> {
        ctx.cancelled().await;
        Err("cancelled".into())
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

/// Read timeout of every request: long enough for the slowest test call, short enough that
/// a hang fails the test.
const READ_TIMEOUT: Duration = Duration::from_secs(60);

fn target(addr: SocketAddr) -> Target {
    Target {
        timeout: READ_TIMEOUT,
        ..Target::from_addr(addr)
    }
}

/// Run blocking socket work off the async workers; its error fails the test.
pub async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> T {
    tokio::task::spawn_blocking(work)
        .await
        .expect("the blocking HTTP work did not panic")
        .unwrap_or_else(|e| panic!("{e}"))
}

/// A response, with the accessors tests use (they panic on what a test did not expect).
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    /// The body, de-chunked.
    pub body: Vec<u8>,
    /// Whether the body came with `Transfer-Encoding: chunked` (streamed, not one buffer).
    pub chunked: bool,
    head: Head,
}

impl From<Response> for Reply {
    fn from(r: Response) -> Self {
        Reply {
            status: r.status(),
            chunked: r.is_chunked(),
            body: r.body,
            head: r.head,
        }
    }
}

impl Reply {
    /// A header's value (names compared without case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.header(name)
    }

    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8(self.body.clone()).expect("the body is UTF-8")
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

    /// The `code` of an error body (PROTOCOL_NOTES row `error-codes`).
    pub fn code(&self) -> String {
        self.json()["code"]
            .as_str()
            .unwrap_or_else(|| panic!("no code in {:?}", self.text()))
            .to_owned()
    }

    /// Fails unless this is an error reply with this status and code.
    pub fn assert_error(&self, status: u16, code: &str) {
        assert_eq!(
            (self.status, self.code().as_str()),
            (status, code),
            "{}",
            self.text()
        );
    }

    /// The SSE events of the body as (name, data) pairs, decoded by the core codec.
    pub fn events(&self) -> Vec<(String, String)> {
        ors_server::core::sse::SseDecoder::new()
            .push(&self.body)
            .into_iter()
            .map(|e| (e.event, e.data))
            .collect()
    }
}

/// A request with headers and an optional JSON body.
pub async fn send(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> Reply {
    let mut req = Request::new(method, path);
    for (name, value) in headers {
        req = req.header(name, value);
    }
    if let Some(body) = body {
        req = req.header("Content-Type", "application/json").body(body);
    }
    blocking(move || req.send(&target(addr))).await.into()
}

/// Send raw bytes on a new connection and read one response to a request of `method`.
pub async fn send_raw(addr: SocketAddr, method: &'static str, bytes: Vec<u8>) -> Reply {
    blocking(move || {
        let mut conn = Conn::open(&target(addr))?;
        conn.write_all(&bytes)?;
        conn.read_response(method)
    })
    .await
    .into()
}

/// Send raw bytes on one connection and read `n` responses to GET requests (pipelining).
pub async fn send_pipelined(addr: SocketAddr, bytes: Vec<u8>, n: usize) -> Vec<Reply> {
    blocking(move || {
        let mut conn = Conn::open(&target(addr))?;
        conn.write_all(&bytes)?;
        (0..n)
            .map(|_| conn.read_response("GET").map(Reply::from))
            .collect()
    })
    .await
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

/// [`episode`], then wait until its setup has finished (the prompt waits for it): a session
/// deleted or shut down while its setup runs has its constructor dropped, so nothing to tear
/// down.
pub async fn ready_episode(addr: SocketAddr, task: Value) -> String {
    let sid = episode(addr, task).await;
    let r = get_s(addr, &sid, "/lab/prompt").await;
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
    call_body(
        addr,
        sid,
        &json!({ "name": name, "input": input }).to_string(),
    )
    .await
}

/// `POST /lab/call` with this body, as a client asking for SSE sends it.
pub async fn call_body(addr: SocketAddr, sid: &str, body: &str) -> Reply {
    send(
        addr,
        "POST",
        "/lab/call",
        &[("X-Session-ID", sid), ("Accept", "text/event-stream")],
        Some(body),
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

/// Start a call and read until its `task_id` event; returns the open response (drop it to
/// disconnect), the task id, and the body bytes read so far.
pub async fn open_call(addr: SocketAddr, sid: &str, body: &str) -> (OpenBody, String, Vec<u8>) {
    match open_stream(addr, sid, "/lab/call", body).await {
        Ok(open) => open,
        Err(reply) => panic!("the call was refused: {} {}", reply.status, reply.text()),
    }
}

/// `POST path` on `sid`, read up to its `task_id` event (a refusal before any stream is the
/// `Err`, as a whole reply): the open response, the id and what was read.
pub async fn open_stream(
    addr: SocketAddr,
    sid: &str,
    path: &str,
    body: &str,
) -> Result<(OpenBody, String, Vec<u8>), Reply> {
    let req = Request::new("POST", path)
        .sid(sid)
        .header("Accept", "text/event-stream")
        .header("Content-Type", "application/json")
        .body(body);
    blocking(move || {
        let mut open = req.open_body(&target(addr), READ_TIMEOUT)?;
        let mut raw = Vec::new();
        if open.head.status != 200 {
            return Ok(Err(Reply::from(open.finish(raw)?)));
        }
        loop {
            let piece = open.next_piece()?.ok_or_else(|| {
                format!("closed before task_id: {:?}", String::from_utf8_lossy(&raw))
            })?;
            raw.extend_from_slice(&piece);
            let events = ors_server::core::sse::SseDecoder::new().push(&raw);
            if let Some(e) = events.into_iter().find(|e| e.event == "task_id") {
                return Ok(Ok((open, e.data, raw)));
            }
        }
    })
    .await
}

/// Read the rest of an open response and parse the whole of it.
pub async fn finish(open: OpenBody, raw: Vec<u8>) -> Reply {
    blocking(move || open.finish(raw)).await.into()
}

/// `POST /create` for `sid` with extra headers (secrets, keys) and a JSON body.
pub async fn create_with(
    addr: SocketAddr,
    sid: &str,
    headers: &[(&str, &str)],
    body: &Value,
) -> Reply {
    let mut all = vec![("X-Session-ID", sid)];
    all.extend_from_slice(headers);
    send(addr, "POST", "/create", &all, Some(&body.to_string())).await
}

/// A call body with a reconnect `task_id`.
pub fn reconnect_body(name: &str, task_id: &str) -> String {
    json!({"name": name, "input": {}, "task_id": task_id}).to_string()
}
