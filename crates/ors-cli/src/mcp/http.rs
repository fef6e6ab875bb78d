//! `ors mcp --http ADDR`: MCP over streamable HTTP at `/mcp`, one ORS episode per MCP session.
//! Every request is checked first (bearer token, `Origin`, `Host`: see [`super::access`]);
//! sessions are bounded ([`super::episode::Slots`]) and end when idle.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE, WWW_AUTHENTICATE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use ors_client::Error;
use rmcp::transport::common::http_header::HEADER_SESSION_ID;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::{SessionId, SessionManager};
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::access::{Access, Refusal};
use super::episode::{Episode, EpisodeSpec};
use super::handler::{EpisodeServer, Eras};

/// The MCP endpoint.
pub const PATH: &str = "/mcp";

/// Connections open at once; one beyond is closed unanswered. Each holds at most a request
/// head ([`MAX_HEAD_BYTES`]) and a body (rmcp's 4 MiB) in memory, so with this cap a flood of
/// connections cannot take the process's memory or file descriptors (512 stays under the
/// common soft limit of 1024 open files, with room for the ORS connections).
pub const MAX_CONNECTIONS: usize = 512;

/// Largest request head (start line and headers); a larger one is 431.
pub const MAX_HEAD_BYTES: usize = 64 * 1024;

/// Time a request head may take to arrive; a slower connection is closed.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(30);

/// The episodes of live MCP sessions, so a shutdown deletes them all, and by MCP session id,
/// so a client's DELETE is answered once its episode is deleted.
#[derive(Default)]
struct Episodes {
    all: Mutex<Vec<Weak<Episode>>>,
    by_id: Mutex<HashMap<SessionId, Weak<Episode>>>,
}

impl Episodes {
    fn add(&self, episode: &Arc<Episode>) {
        if let Ok(mut all) = self.all.lock() {
            all.retain(|w| w.strong_count() > 0);
            all.push(Arc::downgrade(episode));
        }
    }

    /// Remember that the MCP session `id` holds `episode` (its `initialize` was answered).
    fn name(&self, id: SessionId, episode: &Arc<Episode>) {
        if let Ok(mut by_id) = self.by_id.lock() {
            by_id.retain(|_, w| w.strong_count() > 0);
            by_id.insert(id, Arc::downgrade(episode));
        }
    }

    /// The episode of the MCP session `id`, forgotten here.
    fn take(&self, id: &str) -> Option<Arc<Episode>> {
        self.by_id.lock().ok()?.remove(id)?.upgrade()
    }

    fn live(&self) -> Vec<Arc<Episode>> {
        self.all
            .lock()
            .map(|all| all.iter().filter_map(Weak::upgrade).collect())
            .unwrap_or_default()
    }
}

tokio::task_local! {
    /// The episode the service factory made while answering this request (an `initialize`).
    static CREATED: Arc<Mutex<Option<Arc<Episode>>>>;
}

/// The `Host` names a request may carry: the address listened on (and `localhost` on a
/// loopback address), so a DNS-rebound name is refused; any (none listed, which rmcp takes as
/// no check), on an unspecified address.
fn allowed_hosts(addr: SocketAddr) -> Vec<String> {
    let ip = addr.ip();
    if ip.is_unspecified() {
        return Vec::new();
    }
    let mut hosts = vec![ip.to_string()];
    if ip.is_loopback() {
        hosts.push("localhost".to_owned());
    }
    hosts
}

/// Serve on `addr` to whom `access` lets in until SIGTERM/SIGINT; then end every MCP session
/// and delete its ORS session. A session without a request (none running) for `idle_timeout`
/// ends, its ORS episode with it; `None`: never.
pub async fn serve(
    spec: EpisodeSpec,
    addr: SocketAddr,
    access: Access,
    idle_timeout: Option<Duration>,
) -> Result<ExitCode, Error> {
    let cannot = |e| Error::InvalidArgument(format!("cannot listen on {addr}: {e}"));
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(cannot)?;
    let local = listener.local_addr().map_err(cannot)?;
    let stop = CancellationToken::new();
    let episodes = Arc::new(Episodes::default());
    let factory_episodes = Arc::clone(&episodes);
    let config = StreamableHttpServerConfig::default()
        .with_cancellation_token(stop.child_token())
        .with_allowed_hosts(allowed_hosts(local));
    // Idle sessions are ended by `expire_when_idle`, which, unlike rmcp's keep-alive, knows
    // that a session waiting for a long tool call is not idle.
    let mut manager = LocalSessionManager::default();
    manager.session_config.keep_alive = None;
    let manager = Arc::new(manager);
    let service = StreamableHttpService::new(
        move || {
            let episode = Arc::new(Episode::new(spec.clone()));
            factory_episodes.add(&episode);
            let _ = CREATED.try_with(|slot| {
                if let Ok(mut slot) = slot.lock() {
                    *slot = Some(Arc::clone(&episode));
                }
            });
            Ok(EpisodeServer::new(episode, Eras::Handshake).closing_on_drop())
        },
        Arc::clone(&manager),
        config,
    );
    // What answering a request needs, shared by every connection.
    let shared = Arc::new((service, access, manager, Arc::clone(&episodes)));
    // Over HTTP stdout is free, so the ready line goes there, as ors-server's does.
    println!("ors mcp listening on http://{local}{PATH}");
    let connections = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    continue;
                }
            },
            () = crate::shutdown::signal() => break,
        };
        let Ok(open) = Arc::clone(&connections).try_acquire_owned() else {
            tracing::warn!(%peer, max = MAX_CONNECTIONS, "too many connections: closing one");
            drop(stream);
            continue;
        };
        let shared = Arc::clone(&shared);
        let conn_stop = stop.clone();
        tokio::spawn(async move {
            let svc = service_fn(move |req: Request<Incoming>| {
                let shared = Arc::clone(&shared);
                async move {
                    let (service, access, manager, episodes) = &*shared;
                    if req.uri().path() != PATH {
                        let body = format!("Not Found: the MCP endpoint is {PATH}");
                        return Ok::<_, Infallible>(text(StatusCode::NOT_FOUND, body));
                    }
                    if let Err(refusal) = access.check(req.headers()) {
                        return Ok(refused(&refusal));
                    }
                    let deleted = (req.method() == Method::DELETE)
                        .then(|| session_id(req.headers()).map(str::to_owned))
                        .flatten();
                    let created = Arc::new(Mutex::new(None));
                    let mut response = CREATED
                        .scope(Arc::clone(&created), service.handle(req))
                        .await;
                    let episode = created.lock().ok().and_then(|mut c| c.take());
                    let id = session_id(response.headers()).map(SessionId::from);
                    if let (Some(episode), Some(id)) = (episode, id) {
                        episodes.name(id.clone(), &episode);
                        if let Some(idle) = idle_timeout {
                            tokio::spawn(expire_when_idle(episode, id, idle, Arc::clone(manager)));
                        }
                    }
                    if let Some(id) = deleted.filter(|_| response.status().is_success()) {
                        // rmcp ends the session's handler without waiting for it; the
                        // answer waits until the ORS session is deleted and its place
                        // free, so an initialize sent next finds room.
                        if let Some(episode) = episodes.take(&id) {
                            episode.close().await;
                        }
                        // rmcp acknowledges a deletion with 202; the Python SDK's client
                        // expects 200 or 204 and logs anything else as a failure. The
                        // deletion is done, so say so.
                        if response.status() == StatusCode::ACCEPTED {
                            *response.status_mut() = StatusCode::NO_CONTENT;
                        }
                    }
                    Ok(response)
                }
            });
            let _open = open;
            let conn = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEAD_TIMEOUT)
                .max_header_size(MAX_HEAD_BYTES)
                .max_buf_size(MAX_HEAD_BYTES + 8192)
                .serve_connection(TokioIo::new(stream), svc);
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                () = conn_stop.cancelled() => conn.as_mut().graceful_shutdown(),
            }
        });
    }
    stop.cancel();
    for episode in episodes.live() {
        episode.close().await;
    }
    Ok(ExitCode::SUCCESS)
}

/// End the MCP session `id` (and so its ORS episode) once it has been idle for `idle`.
async fn expire_when_idle(
    episode: Arc<Episode>,
    id: SessionId,
    idle: Duration,
    manager: Arc<LocalSessionManager>,
) {
    if !episode.idle_for(idle).await {
        return;
    }
    tracing::info!(
        mcp_session = %id,
        idle_secs = idle.as_secs(),
        "the MCP session is idle: ending it and its ORS episode"
    );
    if let Err(e) = manager.close_session(&id).await {
        tracing::debug!(mcp_session = %id, error = %e, "closing the idle MCP session");
    }
    episode.close().await;
}

/// The MCP session id a request or response names.
fn session_id(headers: &hyper::HeaderMap) -> Option<&str> {
    headers.get(HEADER_SESSION_ID)?.to_str().ok()
}

/// 401 (with `WWW-Authenticate: Bearer`) or 403, saying what to change; logged.
fn refused(refusal: &Refusal) -> Response<BoxBody<Bytes, Infallible>> {
    let (status, reason) = match refusal {
        Refusal::Unauthorized => (StatusCode::UNAUTHORIZED, "no valid bearer token"),
        Refusal::Origin(_) => (StatusCode::FORBIDDEN, "origin not allowed"),
    };
    tracing::warn!(reason = ?reason, "MCP request refused");
    let mut response = text(status, refusal.to_string());
    if status == StatusCode::UNAUTHORIZED {
        let bearer = HeaderValue::from_static("Bearer");
        response.headers_mut().insert(WWW_AUTHENTICATE, bearer);
    }
    response
}

/// A plain-text answer.
fn text(status: StatusCode, body: String) -> Response<BoxBody<Bytes, Infallible>> {
    let mut response = Response::new(Full::new(Bytes::from(body)).boxed());
    *response.status_mut() = status;
    let plain = HeaderValue::from_static("text/plain; charset=utf-8");
    response.headers_mut().insert(CONTENT_TYPE, plain);
    response
}
