//! A session's life: the state its handle and its ping task share, the background ping, how
//! an error answer is read as the session's death, and deleting it.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use ors_core::protocol::routes;
use ors_core::ErrorCode;
use serde::de::DeserializeOwned;
use tokio::sync::watch;

use super::task::TaskRef;
use crate::call::ProgressFn;
use crate::client::Environment;
use crate::error::{Error, Result};
use crate::http::{Http, Req, Retry};

/// Why a session died.
#[derive(Debug, Clone)]
pub(super) struct Death {
    pub(super) reason: String,
    /// The server said the session no longer exists, so deleting it is pointless.
    pub(super) gone: bool,
}

/// State shared by a session and its ping task.
pub(super) struct Shared {
    pub(super) env: Environment,
    pub(super) sid: String,
    pub(super) task: TaskRef,
    pub(super) progress: Option<ProgressFn>,
    pub(super) death: watch::Sender<Option<Death>>,
    pub(super) no_task_tools: AtomicBool,
}

impl Shared {
    pub(super) fn http(&self) -> &Http {
        &self.env.client().http
    }

    /// `GET /{env}{route}` of this session, its JSON answer decoded.
    pub(super) async fn get<T: DeserializeOwned>(&self, route: &str) -> Result<T> {
        let req = Req::get(self.env.path(route)).sid(&self.sid);
        self.http().json(&req, Retry::Idempotent).await
    }

    /// `POST {route}` of this session (`/ping`, `/delete`): safe to repeat, so retried.
    pub(super) async fn post(&self, route: &str) -> Result<()> {
        let req = Req::post(route).sid(&self.sid);
        self.http().fetch(&req, Retry::Idempotent).await.map(drop)
    }

    pub(super) fn mark_dead(&self, reason: String, gone: bool) {
        let changed = self.death.send_if_modified(|d| {
            let first = d.is_none();
            d.get_or_insert_with(|| Death {
                reason: reason.clone(),
                gone,
            });
            first
        });
        if changed {
            tracing::info!(sid = %self.sid, %reason, "session terminated");
        }
    }

    pub(super) fn terminated(&self) -> Option<Error> {
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
    pub(super) fn absorb(&self, e: Error) -> Error {
        if session_gone(&e) {
            self.mark_dead(format!("the server answered {e}"), true);
        } else if server_unreachable(&e) {
            self.mark_dead(format!("the server is unreachable: {e}"), false);
        } else {
            return e;
        }
        self.terminated().unwrap_or(e)
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

pub(super) async fn ping_loop(shared: Arc<Shared>, every: std::time::Duration) {
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let (reason, gone) = loop {
        ticker.tick().await;
        match shared.post(routes::PING).await {
            Ok(_) => {}
            Err(e) if session_gone(&e) => break (format!("ping answered {e}"), true),
            Err(e)
                if matches!(e, Error::Transport(_) | Error::Timeout(_))
                    || server_unreachable(&e) =>
            {
                break (format!("the server is unreachable: {e}"), false);
            }
            Err(e) => tracing::warn!(sid = %shared.sid, error = %e, "ping failed"),
        }
    };
    shared.mark_dead(reason, gone);
}

pub(super) async fn delete(shared: &Shared) -> Result<()> {
    if shared.death.borrow().as_ref().is_some_and(|d| d.gone) {
        return Ok(());
    }
    // Deleting twice is harmless (the second answers 410), so every failure may be retried.
    match shared.post(routes::DELETE).await {
        Ok(()) => tracing::debug!(sid = %shared.sid, "session deleted"),
        Err(e) if session_gone(&e) => {
            tracing::debug!(sid = %shared.sid, error = %e, "session already gone");
        }
        Err(e) => return Err(e),
    }
    Ok(())
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
}
