//! [`ToolContext`]: what a running tool may know about its call.

use std::fmt;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// Progress sink handed to a [`ToolContext`] by the server.
pub type ProgressSink = Arc<dyn Fn(Value) + Send + Sync>;

/// What a running tool may know about its call: ids, cancellation, and a progress channel.
#[derive(Clone)]
pub struct ToolContext {
    session_id: Arc<str>,
    call_id: Arc<str>,
    cancel: CancellationToken,
    progress: Option<ProgressSink>,
    reasoning: Option<Arc<str>>,
}

impl fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolContext")
            .field("session_id", &self.session_id)
            .field("call_id", &self.call_id)
            .field("cancelled", &self.cancel.is_cancelled())
            .field("reasoning", &self.reasoning)
            .finish()
    }
}

impl ToolContext {
    /// A context for the given session and call; the server builds these.
    pub fn new(
        session_id: impl Into<Arc<str>>,
        call_id: impl Into<Arc<str>>,
        cancel: CancellationToken,
        progress: Option<ProgressSink>,
    ) -> Self {
        Self {
            session_id: session_id.into(),
            call_id: call_id.into(),
            cancel,
            progress,
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
        &self.cancel
    }

    /// Whether the call has been cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Resolves when the call is cancelled; `select!` on it in long-running tools.
    pub async fn cancelled(&self) {
        self.cancel.cancelled().await
    }

    /// Send a `progress` SSE event with this JSON value to the caller.
    pub fn progress(&self, value: impl Serialize) {
        if let Some(sink) = &self.progress {
            match serde_json::to_value(value) {
                Ok(v) => sink(v),
                Err(e) => sink(Value::String(format!("unserializable progress: {e}"))),
            }
        }
    }
}
