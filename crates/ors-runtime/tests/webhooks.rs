//! Webhook tools against a real local HTTP server (hyper) that checks the secret: the request
//! a webhook endpoint gets, the answers mapped to results, non-2xx and timeouts as `ok: false`,
//! and no retry once the request may have been sent.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a failed assumption is a failed test

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use ors_core::types::{RunToolOutput, STRUCTURED_KEY};
use ors_runtime::webhook::WebhookTool;
use ors_runtime::{DynamicTool, ToolContext};

const SECRET: &str = "hook-secret-7";

/// Only turns a hang into a failure.
const LIMIT: Duration = Duration::from_secs(30);

/// What the endpoint received: the secret header and the body of each request.
type Seen = Arc<Mutex<Vec<(Option<String>, Value)>>>;

async fn answer(req: Request<Incoming>, seen: Seen) -> Response<Full<Bytes>> {
    let path = req.uri().path().to_owned();
    let secret = req
        .headers()
        .get("x-agent-secret")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body = req
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    if let Ok(mut s) = seen.lock() {
        s.push((secret.clone(), body.clone()));
    }
    let reply = |status: StatusCode, ct: &str, text: String| {
        let mut r = Response::new(Full::new(Bytes::from(text)));
        *r.status_mut() = status;
        if let Ok(v) = ct.parse() {
            r.headers_mut().insert(http::header::CONTENT_TYPE, v);
        }
        r
    };
    if secret.as_deref() != Some(SECRET) {
        return reply(
            StatusCode::UNAUTHORIZED,
            "text/plain",
            "bad secret".to_owned(),
        );
    }
    match path.as_str() {
        "/order" => reply(
            StatusCode::OK,
            "application/json",
            json!({"orderId": body["input"]["orderId"], "status": "shipped"}).to_string(),
        ),
        "/grade" => reply(
            StatusCode::OK,
            "application/json",
            json!({"blocks": [{"type": "text", "text": "right"}], "reward": 1.0, "finished": true})
                .to_string(),
        ),
        "/text" => reply(StatusCode::OK, "text/plain", "plain words".to_owned()),
        "/slow" => {
            tokio::time::sleep(LIMIT).await;
            reply(StatusCode::OK, "text/plain", "late".to_owned())
        }
        _ => reply(
            StatusCode::NOT_FOUND,
            "text/plain",
            "no such hook".to_owned(),
        ),
    }
}

/// Serve the endpoint on a free port; its base URL and what it sees.
async fn endpoint() -> (String, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen: Seen = Arc::default();
    let served = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let seen = Arc::clone(&served);
            tokio::spawn(async move {
                let svc = service_fn(move |req| {
                    let seen = Arc::clone(&seen);
                    async move { Ok::<_, Infallible>(answer(req, seen).await) }
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    (format!("http://{addr}"), seen)
}

fn tool(name: &str, url: String, secret: &str) -> DynamicTool {
    let schema = json!({"type": "object", "properties": {"orderId": {"type": "string"}}});
    WebhookTool::new(name, "A webhook.", schema, url)
        .with_secret(secret)
        .with_timeout(Duration::from_secs(1))
        .into_tool()
        .unwrap()
}

fn ctx() -> ToolContext {
    ToolContext::new("session-1", "call-9", CancellationToken::new(), None)
}

/// The message of an `ok: false` result.
fn error_of(out: &RunToolOutput) -> String {
    match out {
        RunToolOutput::Error(m) => m.error.clone(),
        RunToolOutput::Success(o) => panic!("expected ok: false, got {o:?}"),
    }
}

async fn call(tool: &DynamicTool, input: Value) -> RunToolOutput {
    tokio::time::timeout(LIMIT, tool.call(ctx(), input))
        .await
        .expect("the call hung")
}

#[tokio::test]
async fn a_call_posts_tool_input_session_and_call_with_the_secret() {
    let (base, seen) = endpoint().await;
    let hook = tool("lookup_order", format!("{base}/order"), SECRET);
    let out = call(&hook, json!({"orderId": "7"})).await;
    let o = out.output().expect("ok");
    assert_eq!(
        o.metadata.as_ref().unwrap()[STRUCTURED_KEY]["status"],
        "shipped"
    );
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        vec![(
            Some(SECRET.to_owned()),
            json!({"tool": "lookup_order", "input": {"orderId": "7"},
                   "session_id": "session-1", "call_id": "call-9"})
        )]
    );
}

#[tokio::test]
async fn answers_become_results_and_failures_are_ok_false() {
    let (base, _) = endpoint().await;
    let out = call(&tool("grade", format!("{base}/grade"), SECRET), json!({})).await;
    let o = out.output().expect("ok");
    assert_eq!((o.reward, o.finished), (Some(1.0), true));
    let out = call(&tool("text", format!("{base}/text"), SECRET), json!({})).await;
    assert_eq!(
        out.output().unwrap().blocks[0].as_text(),
        Some("plain words")
    );

    let refused = call(&tool("grade", format!("{base}/grade"), "wrong"), json!({})).await;
    let msg = error_of(&refused);
    assert!(msg.contains("401") && msg.contains("bad secret"), "{msg}");

    let slow = call(&tool("slow", format!("{base}/slow"), SECRET), json!({})).await;
    let msg = error_of(&slow);
    assert!(msg.contains("no answer within"), "{msg}");

    let invalid = call(
        &tool("lookup_order", format!("{base}/order"), SECRET),
        json!({"orderId": 7}),
    )
    .await;
    assert!(
        error_of(&invalid).contains("orderId"),
        "validated before sending"
    );
}

#[tokio::test]
async fn a_request_that_may_have_been_sent_is_not_retried() {
    // Accepts, reads, and closes without answering: the request was sent.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(Mutex::new(0u32));
    let count = Arc::clone(&accepted);
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            *count.lock().unwrap() += 1;
            let mut buf = [0u8; 4096];
            let _ = tokio::io::AsyncReadExt::read(&mut stream, &mut buf).await;
            drop(stream);
        }
    });
    let out = call(
        &tool("hang_up", format!("http://{addr}/"), SECRET),
        json!({}),
    )
    .await;
    assert!(!out.is_ok());
    assert_eq!(*accepted.lock().unwrap(), 1, "sent once, never again");

    // Nothing listens: retried (twice by default), then a clear error.
    let closed = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let out = call(
        &tool("nobody", format!("http://127.0.0.1:{port}/"), SECRET),
        json!({}),
    )
    .await;
    let msg = error_of(&out);
    assert!(msg.contains("cannot connect"), "{msg}");
}
