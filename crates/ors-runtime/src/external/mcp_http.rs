//! rmcp's streamable-HTTP client transport over the runtime's HTTP client: rmcp drives the
//! MCP session (`Mcp-Session-Id`, streams, reconnects); this answers its three requests (POST
//! a message, GET the server's stream, DELETE the session) with hyper, bodies bounded by
//! `ors_core::body` and event streams decoded by ors-core's SSE decoder. A body or event over
//! its limit (or a stream that is not SSE) fails its request at once, and is recorded as why
//! the connection broke, so the calls say what the server sent and the limit.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::stream::{self, BoxStream, StreamExt};
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use http::{HeaderName, HeaderValue, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use ors_core::body::BodyError;
use ors_core::sse::{DecodeLimits, SseDecoder};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::common::http_header::{
    EVENT_STREAM_MIME_TYPE, HEADER_LAST_EVENT_ID, HEADER_SESSION_ID, JSON_MIME_TYPE,
};
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use sse_stream::{Error as SseStreamError, Sse};

use super::http::{header_text, read_body, HttpClient, ReadError, SendError};
use super::mcp_stdio::Broken;

/// The runtime's HTTP client as rmcp's, remembering why its connection broke.
#[derive(Clone)]
pub(crate) struct McpHttpClient {
    http: HttpClient,
    broken: Broken,
}

impl McpHttpClient {
    /// A client recording into `broken` the first message it refused.
    pub(crate) fn new(broken: Broken) -> Self {
        Self {
            http: HttpClient::new(),
            broken,
        }
    }

    /// Read a body within `max`, recording a body over it as why the connection broke.
    async fn body(
        &self,
        resp: http::Response<Incoming>,
        max: usize,
    ) -> std::result::Result<Vec<u8>, McpHttpError> {
        read_body(resp, max).await.map_err(|e| {
            if let ReadError::Bounds(BodyError::TooLarge { .. }) = e {
                let _ = self.broken.set(format!(
                    "sent a message (a JSON body) of more than {max} bytes, the limit \
                     (McpServer::max_line_bytes)"
                ));
            }
            McpHttpError::from(e)
        })
    }

    /// Send a request built by [`request`].
    async fn send(
        &self,
        req: http::request::Builder,
        body: Bytes,
    ) -> std::result::Result<http::Response<Incoming>, McpHttpError> {
        let req = req
            .body(Full::new(body))
            .map_err(|e| McpHttpError::Build(e.to_string()))?;
        Ok(self.http.send(req).await?)
    }
}

/// Why a request of the MCP transport failed.
#[derive(Debug, thiserror::Error)]
pub enum McpHttpError {
    /// No response.
    #[error(transparent)]
    Send(#[from] SendError),
    /// A body could not be read.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// The request could not be built.
    #[error("building the request: {0}")]
    Build(String),
}

impl From<McpHttpError> for StreamableHttpError<McpHttpError> {
    fn from(e: McpHttpError) -> Self {
        StreamableHttpError::Client(e)
    }
}

type Result<T> = std::result::Result<T, StreamableHttpError<McpHttpError>>;

fn content_type_is(resp: &http::Response<Incoming>, mime: &str) -> bool {
    header_text(resp, CONTENT_TYPE)
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case(mime))
}

/// A request of the MCP session: its id, the bearer token and rmcp's own headers.
fn request(
    method: Method,
    uri: &str,
    sid: Option<&str>,
    auth: Option<String>,
    headers: HashMap<HeaderName, HeaderValue>,
) -> http::request::Builder {
    let mut req = Request::builder().method(method).uri(uri);
    if let Some(sid) = sid {
        req = req.header(HEADER_SESSION_ID, sid);
    }
    if let Some(token) = auth {
        req = req.header(AUTHORIZATION, format!("Bearer {token}"));
    }
    headers
        .into_iter()
        .fold(req, |req, (name, value)| req.header(name, value))
}

/// An event stream as rmcp's events, each at most `max_event` bytes; a stream that breaks
/// that (or is not SSE) ends with an error, recorded in `broken`.
fn sse_events(body: Incoming, max_event: usize, broken: Broken) -> SseEvents {
    let decoder = SseDecoder::with_limits(DecodeLimits::bounded(max_event));
    // The events of each frame; after an error, the stream ends (the state is `None`).
    stream::unfold(Some((body, decoder)), move |state| {
        let broken = Arc::clone(&broken);
        async move {
            let (mut body, mut decoder) = state?;
            let frame = match body.frame().await? {
                Ok(frame) => frame,
                Err(e) => return Some((vec![Err(SseStreamError::Body(Box::new(e)))], None)),
            };
            // A frame of trailers holds no events.
            let Ok(data) = frame.into_data() else {
                return Some((Vec::new(), Some((body, decoder))));
            };
            match decoder.try_push(&data) {
                Ok(events) => {
                    let events = events.into_iter().filter(|e| !e.data.is_empty());
                    let events = events.map(|e| Ok(Sse::default().event(e.event).data(e.data)));
                    Some((events.collect(), Some((body, decoder))))
                }
                Err(e) => {
                    let _ = broken.set(format!(
                        "sent an event stream the client refused ({e}; a message may have at \
                         most {max_event} bytes, McpServer::max_line_bytes)"
                    ));
                    Some((vec![Err(SseStreamError::Body(Box::new(e)))], None))
                }
            }
        }
    })
    .flat_map(stream::iter)
    .boxed()
}

/// rmcp's event stream.
type SseEvents = BoxStream<'static, std::result::Result<Sse, SseStreamError>>;

impl StreamableHttpClient for McpHttpClient {
    type Error = McpHttpError;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        sid: Option<Arc<str>>,
        auth: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse> {
        let limits = StreamableHttpResponseLimits::default();
        self.post_message_with_response_limits(uri, message, sid, auth, headers, limits)
            .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        sid: Option<Arc<str>>,
        auth: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse> {
        let body = Bytes::from(serde_json::to_vec(&message)?);
        let req = request(Method::POST, &uri, sid.as_deref(), auth, headers)
            .header(CONTENT_TYPE, JSON_MIME_TYPE)
            .header(
                ACCEPT,
                format!("{EVENT_STREAM_MIME_TYPE}, {JSON_MIME_TYPE}"),
            );
        let resp = self.send(req, body).await?;
        let status = resp.status();
        if matches!(status, StatusCode::ACCEPTED | StatusCode::NO_CONTENT) {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if status == StatusCode::NOT_FOUND && sid.is_some() {
            return Err(StreamableHttpError::SessionExpired);
        }
        let new_session = header_text(&resp, HEADER_SESSION_ID).map(str::to_owned);
        let is_json = content_type_is(&resp, JSON_MIME_TYPE);
        if !status.is_success() {
            let bytes = self.body(resp, limits.max_json_response_size).await?;
            // A JSON-RPC error carried by an error status is the server's answer.
            if is_json {
                if let Ok(msg @ ServerJsonRpcMessage::Error(_)) = serde_json::from_slice(&bytes) {
                    return Ok(StreamableHttpPostResponse::Json(msg, new_session));
                }
            }
            let text = String::from_utf8_lossy(&bytes);
            let text = ors_core::text::preview(&text, limits.max_error_response_size.min(1024));
            return unexpected(format!("HTTP {status}: {text}"));
        }
        let awaits_no_response = !matches!(message, ClientJsonRpcMessage::Request(_));
        if content_type_is(&resp, EVENT_STREAM_MIME_TYPE) {
            let events = sse_events(
                resp.into_body(),
                limits.max_sse_event_size,
                Arc::clone(&self.broken),
            );
            return Ok(StreamableHttpPostResponse::Sse(events, new_session));
        }
        if is_json {
            let bytes = self.body(resp, limits.max_json_response_size).await?;
            return match serde_json::from_slice::<ServerJsonRpcMessage>(&bytes) {
                Ok(msg) => Ok(StreamableHttpPostResponse::Json(msg, new_session)),
                Err(_) if awaits_no_response => Ok(StreamableHttpPostResponse::Accepted),
                Err(e) => Err(StreamableHttpError::Deserialize(e)),
            };
        }
        if awaits_no_response {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        let ct = resp.headers().get(CONTENT_TYPE);
        let ct = ct.map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        Err(StreamableHttpError::UnexpectedContentType(ct))
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        sid: Arc<str>,
        auth: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<()> {
        let req = request(Method::DELETE, &uri, Some(&sid), auth, headers);
        match self.send(req, Bytes::new()).await?.status() {
            s if s.is_success() || s == StatusCode::METHOD_NOT_ALLOWED => Ok(()),
            s => unexpected(format!("deleting the MCP session answered HTTP {s}")),
        }
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        sid: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<SseEvents> {
        let max = StreamableHttpResponseLimits::default().max_sse_event_size;
        self.get_stream_with_max_sse_event_size(uri, sid, last_event_id, auth, headers, max)
            .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        sid: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<SseEvents> {
        let mut req = request(Method::GET, &uri, sid.as_deref(), auth, headers)
            .header(ACCEPT, EVENT_STREAM_MIME_TYPE);
        if let Some(id) = last_event_id {
            req = req.header(HEADER_LAST_EVENT_ID, id);
        }
        let resp = self.send(req, Bytes::new()).await?;
        let status = resp.status();
        if status == StatusCode::NOT_FOUND && sid.is_some() {
            return Err(StreamableHttpError::SessionExpired);
        }
        let sse = status.is_success() && content_type_is(&resp, EVENT_STREAM_MIME_TYPE);
        if status == StatusCode::METHOD_NOT_ALLOWED || (status.is_success() && !sse) {
            return Err(StreamableHttpError::ServerDoesNotSupportSse);
        }
        if !status.is_success() {
            return unexpected(format!(
                "opening the MCP event stream answered HTTP {status}"
            ));
        }
        let broken = Arc::clone(&self.broken);
        Ok(sse_events(resp.into_body(), max_sse_event_size, broken))
    }
}

/// rmcp's error for an answer it cannot use.
fn unexpected<T>(msg: String) -> Result<T> {
    Err(StreamableHttpError::UnexpectedServerResponse(msg.into()))
}
