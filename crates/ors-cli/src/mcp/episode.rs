//! One ORS episode behind one MCP session: the ORS session, opened when the MCP client first
//! needs it (`initialize`, or the first request of a client that skips the handshake), and
//! deleted when the MCP session ends.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ors_client::{Environment, Error, RunToolOutput, Secrets, Session, TaskRef, ToolSpec};
use serde_json::Value;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
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
    /// What bounds the episodes open at once (`--max-sessions`); `None`: no bound (stdio).
    pub slots: Option<Slots>,
}

/// The episodes one `ors mcp --http` may hold open at once: one slot each, taken when its
/// ORS session opens and given back when it is deleted.
#[derive(Clone, Debug)]
pub struct Slots {
    free: Arc<Semaphore>,
    max: usize,
}

impl Slots {
    /// At most `max` episodes at once.
    pub fn new(max: usize) -> Self {
        Self {
            free: Arc::new(Semaphore::new(max)),
            max,
        }
    }
}

/// Why a request of the MCP client cannot be answered with a tool result.
#[derive(Debug, thiserror::Error)]
pub enum EpisodeError {
    /// A tool reported `finished`: the episode takes no more calls.
    #[error("episode finished: a tool call ended this ORS episode, so it takes no more calls")]
    Finished,
    /// Every slot is taken (`--max-sessions`): no ORS session was opened.
    #[error("ors mcp is serving its maximum of {0} MCP sessions (--max-sessions); end one (DELETE /mcp with its Mcp-Session-Id) or wait until one goes idle, then initialize again")]
    Full(usize),
    /// The ORS session could not be opened, or the server failed.
    #[error("ORS: {0}")]
    Ors(Error),
}

/// The ORS side of one MCP session.
pub struct Episode {
    spec: EpisodeSpec,
    /// The open session and its slot (given back on `close`); `None` before the first need
    /// and after `close`.
    session: Mutex<Option<(Arc<Session>, Option<OwnedSemaphorePermit>)>>,
    /// Serialises opening, so two concurrent first requests open one session.
    opening: tokio::sync::Mutex<()>,
    /// Held while the session is deleted, so every `close` returns only once it is deleted
    /// (and its slot given back), whichever of them did it.
    closing: tokio::sync::Mutex<()>,
    /// The session's tools, fetched once (they are fixed for an episode).
    tools: tokio::sync::OnceCell<Vec<ToolSpec>>,
    finished: AtomicBool,
    closed: AtomicBool,
    /// Fires on `close`, ending calls still running.
    shutdown: CancellationToken,
    /// When the MCP client last asked something, and whether it is waiting for an answer.
    activity: Arc<Activity>,
}

/// What tells an idle MCP session from a busy one: requests being answered, and when the last
/// one ended. A call running for an hour is not idle, whatever the timeout.
#[derive(Debug)]
pub struct Activity {
    busy: AtomicUsize,
    last: Mutex<Instant>,
    changed: Notify,
}

impl Activity {
    fn touch(&self) {
        if let Ok(mut last) = self.last.lock() {
            *last = Instant::now();
        }
        self.changed.notify_waiters();
    }

    /// When the session becomes idle for `timeout` if nothing happens, or `None` while a
    /// request is being answered.
    fn idle_at(&self, timeout: Duration) -> Option<Instant> {
        if self.busy.load(Ordering::SeqCst) > 0 {
            return None;
        }
        let last = self.last.lock().map_or_else(|_| Instant::now(), |l| *l);
        Some(last + timeout)
    }
}

/// Marks a request of the MCP client as being answered until dropped.
pub struct Busy(Arc<Activity>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.busy.fetch_sub(1, Ordering::SeqCst);
        self.0.touch();
    }
}

impl Episode {
    /// An episode not opened yet.
    pub fn new(spec: EpisodeSpec) -> Self {
        Self {
            spec,
            session: Mutex::new(None),
            opening: tokio::sync::Mutex::new(()),
            closing: tokio::sync::Mutex::new(()),
            tools: tokio::sync::OnceCell::new(),
            finished: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            shutdown: CancellationToken::new(),
            activity: Arc::new(Activity {
                busy: AtomicUsize::new(0),
                last: Mutex::new(Instant::now()),
                changed: Notify::new(),
            }),
        }
    }

    /// Count a request of the MCP client as being answered while the guard lives.
    pub fn busy(&self) -> Busy {
        self.activity.busy.fetch_add(1, Ordering::SeqCst);
        self.activity.touch();
        Busy(Arc::clone(&self.activity))
    }

    /// Wait until no request has been answered for `timeout` (none running meanwhile), or
    /// the episode is closed. True when it went idle.
    pub async fn idle_for(&self, timeout: Duration) -> bool {
        loop {
            // Registered before reading the state, so a change in between is not missed.
            let changed = self.activity.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let wake = async {
                match self.activity.idle_at(timeout) {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = self.shutdown.cancelled() => return false,
                () = changed => continue,
                () = wake => {
                    if self.activity.idle_at(timeout).is_some_and(|at| at <= Instant::now()) {
                        return true;
                    }
                }
            }
        }
    }

    /// The environment's name.
    pub fn env_name(&self) -> &str {
        self.spec.env.name()
    }

    /// The ORS session, opened on first use.
    pub async fn session(&self) -> Result<Arc<Session>, EpisodeError> {
        // Held only while the session opens: once it is open, taking it is immediate.
        let _guard = self.opening.lock().await;
        if let Some((s, _)) = self.session.lock().ok().as_deref().and_then(Option::as_ref) {
            return Ok(Arc::clone(s));
        }
        if self.closed.load(Ordering::SeqCst) {
            return Err(EpisodeError::Ors(Error::InvalidArgument(
                "the MCP session has ended".into(),
            )));
        }
        let slot = self.spec.slots.as_ref().map(|slots| {
            let free = Arc::clone(&slots.free);
            free.try_acquire_owned()
                .map_err(|_| EpisodeError::Full(slots.max))
        });
        let slot = slot.transpose()?;
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
        if let Ok(mut open) = self.session.lock() {
            *open = Some((Arc::clone(&session), slot));
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
        if matches!(&out, RunToolOutput::Success(o) if o.finished) {
            self.finished.store(true, Ordering::SeqCst);
        }
        Ok((out, session.sid().to_owned()))
    }

    /// Delete the ORS session (if it was opened); later requests fail. Idempotent, and every
    /// call returns once the session is deleted and its slot free: a client told its MCP
    /// session is deleted can initialize a new one at once.
    pub async fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.shutdown.cancel();
        let _closing = self.closing.lock().await;
        let taken = self.session.lock().ok().and_then(|mut s| s.take());
        // The slot is held until the session is deleted (the end of this function).
        let Some((mut session, _slot)) = taken else {
            return;
        };
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
                Err(shared) => session = shared,
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
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
