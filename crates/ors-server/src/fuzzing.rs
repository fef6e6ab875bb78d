//! What the cargo-fuzz targets in `tools/fuzz/` reach inside the server (cargo feature `fuzzing`):
//! the route table, request-body and header parsing, and whole connections served from bytes
//! in memory. Not a public API: nothing outside `tools/fuzz/` may use it, and it changes freely.

use std::sync::Arc;

use http::HeaderMap;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use ors_core::types::Secrets;
use ors_runtime::env::DynEnvironment;
use serde::de::DeserializeOwned;
use tokio::io::{AsyncRead, AsyncWrite};

use crate::app::App;
use crate::config::ServerConfig;
use crate::error::{ApiError, ServerError};

pub use crate::router::{route, Endpoint, RouteMatch};

/// An error as the client sees it: its status and its `detail`.
pub type Refusal = (u16, String);

fn refusal(e: ApiError) -> Refusal {
    (e.status().as_u16(), e.to_string())
}

/// A request body parsed into its `ors-core` type, as every handler parses it.
pub fn parse_body<T: DeserializeOwned>(body: &[u8]) -> Result<T, Refusal> {
    crate::request::parse_body(body).map_err(refusal)
}

/// The `X-Session-ID` of a request, as every session route reads it.
pub fn session_id(headers: &HeaderMap) -> Result<String, Refusal> {
    crate::request::session_id(headers)
        .map(str::to_owned)
        .map_err(refusal)
}

/// The `X-Secrets` of a request.
pub fn header_secrets(headers: &HeaderMap) -> Result<Option<Secrets>, Refusal> {
    crate::request::header_secrets(headers).map_err(refusal)
}

/// Whether a request asks for `text/event-stream`.
pub fn wants_sse(headers: &HeaderMap) -> bool {
    crate::request::wants_sse(headers)
}

/// A server without a listener: it serves connections handed to it (an in-memory duplex
/// stream), with the connection settings of the real accept loop. No reaper runs.
pub struct Harness {
    app: Arc<App>,
    builder: hyper::server::conn::http1::Builder,
}

impl Harness {
    /// A server for these settings and environments (the first is the default).
    pub fn new(
        config: ServerConfig,
        envs: Vec<Arc<dyn DynEnvironment>>,
    ) -> Result<Self, ServerError> {
        let builder = crate::server::connection_builder(&config);
        let app = Arc::new(App::new(config, envs)?);
        Ok(Self { app, builder })
    }

    /// Serve one connection until the client leaves or the connection fails.
    pub async fn serve<I>(&self, io: I)
    where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let app = Arc::clone(&self.app);
        let activity = Arc::new(crate::connection::Activity::default());
        let service = service_fn(move |req| Arc::clone(&app).serve(req, activity.begin()));
        let conn = self.builder.serve_connection(TokioIo::new(io), service);
        let _ = conn.await;
    }
}
