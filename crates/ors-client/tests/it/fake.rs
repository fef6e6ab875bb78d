//! The scripted fake server (real HTTP/1.1 over TCP): canned answers, or a script that takes
//! over the connection and writes anything at all, which is how the hostile behaviours (floods,
//! drips, lies about lengths) are played. Only std and tokio, so the `hostile_server` example
//! can include this file and play the same behaviours by hand.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// One request as the fake server saw it.
#[derive(Debug, Clone)]
pub struct FakeRequest {
    /// `POST /x`.
    pub line: String,
    /// Lower-cased header lines.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: String,
}

/// A script that takes over a connection after its request was read.
pub type Script = Box<dyn FnOnce(TcpStream) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send>;

/// A canned answer: status, content type, body, extra header lines; or a script.
pub struct FakeResponse {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
    pub headers: Vec<(&'static str, String)>,
    /// When set, the script answers instead (and owns the connection until it returns).
    pub script: Option<Script>,
}

impl FakeResponse {
    /// A JSON answer.
    pub fn json(status: u16, body: &str) -> Self {
        Self {
            status,
            content_type: "application/json",
            body: body.to_owned(),
            headers: Vec::new(),
            script: None,
        }
    }

    /// An SSE answer.
    pub fn sse(body: &str) -> Self {
        Self {
            content_type: "text/event-stream",
            ..Self::json(200, body)
        }
    }

    /// Add a header line.
    pub fn header(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    /// Hand the connection to `script`, which writes whatever it likes; the connection closes
    /// when it returns.
    pub fn raw<F, Fut>(script: F) -> Self
    where
        F: FnOnce(TcpStream) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        Self {
            script: Some(Box::new(move |conn| Box::pin(script(conn)))),
            ..Self::json(200, "")
        }
    }
}

/// Write `head`, then `piece` again and again until the peer goes away; returns the bytes
/// written. A client that stops reading but keeps the connection open stalls this forever,
/// which is what a test waiting for it to return detects.
pub async fn write_forever(mut conn: TcpStream, head: &[u8], piece: &[u8]) -> u64 {
    if conn.write_all(head).await.is_err() {
        return 0;
    }
    let mut written = head.len() as u64;
    while conn.write_all(piece).await.is_ok() {
        written += piece.len() as u64;
    }
    written
}

/// Write `head`, then one byte of `drip` every `every` until the peer goes away.
pub async fn drip(mut conn: TcpStream, head: &[u8], drip: &[u8], every: Duration) {
    if conn.write_all(head).await.is_err() {
        return;
    }
    for b in drip.iter().cycle() {
        tokio::time::sleep(every).await;
        if conn.write_all(&[*b]).await.is_err() {
            return;
        }
    }
}

/// The head of a `200` event stream whose body ends when the connection closes.
pub const SSE_HEAD: &[u8] =
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n";

/// One SSE event.
pub fn event(name: &str, data: &str) -> Vec<u8> {
    format!("event: {name}\ndata: {data}\n\n").into_bytes()
}

/// The start of a call stream: [`SSE_HEAD`], the `task_id` event, then `more`.
pub fn call_start(task_id: &str, more: &[u8]) -> Vec<u8> {
    let mut out = SSE_HEAD.to_vec();
    out.extend(event("task_id", task_id));
    out.extend_from_slice(more);
    out
}

type Handler = dyn Fn(&FakeRequest, usize) -> FakeResponse + Send + Sync;

/// A scripted HTTP/1.1 server: the handler gets each request and how many requests with the
/// same request line came before it.
pub struct Fake {
    pub url: String,
    seen: Arc<Mutex<Vec<FakeRequest>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Fake {
    /// Serve `handler` on a free port.
    pub async fn start(
        handler: impl Fn(&FakeRequest, usize) -> FakeResponse + Send + Sync + 'static,
    ) -> Fake {
        Self::start_on("127.0.0.1:0", handler).await
    }

    /// Serve `handler` on `addr`.
    pub async fn start_on(
        addr: &str,
        handler: impl Fn(&FakeRequest, usize) -> FakeResponse + Send + Sync + 'static,
    ) -> Fake {
        let listener = TcpListener::bind(addr).await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let seen: Arc<Mutex<Vec<FakeRequest>>> = Arc::default();
        let handler: Arc<Handler> = Arc::new(handler);
        let s = Arc::clone(&seen);
        let task = tokio::spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                let (seen, handler) = (Arc::clone(&s), Arc::clone(&handler));
                tokio::spawn(serve_fake(conn, seen, handler));
            }
        });
        Fake { url, seen, task }
    }

    /// A server for one episode of the environment `env` with session id `sid-1`: the SSE
    /// `create_session` reply (the reference form), `create` answered by `create`, the calls
    /// by `call`, deletes and pings accepted.
    pub async fn episode(
        create: impl Fn(usize) -> FakeResponse + Send + Sync + 'static,
        call: impl Fn(usize) -> FakeResponse + Send + Sync + 'static,
    ) -> Fake {
        Fake::start(move |req: &FakeRequest, n| match req.line.as_str() {
            "POST /create_session" => {
                FakeResponse::sse("event: task_id\ndata: sid-1\n\nevent: end\ndata: \n\n")
            }
            "POST /create" => create(n),
            "POST /env/call" => call(n),
            "POST /delete" | "POST /delete_session" | "POST /ping" => {
                FakeResponse::json(200, r#"{"sid":"sid-1"}"#)
            }
            _ => FakeResponse::json(404, r#"{"detail":"Not Found"}"#),
        })
        .await
    }

    /// How many requests had this request line (`"POST /create"`).
    pub fn count(&self, line: &str) -> usize {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.line == line)
            .count()
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<FakeRequest> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for Fake {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn serve_fake(
    mut conn: TcpStream,
    seen: Arc<Mutex<Vec<FakeRequest>>>,
    handler: Arc<Handler>,
) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(async move {
        let mut buf: Vec<u8> = Vec::new();
        let mut tmp = vec![0u8; 8192];
        loop {
            let head_end = loop {
                if let Some(i) = find(&buf, b"\r\n\r\n") {
                    break i;
                }
                match conn.read(&mut tmp).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buf.extend_from_slice(&tmp[..n]),
                }
            };
            let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
            let mut lines = head.split("\r\n");
            let first = lines.next().unwrap_or("");
            let line = first.rsplit_once(' ').map_or(first, |(l, _)| l).to_owned();
            let headers: Vec<(String, String)> = lines
                .filter_map(|l| l.split_once(':'))
                .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
                .collect();
            let len: usize = headers
                .iter()
                .find(|(k, _)| k == "content-length")
                .and_then(|(_, v)| v.parse().ok())
                .unwrap_or(0);
            while buf.len() < head_end + 4 + len {
                match conn.read(&mut tmp).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buf.extend_from_slice(&tmp[..n]),
                }
            }
            let body = String::from_utf8_lossy(&buf[head_end + 4..head_end + 4 + len]).into_owned();
            buf.drain(..head_end + 4 + len);
            let req = FakeRequest {
                line,
                headers,
                body,
            };
            let before = {
                let mut s = seen.lock().unwrap();
                let n = s.iter().filter(|r| r.line == req.line).count();
                s.push(req.clone());
                n
            };
            let resp = handler(&req, before);
            if let Some(script) = resp.script {
                return script(conn).await;
            }
            let mut out = format!(
                "HTTP/1.1 {} X\r\nContent-Type: {}\r\nContent-Length: {}\r\n",
                resp.status,
                resp.content_type,
                resp.body.len()
            );
            for (k, v) in &resp.headers {
                out.push_str(&format!("{k}: {v}\r\n"));
            }
            out.push_str("\r\n");
            out.push_str(&resp.body);
            if conn.write_all(out.as_bytes()).await.is_err() {
                return;
            }
        }
    })
}
