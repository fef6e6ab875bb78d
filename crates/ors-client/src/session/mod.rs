//! Sessions (episodes), opened on an [`Environment`] for a [`TaskRef`]: creation in both reply
//! forms, the background ping, death detection, prompt, tools, calls, and deletion.

use std::future::{Future, IntoFuture};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use futures_util::future::BoxFuture;
use ors_core::protocol::routes;
use ors_core::{
    Blocks, CreateSession, ErrorCode, GroupCandidate, GroupScore, ListToolsOutput, Message,
    RunToolOutput, ScoreGroupOutput, Secrets, TerminalToolSpec, ToolOutput, ToolSpec,
};
use serde::Serialize;
use serde_json::Value;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::call::{object_input, run_call, CallSpec, Payload, Progress, ProgressFn};
use crate::client::Environment;
use crate::config::SecretsMode;
use crate::error::{Error, Result};
use crate::http::{Req, Retry};

mod create;
mod life;
mod task;

use create::{create_request, create_session_id, refuses_body_secrets, release_id};
use life::{delete, ping_loop, Shared};
pub use task::TaskRef;

impl Environment {
    /// Start opening a session on a task: `env.session(TaskRef::at("test", 0)).await?`, or add
    /// secrets and a progress callback on the builder first.
    pub fn session(&self, task: impl Into<TaskRef>) -> SessionBuilder {
        SessionBuilder {
            env: self.clone(),
            task: task.into(),
            secrets: Secrets::default(),
            progress: None,
            toolset: None,
        }
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
    setters! { []
        /// One of the environment's named toolsets for this session (`toolset_name`,
        /// PROTOCOL_NOTES row `toolset-name`); a server answers 400 for a name the environment
        /// does not define.
        toolset: Some(impl Into<String>);
        /// Secrets for the environment (API keys it needs); never logged.
        secrets: Secrets;
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
        let mut body = match self.task.clone().checked()? {
            TaskRef::Spec(v) => CreateSession::from_task(v),
            TaskRef::At { split, index } => CreateSession::from_split(split, index),
        }
        .env(self.env.name());
        body.toolset_name = self.toolset.clone();

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
        let every = http.cfg.ping_interval;
        let ping = every.map(|every| tokio::spawn(ping_loop(Arc::clone(&shared), every)));
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
        tokio::select! {
            biased;
            r = fut => r,
            reason = self.terminated() => {
                Err(Error::SessionTerminated { sid: self.shared.sid.clone(), reason })
            }
        }
    }

    /// [`Session::guarded`] of a request to a route a server may lack: `None` when it does
    /// ([`Session::route_missing`]).
    async fn optional<T>(&self, fut: impl Future<Output = Result<T>>) -> Result<Option<T>> {
        match self.guarded_raw(fut).await {
            Ok(out) => Ok(Some(out)),
            Err(e) if self.route_missing(&e).await => Ok(None),
            Err(e) => Err(self.shared.absorb(e)),
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
            None => self.shared.post(routes::PING).await.is_ok(),
        }
    }

    /// `GET /{env}/prompt`: the blocks that start the episode.
    pub async fn prompt(&self) -> Result<Blocks> {
        self.guarded(self.shared.get(routes::PROMPT)).await
    }

    /// `GET /{env}/messages`: the prompt as a conversation (PROTOCOL_NOTES row
    /// `messages-route`); from a server without the route, one user message holding the prompt.
    pub async fn messages(&self) -> Result<Vec<Message>> {
        match self.optional(self.shared.get(routes::MESSAGES)).await? {
            Some(messages) => Ok(messages),
            None => Ok(vec![Message::user(self.prompt().await?)]),
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
        if !self.shared.no_task_tools.load(Ordering::Relaxed) {
            match self.optional(self.shared.get(routes::TASK_TOOLS)).await? {
                Some(out) => return Ok(out),
                None => self.shared.no_task_tools.store(true, Ordering::Relaxed),
            }
        }
        self.guarded(self.shared.env.listing()).await
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
        let input = object_input(input).map_err(|kind| {
            Error::InvalidArgument(format!("tool input must be a JSON object, got {kind}"))
        })?;
        let spec = CallSpec {
            req: Req::post(self.shared.env.path(routes::CALL)).sid(&self.shared.sid),
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
            req: Req::post(self.shared.env.path(routes::SCORE_GROUP)).sid(&self.shared.sid),
            name: "score_group",
            payload: Payload::ScoreGroup(&candidates),
            progress: None,
        };
        let call = run_call::<ScoreGroupOutput>(self.shared.http(), spec);
        let Some(out) = self.optional(call).await? else {
            return Err(Error::Unsupported {
                env: self.shared.env.name().to_owned(),
                capability: "score_group".to_owned(),
            });
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
        let shared = Arc::clone(&self.shared);
        drop(self); // stops the ping
        delete(&shared).await
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Some(ping) = &self.ping {
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
