//! Whole connections to a server: raw bytes (anything a socket may carry) or a sequence of
//! requests built from the fuzzer's bytes (routes, session ids, headers, bodies of every
//! endpoint, tool calls), on a paused clock so sleeps and timeouts cost no real time.
//!
//! Nothing may panic (libFuzzer's hook aborts on a panic in any task, caught or not), no
//! answer is a 500 but the environment's own set-up failure, every error is a JSON
//! `{"detail", "code"}` body, a 405 says what is allowed, and every call stream decodes to a
//! result or an error event.
#![no_main]

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{ACCEPT, ALLOW, CONTENT_TYPE};
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use ors_core::sse::{CallEvent, CallStreamDecoder};
use ors_core::types::ErrorBody;
use ors_core::ErrorCode;
use ors_fuzz::env::Fuzzed;
use ors_server::fuzzing::Harness;
use ors_server::runtime::env::EnvHandle;
use ors_server::ServerConfig;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Longest (virtual) wait for one answer: longer than every server timeout.
const ANSWER_WITHIN: Duration = Duration::from_secs(900);

/// Most answer bytes read; the rest of a body is left unread.
const READ_AT_MOST: usize = 1 << 20;

fn harness() -> Arc<Harness> {
    let config = ServerConfig {
        max_body_bytes: 16 * 1024,
        max_sessions: 8,
        max_queued_calls: 4,
        tool_timeout: Some(Duration::from_secs(120)),
        ..ServerConfig::default()
    };
    let env = Arc::new(EnvHandle::<Fuzzed>::default());
    Arc::new(Harness::new(config, vec![env]).expect("the harness starts"))
}

/// A new connection to the harness.
fn connect(h: &Arc<Harness>) -> tokio::io::DuplexStream {
    let (client, server) = tokio::io::duplex(64 * 1024);
    let h = Arc::clone(h);
    tokio::spawn(async move { h.serve(server).await });
    client
}

/// Raw bytes in, everything the server says back until it closes or goes quiet.
async fn raw(h: &Arc<Harness>, bytes: &[u8], half_close: bool) {
    let mut io = connect(h);
    if io.write_all(bytes).await.is_err() {
        return;
    }
    if half_close {
        let _ = io.shutdown().await;
    }
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match tokio::time::timeout(Duration::from_secs(60), io.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => break,
            Ok(Ok(n)) => {
                if out.len() < READ_AT_MOST {
                    out.extend_from_slice(&buf[..n]);
                }
            }
        }
    }
    // The first answer, at least, is HTTP (1.0 to a 1.0 request) and no 500.
    if let Some(status) = out.get(..12) {
        let text = String::from_utf8_lossy(&out[..out.len().min(300)]);
        assert!(
            status.starts_with(b"HTTP/1.1 ") || status.starts_with(b"HTTP/1.0 "),
            "{text}"
        );
        // A 500 is only ever the environment's own failure (task 4's set-up).
        if &status[9..] == b"500" {
            assert!(text.contains("\"code\":\"setup_failed\""), "{text}");
        }
    }
}

const PATHS: [&str; 20] = [
    "/health",
    "/list_environments",
    "/create_session",
    "/create",
    "/ping",
    "/delete",
    "/delete_session",
    "/tools",
    "/splits",
    "/tasks",
    "/num_tasks",
    "/task",
    "/get_task",
    "/task_range",
    "/get_task_range",
    "/task_tools",
    "/prompt",
    "/call",
    "/nope",
    "/",
];
const ENVS: [&str; 4] = ["", "/fuzzed", "/FUZZED", "/other"];
const TOOLS: [&str; 8] = [
    "echo", "counter", "sleep", "big", "fail", "submit", "nope", "",
];
const SPLITS: [&str; 3] = ["train", "test", "nope"];

fn number(u: &mut Unstructured<'_>) -> Result<Value> {
    Ok(match u.int_in_range(0u8..=5)? {
        0 => json!(u.int_in_range(-2i64..=6)?),
        1 => json!(u.arbitrary::<i64>()?),
        2 => json!(u.arbitrary::<u64>()?),
        3 => json!(u.arbitrary::<f64>()?),
        4 => json!(u.arbitrary::<String>()?),
        _ => Value::Null,
    })
}

fn string(u: &mut Unstructured<'_>, common: &[&str]) -> Result<Value> {
    Ok(if u.ratio(3, 4)? {
        json!(u.choose(common)?)
    } else {
        json!(u.arbitrary::<String>()?)
    })
}

/// A JSON value of any shape, from a few bytes.
fn any_json(u: &mut Unstructured<'_>) -> Result<Value> {
    let text: String = u.arbitrary()?;
    Ok(serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

fn tool_input(u: &mut Unstructured<'_>) -> Result<Value> {
    Ok(match u.int_in_range(0u8..=5)? {
        0 => {
            json!({"text": u.arbitrary::<String>()?, "times": number(u)?, "mode": string(u, &["plain", "loud", "Plain"])?})
        }
        1 => {
            json!({"ms": if u.arbitrary()? { json!(u.int_in_range(0u64..=200_000)?) } else { number(u)? }})
        }
        2 => {
            json!({"bytes": if u.arbitrary()? { json!(u.int_in_range(0u64..=70_000)?) } else { number(u)? }})
        }
        3 => json!({}),
        4 => Value::Null,
        _ => any_json(u)?,
    })
}

fn body(u: &mut Unstructured<'_>, path: &str) -> Result<Option<Bytes>> {
    let value = match u.int_in_range(0u8..=9)? {
        0 => return Ok(None),
        1 => return Ok(Some(Bytes::from(u.arbitrary::<Vec<u8>>()?))),
        2 => any_json(u)?,
        _ if path.ends_with("/create") => match u.int_in_range(0u8..=2)? {
            0 => json!({"split": string(u, &SPLITS)?, "index": number(u)?}),
            1 => {
                json!({"env_name": string(u, &["fuzzed", "other"])?, "task_spec": {"id": number(u)?}})
            }
            _ => json!({"split": "train", "index": 0, "secrets": any_json(u)?}),
        },
        _ if path.ends_with("/call") => {
            let mut call = json!({"name": string(u, &TOOLS)?, "input": tool_input(u)?});
            if u.arbitrary()? {
                call["task_id"] = string(u, &["t1", "t2"])?;
            }
            call
        }
        _ if path.ends_with("task_range") => {
            json!({"split": string(u, &SPLITS)?, "start": number(u)?, "stop": number(u)?})
        }
        _ if path.ends_with("task") => json!({"split": string(u, &SPLITS)?, "index": number(u)?}),
        _ => json!({"split": string(u, &SPLITS)?}),
    };
    Ok(Some(Bytes::from(value.to_string())))
}

/// One request built from the fuzzer's bytes, or `None` when they make no valid request.
fn request(u: &mut Unstructured<'_>, sids: &[String]) -> Result<Option<Request<Full<Bytes>>>> {
    let method = match u.int_in_range(0u8..=9)? {
        0 => Method::PUT,
        1 => Method::HEAD,
        2..=4 => Method::GET,
        _ => Method::POST,
    };
    let path = if u.ratio(9, 10)? {
        format!("{}{}", u.choose(&ENVS)?, u.choose(&PATHS)?)
    } else {
        u.arbitrary::<String>()?
    };
    let mut b = Request::builder()
        .method(method)
        .uri(path.as_str())
        .header("host", "fuzz");
    match u.int_in_range(0u8..=5)? {
        0 => {}
        1 => b = b.header("x-session-id", u.arbitrary::<Vec<u8>>()?),
        _ => b = b.header("x-session-id", u.choose(sids)?.as_str()),
    }
    if u.arbitrary()? {
        b = b.header(
            ACCEPT,
            *u.choose(&["text/event-stream", "application/json", "*/*"])?,
        );
    }
    if u.ratio(1, 8)? {
        b = b.header("x-secrets", u.arbitrary::<Vec<u8>>()?);
    }
    let body = body(u, &path)?;
    if body.is_some() {
        b = b.header(CONTENT_TYPE, "application/json");
    }
    Ok(b.body(Full::new(body.unwrap_or_default())).ok())
}

/// Everything an answer must be.
fn check_answer(
    method: &Method,
    path: &str,
    status: StatusCode,
    headers: &http::HeaderMap,
    body: &[u8],
    complete: bool,
) {
    if status == StatusCode::INTERNAL_SERVER_ERROR && complete && method != Method::HEAD {
        // Only ever the environment's own failure (task 4's set-up), never the server's.
        let e: Option<ErrorBody> = serde_json::from_slice(body).ok();
        assert_eq!(
            e.and_then(|e| e.error_code()),
            Some(ErrorCode::SetupFailed),
            "{method} {path}: {}",
            String::from_utf8_lossy(body)
        );
    }
    if status == StatusCode::METHOD_NOT_ALLOWED {
        assert!(
            headers.contains_key(ALLOW),
            "{method} {path}: a 405 without Allow"
        );
    }
    if method == Method::HEAD || !complete {
        return;
    }
    if status.is_client_error() || status.is_server_error() {
        let e: ErrorBody = serde_json::from_slice(body).unwrap_or_else(|e| {
            panic!(
                "{method} {path}: {status} without an error body ({e}): {}",
                String::from_utf8_lossy(body)
            )
        });
        assert!(!e.detail.is_empty(), "{method} {path}: empty detail");
        assert!(
            e.error_code().is_some(),
            "{method} {path}: unknown code in {}",
            String::from_utf8_lossy(body)
        );
    }
    let sse = headers
        .get(CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    if status == StatusCode::OK && sse && path.ends_with("/call") {
        let mut d = CallStreamDecoder::new();
        let events = d.push(body);
        for e in &events {
            assert!(
                e.is_ok(),
                "{method} {path}: {e:?} in {}",
                String::from_utf8_lossy(body)
            );
        }
        assert!(
            d.finished(),
            "{method} {path}: the stream ended without its last event"
        );
        assert!(matches!(
            events.last(),
            Some(Ok(CallEvent::Result(_) | CallEvent::Error(_)))
        ));
    }
}

async fn handshake(h: &Arc<Harness>) -> Option<SendRequest<Full<Bytes>>> {
    let (sender, conn) = http1::handshake(TokioIo::new(connect(h))).await.ok()?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Some(sender)
}

async fn requests(h: &Arc<Harness>, u: &mut Unstructured<'_>) -> Result<()> {
    let mut sender = None;
    let mut sids = vec!["s1".to_owned()];
    for _ in 0..u.int_in_range(1u8..=10)? {
        let Some(req) = request(u, &sids)? else {
            continue;
        };
        if sender
            .as_ref()
            .is_none_or(|s: &SendRequest<_>| s.is_closed())
        {
            sender = handshake(h).await;
        }
        let Some(s) = sender.as_mut() else {
            return Ok(());
        };
        let (method, path) = (req.method().clone(), req.uri().path().to_owned());
        let exchange = async {
            s.ready().await.ok()?;
            let resp = s.send_request(req).await.ok()?;
            let (parts, mut body) = resp.into_parts();
            let mut bytes = Vec::new();
            let mut complete = true;
            while let Some(frame) = body.frame().await {
                let Ok(frame) = frame else {
                    complete = false;
                    break;
                };
                if let Some(data) = frame.data_ref() {
                    bytes.extend_from_slice(data);
                    if bytes.len() > READ_AT_MOST {
                        complete = false;
                        break;
                    }
                }
            }
            Some((parts, bytes, complete))
        };
        match tokio::time::timeout(ANSWER_WITHIN, exchange).await {
            Ok(Some((parts, bytes, complete))) => {
                check_answer(
                    &method,
                    &path,
                    parts.status,
                    &parts.headers,
                    &bytes,
                    complete,
                );
                if path.ends_with("/create_session") && parts.status == StatusCode::OK {
                    if let Ok(v) = serde_json::from_slice::<Value>(&bytes) {
                        if let Some(sid) = v["sid"].as_str() {
                            sids.push(sid.to_owned());
                        }
                    }
                }
            }
            // A broken or stuck exchange: the next request opens a new connection.
            _ => sender = None,
        }
    }
    Ok(())
}

fn check(data: &[u8]) -> Result<()> {
    let mut u = Unstructured::new(data);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("a runtime");
    let h = harness();
    match u.int_in_range(0u8..=3)? {
        0 => {
            let half_close = u.arbitrary()?;
            let bytes = u.take_rest();
            rt.block_on(raw(&h, bytes, half_close));
        }
        _ => rt.block_on(requests(&h, &mut u))?,
    }
    Ok(())
}

fuzz_target!(|data: &[u8]| {
    let _ = check(data);
});
