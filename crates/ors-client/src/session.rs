//! Sessions (episodes), opened on an [`Environment`] for a [`TaskRef`]: creation in both reply
//! forms, the background ping, death detection, prompt, tools, calls, and deletion.

use std::future::{Future, IntoFuture};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use base64::Engine as _;
use futures_util::future::BoxFuture;
use http::header::{HeaderName, HeaderValue, CONTENT_TYPE};
use ors_core::protocol::{routes, HEADER_SECRETS};
use ors_core::sse::{SseDecoder, EVENT_TASK_ID};
use ors_core::{
    Blocks, CreateSession, ErrorCode, GroupCandidate, GroupScore, ListToolsOutput, Message,
    RunToolOutput, ScoreGroupOutput, Secrets, SessionId, TerminalToolSpec, ToolOutput, ToolSpec,
};
use serde::Serialize;
use serde_json::{Map, Value};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::call::{run_call, CallSpec, Payload, Progress, ProgressFn};
use crate::client::Environment;
use crate::config::SecretsMode;
use crate::error::{Error, Result};
use crate::http::{decode_json, Http, Req, Retry};

/// Which task a session runs: given inline, or resolved by the server from split and index.
#[derive(Debug, Clone, PartialEq)]
pub enum TaskRef {
    /// The task itself (`task_spec`), a JSON object.
    Spec(Value),
    /// The task at `index` of `split`.
    At {
        /// The split name.
        split: String,
        /// The index in the split.
        index: i64,
    },
}

impl TaskRef {
    /// The task at `index` of `split`.
    pub fn at(split: impl Into<String>, index: i64) -> Self {
        TaskRef::At {
            split: split.into(),
            index,
        }
    }

    /// A task given inline, from any serializable value that is a JSON object.
    pub fn spec<T: Serialize + ?Sized>(task: &T) -> Result<Self> {
        let v = serde_json::to_value(task)
            .map_err(|e| Error::InvalidArgument(format!("the task is not serializable: {e}")))?;
        if !v.is_object() {
            return Err(Error::InvalidArgument(
                "a task given inline must be a JSON object".into(),
            ));
        }
        Ok(TaskRef::Spec(v))
    }
}

impl From<Value> for TaskRef {
    fn from(v: Value) -> Self {
        TaskRef::Spec(v)
    }
}

impl Environment {
    /// Start opening a session on a task: `env.session(TaskRef::at("test", 0)).await?`, or add
    /// secrets and a progress callback on the builder first.
    pub fn session(&self, task: impl Into<TaskRef>) -> SessionBuilder {
        SessionBuilder::new(self.clone(), task.into())
    }

    /// Open a session on the task at `index` of `split`.
    pub async fn session_at(&self, split: &str, index: i64) -> Result<Session> {
        self.session(TaskRef::at(split, index)).open().await
    }

    /// Open a session on a task given inline: a `serde_json::Value` or any serializable task
    /// type.
    pub async fn session_for<T: Serialize + ?Sized>(&self, task: &T) -> Result<Session> {
        self.session(TaskRef::spec(task)?).open().await
    }
}

/// Options for opening a session; `.await` it (or call [`SessionBuilder::open`]).
#[must_use = "a SessionBuilder does nothing until it is opened or awaited"]
pub struct SessionBuilder {
    env: Environment,
    task: TaskRef,
    secrets: Secrets,
    progress: Option<ProgressFn>,
    toolset: Option<String>,
}

impl SessionBuilder {
    pub(crate) fn new(env: Environment, task: TaskRef) -> Self {
        Self {
            env,
            task,
            secrets: Secrets::default(),
            progress: None,
            toolset: None,
        }
    }

    /// One of the environment's named toolsets for this session (`toolset_name`, PROTOCOL_NOTES
    /// row `toolset-name`); a server answers 400 for a name the environment does not define.
    pub fn toolset(mut self, name: impl Into<String>) -> Self {
        self.toolset = Some(name.into());
        self
    }

    /// Secrets for the environment (API keys it needs); never logged.
    pub fn secrets(mut self, secrets: Secrets) -> Self {
        self.secrets = secrets;
        self
    }

    /// Add one secret.
    pub fn secret(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.secrets.insert(key, value);
        self
    }

    /// Receive the `progress` events of every call made on this session.
    pub fn on_progress(mut self, f: impl Fn(&Progress<'_>) + Send + Sync + 'static) -> Self {
        self.progress = Some(Arc::new(f));
        self
    }

    /// Create the session on the server and start its background ping.
    pub async fn open(self) -> Result<Session> {
        let http = Arc::clone(&self.env.client().http);
        let body = match &self.task {
            TaskRef::Spec(v) if !v.is_object() => {
                return Err(Error::InvalidArgument(
                    "a task given inline must be a JSON object".into(),
                ))
            }
            TaskRef::Spec(v) => CreateSession::from_task(v.clone()),
            TaskRef::At { split, index } => CreateSession::from_split(split.clone(), *index),
        }
        .env(self.env.name());
        let body = CreateSession {
            toolset_name: self.toolset.clone(),
            ..body
        };

        let sid = create_session_id(&http).await?;
        let mut mode = match http.cfg.secrets_mode {
            SecretsMode::Auto if http.secrets_in_header.load(Ordering::Relaxed) => {
                SecretsMode::Header
            }
            mode => mode,
        };
        loop {
            let req = create_request(&sid, body.clone(), &self.secrets, mode)?;
            // A repeated /create after a lost reply would hit "session already exists", so
            // only failures where the server certainly did nothing are retried.
            match http.fetch(&req, Retry::Refused).await {
                Ok(_) => break,
                // FastAPI validates the body before anything runs: the session was not made.
                Err(e) if mode == SecretsMode::Auto && refuses_body_secrets(&e) => {
                    tracing::debug!(sid = %sid, "the server refuses body secrets: sending X-Secrets");
                    http.secrets_in_header.store(true, Ordering::Relaxed);
                    mode = SecretsMode::Header;
                }
                Err(e) => {
                    release_id(&http, &sid).await;
                    return Err(e);
                }
            }
        }
        tracing::debug!(sid = %sid, env = self.env.name(), "session created");

        let (death, _) = watch::channel(None);
        let shared = Arc::new(Shared {
            env: self.env,
            sid,
            task: self.task,
            progress: self.progress,
            death,
            no_task_tools: AtomicBool::new(false),
        });
        let ping = http
            .cfg
            .ping_interval
            .map(|every| tokio::spawn(ping_loop(Arc::clone(&shared), every)));
        Ok(Session {
            shared,
            ping,
            closed: false,
        })
    }
}

impl IntoFuture for SessionBuilder {
    type Output = Result<Session>;
    type IntoFuture = BoxFuture<'static, Result<Session>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.open())
    }
}

/// `POST /create_session`, accepting a JSON `{"sid"}` reply or an SSE `task_id` event.
async fn create_session_id(http: &Http) -> Result<String> {
    // JSON is asked for; the reference server answers SSE regardless, and both are read.
    let req = Req::post(routes::CREATE_SESSION);
    // A repeat only mints another unused id, so this is safe to retry.
    let (headers, body) = http.fetch(&req, Retry::Idempotent).await?;
    let is_sse = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("text/event-stream"));
    let sid = if is_sse || !body.trim_ascii_start().starts_with(b"{") {
        let mut decoder = SseDecoder::new();
        let events = decoder.push(&body);
        events
            .into_iter()
            .find(|e| e.event == EVENT_TASK_ID)
            .map(|e| e.data.trim().to_owned())
            .ok_or_else(|| {
                Error::Protocol("/create_session sent neither {\"sid\"} nor a task_id event".into())
            })?
    } else {
        decode_json::<SessionId>(routes::CREATE_SESSION, &body)?.sid
    };
    if sid.is_empty() {
        return Err(Error::Protocol(
            "/create_session sent an empty session id".into(),
        ));
    }
    Ok(sid)
}

/// The `/create` request with the secrets where `mode` puts them (`Auto`: the body).
fn create_request(
    sid: &str,
    mut body: CreateSession,
    secrets: &Secrets,
    mode: SecretsMode,
) -> Result<Req> {
    let mut req = Req::post(routes::CREATE).sid(sid);
    if !secrets.is_empty() {
        if matches!(
            mode,
            SecretsMode::Auto | SecretsMode::Body | SecretsMode::Both
        ) {
            body = body.secrets(secrets.clone());
        }
        if matches!(mode, SecretsMode::Header | SecretsMode::Both) {
            req = req.header(
                HeaderName::from_static(HEADER_SECRETS),
                secrets_header(secrets)?,
            );
        }
    }
    req.json(&body)
}

/// Whether `/create` was refused for its body's `secrets` field: the `openreward` server's
/// 422 `extra_forbidden` naming it (PROTOCOL_NOTES row `secrets-forms`).
fn refuses_body_secrets(e: &Error) -> bool {
    matches!(e, Error::Http { status: 422, detail, .. } if detail.contains("secrets"))
}

/// Best-effort `POST /delete_session` for an id whose `/create` failed.
async fn release_id(http: &Http, sid: &str) {
    let req = Req::post(routes::DELETE_SESSION).sid(sid);
    if let Err(e) = http.fetch(&req, Retry::Refused).await {
        tracing::debug!(sid, error = %e, "delete_session after a failed create also failed");
    }
}

/// The `X-Secrets` header: base64 of `{"KEY": {"value": "V", "allowed_domains": [...]}}`
/// (the domains only when given).
fn secrets_header(secrets: &Secrets) -> Result<HeaderValue> {
    let map: Map<String, Value> = secrets
        .iter()
        .map(|(k, v)| {
            let mut entry = serde_json::json!({ "value": v });
            if let Some(domains) = secrets.allowed_domains(k) {
                entry["allowed_domains"] = serde_json::json!(domains);
            }
            (k.to_owned(), entry)
        })
        .collect();
    let encoded = base64::engine::general_purpose::STANDARD.encode(Value::Object(map).to_string());
    let mut v = HeaderValue::from_str(&encoded)
        .map_err(|e| Error::InvalidArgument(format!("secrets header: {e}")))?;
    v.set_sensitive(true);
    Ok(v)
}

/// Why a session died.
#[derive(Debug, Clone)]
struct Death {
    reason: String,
    /// The server said the session no longer exists, so deleting it is pointless.
    gone: bool,
}

/// State shared by a session and its ping task.
struct Shared {
    env: Environment,
    sid: String,
    task: TaskRef,
    progress: Option<ProgressFn>,
    death: watch::Sender<Option<Death>>,
    no_task_tools: AtomicBool,
}

impl Shared {
    fn http(&self) -> &Http {
        &self.env.client().http
    }

    fn mark_dead(&self, reason: String, gone: bool) {
        let changed = self.death.send_if_modified(|d| {
            if d.is_none() {
                *d = Some(Death {
                    reason: reason.clone(),
                    gone,
                });
                true
            } else {
                false
            }
        });
        if changed {
            tracing::info!(sid = %self.sid, %reason, "session terminated");
        }
    }

    fn terminated(&self) -> Option<Error> {
        self.death
            .borrow()
            .as_ref()
            .map(|d| Error::SessionTerminated {
                sid: self.sid.clone(),
                reason: d.reason.clone(),
            })
    }

    /// Turn a "this session does not exist" answer, or a gateway's "its server does not
    /// answer", into the session's death.
    fn absorb(&self, e: Error) -> Error {
        if session_gone(&e) {
            self.mark_dead(format!("the server answered {e}"), true);
            return self.terminated().unwrap_or(e);
        }
        if server_unreachable(&e) {
            self.mark_dead(format!("the server is unreachable: {e}"), false);
            return self.terminated().unwrap_or(e);
        }
        e
    }
}

/// Whether an error answer to a session-scoped request comes from a gateway that cannot reach
/// the session's server: 502 or 504 without an ORS `code`. ORS servers do not answer these
/// themselves; a proxy in front of them does (`deploy/nginx/ors.conf` answers 502 for a
/// replica that stopped), and only the server it cannot reach holds the session.
fn server_unreachable(e: &Error) -> bool {
    matches!(
        e,
        Error::Http {
            status: 502 | 504,
            code: None,
            ..
        }
    )
}

/// Whether an error answer to a session-scoped request means the session is gone. Decided on
/// the server's `code` (PROTOCOL_NOTES row `error-codes`), never on the words of `detail`;
/// from a server without codes (the Python reference) 404 and 410 mean gone; a code this
/// version does not know is gone only with 410.
fn session_gone(e: &Error) -> bool {
    let Error::Http { status, code, .. } = e else {
        return false;
    };
    match code.as_deref().map(str::parse::<ErrorCode>) {
        Some(Ok(code)) => code.means_session_gone(),
        Some(Err(_)) => *status == 410,
        None => *status == 404 || *status == 410,
    }
}

async fn ping_loop(shared: Arc<Shared>, every: std::time::Duration) {
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let req = Req::post(routes::PING).sid(&shared.sid);
        match shared.http().fetch(&req, Retry::Idempotent).await {
            Ok(_) => {}
            Err(e) if session_gone(&e) => {
                shared.mark_dead(format!("ping answered {e}"), true);
                return;
            }
            Err(e)
                if matches!(e, Error::Transport(_) | Error::Timeout(_))
                    || server_unreachable(&e) =>
            {
                shared.mark_dead(format!("the server is unreachable: {e}"), false);
                return;
            }
            Err(e) => tracing::warn!(sid = %shared.sid, error = %e, "ping failed"),
        }
    }
}

/// One episode on the server: created by [`Environment::session`], pinged in the background,
/// deleted by [`Session::close`] (or, as a fallback, when dropped inside a tokio runtime).
///
/// Once the session is known to be dead (a ping answered 404/410, the server became
/// unreachable, or a request said the session is gone), every method fails fast with
/// [`Error::SessionTerminated`] naming the cause, and a call in flight is abandoned.
pub struct Session {
    shared: Arc<Shared>,
    ping: Option<JoinHandle<()>>,
    closed: bool,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("env", &self.shared.env.name())
            .field("sid", &self.shared.sid)
            .field("terminated", &self.is_terminated())
            .finish()
    }
}

impl Session {
    /// The session id.
    pub fn sid(&self) -> &str {
        &self.shared.sid
    }

    /// The environment this session runs in.
    pub fn environment(&self) -> &Environment {
        &self.shared.env
    }

    /// The task this session was opened on.
    pub fn task(&self) -> &TaskRef {
        &self.shared.task
    }

    /// Whether the session is known to be dead.
    pub fn is_terminated(&self) -> bool {
        self.shared.death.borrow().is_some()
    }

    /// Why the session died, if it did.
    pub fn termination_reason(&self) -> Option<String> {
        self.shared
            .death
            .borrow()
            .as_ref()
            .map(|d| d.reason.clone())
    }

    /// Wait until the session is known to be dead (for supervisors); returns the reason.
    pub async fn terminated(&self) -> String {
        let mut rx = self.shared.death.subscribe();
        // The sender lives in `shared`, which `self` holds, so waiting cannot fail.
        let _ = rx.wait_for(Option::is_some).await;
        self.termination_reason().unwrap_or_default()
    }

    /// Run `fut` unless the session is dead; abandon it as soon as the session dies. An
    /// answer saying the session is gone makes it dead.
    async fn guarded<T>(&self, fut: impl Future<Output = Result<T>>) -> Result<T> {
        self.guarded_raw(fut)
            .await
            .map_err(|e| self.shared.absorb(e))
    }

    /// [`Session::guarded`] without looking at what an error says about the session.
    async fn guarded_raw<T>(&self, fut: impl Future<Output = Result<T>>) -> Result<T> {
        if let Some(e) = self.shared.terminated() {
            return Err(e);
        }
        let mut rx = self.shared.death.subscribe();
        tokio::select! {
            biased;
            r = fut => r,
            _ = rx.wait_for(Option::is_some) => Err(self.shared.terminated().unwrap_or_else(|| {
                Error::SessionTerminated { sid: self.shared.sid.clone(), reason: "unknown".into() }
            })),
        }
    }

    /// Whether a 404 from an episode route means the server lacks the route (rather than the
    /// session): said by the code `no_route`; a server without codes is asked with `/ping`
    /// whether the session is alive.
    async fn route_missing(&self, e: &Error) -> bool {
        if e.status() != Some(404) {
            return false;
        }
        match e.code() {
            Some(code) => code == ErrorCode::NoRoute.as_str(),
            None => {
                let ping = Req::post(routes::PING).sid(&self.shared.sid);
                self.shared
                    .http()
                    .fetch(&ping, Retry::Idempotent)
                    .await
                    .is_ok()
            }
        }
    }

    /// `GET /{env}/prompt`: the blocks that start the episode.
    pub async fn prompt(&self) -> Result<Blocks> {
        let req = Req::get(self.shared.env.path(routes::PROMPT)).sid(&self.shared.sid);
        self.guarded(self.shared.http().json(&req, Retry::Idempotent))
            .await
    }

    /// `GET /{env}/messages`: the prompt as a conversation (PROTOCOL_NOTES row
    /// `messages-route`); from a server without the route, one user message holding the prompt.
    pub async fn messages(&self) -> Result<Vec<Message>> {
        let req = Req::get(self.shared.env.path(routes::MESSAGES)).sid(&self.shared.sid);
        match self
            .guarded_raw(self.shared.http().json(&req, Retry::Idempotent))
            .await
        {
            Ok(messages) => Ok(messages),
            Err(e) if self.route_missing(&e).await => Ok(vec![Message::user(self.prompt().await?)]),
            Err(e) => Err(self.shared.absorb(e)),
        }
    }

    /// The tools of this episode: `GET /{env}/task_tools` (shared and task-specific), or the
    /// shared `GET /{env}/tools` when the server has no `task_tools` route.
    pub async fn tools(&self) -> Result<Vec<ToolSpec>> {
        Ok(self.listing().await?.tools)
    }

    /// The episode's terminal tool, when the environment has one (PROTOCOL_NOTES row
    /// `terminal-tool`): what [`Session::call_terminal`] calls.
    pub async fn terminal_tool(&self) -> Result<Option<TerminalToolSpec>> {
        Ok(self.listing().await?.terminal_tool)
    }

    /// End the episode with the model's plain answer (it answered without a tool call): call
    /// the terminal tool with `answer` in its one field. [`Error::InvalidArgument`] when the
    /// environment has no terminal tool.
    pub async fn call_terminal(&self, answer: &str) -> Result<ToolOutput> {
        let Some(term) = self.terminal_tool().await? else {
            return Err(Error::InvalidArgument(format!(
                "environment '{}' has no terminal tool",
                self.shared.env.name()
            )));
        };
        self.call(&term.name, term.input(answer)).await
    }

    /// The episode's tools listing as sent (its tools, and the terminal tool and group
    /// scoring when the environment has them), from `task_tools` or, without that route,
    /// `tools`.
    pub async fn listing(&self) -> Result<ListToolsOutput> {
        let http = self.shared.http();
        if !self.shared.no_task_tools.load(Ordering::Relaxed) {
            let req = Req::get(self.shared.env.path(routes::TASK_TOOLS)).sid(&self.shared.sid);
            match self
                .guarded_raw(http.json::<ListToolsOutput>(&req, Retry::Idempotent))
                .await
            {
                Ok(out) => return Ok(out),
                Err(e) if self.route_missing(&e).await => {
                    self.shared.no_task_tools.store(true, Ordering::Relaxed);
                }
                Err(e) => return Err(self.shared.absorb(e)),
            }
        }
        let req = Req::get(self.shared.env.path(routes::TOOLS));
        self.guarded(http.json(&req, Retry::Idempotent)).await
    }

    /// This episode's tools in the function-calling format of an LLM provider.
    pub async fn tools_for(&self, provider: crate::Provider) -> Result<Vec<Value>> {
        Ok(provider.tools(&self.tools().await?))
    }

    /// Call a tool and get its result as the server sent it: `ok: false` is a value here,
    /// not an error. A crash is [`Error::ToolCrashed`].
    pub async fn call_raw(&self, name: &str, input: Value) -> Result<RunToolOutput> {
        self.call_inner(name, input, self.shared.progress.as_ref())
            .await
    }

    /// Call a tool: its output, or [`Error::ToolError`] when it answered `ok: false`.
    /// `input` must be a JSON object (`null` means no input).
    pub async fn call(&self, name: &str, input: Value) -> Result<ToolOutput> {
        into_output(self.call_raw(name, input).await?)
    }

    /// Call a tool with a typed input (any `Serialize` that becomes a JSON object, or `()`).
    pub async fn call_as<I: Serialize + ?Sized>(
        &self,
        name: &str,
        input: &I,
    ) -> Result<ToolOutput> {
        let value = serde_json::to_value(input)
            .map_err(|e| Error::InvalidArgument(format!("tool input is not serializable: {e}")))?;
        self.call(name, value).await
    }

    /// Call a tool, handing its progress events to `on_progress` (instead of the session's
    /// callback).
    pub async fn call_with_progress(
        &self,
        name: &str,
        input: Value,
        on_progress: impl Fn(&Progress<'_>) + Send + Sync + 'static,
    ) -> Result<ToolOutput> {
        let cb: ProgressFn = Arc::new(on_progress);
        into_output(self.call_inner(name, input, Some(&cb)).await?)
    }

    async fn call_inner(
        &self,
        name: &str,
        input: Value,
        progress: Option<&ProgressFn>,
    ) -> Result<RunToolOutput> {
        let input = match input {
            Value::Null => Value::Object(Map::new()),
            Value::Object(_) => input,
            other => {
                return Err(Error::InvalidArgument(format!(
                    "tool input must be a JSON object, got {}",
                    ors_core::types::json_kind(&other)
                )))
            }
        };
        let spec = CallSpec {
            path: self.shared.env.path(routes::CALL),
            sid: &self.shared.sid,
            name,
            payload: Payload::Tool(&input),
            progress,
        };
        self.guarded(run_call(self.shared.http(), spec)).await
    }

    /// Whether the environment scores groups of candidate answers (`supports_score_group` in
    /// its tools listing; absent means no).
    pub async fn supports_score_group(&self) -> Result<bool> {
        Ok(self.listing().await?.supports_score_group == Some(true))
    }

    /// Score a group of candidate answers to this session's task (`POST /{env}/score_group`,
    /// PROTOCOL_NOTES row `score-group`): one score per candidate, in their order, streamed and
    /// reconnected like a call. [`Error::Unsupported`] when the environment does not score
    /// groups; a failed judging is [`Error::ToolCrashed`].
    pub async fn score_group(&self, candidates: Vec<GroupCandidate>) -> Result<Vec<GroupScore>> {
        let asked = candidates.len();
        let spec = CallSpec {
            path: self.shared.env.path(routes::SCORE_GROUP),
            sid: &self.shared.sid,
            name: "score_group",
            payload: Payload::ScoreGroup(&candidates),
            progress: None,
        };
        let out: ScoreGroupOutput = match self.guarded_raw(run_call(self.shared.http(), spec)).await
        {
            Ok(out) => out,
            Err(e) if self.route_missing(&e).await => {
                return Err(Error::Unsupported {
                    env: self.shared.env.name().to_owned(),
                    capability: "score_group".to_owned(),
                })
            }
            Err(e) => return Err(self.shared.absorb(e)),
        };
        if out.scores.len() != asked {
            return Err(Error::Protocol(format!(
                "score_group answered {} scores for {asked} candidates",
                out.scores.len()
            )));
        }
        Ok(out.scores)
    }

    /// Delete the session on the server (`POST /delete`) and stop pinging. A session the
    /// server already forgot (404/410) counts as closed.
    pub async fn close(mut self) -> Result<()> {
        self.closed = true;
        if let Some(ping) = self.ping.take() {
            ping.abort();
        }
        delete(&self.shared).await
    }
}

async fn delete(shared: &Shared) -> Result<()> {
    if shared.death.borrow().as_ref().is_some_and(|d| d.gone) {
        return Ok(());
    }
    let req = Req::post(routes::DELETE).sid(&shared.sid);
    // Deleting twice is harmless (the second answers 410), so every failure may be retried.
    match shared.http().fetch(&req, Retry::Idempotent).await {
        Ok(_) => {
            tracing::debug!(sid = %shared.sid, "session deleted");
            Ok(())
        }
        Err(e) if session_gone(&e) => {
            tracing::debug!(sid = %shared.sid, error = %e, "session already gone");
            Ok(())
        }
        Err(e) => Err(e),
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Some(ping) = self.ping.take() {
            ping.abort();
        }
        if self.closed {
            return;
        }
        // Without a runtime there is nothing to run the request on; the server's reaper will
        // remove the session after its idle timeout.
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let shared = Arc::clone(&self.shared);
            rt.spawn(async move {
                if let Err(e) = delete(&shared).await {
                    tracing::debug!(sid = %shared.sid, error = %e, "delete on drop failed");
                }
            });
        }
    }
}

fn into_output(r: RunToolOutput) -> Result<ToolOutput> {
    match r {
        RunToolOutput::Success(o) => Ok(o),
        RunToolOutput::Error(e) => Err(Error::ToolError {
            message: e.error,
            reason: e.reason,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http(status: u16, code: Option<&str>, detail: &str) -> Error {
        Error::Http {
            status,
            code: code.map(str::to_owned),
            detail: detail.to_owned(),
        }
    }

    #[test]
    fn gone_is_decided_on_the_code() {
        for code in ["session_not_found", "session_timed_out", "no_episode_yet"] {
            assert!(
                session_gone(&http(404, Some(code), "whatever the words")),
                "{code}"
            );
        }
        assert!(session_gone(&http(410, Some("session_deleted"), "x")));
        // The words of the detail do not matter, the code does.
        assert!(!session_gone(&http(
            404,
            Some("unknown_environment"),
            "session not found"
        )));
        assert!(!session_gone(&http(
            404,
            Some("no_route"),
            "Active environment not found"
        )));
        assert!(!session_gone(&http(
            400,
            Some("session_exists"),
            "session gone"
        )));
        // A code from a newer server: only 410 says gone.
        assert!(!session_gone(&http(404, Some("brand_new"), "x")));
        assert!(session_gone(&http(410, Some("brand_new"), "x")));
        assert!(!session_gone(&Error::Timeout("session".into())));
    }

    #[test]
    fn without_a_code_404_and_410_mean_gone() {
        // The Python reference sends no codes: its 404 "Active environment not found" and
        // 410 "Session deleted" are decided by status.
        assert!(session_gone(&http(
            404,
            None,
            "Active environment not found"
        )));
        assert!(session_gone(&http(410, None, "Session deleted")));
        assert!(!session_gone(&http(400, None, "Session already exists")));
        assert!(!session_gone(&http(500, None, "session crashed")));
    }

    #[test]
    fn secrets_header_is_the_reference_form() {
        let s: Secrets = [("KEY", "v")].into_iter().collect();
        let h = secrets_header(&s).unwrap();
        let raw = base64::engine::general_purpose::STANDARD
            .decode(h.as_bytes())
            .unwrap();
        let v: Value = serde_json::from_slice(&raw).unwrap();
        assert_eq!(v, serde_json::json!({"KEY": {"value": "v"}}));
        assert!(h.is_sensitive());
    }
}
