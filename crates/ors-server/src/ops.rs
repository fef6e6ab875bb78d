//! The operator routes, `/metrics` and `/ready`, and the drain a SIGTERM starts: no new
//! sessions, `/ready` 503, running episodes carry on until they end or the drain time is up.

use std::sync::atomic::Ordering;
use std::time::Duration;

use http::StatusCode;
use serde::Serialize;

use crate::app::App;
use crate::body::{self, Resp};
use crate::error::{to_json, ApiError};
use crate::handlers::Req;
use crate::router::METRICS;

/// The body of `/ready`.
#[derive(Serialize)]
struct Readiness {
    ready: bool,
    sessions: usize,
    max_sessions: usize,
}

impl App {
    /// `GET /ready`: 200 while the server takes new sessions, 503 (same body, `"ready":
    /// false`) while it drains or is at its session limit. `/health` stays liveness.
    pub(crate) async fn ready(&self, _: Req<'_>) -> Result<Resp, ApiError> {
        let ready = !self.is_closing() && !self.is_draining() && !self.sessions.is_full();
        let reply = to_json(&Readiness {
            ready,
            sessions: self.sessions.len(),
            max_sessions: self.config.max_sessions,
        })?;
        let status = if ready {
            StatusCode::OK
        } else {
            StatusCode::SERVICE_UNAVAILABLE
        };
        Ok(body::json_status(status, reply))
    }

    /// `GET /metrics`: the Prometheus text, or 404 when metrics are off.
    pub(crate) async fn metrics(&self, _: Req<'_>) -> Result<Resp, ApiError> {
        let Some(metrics) = &self.metrics else {
            return Err(ApiError::NoRoute {
                method: "GET".into(),
                path: format!("{METRICS} (metrics are off: ORS_METRICS=off)"),
            });
        };
        let per_env = self.sessions.count_by_env(self.envs.len());
        let draining = self.is_draining() || self.is_closing();
        metrics.render(self.stats(), &per_env, self.config.max_sessions, draining)
    }

    pub(crate) fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Acquire)
    }

    /// Wait until no session is left, or `within` has passed, or `skip` resolves (a second
    /// signal). Returns the sessions still live.
    pub(crate) async fn drained(&self, within: Duration, skip: impl std::future::Future) -> usize {
        let deadline = tokio::time::Instant::now() + within;
        tokio::pin!(skip);
        while self.sessions.len() > 0 && tokio::time::Instant::now() < deadline {
            tokio::select! {
                _ = &mut skip => break,
                _ = tokio::time::sleep(Duration::from_millis(50)) => {}
            }
        }
        self.sessions.len()
    }
}

/// The signals a server binary stops on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Signal {
    /// SIGINT (Ctrl-C): stop now, gracefully.
    Interrupt,
    /// SIGTERM (an orchestrator's stop): drain first.
    Terminate,
}

/// SIGINT and SIGTERM as they arrive; handlers are installed on creation, so a signal right
/// after is not missed.
pub(crate) struct Signals {
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
    #[cfg(unix)]
    terminate: tokio::signal::unix::Signal,
}

impl Signals {
    pub(crate) fn install() -> std::io::Result<Self> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            Ok(Self {
                interrupt: signal(SignalKind::interrupt())?,
                terminate: signal(SignalKind::terminate())?,
            })
        }
        #[cfg(not(unix))]
        Ok(Self {})
    }

    /// The next signal.
    pub(crate) async fn next(&mut self) -> Signal {
        #[cfg(unix)]
        {
            tokio::select! {
                _ = self.interrupt.recv() => Signal::Interrupt,
                _ = self.terminate.recv() => Signal::Terminate,
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            Signal::Interrupt
        }
    }
}
