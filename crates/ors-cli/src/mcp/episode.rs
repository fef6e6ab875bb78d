//! One ORS episode behind one MCP session: the ORS session, opened when the MCP client first
//! needs it (`initialize`, or the first request of a client that skips the handshake), and
//! deleted when the MCP session ends.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ors_client::{Environment, Error, RunToolOutput, Secrets, Session, TaskRef, ToolSpec};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// What opens an episode: the environment, the task and the secrets. Shared by every MCP
/// session of an `ors mcp --http` process.
#[derive(Clone)]
pub struct EpisodeSpec {
    /// The environment on the ORS server.
    pub env: Environment,
    /// The task of every episode.
    pub task: TaskRef,
    /// Secrets sent on `/create`.
    pub secrets: Secrets,
}

/// Why a request of the MCP client cannot be answered with a tool result.
#[derive(Debug)]
pub enum EpisodeError {
    /// A tool reported `finished`: the episode takes no more calls.
    Finished,
    /// The ORS session could not be opened, or the server failed.
    Ors(Error),
}

impl std::fmt::Display for EpisodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EpisodeError::Finished => f.write_str(
                "episode finished: a tool call ended this ORS episode, so it takes no more calls",
            ),
            EpisodeError::Ors(e) => write!(f, "ORS: {e}"),
        }
    }
}

/// The ORS side of one MCP session.
pub struct Episode {
    spec: EpisodeSpec,
    /// The open session; `None` before the first need and after `close`.
    session: Mutex<Option<Arc<Session>>>,
    /// Serialises opening, so two concurrent first requests open one session.
    opening: tokio::sync::Mutex<()>,
    /// The session's tools, fetched once (they are fixed for an episode).
    tools: tokio::sync::OnceCell<Vec<ToolSpec>>,
    finished: AtomicBool,
    closed: AtomicBool,
    /// Fires on `close`, ending calls still running.
    shutdown: CancellationToken,
}

impl Episode {
    /// An episode not opened yet.
    pub fn new(spec: EpisodeSpec) -> Self {
        Self {
            spec,
            session: Mutex::new(None),
            opening: tokio::sync::Mutex::new(()),
            tools: tokio::sync::OnceCell::new(),
            finished: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            shutdown: CancellationToken::new(),
        }
    }

    /// The environment's name.
    pub fn env_name(&self) -> &str {
        self.spec.env.name()
    }

    fn current(&self) -> Option<Arc<Session>> {
        self.session.lock().ok().and_then(|s| s.clone())
    }

    /// The ORS session, opened on first use.
    pub async fn session(&self) -> Result<Arc<Session>, EpisodeError> {
        if let Some(s) = self.current() {
            return Ok(s);
        }
        let _guard = self.opening.lock().await;
        if let Some(s) = self.current() {
            return Ok(s);
        }
        if self.closed.load(Ordering::SeqCst) {
            return Err(EpisodeError::Ors(Error::InvalidArgument(
                "the MCP session has ended".into(),
            )));
        }
        let session = self
            .spec
            .env
            .session(self.spec.task.clone())
            .secrets(self.spec.secrets.clone())
            .open()
            .await
            .map_err(EpisodeError::Ors)?;
        tracing::info!(
            sid = session.sid(),
            env = self.env_name(),
            "ORS session opened"
        );
        let session = Arc::new(session);
        if let Ok(mut slot) = self.session.lock() {
            *slot = Some(Arc::clone(&session));
        }
        Ok(session)
    }

    /// The episode's tools (`task_tools`), unchanged.
    pub async fn tools(&self) -> Result<&[ToolSpec], EpisodeError> {
        let session = self.session().await?;
        self.tools
            .get_or_try_init(|| async move { session.tools().await })
            .await
            .map(Vec::as_slice)
            .map_err(EpisodeError::Ors)
    }

    /// The episode's prompt.
    pub async fn prompt(&self) -> Result<ors_client::Blocks, EpisodeError> {
        let session = self.session().await?;
        session.prompt().await.map_err(EpisodeError::Ors)
    }

    /// Run one tool call; a result with `finished` ends the episode for later calls. Returns
    /// the result and the ORS session id.
    pub async fn call(
        &self,
        name: &str,
        input: Value,
    ) -> Result<(RunToolOutput, String), EpisodeError> {
        if self.finished.load(Ordering::SeqCst) {
            return Err(EpisodeError::Finished);
        }
        let session = self.session().await?;
        let out = tokio::select! {
            out = session.call_raw(name, input) => out.map_err(EpisodeError::Ors)?,
            () = self.shutdown.cancelled() => {
                return Err(EpisodeError::Ors(Error::InvalidArgument(
                    "the MCP session ended during the call".into(),
                )))
            }
        };
        if let RunToolOutput::Success(o) = &out {
            if o.finished {
                self.finished.store(true, Ordering::SeqCst);
            }
        }
        Ok((out, session.sid().to_owned()))
    }

    /// Delete the ORS session (if it was opened); later requests fail. Idempotent.
    pub async fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.shutdown.cancel();
        let taken = self.session.lock().ok().and_then(|mut s| s.take());
        let Some(mut session) = taken else { return };
        // Calls in flight hold the session for a moment after `shutdown` ends them; deleting
        // needs it alone. Should one still hold it, its drop deletes the session instead.
        for _ in 0..100 {
            match Arc::try_unwrap(session) {
                Ok(owned) => {
                    let sid = owned.sid().to_owned();
                    match owned.close().await {
                        Ok(()) => tracing::info!(sid = %sid, "ORS session deleted"),
                        Err(e) => {
                            tracing::warn!(sid = %sid, error = %e, "deleting the ORS session failed")
                        }
                    }
                    return;
                }
                Err(shared) => {
                    session = shared;
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        }
        tracing::warn!(
            sid = session.sid(),
            "a call still holds the ORS session; it is deleted when that call ends"
        );
    }
}

impl Drop for Episode {
    fn drop(&mut self) {
        // An MCP session dropped without `close` (an HTTP session that timed out): the
        // session's own drop deletes it on the server.
        self.shutdown.cancel();
    }
}
