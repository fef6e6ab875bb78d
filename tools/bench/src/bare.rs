//! The bare server: hyper answering the benchmark's ORS requests with canned bytes and no
//! logic, so its throughput is the machine's limit for this shape of traffic.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use ors_core::sse::{encode_result, encode_task_id};
use ors_core::types::{Block, RunToolOutput, ToolOutput};
use serde_json::json;
use tokio::net::TcpListener;

use crate::workloads::ECHO_TEXT;

/// Pending connections the kernel may queue before `accept`.
const BACKLOG: u32 = 4096;

/// The canned answers, built once at start-up.
struct Canned {
    prompt: Bytes,
    echo: Bytes,
    submit: Bytes,
    big: Bytes,
    slept: Bytes,
    not_found: Bytes,
    next_id: AtomicU64,
}

impl Canned {
    fn new(big_bytes: usize) -> Self {
        let call = |out: ToolOutput| {
            let mut sse = encode_task_id("00000000000000000000000000000000");
            sse.extend_from_slice(&encode_result(&RunToolOutput::Success(out)));
            Bytes::from(sse)
        };
        let mut length = serde_json::Map::new();
        length.insert("length".into(), json!(ECHO_TEXT.len()));
        Self {
            prompt: Bytes::from(json!([Block::text("What is 0+0?")]).to_string()),
            echo: call(
                ToolOutput::text(ECHO_TEXT)
                    .with_reward(0.0)
                    .with_metadata(length),
            ),
            submit: call(ToolOutput::text("Correct!").with_reward(1.0).finish()),
            big: call(ToolOutput::text("x".repeat(big_bytes))),
            slept: call(ToolOutput::text("slept")),
            not_found: Bytes::from_static(b"{\"detail\":\"not found\"}"),
            next_id: AtomicU64::new(1),
        }
    }
}

fn respond(status: StatusCode, content_type: &'static str, body: Bytes) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(body));
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    if content_type == "text/event-stream" {
        resp.headers_mut()
            .insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    }
    resp
}

fn sid_json(sid: &str) -> Bytes {
    Bytes::from(format!("{{\"sid\":\"{sid}\"}}"))
}

/// The `"ms":N` of a `sleep` call's body (0 when absent): the one thing the bare server
/// reads, so the concurrency workload's calls take as long as on a real server.
fn sleep_ms(body: &[u8]) -> u64 {
    let key = b"\"ms\":";
    let Some(at) = body.windows(key.len()).position(|w| w == key) else {
        return 0;
    };
    body[at + key.len()..]
        .iter()
        .skip_while(|b| **b == b' ')
        .take_while(|b| b.is_ascii_digit())
        .fold(0u64, |n, d| {
            n.saturating_mul(10).saturating_add(u64::from(d - b'0'))
        })
}

/// Does the JSON body name this tool? A byte search, not a parse: the bare server has no logic.
fn names(body: &[u8], tool: &[u8]) -> bool {
    body.windows(tool.len()).any(|w| w == tool)
}

async fn handle(
    canned: Arc<Canned>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let (parts, body) = req.into_parts();
    // Read the body as any server must before answering on a keep-alive connection.
    let body = match body.collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => Bytes::new(),
    };
    let sid = parts
        .headers
        .get("x-session-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let path = parts.uri.path();
    let json = "application/json";
    let resp = match (&parts.method, path) {
        (&Method::POST, "/create_session") => {
            let n = canned.next_id.fetch_add(1, Ordering::Relaxed);
            respond(StatusCode::OK, json, sid_json(&format!("{n:032x}")))
        }
        (&Method::POST, "/create" | "/delete") => respond(StatusCode::OK, json, sid_json(sid)),
        (&Method::GET, "/health") => respond(
            StatusCode::OK,
            json,
            Bytes::from_static(b"{\"status\":\"ok\"}"),
        ),
        (&Method::GET, p) if p.ends_with("/prompt") => {
            respond(StatusCode::OK, json, canned.prompt.clone())
        }
        (&Method::POST, p) if p.ends_with("/call") => {
            let sse = if names(&body, b"\"submit\"") {
                canned.submit.clone()
            } else if names(&body, b"\"sleep\"") {
                tokio::time::sleep(Duration::from_millis(sleep_ms(&body))).await;
                canned.slept.clone()
            } else if names(&body, b"\"big\"") {
                canned.big.clone()
            } else {
                canned.echo.clone()
            };
            respond(StatusCode::OK, "text/event-stream", sse)
        }
        _ => respond(StatusCode::NOT_FOUND, json, canned.not_found.clone()),
    };
    Ok(resp)
}

/// Serve until killed, printing the ready line once listening.
pub async fn serve(addr: SocketAddr, big_bytes: usize) -> Result<(), String> {
    let bind = |e: std::io::Error| format!("bind {addr}: {e}");
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()
    } else {
        tokio::net::TcpSocket::new_v6()
    }
    .map_err(bind)?;
    socket.set_reuseaddr(true).map_err(bind)?;
    socket.bind(addr).map_err(bind)?;
    // A burst of hundreds of connects must not overflow the accept queue (the default of
    // 128 drops SYNs, which the client retries only after a second).
    let listener = socket.listen(BACKLOG).map_err(bind)?;
    let local = listener
        .local_addr()
        .map_err(|e| format!("local address: {e}"))?;
    println!("ors-bare listening on http://{local}");
    run(listener, big_bytes).await;
    Ok(())
}

/// Accept and serve connections on `listener` forever.
pub async fn run(listener: TcpListener, big_bytes: usize) {
    let canned = Arc::new(Canned::new(big_bytes));
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(s) => s,
            // Out of descriptors or a reset before accept: keep serving the others.
            Err(_) => {
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let canned = canned.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req| handle(canned.clone(), req));
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}
