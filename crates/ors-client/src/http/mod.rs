//! The HTTP layer: one pooled hyper client, request building, redirects (same origin only),
//! error mapping, bounded body reading, and retries with exponential backoff and jitter.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, ACCEPT, CONTENT_TYPE, LOCATION, USER_AGENT};
use http::{Method, Request, Response, Uri};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::rt::TokioExecutor;
use serde::de::DeserializeOwned;

mod answer;
mod redirect;
mod retry;

pub(crate) use answer::{decode_json, preview, status_failure};
use redirect::{resolve, same_origin};
pub(crate) use retry::{random, Backoff, Failure, Retry, Starting};

use crate::body::{BodyReader, Meter};
use crate::config::{Config, SizeLimit};
use crate::error::{Error, Result};

use ors_core::protocol::{HEADER_API_KEY, HEADER_CLIENT_TASK_IDS, HEADER_SESSION_ID};

/// Redirects followed for one request, at most.
pub(crate) const MAX_REDIRECTS: usize = 5;
/// How much of an error answer's body is read for its detail.
pub(crate) const MAX_ERROR_BODY: usize = 64 * 1024;

/// One request to send: method, path below the base URL, headers and JSON body.
#[derive(Debug, Clone, Default)]
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
    /// A bound on this answer's body instead of the client's JSON body limit, and which
    /// limit it is (for the error).
    pub max_body: Option<(usize, SizeLimit)>,
}

impl Req {
    /// A GET of `path` accepting JSON.
    pub fn get(path: impl Into<String>) -> Self {
        Self {
            method: Method::GET,
            path: path.into(),
            accept: "application/json",
            ..Self::default()
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
}

/// The transport shared by every clone of a client.
pub(crate) struct Http {
    client: HyperClient<HttpsConnector<HttpConnector>, Full<Bytes>>,
    pub(crate) cfg: Config,
    /// The most bytes one response has held in this client's buffers.
    pub(crate) meter: Meter,
    /// Whether the server runs a call under the `task_id` a client sends for it (its responses
    /// carry [`HEADER_CLIENT_TASK_IDS`], row `client-task-id`), so a call may be named and
    /// resent.
    pub(crate) client_task_ids: AtomicBool,
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

    fn build(&self, req: &Req, uri: &Uri) -> Result<Request<Full<Bytes>>> {
        let mut b = Request::builder()
            .method(req.method.clone())
            .uri(uri.clone())
            .header(ACCEPT, req.accept)
            .header(USER_AGENT, &self.cfg.user_agent);
        if let Some(key) = self.cfg.api_key.as_ref().filter(|_| req.base.is_none()) {
            b = b.header(HEADER_API_KEY, secret_header(key, "the API key")?);
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
        if req.body.is_some() {
            b = b.header(CONTENT_TYPE, "application/json");
        }
        b.body(Full::new(req.body.clone().unwrap_or_default()))
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
            Err(_) => Err(Failure::Broken(Error::Timeout(format!(
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
            let refuse = |why: String| {
                let e =
                    Error::Protocol(format!("{} {} was redirected {why}", req.method, req.path));
                Err(Failure::Fatal(e))
            };
            let keeps_method = matches!(status.as_u16(), 307 | 308);
            let follows =
                keeps_method || (matches!(status.as_u16(), 301..=303) && req.method == Method::GET);
            if !follows {
                return refuse(format!(
                    "with {status} to {to}, which would change the request; not followed (only \
                     307 and 308 keep a POST as it is)"
                ));
            }
            if hops == MAX_REDIRECTS {
                return refuse(format!(
                    "more than {MAX_REDIRECTS} times (the last to {to})"
                ));
            }
            let Some(next) = resolve(&uri, &to) else {
                return refuse(format!("to {to:?}, which is not a URL"));
            };
            if !same_origin(&uri, &next) {
                return refuse(format!(
                    "to another server ({next}); not followed, so the API key and session id \
                     stay with {origin}"
                ));
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
        // One deadline for head and body. The head's own timeout says "no response"; racing it
        // against a second timer of the same length made a silent server's error depend on
        // which timer the runtime happened to fire first.
        let deadline = tokio::time::Instant::now() + timeout;
        let resp = self.send_once(req, timeout).await?;
        let work = async {
            let (parts, body) = resp.into_parts();
            let reader = BodyReader::new(&parts.headers, body);
            if !parts.status.is_success() {
                let bytes = reader.read_prefix(MAX_ERROR_BODY).await;
                return Err(status_failure(parts.status, &parts.headers, &bytes));
            }
            let (max, limit) = req
                .max_body
                .unwrap_or((self.cfg.max_body_bytes, SizeLimit::Body));
            let bytes = reader.read_all(max, &self.meter).await.map_err(|e| {
                let what = match &req.base {
                    Some(base) => format!("the reply of {base} to {} {}", req.method, req.path),
                    None => format!("the reply to {} {}", req.method, req.path),
                };
                match e.into_error(&what, max, limit) {
                    e @ Error::ResponseTooLarge { .. } => Failure::Fatal(e),
                    e => Failure::Broken(e),
                }
            })?;
            Ok((parts.headers, bytes))
        };
        match tokio::time::timeout_at(deadline, work).await {
            Ok(r) => r,
            Err(_) => Err(Failure::Broken(Error::Timeout(format!(
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
                        error = %f.into_error(), "retrying request"
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

    /// A GET of `path` that may be retried, its JSON answer decoded.
    pub async fn get<T: DeserializeOwned>(&self, path: impl Into<String>) -> Result<T> {
        self.json(&Req::get(path), Retry::Idempotent).await
    }

    /// The configured backoff of requests to the ORS server.
    pub fn backoff(&self) -> Backoff {
        Backoff {
            retries: self.cfg.max_retries,
            base: self.cfg.backoff_base,
            max: self.cfg.backoff_max,
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
    let parse = std::iter::successors(std::error::Error::source(e), |c| c.source())
        .find_map(|c| c.downcast_ref::<hyper::Error>().filter(|h| h.is_parse()));
    let Some(h) = parse else {
        return Failure::Broken(Error::transport(e));
    };
    let what = if h.is_parse_too_large() {
        "has a response head that is too large (a header that never ends?)"
    } else {
        "got a response that is not HTTP/1.1"
    };
    Failure::Fatal(Error::Protocol(format!(
        "{} {} {what}: {}",
        req.method,
        req.path,
        crate::error::chain(e)
    )))
}

/// `value` as a header value that is never logged; `what` names it when it cannot be one.
pub(crate) fn secret_header(value: &str, what: &str) -> Result<HeaderValue> {
    let mut v = HeaderValue::from_str(value).map_err(|_| {
        Error::InvalidArgument(format!("{what} has characters a header cannot carry"))
    })?;
    v.set_sensitive(true);
    Ok(v)
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
    fn segments_are_percent_encoded() {
        assert_eq!(segment("gsm8k"), "gsm8k");
        assert_eq!(segment("a b/c"), "a%20b%2Fc");
    }
}
