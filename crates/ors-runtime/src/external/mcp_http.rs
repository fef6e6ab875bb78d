//! rmcp's streamable-HTTP client transport over the runtime's HTTP client: rmcp drives the
//! MCP session (`Mcp-Session-Id`, streams, reconnects); this answers its three requests (POST
//! a message, GET the server's stream, DELETE the session) with hyper, bodies bounded by
//! `ors_core::body` and event streams decoded by ors-core's SSE decoder. A body or event over
//! its limit (or a stream that is not SSE) fails its request at once, and is recorded as why
//! the connection broke, so the calls say what the server sent and the limit.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::stream::{self, BoxStream, StreamExt};
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use http::{HeaderName, HeaderValue, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
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

use super::http::{read_body, HttpClient, ReadError, SendError};
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
            if matches!(
                e,
                ReadError::Bounds(ors_core::body::BodyError::TooLarge { .. })
            ) {
                let _ = self.broken.set(format!(
                    "sent a message (a JSON body) of more than {max} bytes, the limit \
                     (McpServer::max_line_bytes)"
                ));
            }
            McpHttpError::from(e)
        })
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
    resp.headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case(mime))
}

fn session_header(resp: &http::Response<Incoming>) -> Option<String> {
    resp.headers()
        .get(HEADER_SESSION_ID)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

impl McpHttpClient {
    fn mcp_request(
        &self,
        method: Method,
        uri: &str,
        session_id: Option<&str>,
        auth: Option<String>,
        custom: HashMap<HeaderName, HeaderValue>,
    ) -> http::request::Builder {
        let mut req = Request::builder().method(method).uri(uri);
        if let Some(sid) = session_id {
            req = req.header(HEADER_SESSION_ID, sid);
        }
        if let Some(token) = auth {
            req = req.header(AUTHORIZATION, format!("Bearer {token}"));
        }
        for (name, value) in custom {
            req = req.header(name, value);
        }
        req
    }

    async fn mcp_send(
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

/// An event stream as rmcp's events, each at most `max_event` bytes; a stream that breaks
/// that (or is not SSE) ends with an error, recorded in `broken`.
fn sse_events(
    body: Incoming,
    max_event: usize,
    broken: Broken,
) -> BoxStream<'static, std::result::Result<Sse, SseStreamError>> {
    let decoder = SseDecoder::with_limits(DecodeLimits::bounded(max_event));
    let state = (
        body,
        decoder,
        std::collections::VecDeque::<Sse>::new(),
        false,
    );
    stream::unfold(
        state,
        move |(mut body, mut decoder, mut ready, mut done)| {
            let broken = Arc::clone(&broken);
            async move {
                let item = loop {
                    if let Some(ev) = ready.pop_front() {
                        break Ok(ev);
                    }
                    if done {
                        return None;
                    }
                    match body.frame().await {
                        None => done = true,
                        Some(Err(e)) => {
                            done = true;
                            break Err(SseStreamError::Body(Box::new(e)));
                        }
                        Some(Ok(frame)) => {
                            let Ok(data) = frame.into_data() else {
                                continue;
                            };
                            match decoder.try_push(&data) {
                                Ok(events) => ready.extend(
                                    events.into_iter().filter(|e| !e.data.is_empty()).map(|e| {
                                        Sse {
                                            event: Some(e.event),
                                            data: Some(e.data),
                                            id: None,
                                            retry: None,
                                        }
                                    }),
                                ),
                                Err(e) => {
                                    done = true;
                                    let _ = broken.set(format!(
                                        "sent an event stream the client refused ({e}; a message \
                                     may have at most {max_event} bytes, \
                                     McpServer::max_line_bytes)"
                                    ));
                                    break Err(SseStreamError::Body(Box::new(e)));
                                }
                            }
                        }
                    }
                };
                Some((item, (body, decoder, ready, done)))
            }
        },
    )
    .boxed()
}

impl StreamableHttpClient for McpHttpClient {
    type Error = McpHttpError;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse> {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse> {
        let body = Bytes::from(serde_json::to_vec(&message)?);
        let had_session = session_id.is_some();
        let req = self
            .mcp_request(
                Method::POST,
                &uri,
                session_id.as_deref(),
                auth_header,
                custom_headers,
            )
            .header(CONTENT_TYPE, JSON_MIME_TYPE)
            .header(
                ACCEPT,
                format!("{EVENT_STREAM_MIME_TYPE}, {JSON_MIME_TYPE}"),
            );
        let resp = self.mcp_send(req, body).await?;
        let status = resp.status();
        if matches!(status, StatusCode::ACCEPTED | StatusCode::NO_CONTENT) {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if status == StatusCode::NOT_FOUND && had_session {
            return Err(StreamableHttpError::SessionExpired);
        }
        let new_session = session_header(&resp);
        if !status.is_success() {
            let is_json = content_type_is(&resp, JSON_MIME_TYPE);
            let bytes = self.body(resp, limits.max_json_response_size).await?;
            // A JSON-RPC error carried by an error status is the server's answer.
            if is_json {
                if let Ok(msg @ ServerJsonRpcMessage::Error(_)) =
                    serde_json::from_slice::<ServerJsonRpcMessage>(&bytes)
                {
                    return Ok(StreamableHttpPostResponse::Json(msg, new_session));
                }
            }
            let text = String::from_utf8_lossy(&bytes);
            let text = ors_core::text::preview(&text, limits.max_error_response_size.min(1024));
            return Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
                format!("HTTP {status}: {text}"),
            )));
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
        if content_type_is(&resp, JSON_MIME_TYPE) {
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
        let ct = resp
            .headers()
            .get(CONTENT_TYPE)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        Err(StreamableHttpError::UnexpectedContentType(ct))
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<()> {
        let req = self.mcp_request(
            Method::DELETE,
            &uri,
            Some(&session_id),
            auth_header,
            custom_headers,
        );
        let resp = self.mcp_send(req, Bytes::new()).await?;
        match resp.status() {
            s if s.is_success() || s == StatusCode::METHOD_NOT_ALLOWED => Ok(()),
            s => Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
                format!("deleting the MCP session answered HTTP {s}"),
            ))),
        }
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, std::result::Result<Sse, SseStreamError>>> {
        self.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default().max_sse_event_size,
        )
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, std::result::Result<Sse, SseStreamError>>> {
        let mut req = self
            .mcp_request(
                Method::GET,
                &uri,
                session_id.as_deref(),
                auth_header,
                custom_headers,
            )
            .header(ACCEPT, EVENT_STREAM_MIME_TYPE);
        if let Some(id) = last_event_id {
            req = req.header(HEADER_LAST_EVENT_ID, id);
        }
        let resp = self.mcp_send(req, Bytes::new()).await?;
        let status = resp.status();
        if status == StatusCode::METHOD_NOT_ALLOWED {
            return Err(StreamableHttpError::ServerDoesNotSupportSse);
        }
        if status == StatusCode::NOT_FOUND && session_id.is_some() {
            return Err(StreamableHttpError::SessionExpired);
        }
        if !status.is_success() {
            return Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
                format!("opening the MCP event stream answered HTTP {status}"),
            )));
        }
        if !content_type_is(&resp, EVENT_STREAM_MIME_TYPE) {
            return Err(StreamableHttpError::ServerDoesNotSupportSse);
        }
        Ok(sse_events(
            resp.into_body(),
            max_sse_event_size,
            Arc::clone(&self.broken),
        ))
    }
}
