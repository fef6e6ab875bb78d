//! Test fixtures: the in-process server, a cutting TCP proxy, the common session set-ups, and
//! a raw request (over the workspace's one raw HTTP client, `ors_conformance::http`) for
//! checking what the server thinks of a session. The scripted fake server is in `fake.rs`.

use std::collections::HashSet;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ors_client::{Block, Client, Session};
use ors_conformance::http::{Request, Target};
use ors_examples::conformance::Conformance;
use ors_examples::gsm8k::Gsm8k;
use ors_server::{RunningServer, Server, ServerConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::progress_env::Progressive;

/// Start a server on a free port with conformance, gsm8k and the progress test environment.
pub async fn server_with(tweak: impl FnOnce(&mut ServerConfig)) -> RunningServer {
    let mut cfg = ServerConfig {
        host: "127.0.0.1".into(),
        port: 0,
        ..ServerConfig::default()
    };
    tweak(&mut cfg);
    Server::with_config(cfg)
        .environment::<Conformance>()
        .environment::<Gsm8k>()
        .environment::<Progressive>()
        .bind()
        .await
        .expect("the test server starts")
}

/// A server with default settings.
pub async fn server() -> RunningServer {
    server_with(|_| {}).await
}

/// A client for `url` with fast retries and no API key from the environment.
pub fn client(url: &str) -> Client {
    Client::builder(url)
        .no_api_key()
        .backoff(Duration::from_millis(10), Duration::from_millis(50))
        .build()
        .expect("valid URL")
}

/// A client for `url` that never pings, so only the test's own requests reach the server.
pub fn client_without_ping(url: &str) -> Client {
    Client::builder(url)
        .no_api_key()
        .ping_interval(None)
        .build()
        .expect("valid URL")
}

/// The status and error code of a raw `POST path` with a session id (to see what the server
/// thinks of a session without the client's interpretation).
pub async fn raw_post(url: &str, path: &str, sid: &str) -> (u16, Option<String>) {
    let target = Target::from_url(url, None).expect("an http:// URL");
    let req = Request::new("POST", path).sid(sid);
    let r = tokio::task::spawn_blocking(move || req.send(&target))
        .await
        .expect("the blocking request")
        .unwrap_or_else(|e| panic!("{e}"));
    (r.status(), r.code())
}

/// `(200, None)`: what [`raw_post`] gives for a live session.
pub fn ok() -> (u16, Option<String>) {
    (200, None)
}

/// `(410, session_deleted)`: what [`raw_post`] gives for a deleted session.
pub fn deleted() -> (u16, Option<String>) {
    (410, Some("session_deleted".to_owned()))
}

/// A session on task 0 of the fixture's `train` split: where most tests start.
pub async fn fixture_session(c: &Client) -> Session {
    c.environment("conformance")
        .session_at("train", 0)
        .await
        .expect("the fixture session opens")
}

/// The in-process server and a sabotaging proxy in front of it.
pub async fn behind_proxy() -> (RunningServer, Proxy) {
    let srv = server().await;
    let proxy = Proxy::start(&srv.url().to_string()).await;
    (srv, proxy)
}

/// Have `proxy` cut the next call of `s` after its `task_id`: the client reconnects and the
/// tool runs once (`counter` answers 1, then 2; a second run would make the next one 3).
pub async fn a_cut_call_runs_once(s: &Session, proxy: &Proxy) {
    proxy.plan(&[Cut::Drop]);
    let first = s.call("counter", serde_json::json!({})).await.unwrap();
    assert_eq!(proxy.pending(), 0, "the first call was cut");
    assert_eq!(text(&first.blocks), "1");
    let second = s.call("counter", serde_json::json!({})).await.unwrap();
    assert_eq!(text(&second.blocks), "2");
}

/// The text of the text blocks, joined.
pub fn text(blocks: &[Block]) -> String {
    blocks.iter().filter_map(Block::as_text).collect()
}

/// Poll `f` every 50 ms until it is true or 20 s pass (generous: the machine is shared).
pub async fn eventually<F, Fut>(mut f: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    for _ in 0..400 {
        if f().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// What the proxy does to the next tool call it sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// Close both sides right after forwarding the `task_id` event.
    Drop,
    /// Forward the `task_id` event, then forward nothing more but keep the connection open.
    Stall,
    /// Close both sides as soon as the response starts, before the `task_id` event.
    Early,
}

/// A TCP proxy in front of a server that sabotages tool-call streams on request.
pub struct Proxy {
    /// The proxy's URL.
    pub url: String,
    plan: Arc<Mutex<Vec<Cut>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// A proxy to `upstream` (an `http://host:port` URL).
    pub async fn start(upstream: &str) -> Proxy {
        let upstream = upstream.trim_start_matches("http://").to_owned();
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let plan: Arc<Mutex<Vec<Cut>>> = Arc::default();
        let p = Arc::clone(&plan);
        let ids: Arc<Mutex<HashSet<String>>> = Arc::default();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let upstream = upstream.clone();
                let plan = Arc::clone(&p);
                let ids = Arc::clone(&ids);
                tokio::spawn(async move {
                    if let Ok(server) = TcpStream::connect(&upstream).await {
                        pump(client, server, plan, ids).await;
                    }
                });
            }
        });
        Proxy { url, plan, task }
    }

    /// Sabotage the next tool calls, one plan entry per call, in order.
    pub fn plan(&self, cuts: &[Cut]) {
        self.plan.lock().unwrap().extend_from_slice(cuts);
    }

    /// Plan entries not used yet.
    pub fn pending(&self) -> usize {
        self.plan.lock().unwrap().len()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The `task_id` a call body names, if any.
fn named_task_id(chunk: &[u8]) -> Option<String> {
    let start = find(chunk, b"\"task_id\":\"")? + b"\"task_id\":\"".len();
    let len = chunk[start..].iter().position(|&b| b == b'"')?;
    Some(String::from_utf8_lossy(&chunk[start..start + len]).into_owned())
}

async fn pump(
    client: TcpStream,
    server: TcpStream,
    plan: Arc<Mutex<Vec<Cut>>>,
    ids: Arc<Mutex<HashSet<String>>>,
) {
    let (mut cr, mut cw) = client.into_split();
    let (mut sr, mut sw) = server.into_split();
    let armed: Arc<Mutex<Option<Cut>>> = Arc::default();
    let armed_up = Arc::clone(&armed);
    let up = tokio::spawn(async move {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let n = match cr.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let chunk = &buf[..n];
            // A new call takes the next plan entry: one without a task_id, or the first naming
            // its id (a client that chooses its ids names every call); one naming an id seen
            // before is a reconnect or a resend. Armed before forwarding so the answer cannot
            // overtake the decision.
            let is_call = find(chunk, b"/call HTTP/1.1").is_some();
            let is_new = match named_task_id(chunk) {
                None => true,
                Some(id) => ids.lock().unwrap().insert(id),
            };
            if is_call && is_new {
                let mut plan = plan.lock().unwrap();
                if !plan.is_empty() {
                    *armed_up.lock().unwrap() = Some(plan.remove(0));
                }
            }
            if sw.write_all(chunk).await.is_err() {
                break;
            }
        }
    });
    let mut buf = vec![0u8; 16 * 1024];
    let mut seen: Vec<u8> = Vec::new();
    loop {
        let n = match sr.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let chunk = &buf[..n];
        let cut = *armed.lock().unwrap();
        match cut {
            None => {
                if cw.write_all(chunk).await.is_err() {
                    break;
                }
            }
            Some(Cut::Early) => break,
            Some(mode) => {
                seen.extend_from_slice(chunk);
                let Some(start) = find(&seen, b"event: task_id") else {
                    continue; // headers so far: hold them until the event is complete
                };
                let Some(end) = find(&seen[start..], b"\n\n") else {
                    continue;
                };
                let upto = start + end + 2;
                if cw.write_all(&seen[..upto]).await.is_err() {
                    break;
                }
                if mode == Cut::Stall {
                    // Keep both sockets open and silent until the client gives up.
                    let mut sink = vec![0u8; 16 * 1024];
                    while let Ok(n) = sr.read(&mut sink).await {
                        if n == 0 {
                            break;
                        }
                    }
                }
                break;
            }
        }
    }
    up.abort();
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}
