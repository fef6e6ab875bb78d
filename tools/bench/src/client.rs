//! One keep-alive HTTP/1.1 connection to an ORS server, and the requests the benchmark makes
//! on it, each checked against what the `conformance` fixture must answer.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::{self, SendRequest};
use hyper::header::{HeaderValue, ACCEPT, CONTENT_TYPE, HOST};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use ors_core::sse::{CallEvent, CallStreamDecoder, SseDecoder, EVENT_TASK_ID};
use ors_core::types::{Block, RunToolOutput, SessionId};
use tokio::net::{TcpSocket, TcpStream};

/// The environment every benchmark route is scoped to.
pub const ENV: &str = "conformance";

/// The longest any one request may take before it counts as an error.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);

/// The largest error body quoted in an error message.
const MAX_QUOTED: usize = 200;

/// What kind of failure a request met; transport failures make the caller back off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailKind {
    /// Connecting, writing or reading failed (the connection is dropped and redialled).
    Transport,
    /// The request did not finish within [`REQUEST_TIMEOUT`].
    Timeout,
    /// The server answered with an unexpected HTTP status.
    Status,
    /// The answer was well-formed HTTP but not what the fixture must answer.
    Check,
}

/// A failed request: its kind and a message naming the request and the problem.
#[derive(Debug, Clone)]
pub struct Failure {
    /// The kind of failure.
    pub kind: FailKind,
    /// What went wrong.
    pub msg: String,
}

impl Failure {
    fn new(kind: FailKind, msg: impl Into<String>) -> Self {
        Self {
            kind,
            msg: msg.into(),
        }
    }

    fn check(msg: impl Into<String>) -> Self {
        Self::new(FailKind::Check, msg)
    }
}

/// The result of a request.
pub type Outcome<T> = Result<T, Failure>;

/// Where the server is: its socket address and the `Host` header value.
#[derive(Debug, Clone)]
pub struct Target {
    /// The server's address.
    pub addr: SocketAddr,
    host: HeaderValue,
    /// Whether the server is the bare canned-response server (answers do not depend on the
    /// task, so the prompt text is not checked against the task index).
    pub canned: bool,
    /// The environment calls go to ([`ENV`] unless set).
    env: String,
}

impl Target {
    /// Parse `http://HOST:PORT` (loopback only).
    pub fn parse(url: &str, canned: bool) -> Result<Self, String> {
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| format!("not an http:// URL: {url}"))?
            .trim_end_matches('/');
        let addr: SocketAddr = rest
            .parse()
            .map_err(|e| format!("bad address in {url}: {e}"))?;
        if !addr.ip().is_loopback() {
            return Err(format!("the benchmark only talks to loopback, not {addr}"));
        }
        let host = HeaderValue::from_str(rest).map_err(|e| format!("bad host {rest}: {e}"))?;
        Ok(Self {
            addr,
            host,
            canned,
            env: ENV.to_owned(),
        })
    }

    /// The same server, calls going to environment `env`.
    pub fn with_env(mut self, env: &str) -> Self {
        self.env = env.to_owned();
        self
    }
}

/// One keep-alive connection, redialled after a transport failure.
pub struct Conn {
    target: Target,
    /// The local address to connect from (the system's choice when `None`).
    source: Option<IpAddr>,
    sender: Option<SendRequest<Full<Bytes>>>,
}

impl Conn {
    /// A connection to `target`, dialled on first use.
    pub fn new(target: Target) -> Self {
        Self {
            target,
            source: None,
            sender: None,
        }
    }

    /// A connection to `target` from the local address `source` (another loopback address
    /// has its own ephemeral ports).
    pub fn with_source(target: Target, source: IpAddr) -> Self {
        Self {
            target,
            source: Some(source),
            sender: None,
        }
    }

    async fn dial(&self) -> std::io::Result<TcpStream> {
        match self.source {
            None => TcpStream::connect(self.target.addr).await,
            Some(ip) => {
                let socket = if ip.is_ipv4() {
                    TcpSocket::new_v4()?
                } else {
                    TcpSocket::new_v6()?
                };
                socket.bind(SocketAddr::new(ip, 0))?;
                socket.connect(self.target.addr).await
            }
        }
    }

    /// Whether the answers of this server are canned.
    pub fn canned(&self) -> bool {
        self.target.canned
    }

    /// Dial now (if not connected), so connection set-up stays out of timed operations.
    pub async fn connect(&mut self) -> Outcome<()> {
        self.sender().await.map(|_| ())
    }

    async fn sender(&mut self) -> Outcome<&mut SendRequest<Full<Bytes>>> {
        if self.sender.as_ref().is_some_and(|s| s.is_closed()) {
            self.sender = None;
        }
        if self.sender.is_none() {
            let transport = |e: std::io::Error| {
                Failure::new(
                    FailKind::Transport,
                    format!("connect {}: {e}", self.target.addr),
                )
            };
            let stream = self.dial().await.map_err(transport)?;
            stream.set_nodelay(true).map_err(transport)?;
            let (sender, conn) = http1::handshake(TokioIo::new(stream))
                .await
                .map_err(|e| Failure::new(FailKind::Transport, format!("handshake: {e}")))?;
            tokio::spawn(async move {
                // The connection ends when the sender is dropped or the server closes it; an
                // error here surfaces on the next request as a transport failure.
                let _ = conn.await;
            });
            self.sender = Some(sender);
        }
        self.sender
            .as_mut()
            .ok_or_else(|| Failure::new(FailKind::Transport, "no connection"))
    }

    /// Send one request and hand the response to `read`, all within [`REQUEST_TIMEOUT`]. A
    /// transport failure or timeout drops the connection so the next request redials.
    async fn exchange<T, F, Fut>(&mut self, req: Request<Full<Bytes>>, read: F) -> Outcome<T>
    where
        F: FnOnce(Response<Incoming>) -> Fut,
        Fut: std::future::Future<Output = Outcome<T>>,
    {
        let what = format!("{} {}", req.method(), req.uri());
        let fut = async {
            let sender = self.sender().await?;
            sender
                .ready()
                .await
                .map_err(|e| Failure::new(FailKind::Transport, format!("{what}: {e}")))?;
            let resp = sender
                .send_request(req)
                .await
                .map_err(|e| Failure::new(FailKind::Transport, format!("{what}: {e}")))?;
            read(resp).await
        };
        let result = match tokio::time::timeout(REQUEST_TIMEOUT, fut).await {
            Ok(r) => r,
            Err(_) => Err(Failure::new(
                FailKind::Timeout,
                format!("{what}: no complete answer within {REQUEST_TIMEOUT:?}"),
            )),
        };
        if let Err(f) = &result {
            if matches!(f.kind, FailKind::Transport | FailKind::Timeout) {
                self.sender = None;
            }
        }
        result.map_err(|f| Failure {
            kind: f.kind,
            msg: if f.msg.starts_with(&what) {
                f.msg
            } else {
                format!("{what}: {}", f.msg)
            },
        })
    }

    fn request(
        &self,
        method: Method,
        path: &str,
        sid: Option<&str>,
        accept: &'static str,
        body: Option<Bytes>,
    ) -> Outcome<Request<Full<Bytes>>> {
        let mut b = Request::builder()
            .method(method)
            .uri(path)
            .header(HOST, self.target.host.clone())
            .header(ACCEPT, accept);
        if let Some(sid) = sid {
            b = b.header(ors_core::protocol::HEADER_SESSION_ID, sid);
        }
        let body = match body {
            Some(bytes) => {
                b = b.header(CONTENT_TYPE, "application/json");
                bytes
            }
            None => Bytes::new(),
        };
        b.body(Full::new(body))
            .map_err(|e| Failure::check(format!("building {path}: {e}")))
    }

    /// A JSON request whose answer must be 200; returns the body.
    async fn json(
        &mut self,
        method: Method,
        path: &str,
        sid: Option<&str>,
        body: Option<Bytes>,
    ) -> Outcome<(Bytes, bool)> {
        let req = self.request(method, path, sid, "application/json", body)?;
        self.exchange(req, |resp| async move {
            let status = resp.status();
            let is_sse = resp
                .headers()
                .get(CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.starts_with("text/event-stream"));
            let body = read_body(resp.into_body()).await?;
            if status != StatusCode::OK {
                return Err(status_failure(status, &body));
            }
            Ok((body, is_sse))
        })
        .await
    }

    /// `POST /create_session`; returns the new session id (JSON or SSE answer).
    pub async fn create_session(&mut self) -> Outcome<String> {
        let (body, is_sse) = self
            .json(Method::POST, "/create_session", None, None)
            .await?;
        let sid = if is_sse {
            SseDecoder::new()
                .push(&body)
                .into_iter()
                .find(|e| e.event == EVENT_TASK_ID)
                .map(|e| e.data)
                .ok_or_else(|| Failure::check("create_session: no task_id event"))?
        } else {
            serde_json::from_slice::<SessionId>(&body)
                .map_err(|e| Failure::check(format!("create_session: {e}")))?
                .sid
        };
        if sid.is_empty() {
            return Err(Failure::check("create_session: empty session id"));
        }
        Ok(sid)
    }

    /// `POST /create` for task `index` of the `train` split.
    pub async fn create(&mut self, sid: &str, index: u64) -> Outcome<()> {
        let body = format!("{{\"split\":\"train\",\"index\":{index}}}");
        let (body, _) = self
            .json(Method::POST, "/create", Some(sid), Some(Bytes::from(body)))
            .await?;
        let got = serde_json::from_slice::<SessionId>(&body)
            .map_err(|e| Failure::check(format!("create: {e}")))?;
        if got.sid != sid {
            return Err(Failure::check(format!(
                "create: answered sid {:?} for {sid:?}",
                got.sid
            )));
        }
        Ok(())
    }

    /// `GET /conformance/prompt`, checked to be the question of task `index`.
    pub async fn prompt(&mut self, sid: &str, index: u64) -> Outcome<()> {
        let path = format!("/{ENV}/prompt");
        let (body, _) = self.json(Method::GET, &path, Some(sid), None).await?;
        let blocks: Vec<Block> = serde_json::from_slice(&body)
            .map_err(|e| Failure::check(format!("prompt: not a list of blocks: {e}")))?;
        let text = match blocks.as_slice() {
            [Block::Text(t)] => t.text.as_str(),
            _ => return Err(Failure::check("prompt: not exactly one text block")),
        };
        if !self.canned() && text != format!("What is {index}+{index}?") {
            return Err(Failure::check(format!(
                "prompt: {text:?} is not the question of train task {index}"
            )));
        }
        Ok(())
    }

    /// `POST /delete`.
    pub async fn delete(&mut self, sid: &str) -> Outcome<()> {
        self.json(Method::POST, "/delete", Some(sid), None).await?;
        Ok(())
    }

    /// `POST /{env}/call` with a prepared JSON body; returns the reassembled result.
    pub async fn call(&mut self, sid: &str, body: Bytes) -> Outcome<RunToolOutput> {
        let path = format!("/{}/call", self.target.env);
        let req = self.request(
            Method::POST,
            &path,
            Some(sid),
            "text/event-stream",
            Some(body),
        )?;
        self.exchange(req, |resp| async move {
            let status = resp.status();
            let mut body = resp.into_body();
            if status != StatusCode::OK {
                let bytes = read_body(body).await?;
                return Err(status_failure(status, &bytes));
            }
            let mut decoder = CallStreamDecoder::new();
            let mut saw_task_id = false;
            let mut result = None;
            while let Some(frame) = body.frame().await {
                let frame = frame.map_err(|e| {
                    Failure::new(FailKind::Transport, format!("reading the stream: {e}"))
                })?;
                let Some(data) = frame.data_ref() else {
                    continue;
                };
                for event in decoder.push(data) {
                    match event.map_err(|e| Failure::check(e.to_string()))? {
                        CallEvent::TaskId(_) => saw_task_id = true,
                        CallEvent::Progress(_) => {}
                        CallEvent::Error(e) => {
                            return Err(Failure::check(format!("error event: {e}")))
                        }
                        CallEvent::Result(r) => {
                            if !saw_task_id {
                                return Err(Failure::check("result before the task_id event"));
                            }
                            result = Some(r);
                        }
                    }
                }
            }
            result.ok_or_else(|| Failure::check("the stream ended without a result"))
        })
        .await
    }
}

async fn read_body(body: Incoming) -> Outcome<Bytes> {
    let mut body = body;
    let mut out = BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame = frame
            .map_err(|e| Failure::new(FailKind::Transport, format!("reading the body: {e}")))?;
        if let Some(data) = frame.data_ref() {
            out.extend_from_slice(data);
        }
    }
    Ok(out.freeze())
}

fn status_failure(status: StatusCode, body: &[u8]) -> Failure {
    let text = String::from_utf8_lossy(&body[..body.len().min(MAX_QUOTED)]);
    Failure::new(FailKind::Status, format!("HTTP {status}: {text}"))
}

/// The single text of a successful result, checked to be one text block.
pub fn single_text(result: &RunToolOutput) -> Outcome<&ors_core::types::ToolOutput> {
    match result {
        RunToolOutput::Error(e) => Err(Failure::check(format!("ok: false: {e}"))),
        RunToolOutput::Success(out) => match out.blocks.as_slice() {
            [Block::Text(_)] => Ok(out),
            _ => Err(Failure::check("the output is not exactly one text block")),
        },
    }
}

/// The text of the first block of a checked single-text output.
pub fn text_of(out: &ors_core::types::ToolOutput) -> &str {
    out.blocks.first().and_then(Block::as_text).unwrap_or("")
}
