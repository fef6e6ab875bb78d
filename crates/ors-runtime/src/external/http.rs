//! The runtime's one HTTP client: hyper-util's pooled client over plain TCP, for webhook tools
//! and MCP servers reached over streamable HTTP. Bodies are read within the bounds of
//! [`ors_core::body`], as the ORS client reads its own.

use std::time::Duration;

use bytes::Bytes;
use http::header::{AsHeaderName, CONTENT_LENGTH};
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use ors_core::body::{content_length, truncated, BodyError, BoundedBody};

/// How long opening a connection may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a request got no response.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// No connection could be opened: nothing was sent, so the request may be retried.
    #[error("cannot connect: {0}")]
    Connect(String),
    /// The request was (or may have been) sent, and no response came.
    #[error("{0}")]
    Failed(String),
}

/// Why a body could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// Over the limit, or cut short of its `Content-Length`.
    #[error("{0}")]
    Bounds(#[from] BodyError),
    /// The connection broke.
    #[error("the connection broke while reading the body: {0}")]
    Transport(String),
}

/// A pooled HTTP/1.1 client. Cheap to clone.
#[derive(Clone, Debug)]
pub struct HttpClient {
    inner: Client<HttpConnector, Full<Bytes>>,
}

impl HttpClient {
    /// A client with a 10 s connect timeout.
    pub fn new() -> Self {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(CONNECT_TIMEOUT));
        connector.set_nodelay(true);
        Self {
            inner: Client::builder(TokioExecutor::new()).build(connector),
        }
    }

    /// Send a request; the response's body is left to read.
    pub async fn send(&self, req: Request<Full<Bytes>>) -> Result<Response<Incoming>, SendError> {
        self.inner.request(req).await.map_err(|e| {
            if e.is_connect() {
                SendError::Connect(source_chain(&e))
            } else {
                SendError::Failed(source_chain(&e))
            }
        })
    }
}

/// An error with its sources, for a message that says what actually failed.
fn source_chain(e: &dyn std::error::Error) -> String {
    let sources = std::iter::successors(e.source(), |s| s.source());
    sources.fold(e.to_string(), |msg, s| format!("{msg}: {s}"))
}

/// Read a whole body of at most `max` bytes.
pub async fn read_body(resp: Response<Incoming>, max: usize) -> Result<Vec<u8>, ReadError> {
    let (parts, mut body) = resp.into_parts();
    let header = parts.headers.get(CONTENT_LENGTH);
    let announced = header.and_then(|v| content_length(v.as_bytes()));
    let mut bounded = BoundedBody::new(announced, max)?;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| match truncated(bounded.received(), announced) {
            Some(cut) => ReadError::from(cut),
            None => ReadError::Transport(source_chain(&e)),
        })?;
        if let Ok(data) = frame.into_data() {
            bounded.push(&data)?;
        }
    }
    Ok(bounded.finish())
}

/// A header of `resp` as text, when it is there and visible ASCII.
pub fn header_text(resp: &Response<Incoming>, name: impl AsHeaderName) -> Option<&str> {
    resp.headers().get(name).and_then(|v| v.to_str().ok())
}

/// Whether a URL can be reached by this client (plain `http://`), else why not.
pub fn check_url(url: &str) -> Result<http::Uri, String> {
    let uri: http::Uri = url
        .parse()
        .map_err(|e| format!("'{url}' is not a URL: {e}"))?;
    match uri.scheme_str() {
        Some("http") if uri.host().is_some() => Ok(uri),
        Some("https") => Err(format!(
            "'{url}': https is not supported yet; reach the server over http (a TLS proxy on \
             the same host, for example)"
        )),
        _ => Err(format!("'{url}' is not an http:// URL")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_http_urls_are_accepted() {
        assert!(check_url("http://127.0.0.1:8080/hook").is_ok());
        assert!(check_url("https://example.com/hook")
            .unwrap_err()
            .contains("https is not supported"));
        assert!(check_url("ftp://example.com").is_err());
        assert!(check_url("not a url").is_err());
    }
}
