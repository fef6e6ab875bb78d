//! `ors mcp --http ADDR`: MCP over streamable HTTP at `/mcp`, one ORS episode per MCP session.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::{Arc, Mutex, Weak};

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use ors_client::Error;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use super::episode::{Episode, EpisodeSpec};
use super::handler::{EpisodeServer, Eras};

/// The MCP endpoint.
pub const PATH: &str = "/mcp";

/// The episodes of live MCP sessions, so a shutdown deletes them all.
#[derive(Default)]
struct Episodes(Mutex<Vec<Weak<Episode>>>);

impl Episodes {
    fn add(&self, episode: &Arc<Episode>) {
        if let Ok(mut all) = self.0.lock() {
            all.retain(|w| w.strong_count() > 0);
            all.push(Arc::downgrade(episode));
        }
    }

    fn live(&self) -> Vec<Arc<Episode>> {
        self.0
            .lock()
            .map(|all| all.iter().filter_map(Weak::upgrade).collect())
            .unwrap_or_default()
    }
}

/// Serve until SIGTERM/SIGINT; then end every MCP session and delete its ORS session.
pub async fn serve(spec: EpisodeSpec, addr: SocketAddr) -> Result<ExitCode, Error> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| Error::InvalidArgument(format!("cannot listen on {addr}: {e}")))?;
    let local = listener
        .local_addr()
        .map_err(|e| Error::InvalidArgument(format!("cannot listen on {addr}: {e}")))?;
    let stop = CancellationToken::new();
    let episodes = Arc::new(Episodes::default());
    let factory_episodes = Arc::clone(&episodes);
    let config = StreamableHttpServerConfig::default()
        .with_cancellation_token(stop.child_token())
        // The address the operator chose to listen on is the one clients name.
        .disable_allowed_hosts();
    let service = StreamableHttpService::new(
        move || {
            let episode = Arc::new(Episode::new(spec.clone()));
            factory_episodes.add(&episode);
            Ok(EpisodeServer::new(episode, Eras::Handshake).closing_on_drop())
        },
        Arc::new(LocalSessionManager::default()),
        config,
    );
    // Over HTTP stdout is free, so the ready line goes there, as ors-server's does.
    println!("ors mcp listening on http://{local}{PATH}");
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    continue;
                }
            },
            () = super::shutdown_signal() => break,
        };
        let service = service.clone();
        let conn_stop = stop.clone();
        tokio::spawn(async move {
            let svc = service_fn(move |req: Request<Incoming>| {
                let service = service.clone();
                async move {
                    if req.uri().path() != PATH {
                        return Ok::<_, Infallible>(not_found());
                    }
                    let delete = req.method() == Method::DELETE;
                    let mut response = service.handle(req).await;
                    // rmcp acknowledges a session's deletion with 202; the Python SDK's
                    // client expects 200 or 204 and logs anything else as a failure. The
                    // deletion is done, so say so.
                    if delete && response.status() == StatusCode::ACCEPTED {
                        *response.status_mut() = StatusCode::NO_CONTENT;
                    }
                    Ok(response)
                }
            });
            let conn = http1::Builder::new().serve_connection(TokioIo::new(stream), svc);
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

fn not_found() -> Response<BoxBody<Bytes, Infallible>> {
    let mut response = Response::new(
        Full::new(Bytes::from(format!(
            "Not Found: the MCP endpoint is {PATH}"
        )))
        .boxed(),
    );
    *response.status_mut() = StatusCode::NOT_FOUND;
    response
}
