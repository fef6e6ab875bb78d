//! The HTTP layer: one pooled hyper client, request building, redirects (same origin only),
//! error mapping, bounded body reading, and retries with exponential backoff and jitter.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::header::{
    HeaderName, HeaderValue, ACCEPT, CONTENT_TYPE, LOCATION, RETRY_AFTER, USER_AGENT,
};
use http::{Method, Request, Response, StatusCode, Uri};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::rt::TokioExecutor;
use serde::de::DeserializeOwned;

use crate::body::{BodyReader, Meter};
use crate::config::Config;
use crate::error::{Error, Result, SizeLimit};

use ors_core::protocol::{
    BACKEND_STARTING, HEADER_API_KEY, HEADER_BACKEND_STATE, HEADER_CLIENT_TASK_IDS,
    HEADER_SESSION_ID,
};

/// Redirects followed for one request, at most.
pub(crate) const MAX_REDIRECTS: usize = 5;
/// How much of an error answer's body is read for its detail.
pub(crate) const MAX_ERROR_BODY: usize = 64 * 1024;

/// Which failures may be repeated for a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Retry {
    /// Repeating changes nothing on the server: retry 5xx, 429, connection errors, timeouts.
    Idempotent,
    /// Repeating is only safe when the server certainly did not act: retry failed connects and
    /// the statuses that say "not processed" (429, 503).
    Refused,
}

/// How one attempt failed, for the retry decision.
#[derive(Debug)]
pub(crate) enum Failure {
    /// No connection could be made: the request was never sent.
    Connect(Error),
    /// The connection broke or the server misbehaved mid-request.
    Broken(Error),
    /// The attempt ran out of time.
    Timeout(Error),
    /// Repeating cannot help: the answer was too large or broke the protocol in a way that
    /// will not change (a redirect to another server, a header that never ends).
    Fatal(Error),
    /// The server answered with an error status.
    Status {
        /// The error, an [`Error::Http`].
        error: Error,
        /// The status code.
        status: u16,
        /// The server's `Retry-After`, in seconds.
        retry_after: Option<Duration>,
        /// A 503 with `X-Backend-State: starting`: the session's setup is still running.
        starting: bool,
    },
}

impl Failure {
    /// The error to give the caller.
    pub(crate) fn into_error(self) -> Error {
        match self {
            Failure::Connect(e) | Failure::Broken(e) | Failure::Timeout(e) | Failure::Fatal(e) => e,
            Failure::Status { error, .. } => error,
        }
    }

    /// Whether a request of this kind may be sent again after this failure.
    pub(crate) fn retryable(&self, retry: Retry) -> bool {
        match (self, retry) {
            (Failure::Fatal(_), _) => false,
            (Failure::Connect(_), _) => true,
            (Failure::Status { status, .. }, Retry::Refused) => *status == 429 || *status == 503,
            (Failure::Status { status, .. }, Retry::Idempotent) => *status == 429 || *status >= 500,
            (Failure::Broken(_) | Failure::Timeout(_), Retry::Idempotent) => true,
            (Failure::Broken(_) | Failure::Timeout(_), Retry::Refused) => false,
        }
    }

    /// Whether the server said the session is still being set up (PROTOCOL_NOTES row
    /// `slow-setup`).
    pub(crate) fn starting(&self) -> bool {
        matches!(self, Failure::Status { starting: true, .. })
    }

    /// The server's requested delay, if it gave one.
    pub(crate) fn retry_after(&self) -> Option<Duration> {
        match self {
            Failure::Status { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

/// One request to send: method, path below the base URL, headers and JSON body.
#[derive(Debug, Clone)]
pub(crate) struct Req {
    pub method: Method,
    pub path: String,
    pub body: Option<Bytes>,
    pub sid: Option<String>,
    pub accept: &'static str,
    pub extra: Vec<(HeaderName, HeaderValue)>,
    /// The base URL of another server (an agent's model server) instead of the ORS server's;
    /// the ORS API key is then not sent.
    pub base: Option<std::sync::Arc<str>>,
    /// A limit for this request instead of the configured request timeout.
    pub timeout: Option<Duration>,
}

/// How often and how patiently a request is repeated.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Backoff {
    /// Retries after the first attempt.
    pub retries: u32,
    /// First delay, doubled per retry, with jitter.
    pub base: Duration,
    /// Largest delay, and cap on a server's `Retry-After`.
    pub max: Duration,
}

impl Backoff {
    /// The delay before retry number `attempt + 1`: the server's `Retry-After` (capped), or
    /// exponential backoff with jitter.
    pub fn delay(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        match retry_after {
            Some(d) => d.min(self.max),
            None => backoff(attempt, self.base, self.max),
        }
    }
}

impl Req {
    /// A GET of `path` accepting JSON.
    pub fn get(path: impl Into<String>) -> Self {
        Self {
            method: Method::GET,
            path: path.into(),
            body: None,
            sid: None,
            accept: "application/json",
            extra: Vec::new(),
            base: None,
            timeout: None,
        }
    }

    /// A POST of `path` accepting JSON, without a body.
    pub fn post(path: impl Into<String>) -> Self {
        Self {
            method: Method::POST,
            ..Self::get(path)
        }
    }

    /// Set the JSON body.
    pub fn json(mut self, body: &impl serde::Serialize) -> Result<Self> {
        let bytes = serde_json::to_vec(body)
            .map_err(|e| Error::InvalidArgument(format!("request body is not JSON: {e}")))?;
        self.body = Some(Bytes::from(bytes));
        Ok(self)
    }

    /// Send the session id.
    pub fn sid(mut self, sid: &str) -> Self {
        self.sid = Some(sid.to_owned());
        self
    }

    /// Set the `Accept` header.
    pub fn accept(mut self, accept: &'static str) -> Self {
        self.accept = accept;
        self
    }

    /// Add a header.
    pub fn header(mut self, name: HeaderName, value: HeaderValue) -> Self {
        self.extra.push((name, value));
        self
    }

    /// Send to the server at `base` (not the ORS server), within `timeout` per attempt.
    pub fn elsewhere(mut self, base: std::sync::Arc<str>, timeout: Duration) -> Self {
        self.base = Some(base);
        self.timeout = Some(timeout);
        self
    }
}

/// The transport shared by every clone of a client.
pub(crate) struct Http {
    client: HyperClient<HttpsConnector<HttpConnector>, Full<Bytes>>,
    pub(crate) cfg: Config,
    /// The most bytes one response has held in this client's buffers.
    pub(crate) meter: Meter,
    /// Whether the server said it runs calls under ids clients choose (row `client-task-id`).
    client_task_ids: AtomicBool,
    /// The server refused secrets in the `/create` body: [`SecretsMode::Auto`] sends the header.
    pub(crate) secrets_in_header: AtomicBool,
}

impl Http {
    /// A pooled keep-alive client for `cfg`, speaking `https://` with `tls`.
    pub fn new(cfg: Config, tls: rustls::ClientConfig) -> Self {
        let mut connector = HttpConnector::new();
        // Tool calls are small request/response exchanges; Nagle only adds latency.
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(cfg.connect_timeout));
        connector.enforce_http(false);
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(connector);
        let client = HyperClient::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(60))
            .pool_max_idle_per_host(256)
            .build(connector);
        Self {
            client,
            cfg,
            meter: Meter::default(),
            client_task_ids: AtomicBool::new(false),
            secrets_in_header: AtomicBool::new(false),
        }
    }

    /// Whether the server runs a call under the `task_id` a client sends for it (its
    /// responses carry [`HEADER_CLIENT_TASK_IDS`]), so a call may be named and resent.
    pub(crate) fn takes_client_task_ids(&self) -> bool {
        self.client_task_ids.load(Ordering::Relaxed)
    }

    fn build(&self, req: &Req, uri: &Uri) -> Result<Request<Full<Bytes>>> {
        let mut b = Request::builder()
            .method(req.method.clone())
            .uri(uri.clone())
            .header(ACCEPT, req.accept)
            .header(USER_AGENT, &self.cfg.user_agent);
        if let Some(key) = self.cfg.api_key.as_ref().filter(|_| req.base.is_none()) {
            let mut v = HeaderValue::from_str(key).map_err(|_| {
                Error::InvalidArgument("the API key has characters a header cannot carry".into())
            })?;
            v.set_sensitive(true);
            b = b.header(HEADER_API_KEY, v);
        }
        if let Some(sid) = &req.sid {
            let v = HeaderValue::from_str(sid).map_err(|_| {
                Error::InvalidArgument(format!("session id {sid:?} cannot be sent in a header"))
            })?;
            b = b.header(HEADER_SESSION_ID, v);
        }
        for (k, v) in &req.extra {
            b = b.header(k, v);
        }
        let body = match &req.body {
            Some(bytes) => {
                b = b.header(CONTENT_TYPE, "application/json");
                Full::new(bytes.clone())
            }
            None => Full::new(Bytes::new()),
        };
        b.body(body)
            .map_err(|e| Error::InvalidArgument(format!("cannot build request for {uri}: {e}")))
    }

    /// Send one attempt and wait for the response head (within `head_timeout`, redirects
    /// included). Error statuses are returned as responses; the caller decides.
    pub async fn send_once(
        &self,
        req: &Req,
        head_timeout: Duration,
    ) -> std::result::Result<Response<Incoming>, Failure> {
        match tokio::time::timeout(head_timeout, self.send_following(req)).await {
            Err(_) => Err(Failure::Timeout(Error::Timeout(format!(
                "no response to {} {} within {:?}",
                req.method, req.path, head_timeout
            )))),
            Ok(r) => r,
        }
    }

    /// Send, following `307`/`308` redirects (and `301`/`302`/`303` of a GET) within the
    /// server's origin, at most [`MAX_REDIRECTS`] of them: the reference server redirects
    /// some paths, and a redirect elsewhere would hand the API key and session id to another
    /// server.
    async fn send_following(&self, req: &Req) -> std::result::Result<Response<Incoming>, Failure> {
        let origin = req.base.as_deref().unwrap_or(&self.cfg.url);
        let mut uri: Uri = format!("{origin}{}", req.path).parse().map_err(|e| {
            Failure::Fatal(Error::InvalidArgument(format!(
                "cannot build a URL for {}: {e}",
                req.path
            )))
        })?;
        let mut hops = 0;
        loop {
            let request = self.build(req, &uri).map_err(Failure::Fatal)?;
            let resp = self
                .client
                .request(request)
                .await
                .map_err(|e| request_failure(&e, req, &uri, &self.cfg))?;
            if resp.headers().contains_key(HEADER_CLIENT_TASK_IDS) {
                self.client_task_ids.store(true, Ordering::Relaxed);
            }
            let status = resp.status();
            let location = resp.headers().get(LOCATION).cloned();
            let Some(location) = location.filter(|_| status.is_redirection()) else {
                return Ok(resp);
            };
            let to = String::from_utf8_lossy(location.as_bytes()).into_owned();
            let keeps_method = matches!(status.as_u16(), 307 | 308);
            let follows =
                keeps_method || (matches!(status.as_u16(), 301..=303) && req.method == Method::GET);
            if !follows {
                return Err(Failure::Fatal(Error::Protocol(format!(
                    "{} {} was redirected with {status} to {to}, which would change the request; \
                     not followed (only 307 and 308 keep a POST as it is)",
                    req.method, req.path
                ))));
            }
            if hops == MAX_REDIRECTS {
                return Err(Failure::Fatal(Error::Protocol(format!(
                    "{} {} was redirected more than {MAX_REDIRECTS} times (the last to {to})",
                    req.method, req.path
                ))));
            }
            let next = resolve(&uri, &to).ok_or_else(|| {
                Failure::Fatal(Error::Protocol(format!(
                    "{} {} was redirected to {to:?}, which is not a URL",
                    req.method, req.path
                )))
            })?;
            if !same_origin(&uri, &next) {
                return Err(Failure::Fatal(Error::Protocol(format!(
                    "{} {} was redirected to another server ({next}); not followed, so the API \
                     key and session id stay with {origin}",
                    req.method, req.path
                ))));
            }
            tracing::debug!(method = %req.method, from = %uri, to = %next, status = status.as_u16(), "following a redirect");
            uri = next;
            hops += 1;
        }
    }

    /// One attempt: send, read the whole body within the JSON body limit, turn an error
    /// status into a [`Failure::Status`].
    async fn attempt(&self, req: &Req) -> std::result::Result<(http::HeaderMap, Bytes), Failure> {
        let timeout = req.timeout.unwrap_or(self.cfg.request_timeout);
        let work = async {
            let resp = self.send_once(req, timeout).await?;
            let (parts, body) = resp.into_parts();
            let reader = BodyReader::new(&parts.headers, body);
            if !parts.status.is_success() {
                let bytes = reader.read_prefix(MAX_ERROR_BODY).await;
                return Err(status_failure(parts.status, &parts.headers, &bytes));
            }
            let max = self.cfg.max_body_bytes;
            let bytes = reader.read_all(max, &self.meter).await.map_err(|e| {
                let what = format!("the reply to {} {}", req.method, req.path);
                let fatal = matches!(e, crate::body::ReadError::TooLarge { .. });
                let error = e.into_error(&what, max, SizeLimit::Body);
                if fatal {
                    Failure::Fatal(error)
                } else {
                    Failure::Broken(error)
                }
            })?;
            Ok((parts.headers, bytes))
        };
        match tokio::time::timeout(timeout, work).await {
            Ok(r) => r,
            Err(_) => Err(Failure::Timeout(Error::Timeout(format!(
                "{} {} took longer than {:?}",
                req.method, req.path, timeout
            )))),
        }
    }

    /// Send with retries as `retry` allows; returns the headers and body of a 2xx answer.
    pub async fn fetch(&self, req: &Req, retry: Retry) -> Result<(http::HeaderMap, Bytes)> {
        self.fetch_with(req, retry, self.backoff()).await.0
    }

    /// [`Http::fetch`] with its own backoff; also returns the attempts made.
    pub async fn fetch_with(
        &self,
        req: &Req,
        retry: Retry,
        backoff: Backoff,
    ) -> (Result<(http::HeaderMap, Bytes)>, u32) {
        let mut attempt = 0u32;
        let mut starting = Starting::default();
        loop {
            match self.attempt(req).await {
                Ok(ok) => return (Ok(ok), attempt + 1),
                Err(f) if f.starting() && starting.keep_waiting(self.cfg.starting_wait) => {
                    let delay = backoff.delay(0, f.retry_after());
                    tracing::debug!(method = %req.method, path = %req.path, ?delay, "session still starting; asking again");
                    tokio::time::sleep(delay).await;
                }
                Err(f) if attempt < backoff.retries && f.retryable(retry) => {
                    let delay = backoff.delay(attempt, f.retry_after());
                    tracing::debug!(
                        method = %req.method, path = %req.path, attempt, ?delay,
                        error = %DisplayFailure(&f), "retrying request"
                    );
                    tokio::time::sleep(delay).await;
                    attempt += 1;
                }
                Err(f) => return (Err(f.into_error()), attempt + 1),
            }
        }
    }

    /// Send with retries and decode a JSON answer.
    pub async fn json<T: DeserializeOwned>(&self, req: &Req, retry: Retry) -> Result<T> {
        let (_, body) = self.fetch(req, retry).await?;
        decode_json(&req.path, &body)
    }

    /// The configured backoff of requests to the ORS server.
    pub fn backoff(&self) -> Backoff {
        Backoff {
            retries: self.cfg.max_retries,
            base: self.cfg.backoff_base,
            max: self.cfg.backoff_max,
        }
    }

    /// The backoff before retry number `attempt + 1`, or the server's `Retry-After` (capped).
    pub fn delay(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        self.backoff().delay(attempt, retry_after)
    }
}

/// Since when a server has answered "starting" (PROTOCOL_NOTES row `slow-setup`).
#[derive(Default)]
pub(crate) struct Starting(Option<Instant>);

impl Starting {
    /// Whether to ask again: the first such answer starts the clock, `wait` bounds it.
    pub(crate) fn keep_waiting(&mut self, wait: Duration) -> bool {
        self.0.get_or_insert_with(Instant::now).elapsed() < wait
    }
}

struct DisplayFailure<'a>(&'a Failure);

impl std::fmt::Display for DisplayFailure<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Failure::Connect(e) | Failure::Broken(e) | Failure::Timeout(e) | Failure::Fatal(e) => {
                e.fmt(f)
            }
            Failure::Status { error, .. } => error.fmt(f),
        }
    }
}

/// How a request that got no response failed. A failed TLS handshake or a malformed or
/// endless response head is not worth repeating; a connection that broke may be. A connection
/// that could not be made names the server's URL, so a wrong `ORS_URL` is obvious.
fn request_failure(
    e: &hyper_util::client::legacy::Error,
    req: &Req,
    uri: &Uri,
    cfg: &Config,
) -> Failure {
    if let Some(tls) = crate::tls::tls_cause(e) {
        let host = uri.authority().map_or("?", |a| a.as_str()).to_owned();
        let detail = match tls {
            rustls::Error::InvalidCertificate(why) => format!(
                "{} ({tls}); the client trusts {}",
                crate::tls::certificate_problem(why),
                crate::tls::trust_note(cfg.tls_roots, cfg.ca_cert.as_ref())
            ),
            _ => format!("{tls} (does {host} speak https on this port?)"),
        };
        return Failure::Fatal(Error::Tls { host, detail });
    }
    // The server the request was for: the ORS server, or an agent's model server.
    let url = req.base.as_deref().unwrap_or(&cfg.url);
    if e.is_connect() {
        return Failure::Connect(Error::Transport(format!(
            "cannot connect to {url}: {}",
            crate::error::chain(e)
        )));
    }
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        if let Some(h) = cause
            .downcast_ref::<hyper::Error>()
            .filter(|h| h.is_parse())
        {
            let what = if h.is_parse_too_large() {
                "has a response head that is too large (a header that never ends?)"
            } else {
                "got a response that is not HTTP/1.1"
            };
            return Failure::Fatal(Error::Protocol(format!(
                "{} {} {what}: {}",
                req.method,
                req.path,
                crate::error::chain(e)
            )));
        }
        source = cause.source();
    }
    Failure::Broken(Error::transport(e))
}

/// The target of a redirect from `base` to `location` (absolute, scheme-relative,
/// absolute-path or relative-path reference).
fn resolve(base: &Uri, location: &str) -> Option<Uri> {
    let location = location.trim();
    if location.is_empty() {
        return None;
    }
    let scheme = base.scheme_str().unwrap_or("http");
    let authority = base.authority()?.as_str();
    let full = if location.contains("://") {
        location.to_owned()
    } else if location.starts_with("//") {
        format!("{scheme}:{location}")
    } else if location.starts_with('/') {
        format!("{scheme}://{authority}{location}")
    } else {
        let dir = base.path().rsplit_once('/').map_or("", |(d, _)| d);
        let (path, query) = match location.split_once('?') {
            Some((p, q)) => (p, Some(q)),
            None => (location, None),
        };
        let mut out = format!(
            "{scheme}://{authority}{}",
            without_dots(&format!("{dir}/{path}"))
        );
        if let Some(q) = query {
            out.push('?');
            out.push_str(q);
        }
        out
    };
    full.parse().ok()
}

/// A path with its `.` and `..` segments resolved (RFC 3986, 5.2.4).
fn without_dots(path: &str) -> String {
    let mut segments: Vec<&str> = Vec::new();
    let parts: Vec<&str> = path.split('/').skip(1).collect();
    for (i, seg) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        match *seg {
            "." | ".." => {
                if *seg == ".." {
                    segments.pop();
                }
                if last {
                    segments.push(""); // `a/..` names the directory: keep its slash
                }
            }
            s => segments.push(s),
        }
    }
    format!("/{}", segments.join("/"))
}

/// Whether two URLs have the same scheme, host and port.
fn same_origin(a: &Uri, b: &Uri) -> bool {
    let port = |u: &Uri| {
        u.port_u16().unwrap_or(match u.scheme_str() {
            Some("https") => 443,
            _ => 80,
        })
    };
    a.scheme() == b.scheme()
        && a.host().map(str::to_ascii_lowercase) == b.host().map(str::to_ascii_lowercase)
        && port(a) == port(b)
}

/// Decode a JSON body, naming the endpoint when it is not what ORS says it is.
pub(crate) fn decode_json<T: DeserializeOwned>(path: &str, body: &[u8]) -> Result<T> {
    serde_json::from_slice(body).map_err(|e| {
        Error::Protocol(format!(
            "unexpected reply from {path}: {e} (body: {})",
            preview(body)
        ))
    })
}

/// A [`Failure::Status`] for an error response, with the server's `detail`.
pub(crate) fn status_failure(
    status: StatusCode,
    headers: &http::HeaderMap,
    body: &[u8],
) -> Failure {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    // OpenAI's servers also send the delay in milliseconds, which is more precise.
    let retry_after = header("retry-after-ms")
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|ms| ms.is_finite() && *ms >= 0.0)
        .map(|ms| Duration::from_secs_f64(ms / 1e3))
        .or_else(|| {
            header(RETRY_AFTER.as_str())
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(Duration::from_secs)
        });
    let (code, detail) = code_and_detail(status, body);
    Failure::Status {
        error: Error::Http {
            status: status.as_u16(),
            code,
            detail,
        },
        status: status.as_u16(),
        retry_after,
        starting: status == StatusCode::SERVICE_UNAVAILABLE
            && headers
                .get(HEADER_BACKEND_STATE)
                .is_some_and(|v| v.as_bytes() == BACKEND_STARTING.as_bytes()),
    }
}

/// The `code` and `detail` of an error body. The detail is the string, the JSON of a
/// structured detail (FastAPI's validation errors), the raw text, or the status's reason when
/// the body is empty; the code is there only when the server sent a string one.
pub(crate) fn code_and_detail(status: StatusCode, body: &[u8]) -> (Option<String>, String) {
    if let Ok(serde_json::Value::Object(mut v)) = serde_json::from_slice(body) {
        let code = match v.remove("code") {
            Some(serde_json::Value::String(c)) => Some(c),
            _ => None,
        };
        match v.remove("detail") {
            Some(serde_json::Value::String(s)) => return (code, s),
            Some(other) => return (code, other.to_string()),
            None => {}
        }
        // OpenAI's and Anthropic's `{"error": {"message", "type", "code"}}`, and the bare
        // `{"error": "..."}` of some compatible servers.
        match v.remove("error") {
            Some(serde_json::Value::String(s)) => return (code, s),
            Some(serde_json::Value::Object(mut e)) => {
                if let Some(serde_json::Value::String(message)) = e.remove("message") {
                    let code = [e.remove("code"), e.remove("type")]
                        .into_iter()
                        .flatten()
                        .find_map(|c| match c {
                            serde_json::Value::String(c) => Some(c),
                            _ => None,
                        });
                    return (code, message);
                }
            }
            _ => {}
        }
    }
    let text = preview(body);
    if text.is_empty() {
        (
            None,
            status.canonical_reason().unwrap_or("error").to_owned(),
        )
    } else {
        (None, text)
    }
}

/// At most 300 characters of a body, on one line, for error messages.
pub(crate) fn preview(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let one_line: String = text
        .trim()
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    match one_line.char_indices().nth(300) {
        Some((i, _)) => format!("{}...", &one_line[..i]),
        None => one_line,
    }
}

/// Exponential backoff with "equal jitter": half of `base * 2^attempt` (capped at `max`) is
/// fixed and the other half random, so many clients retrying at once spread out.
pub(crate) fn backoff(attempt: u32, base: Duration, max: Duration) -> Duration {
    let exp = base.saturating_mul(1u32 << attempt.min(20)).min(max);
    let half = exp / 2;
    let span = u64::try_from(half.as_nanos()).unwrap_or(u64::MAX);
    half + Duration::from_nanos(jitter() % span.saturating_add(1))
}

/// A pseudo-random number from the clock and a process-wide counter (no `rand` needed: this
/// only has to differ between concurrent retriers, not be unpredictable).
fn jitter() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    splitmix64(t ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Percent-encode one path segment (an environment name) so any name makes a valid URL.
pub(crate) fn segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_stays_capped_and_jitters() {
        let base = Duration::from_millis(100);
        let max = Duration::from_secs(1);
        for attempt in 0..10 {
            let exp = base.saturating_mul(1 << attempt).min(max);
            let d = backoff(attempt, base, max);
            assert!(d >= exp / 2 && d <= exp, "attempt {attempt}: {d:?}");
        }
        let samples: std::collections::HashSet<Duration> =
            (0..20).map(|_| backoff(3, base, max)).collect();
        assert!(samples.len() > 1, "backoff has no jitter");
    }

    #[test]
    fn codes_and_details_come_from_json_or_text() {
        let s = StatusCode::BAD_REQUEST;
        let detail = |body: &[u8]| code_and_detail(s, body).1;
        assert_eq!(
            code_and_detail(s, br#"{"detail":"Invalid index","code":"invalid_request"}"#),
            (Some("invalid_request".into()), "Invalid index".into())
        );
        assert_eq!(
            code_and_detail(s, br#"{"detail":"Invalid index"}"#),
            (None, "Invalid index".into())
        );
        assert_eq!(
            detail(br#"{"detail":[{"loc":["body","split"]}]}"#),
            r#"[{"loc":["body","split"]}]"#
        );
        assert_eq!(detail(b"plain\ntext"), "plain text");
        assert_eq!(
            code_and_detail(
                s,
                br#"{"error":{"message":"bad role","type":"invalid_request_error","code":null}}"#
            ),
            (Some("invalid_request_error".into()), "bad role".into())
        );
        assert_eq!(
            code_and_detail(
                s,
                br#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#
            ),
            (Some("rate_limit_error".into()), "slow down".into())
        );
        assert_eq!(detail(br#"{"error":"model not found"}"#), "model not found");
        assert_eq!(
            code_and_detail(StatusCode::NOT_FOUND, b""),
            (None, "Not Found".into())
        );
    }

    #[test]
    fn a_503_starting_is_told_apart_and_waited_for_within_the_bound() {
        let mut headers = http::HeaderMap::new();
        headers.insert(RETRY_AFTER, HeaderValue::from_static("2"));
        assert!(!status_failure(StatusCode::SERVICE_UNAVAILABLE, &headers, b"{}").starting());
        headers.insert(HEADER_BACKEND_STATE, HeaderValue::from_static("starting"));
        let f = status_failure(StatusCode::SERVICE_UNAVAILABLE, &headers, b"{}");
        assert!(f.starting());
        assert_eq!(f.retry_after(), Some(Duration::from_secs(2)));
        assert!(!status_failure(StatusCode::BAD_GATEWAY, &headers, b"{}").starting());
        let mut clock = Starting::default();
        assert!(clock.keep_waiting(Duration::from_secs(60)));
        assert!(!clock.keep_waiting(Duration::ZERO));
    }

    #[test]
    fn retry_rules_never_repeat_a_4xx() {
        let st = |status| Failure::Status {
            error: Error::Http {
                status,
                code: None,
                detail: String::new(),
            },
            status,
            retry_after: None,
            starting: false,
        };
        for retry in [Retry::Idempotent, Retry::Refused] {
            assert!(!st(400).retryable(retry));
            assert!(!st(404).retryable(retry));
            assert!(!st(410).retryable(retry));
            assert!(st(429).retryable(retry));
            assert!(st(503).retryable(retry));
            assert!(Failure::Connect(Error::Transport(String::new())).retryable(retry));
        }
        assert!(st(500).retryable(Retry::Idempotent));
        assert!(!st(500).retryable(Retry::Refused));
        assert!(!Failure::Broken(Error::Transport(String::new())).retryable(Retry::Refused));
    }

    #[test]
    fn redirects_resolve_and_stay_on_their_origin() {
        let base: Uri = "http://h:8080/a/b?x=1".parse().unwrap();
        let at = |l: &str| resolve(&base, l).map(|u| u.to_string());
        assert_eq!(
            at("/gsm8k/tools").as_deref(),
            Some("http://h:8080/gsm8k/tools")
        );
        assert_eq!(at("c").as_deref(), Some("http://h:8080/a/c"));
        assert_eq!(at("../v2/c?q=1").as_deref(), Some("http://h:8080/v2/c?q=1"));
        assert_eq!(at("./c/..").as_deref(), Some("http://h:8080/a/"));
        assert_eq!(at("../../../c").as_deref(), Some("http://h:8080/c"));
        assert_eq!(at("//other/x").as_deref(), Some("http://other/x"));
        assert_eq!(at("http://h:8080/z").as_deref(), Some("http://h:8080/z"));
        assert_eq!(at(""), None);
        let same = |l: &str| same_origin(&base, &resolve(&base, l).unwrap());
        assert!(same("/x") && same("http://H:8080/x"));
        assert!(!same("http://h:8081/x"));
        assert!(!same("http://evil/x"));
        assert!(!same("https://h:8080/x"));
        let plain: Uri = "http://h/".parse().unwrap();
        assert!(same_origin(&plain, &"http://h:80/x".parse().unwrap()));
    }

    #[test]
    fn segments_are_percent_encoded() {
        assert_eq!(segment("gsm8k"), "gsm8k");
        assert_eq!(segment("a b/c"), "a%20b%2Fc");
    }
}
