//! [`ToolContext`]: what a running tool may know about its call.

use std::fmt;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// Progress sink handed to a [`ToolContext`] by the server.
pub type ProgressSink = Arc<dyn Fn(Value) + Send + Sync>;

/// What a server ties one call's context to: the call's progress stream and its
/// cancellation. One value per call, so the token can be made when a tool first asks for it:
/// most tools never do, and a child token takes its parent's lock when made and again when
/// dropped.
pub trait CallLink: Send + Sync {
    /// Send a `progress` event with this value to the call's streams.
    fn progress(&self, value: Value);
    /// The call's cancellation token, the same one each time.
    fn cancellation(&self) -> &CancellationToken;
}

/// What a running tool may know about its call: ids, cancellation, and a progress channel.
#[derive(Clone)]
pub struct ToolContext {
    session_id: Arc<str>,
    call_id: Arc<str>,
    link: Arc<dyn CallLink>,
    reasoning: Option<Arc<str>>,
}

/// The link of a context given its token and sink whole ([`ToolContext::new`]).
struct Parts {
    cancel: CancellationToken,
    progress: Option<ProgressSink>,
}

impl CallLink for Parts {
    fn progress(&self, value: Value) {
        if let Some(sink) = &self.progress {
            sink(value);
        }
    }

    fn cancellation(&self) -> &CancellationToken {
        &self.cancel
    }
}

impl fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolContext")
            .field("session_id", &self.session_id)
            .field("call_id", &self.call_id)
            .field("cancelled", &self.is_cancelled())
            .field("reasoning", &self.reasoning)
            .finish()
    }
}

impl ToolContext {
    /// A context given its token and progress sink whole (tests, direct dispatch); a server
    /// links each call's context with [`ToolContext::linked`] instead.
    pub fn new(
        session_id: impl Into<Arc<str>>,
        call_id: impl Into<Arc<str>>,
        cancel: CancellationToken,
        progress: Option<ProgressSink>,
    ) -> Self {
        Self::linked(session_id, call_id, Arc::new(Parts { cancel, progress }))
    }

    /// A context whose cancellation and progress are the server's `link` for this call.
    pub fn linked(
        session_id: impl Into<Arc<str>>,
        call_id: impl Into<Arc<str>>,
        link: Arc<dyn CallLink>,
    ) -> Self {
        Self {
            session_id: session_id.into(),
            call_id: call_id.into(),
            link,
            reasoning: None,
        }
    }

    /// This context carrying the model's `reasoning` for the call (what an environment with
    /// `#[environment(reasoning)]` takes out of the input before the tool's own fields are
    /// read).
    pub fn with_reasoning(mut self, reasoning: impl Into<Arc<str>>) -> Self {
        self.reasoning = Some(reasoning.into());
        self
    }

    /// Why the model says it made this call: the optional `reasoning` input every tool of an
    /// `#[environment(reasoning)]` environment accepts; `None` when it sent none.
    pub fn reasoning(&self) -> Option<&str> {
        self.reasoning.as_deref()
    }

    /// A context outside any server (tests, direct dispatch): never cancelled, progress dropped.
    pub fn detached() -> Self {
        Self::new("detached", "detached", CancellationToken::new(), None)
    }

    /// The session (episode) id.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// The id of this call (the SSE `task_id`).
    pub fn call_id(&self) -> &str {
        &self.call_id
    }

    /// The token that fires when the session is deleted or reaped, or the call times out.
    pub fn cancellation(&self) -> &CancellationToken {
        self.link.cancellation()
    }

    /// Whether the call has been cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.cancellation().is_cancelled()
    }

    /// Resolves when the call is cancelled; `select!` on it in long-running tools.
    pub async fn cancelled(&self) {
        self.cancellation().cancelled().await
    }

    /// Send a `progress` SSE event with this JSON value to the caller.
    pub fn progress(&self, value: impl Serialize) {
        let value = serde_json::to_value(value)
            .unwrap_or_else(|e| Value::String(format!("unserializable progress: {e}")));
        self.link.progress(value);
    }
}
