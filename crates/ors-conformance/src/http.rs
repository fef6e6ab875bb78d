//! A deliberately tiny HTTP/1.1 client over `std::net`: it writes whatever bytes a clause
//! wants (so malformed requests are possible) and reads responses incrementally (so SSE
//! streams can be consumed event by event, or dropped half way).
//!
//! It is the one raw HTTP client of the workspace's tests too: the server's integration tests,
//! the end-to-end tests and the client's tests use it (from async tests, inside
//! `tokio::task::spawn_blocking`), so the bytes on the wire are checked by one reader.
//!
//! ```no_run
//! use ors_conformance::http::{Request, Target};
//!
//! let target = Target::from_url("http://127.0.0.1:8080", None)?;
//! let r = Request::new("POST", "/ping").sid("no-such-session").send(&target)?;
//! assert_eq!(r.status(), 404);
//! assert_eq!(r.code().as_deref(), Some("session_not_found"));
//! # Ok::<(), String>(())
//! ```

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

use ors_core::protocol::HEADER_SESSION_ID;
use ors_core::sse::{SseDecoder, SseEvent};

/// Bytes read from the socket at a time.
const READ_SIZE: usize = 16 * 1024;
/// Largest response head accepted (status line and headers).
const MAX_HEAD: usize = 256 * 1024;
/// Largest response body read, however it is framed: the client's default `max_result_bytes`,
/// so a server that streams without end cannot take the checker's memory.
pub const MAX_BODY: usize = 256 * 1024 * 1024;

/// Where the server under test listens, and how to talk to it.
#[derive(Debug, Clone)]
pub struct Target {
    /// The resolved socket address.
    pub addr: SocketAddr,
    /// The `Host` header value (`host:port`).
    pub host: String,
    /// Sent as `X-API-Key` on every request built with [`Request`], when set.
    pub api_key: Option<String>,
    /// Read timeout for ordinary requests.
    pub timeout: Duration,
}

impl Target {
    /// A server at a socket address (an in-process test server), no API key.
    pub fn from_addr(addr: SocketAddr) -> Self {
        Self {
            addr,
            host: addr.to_string(),
            api_key: None,
            timeout: Duration::from_secs(30),
        }
    }

    /// Parse `http://host:port[/]` (no TLS, no path prefix).
    pub fn from_url(url: &str, api_key: Option<String>) -> Result<Self, String> {
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| format!("only http:// URLs are supported, got {url:?}"))?;
        let hostport = rest.trim_end_matches('/');
        if hostport.contains('/') {
            return Err(format!("the URL must not have a path: {url:?}"));
        }
        let with_port = if hostport
            .rsplit_once(':')
            .is_some_and(|(_, p)| !p.contains(']'))
        {
            hostport.to_owned()
        } else {
            format!("{hostport}:80")
        };
        let addr = with_port
            .to_socket_addrs()
            .map_err(|e| format!("cannot resolve {hostport:?}: {e}"))?
            .next()
            .ok_or_else(|| format!("{hostport:?} resolves to no address"))?;
        Ok(Self {
            host: hostport.to_owned(),
            api_key,
            ..Self::from_addr(addr)
        })
    }
}

/// A parsed status line and header block.
#[derive(Debug, Clone)]
pub struct Head {
    /// The status code.
    pub status: u16,
    /// Header names (lower-cased) and values, in order.
    pub headers: Vec<(String, String)>,
}

impl Head {
    /// Whether the body is sent with `Transfer-Encoding: chunked`.
    pub fn is_chunked(&self) -> bool {
        self.header("transfer-encoding")
            .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"))
    }

    /// The first value of a header (name matched case-insensitively).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A complete response.
#[derive(Debug, Clone)]
pub struct Response {
    /// Status and headers.
    pub head: Head,
    /// The body, de-chunked.
    pub body: Vec<u8>,
}

impl Response {
    /// The status code.
    pub fn status(&self) -> u16 {
        self.head.status
    }

    /// A header value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.header(name)
    }

    /// The body as JSON.
    pub fn json(&self) -> Result<serde_json::Value, String> {
        serde_json::from_slice(&self.body).map_err(|e| {
            format!(
                "status {} body is not JSON ({e}): {}",
                self.status(),
                snippet(&self.body)
            )
        })
    }

    /// The body as lossy text, shortened for messages.
    pub fn snippet(&self) -> String {
        snippet(&self.body)
    }

    /// The body as (lossy) text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// Whether the body came with `Transfer-Encoding: chunked` (a stream, not one buffer).
    pub fn is_chunked(&self) -> bool {
        self.head.is_chunked()
    }

    /// The `detail` string of an error body, if it has one.
    pub fn detail(&self) -> Option<String> {
        self.error_field("detail")
    }

    /// The machine-readable `code` of an error body (PROTOCOL_NOTES row `error-codes`), if
    /// it has one.
    pub fn code(&self) -> Option<String> {
        self.error_field("code")
    }

    fn error_field(&self, name: &str) -> Option<String> {
        self.json().ok()?.get(name)?.as_str().map(str::to_owned)
    }

    /// The SSE events of the body, decoded by the core codec (comments dropped).
    pub fn events(&self) -> Vec<SseEvent> {
        SseDecoder::new().push(&self.body)
    }
}

/// Up to 200 characters of a body on one line, for failure messages.
pub fn snippet(body: &[u8]) -> String {
    ors_core::text::preview(&String::from_utf8_lossy(body), 200)
}

/// One open connection.
pub struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
    eof: bool,
}

impl Conn {
    /// Connect with the target's read timeout.
    pub fn open(target: &Target) -> Result<Self, String> {
        Self::open_with_timeout(target, target.timeout)
    }

    /// Connect with a specific read timeout.
    pub fn open_with_timeout(target: &Target, timeout: Duration) -> Result<Self, String> {
        let stream = TcpStream::connect_timeout(&target.addr, Duration::from_secs(5))
            .map_err(|e| format!("cannot connect to {}: {e}", target.addr))?;
        stream
            .set_read_timeout(Some(timeout))
            .and_then(|()| stream.set_write_timeout(Some(timeout)))
            .and_then(|()| stream.set_nodelay(true))
            .map_err(|e| format!("socket setup: {e}"))?;
        Ok(Self {
            stream,
            buf: Vec::new(),
            eof: false,
        })
    }

    /// Change the read timeout (for example before a long call).
    pub fn set_timeout(&mut self, timeout: Duration) -> Result<(), String> {
        self.stream
            .set_read_timeout(Some(timeout))
            .map_err(|e| format!("socket setup: {e}"))
    }

    /// Write raw bytes.
    pub fn write_all(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.stream
            .write_all(bytes)
            .and_then(|()| self.stream.flush())
            .map_err(|e| format!("write failed: {e}"))
    }

    /// Close the writing half (the server sees end of input).
    pub fn shutdown_write(&mut self) {
        let _ = self.stream.shutdown(std::net::Shutdown::Write);
    }

    /// Read more bytes into the buffer; `false` at end of stream.
    fn fill(&mut self) -> Result<bool, String> {
        if self.eof {
            return Ok(false);
        }
        let mut tmp = [0u8; READ_SIZE];
        loop {
            match self.stream.read(&mut tmp) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(false);
                }
                Ok(n) => {
                    self.buf.extend_from_slice(&tmp[..n]);
                    return Ok(true);
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return Err("timed out waiting for the server".to_owned())
                }
                Err(e) => return Err(format!("read failed: {e}")),
            }
        }
    }

    /// Whether the server has answered anything yet, waiting at most `wait`.
    pub fn poll_readable(&mut self, wait: Duration) -> Result<bool, String> {
        if !self.buf.is_empty() {
            return Ok(true);
        }
        let old = self.stream.read_timeout().ok().flatten();
        self.set_timeout(wait)?;
        let got = match self.fill() {
            Ok(more) => more || !self.buf.is_empty(),
            Err(e) if e.starts_with("timed out") => false,
            Err(e) => return Err(e),
        };
        if let Some(old) = old {
            self.set_timeout(old)?;
        }
        Ok(got || self.eof)
    }

    fn take_line(&mut self) -> Result<Vec<u8>, String> {
        loop {
            if let Some(i) = self.buf.iter().position(|&b| b == b'\n') {
                let mut line: Vec<u8> = self.buf.drain(..=i).collect();
                line.pop();
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                return Ok(line);
            }
            if self.buf.len() > MAX_HEAD {
                return Err("response line too long".to_owned());
            }
            if !self.fill()? {
                return Err("connection closed before the response was complete".to_owned());
            }
        }
    }

    fn take_exact(&mut self, n: usize) -> Result<Vec<u8>, String> {
        while self.buf.len() < n {
            if !self.fill()? {
                return Err(format!(
                    "connection closed after {} of {n} body bytes",
                    self.buf.len()
                ));
            }
        }
        Ok(self.buf.drain(..n).collect())
    }

    /// Read a response head, skipping `1xx` interim responses.
    pub fn read_head(&mut self) -> Result<Head, String> {
        loop {
            let status_line = String::from_utf8_lossy(&self.take_line()?).into_owned();
            if !status_line.starts_with("HTTP/1.") {
                return Err(format!("not an HTTP/1.x status line: {status_line:?}"));
            }
            let status: u16 = status_line
                .split(' ')
                .nth(1)
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| format!("bad status line: {status_line:?}"))?;
            let mut headers = Vec::new();
            loop {
                let line = self.take_line()?;
                if line.is_empty() {
                    break;
                }
                if let Some((n, v)) = String::from_utf8_lossy(&line).split_once(':') {
                    headers.push((n.trim().to_ascii_lowercase(), v.trim().to_owned()));
                }
            }
            if !(100..200).contains(&status) {
                return Ok(Head { status, headers });
            }
        }
    }

    /// Read the whole body that follows `head`.
    pub fn read_body(&mut self, head: &Head, request_method: &str) -> Result<Vec<u8>, String> {
        BodyState::new(head, request_method).read_rest(self, Vec::new())
    }

    /// The body that follows `head`, read piece by piece from this connection it owns (hold
    /// it across other work; drop it to disconnect).
    pub fn into_body(self, head: Head, request_method: &str) -> OpenBody {
        OpenBody {
            state: BodyState::new(&head, request_method),
            conn: self,
            head,
        }
    }

    /// Read a whole response (head and body).
    pub fn read_response(&mut self, request_method: &str) -> Result<Response, String> {
        let head = self.read_head()?;
        let body = self.read_body(&head, request_method)?;
        Ok(Response { head, body })
    }
}

enum Mode {
    Length(usize),
    Chunked,
    UntilClose,
}

/// Where a body reader is: its framing, whether the end was seen, and the bytes read so far.
struct BodyState {
    mode: Mode,
    done: bool,
    read: usize,
}

impl BodyState {
    fn new(head: &Head, request_method: &str) -> Self {
        let mode =
            if request_method.eq_ignore_ascii_case("HEAD") || matches!(head.status, 204 | 304) {
                Mode::Length(0)
            } else if head.is_chunked() {
                Mode::Chunked
            } else if let Some(n) = head
                .header("content-length")
                .and_then(|v| v.parse::<usize>().ok())
            {
                Mode::Length(n)
            } else {
                Mode::UntilClose
            };
        Self {
            mode,
            done: false,
            read: 0,
        }
    }

    /// The next piece, refused once the body passes [`MAX_BODY`] (before reading, when its
    /// length or a chunk's size says so).
    fn next_piece(&mut self, conn: &mut Conn) -> Result<Option<Vec<u8>>, String> {
        let piece = self.next_framed(conn)?;
        if let Some(piece) = &piece {
            self.read += piece.len();
            if self.read > MAX_BODY {
                return Err(too_large());
            }
        }
        Ok(piece)
    }

    /// Read the rest of the body onto `out`.
    fn read_rest(&mut self, conn: &mut Conn, mut out: Vec<u8>) -> Result<Vec<u8>, String> {
        while let Some(piece) = self.next_piece(conn)? {
            out.extend_from_slice(&piece);
        }
        Ok(out)
    }

    fn next_framed(&mut self, conn: &mut Conn) -> Result<Option<Vec<u8>>, String> {
        if self.done {
            return Ok(None);
        }
        match &mut self.mode {
            Mode::Length(remaining) => {
                if self.read.saturating_add(*remaining) > MAX_BODY {
                    return Err(too_large());
                }
                if *remaining == 0 {
                    self.done = true;
                    return Ok(None);
                }
                if conn.buf.is_empty() && !conn.fill()? {
                    return Err(format!(
                        "connection closed with {remaining} body bytes missing"
                    ));
                }
                let n = (*remaining).min(conn.buf.len());
                *remaining -= n;
                Ok(Some(conn.buf.drain(..n).collect()))
            }
            Mode::Chunked => {
                let line = conn.take_line()?;
                let line = String::from_utf8_lossy(&line);
                let size_text = line.split(';').next().unwrap_or_default().trim();
                let size = usize::from_str_radix(size_text, 16)
                    .map_err(|_| format!("bad chunk size line {line:?}"))?;
                if size == 0 {
                    // Trailers, then the blank line ending the body.
                    while !conn.take_line()?.is_empty() {}
                    self.done = true;
                    return Ok(None);
                }
                if self.read.saturating_add(size) > MAX_BODY {
                    return Err(too_large());
                }
                let data = conn.take_exact(size)?;
                if !conn.take_line()?.is_empty() {
                    return Err("chunk not followed by CRLF".to_owned());
                }
                Ok(Some(data))
            }
            Mode::UntilClose => {
                if conn.buf.is_empty() && !conn.fill()? {
                    self.done = true;
                    return Ok(None);
                }
                Ok(Some(std::mem::take(&mut conn.buf)))
            }
        }
    }
}

fn too_large() -> String {
    format!("the response body is larger than {MAX_BODY} bytes, the most the checks read")
}

/// A response whose body is still arriving, owning its connection (see [`Conn::into_body`]).
pub struct OpenBody {
    conn: Conn,
    state: BodyState,
    /// Status and headers.
    pub head: Head,
}

impl OpenBody {
    /// The next piece of the body, `None` at its end.
    pub fn next_piece(&mut self) -> Result<Option<Vec<u8>>, String> {
        self.state.next_piece(&mut self.conn)
    }

    /// Read the rest of the body; `received` is what was read before (it comes first).
    pub fn finish(mut self, received: Vec<u8>) -> Result<Response, String> {
        let body = self.state.read_rest(&mut self.conn, received)?;
        Ok(Response {
            head: self.head,
            body,
        })
    }
}

/// A well-formed request, built up and then sent on a fresh connection.
#[derive(Debug, Clone)]
pub struct Request {
    /// The method.
    pub method: String,
    /// The path (with query, if any).
    pub path: String,
    /// Extra headers, raw bytes so a clause can send invalid ones.
    pub headers: Vec<(String, Vec<u8>)>,
    /// The body.
    pub body: Vec<u8>,
}

impl Request {
    /// A request without body.
    pub fn new(method: &str, path: &str) -> Self {
        Self {
            method: method.to_owned(),
            path: path.to_owned(),
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    /// Add a header.
    pub fn header(mut self, name: &str, value: impl AsRef<[u8]>) -> Self {
        self.headers
            .push((name.to_owned(), value.as_ref().to_vec()));
        self
    }

    /// Set the `X-Session-ID` header.
    pub fn sid(self, sid: &str) -> Self {
        self.header(HEADER_SESSION_ID, sid)
    }

    /// A JSON body with its content type.
    pub fn json(self, value: &serde_json::Value) -> Self {
        self.header("Content-Type", "application/json")
            .body(value.to_string().into_bytes())
    }

    /// A raw body (no content type added).
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = body.into();
        self
    }

    /// The bytes on the wire.
    pub fn to_bytes(&self, target: &Target) -> Vec<u8> {
        let (method, path, host) = (&self.method, &self.path, &target.host);
        let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\n");
        if let Some(key) = &target.api_key {
            head.push_str(&format!("X-API-Key: {key}\r\n"));
        }
        let mut out = head.into_bytes();
        for (name, value) in &self.headers {
            out.extend([name.as_bytes(), b": ", value, b"\r\n"].concat());
        }
        let has_length = self.headers.iter().any(|(n, _)| {
            n.eq_ignore_ascii_case("content-length") || n.eq_ignore_ascii_case("transfer-encoding")
        });
        if !has_length && (!self.body.is_empty() || self.method != "GET") {
            out.extend(format!("Content-Length: {}\r\n", self.body.len()).into_bytes());
        }
        out.extend(b"\r\n");
        out.extend(&self.body);
        out
    }

    /// Send on a new connection and read the whole response.
    pub fn send(&self, target: &Target) -> Result<Response, String> {
        let mut conn = Conn::open(target)?;
        conn.write_all(&self.to_bytes(target))?;
        conn.read_response(&self.method)
            .map_err(|e| format!("{} {}: {e}", self.method, self.path))
    }

    /// Send on a new connection and return the response with its body still to read.
    pub fn open_body(&self, target: &Target, timeout: Duration) -> Result<OpenBody, String> {
        let (conn, head) = self.open(target, timeout)?;
        Ok(conn.into_body(head, &self.method))
    }

    /// Send on a new connection and return it with the response head, body unread.
    pub fn open(&self, target: &Target, timeout: Duration) -> Result<(Conn, Head), String> {
        let mut conn = Conn::open_with_timeout(target, timeout)?;
        conn.write_all(&self.to_bytes(target))?;
        let head = conn
            .read_head()
            .map_err(|e| format!("{} {}: {e}", self.method, self.path))?;
        Ok((conn, head))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn serve_once(reply: &'static [u8]) -> Target {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        std::thread::spawn(move || {
            if let Ok((mut s, _)) = listener.accept() {
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf);
                let _ = s.write_all(reply);
            }
        });
        Target::from_url(&format!("http://{addr}"), None).expect("target")
    }

    #[test]
    fn reads_chunked_body_and_skips_interim_responses() {
        let t = serve_once(
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;x=y\r\n world\r\n0\r\n\r\n",
        );
        let r = Request::new("GET", "/").send(&t).expect("response");
        assert_eq!(r.status(), 200);
        assert_eq!(r.body, b"hello world");
    }

    #[test]
    fn reads_content_length_body_and_headers() {
        let t = serve_once(b"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: 15\r\n\r\n{\"detail\":\"x\"}\n");
        let r = Request::new("GET", "/").send(&t).expect("response");
        assert_eq!(r.status(), 404);
        assert_eq!(r.header("Content-Type"), Some("application/json"));
        assert_eq!(r.json().expect("json")["detail"], "x");
    }

    #[test]
    fn reports_a_truncated_body() {
        let t = serve_once(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc");
        let err = Request::new("GET", "/").send(&t).expect_err("truncated");
        assert!(err.contains("missing"), "{err}");
    }

    #[test]
    fn a_body_announced_over_the_limit_is_refused_before_it_is_read() {
        let t = serve_once(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000000\r\n\r\nabc");
        let err = Request::new("GET", "/").send(&t).expect_err("too large");
        assert!(err.contains("larger than 268435456 bytes"), "{err}");
        // A chunk of 512 MiB, announced by its size line.
        let t = serve_once(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n20000000\r\nabc",
        );
        let err = Request::new("GET", "/").send(&t).expect_err("too large");
        assert!(err.contains("larger than 268435456 bytes"), "{err}");
    }

    #[test]
    fn error_bodies_give_detail_and_code() {
        let t = serve_once(b"HTTP/1.1 410 Gone\r\nContent-Length: 42\r\n\r\n{\"detail\":\"gone\",\"code\":\"session_deleted\"}");
        let r = Request::new("POST", "/ping").send(&t).expect("response");
        assert_eq!(r.detail().as_deref(), Some("gone"));
        assert_eq!(r.code().as_deref(), Some("session_deleted"));
        assert!(!r.is_chunked());
    }

    #[test]
    fn an_open_body_is_read_piece_by_piece_then_finished() {
        let t = serve_once(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n19\r\nevent: task_id\ndata: t1\n\n\r\n11\r\nevent: end\ndata: \r\n2\r\n\n\n\r\n0\r\n\r\n",
        );
        let mut open = Request::new("POST", "/call")
            .open_body(&t, Duration::from_secs(5))
            .expect("open");
        let first = open.next_piece().expect("read").expect("a piece");
        assert_eq!(first, b"event: task_id\ndata: t1\n\n");
        let r = open.finish(first).expect("rest");
        assert!(r.is_chunked());
        let names: Vec<String> = r.events().into_iter().map(|e| e.event).collect();
        assert_eq!(names, ["task_id", "end"]);
    }

    #[test]
    fn parses_urls() {
        let t = Target::from_url("http://127.0.0.1:8080/", None).expect("url");
        assert_eq!(t.host, "127.0.0.1:8080");
        assert!(Target::from_url("https://x", None).is_err());
        assert!(Target::from_url("http://127.0.0.1:1/api", None).is_err());
    }
}
