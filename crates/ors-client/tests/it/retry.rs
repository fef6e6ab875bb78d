//! Retries against scripted fake servers: 5xx and 429 are retried on requests that are safe
//! to repeat, never a 4xx, and never a request the server may have acted on. Also the SSE form
//! of the `create_session` reply, and the API key header.

use std::time::Duration;

use ors_client::{Client, Error};
use serde_json::json;

use crate::fake::{Fake, FakeRequest, FakeResponse};

fn client(url: &str) -> Client {
    Client::builder(url)
        .api_key("k-123")
        .ping_interval(None)
        .max_retries(3)
        .reconnect_attempts(3)
        .backoff(Duration::from_millis(5), Duration::from_millis(20))
        .build()
        .unwrap()
}

/// A session of the fake's environment `env`.
async fn open(fake: &Fake) -> ors_client::Session {
    client(&fake.url)
        .environment("env")
        .session_at("train", 0)
        .await
        .unwrap()
}

const RESULT: &str = "event: task_id\ndata: t1\n\nevent: end\ndata: {\"ok\":true,\"output\":{\"blocks\":[{\"type\":\"text\",\"text\":\"hi\",\"detail\":null}],\"metadata\":null,\"reward\":0.5,\"finished\":false}}\n\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_503_then_200_is_retried_and_succeeds() {
    let fake = Fake::start(|_, n| {
        if n < 2 {
            FakeResponse::json(503, r#"{"detail":"busy"}"#)
        } else {
            FakeResponse::json(200, r#"["x"]"#)
        }
    })
    .await;
    assert_eq!(client(&fake.url).environments().await.unwrap(), ["x"]);
    assert_eq!(fake.count("GET /list_environments"), 3);
    let key = fake.requests()[0]
        .headers
        .iter()
        .find(|(k, _)| k == "x-api-key")
        .map(|(_, v)| v.clone());
    assert_eq!(key.as_deref(), Some("k-123"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statuses_429_and_500_are_retried_up_to_the_limit() {
    let fake = Fake::start(|req, _| {
        if req.line.ends_with("/splits") {
            FakeResponse::json(429, r#"{"detail":"slow down"}"#)
        } else {
            FakeResponse::json(500, r#"{"detail":"kaput"}"#)
        }
    })
    .await;
    let env = client(&fake.url).environment("env");
    match env.splits().await {
        Err(Error::Http {
            status: 429,
            code: None,
            detail,
        }) => assert_eq!(detail, "slow down"),
        other => panic!("expected 429, got {other:?}"),
    }
    assert_eq!(fake.count("GET /env/splits"), 4, "1 attempt + 3 retries");
    assert_eq!(
        env.num_tasks("train").await.unwrap_err().status(),
        Some(500)
    );
    assert_eq!(fake.count("POST /env/num_tasks"), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_4xx_is_never_retried() {
    let fake = Fake::start(|_, _| FakeResponse::json(400, r#"{"detail":"Invalid split"}"#)).await;
    let err = client(&fake.url)
        .environment("env")
        .tasks("x")
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "HTTP 400: Invalid split");
    assert_eq!(fake.count("POST /env/tasks"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_accepts_the_sse_reply_and_is_not_repeated_after_a_500() {
    let fake = Fake::episode(
        |_| FakeResponse::json(500, r#"{"detail":"setup exploded"}"#),
        |_| FakeResponse::sse(RESULT),
    )
    .await;
    let err = client(&fake.url)
        .environment("env")
        .session_at("train", 0)
        .await
        .unwrap_err();
    assert_eq!(err.status(), Some(500));
    assert_eq!(
        fake.count("POST /create"),
        1,
        "a 500 from /create may mean it acted"
    );
    let create = fake
        .requests()
        .into_iter()
        .find(|r| r.line == "POST /create")
        .unwrap();
    assert!(create
        .headers
        .contains(&("x-session-id".into(), "sid-1".into())));
    let body: serde_json::Value = serde_json::from_str(&create.body).unwrap();
    assert_eq!(
        body,
        json!({"env_name": "env", "split": "train", "index": 0})
    );
    assert_eq!(
        fake.count("POST /delete_session"),
        1,
        "the unused id is released"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_refused_with_503_is_retried_but_a_500_before_task_id_is_not() {
    let fake = Fake::episode(
        |n| {
            if n == 0 {
                FakeResponse::json(503, r#"{"detail":"full"}"#)
            } else {
                FakeResponse::json(200, r#"{"sid":"sid-1"}"#)
            }
        },
        |n| match n {
            0 => FakeResponse::json(503, r#"{"detail":"busy"}"#),
            1 => FakeResponse::sse(RESULT),
            _ => FakeResponse::json(500, r#"{"detail":"kaput"}"#),
        },
    )
    .await;
    let s = open(&fake).await;
    assert_eq!(
        fake.count("POST /create"),
        2,
        "a 503 from /create is retried"
    );
    assert_eq!(s.sid(), "sid-1");

    let out = s.call("t", json!({})).await.unwrap();
    assert_eq!(out.reward, Some(0.5));
    assert_eq!(fake.count("POST /env/call"), 2);

    assert_eq!(
        s.call("t", json!({})).await.unwrap_err().status(),
        Some(500)
    );
    assert_eq!(
        fake.count("POST /env/call"),
        3,
        "the tool may have run: not repeated"
    );
    s.close().await.unwrap();
    assert_eq!(fake.count("POST /delete"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_500_after_task_id_reconnects_with_the_task_id() {
    let fake = Fake::episode(
        |_| FakeResponse::json(200, r#"{"sid":"sid-1"}"#),
        |n| match n {
            // The stream ends after the task_id, then the reconnect hits a 500, then works.
            0 => FakeResponse::sse("event: task_id\ndata: t1\n\n"),
            1 => FakeResponse::json(500, r#"{"detail":"hiccup"}"#),
            _ => FakeResponse::sse(RESULT),
        },
    )
    .await;
    let s = open(&fake).await;
    let out = s.call("t", json!({"a": 1})).await.unwrap();
    assert_eq!(out.reward, Some(0.5));
    let calls: Vec<serde_json::Value> = fake
        .requests()
        .iter()
        .filter(|r| r.line == "POST /env/call")
        .map(|r| serde_json::from_str(&r.body).unwrap())
        .collect();
    assert_eq!(calls.len(), 3);
    assert_eq!(calls[0], json!({"name": "t", "input": {"a": 1}}));
    assert_eq!(calls[1]["task_id"], "t1");
    assert_eq!(calls[2]["task_id"], "t1");
    s.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_result_is_a_protocol_error() {
    let fake = Fake::episode(
        |_| FakeResponse::json(200, r#"{"sid":"sid-1"}"#),
        |_| FakeResponse::sse("event: task_id\ndata: t1\n\nevent: end\ndata: {\"ok\": tru\n\n"),
    )
    .await;
    let s = open(&fake).await;
    assert!(matches!(
        s.call("t", json!({})).await,
        Err(Error::Protocol(_))
    ));
    s.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_server_is_a_transport_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    match client(&url).environments().await {
        // The message names the URL tried, so a wrong ORS_URL is obvious.
        Err(Error::Transport(m)) => {
            assert!(m.starts_with(&format!("cannot connect to {url}: ")), "{m}")
        }
        other => panic!("expected a transport error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_fall_back_to_the_shared_list_when_task_tools_is_missing() {
    // Servers without error codes: whether a 404 is about the route or the session is asked
    // with /ping, never read from the words of the detail.
    let fake = Fake::start(|req: &FakeRequest, n| match req.line.as_str() {
        "POST /create_session" => {
            let sid = if n == 0 { "alive" } else { "gone" };
            FakeResponse::json(200, &format!(r#"{{"sid":"{sid}"}}"#))
        }
        "POST /create" | "POST /delete" => FakeResponse::json(200, r#"{"sid":"x"}"#),
        "POST /ping" if header(req, "x-session-id") == Some("alive") => {
            FakeResponse::json(200, r#"{"status":"ok"}"#)
        }
        "GET /old/tools" => FakeResponse::json(
            200,
            r#"{"tools":[{"name":"submit","description":"d","input_schema":null}]}"#,
        ),
        _ => FakeResponse::json(404, r#"{"detail":"Not Found"}"#),
    })
    .await;
    let c = client(&fake.url);
    let s = c.environment("old").session_at("train", 0).await.unwrap();
    for _ in 0..2 {
        let tools = s.tools().await.unwrap();
        assert_eq!(tools[0].name, "submit");
    }
    assert_eq!(
        fake.count("GET /old/task_tools"),
        1,
        "the fallback is remembered"
    );
    assert_eq!(fake.count("GET /old/tools"), 2);
    s.close().await.unwrap();

    // The same 404 for a session the server no longer has (its ping is 404 too).
    let s = c.environment("old").session_at("train", 0).await.unwrap();
    assert_eq!(s.sid(), "gone");
    assert!(s.tools().await.unwrap_err().is_session_terminated());
    assert_eq!(fake.count("GET /old/tools"), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_codes_decide_between_a_missing_route_and_a_gone_session() {
    let fake = Fake::start(|req: &FakeRequest, n| match req.line.as_str() {
        "POST /create_session" => FakeResponse::json(200, &format!(r#"{{"sid":"s{n}"}}"#)),
        "POST /create" | "POST /delete" => FakeResponse::json(200, r#"{"sid":"x"}"#),
        "GET /env/tools" => FakeResponse::json(
            200,
            r#"{"tools":[{"name":"submit","description":"d","input_schema":null}]}"#,
        ),
        // The words say "session", the code says the route is missing.
        "GET /env/task_tools" if header(req, "x-session-id") == Some("s0") => FakeResponse::json(
            404,
            r#"{"detail":"session route not here","code":"no_route"}"#,
        ),
        // The words say nothing about a session, the code says it timed out.
        "GET /env/task_tools" => {
            FakeResponse::json(404, r#"{"detail":"Not Found","code":"session_timed_out"}"#)
        }
        _ => FakeResponse::json(500, r#"{"detail":"unexpected","code":"internal"}"#),
    })
    .await;
    let env = client(&fake.url).environment("env");
    let s = env.session_at("train", 0).await.unwrap();
    assert_eq!(s.tools().await.unwrap()[0].name, "submit");
    s.close().await.unwrap();

    let s = env.session_at("train", 0).await.unwrap();
    match s.tools().await {
        Err(Error::SessionTerminated { reason, .. }) => {
            assert!(reason.contains("session_timed_out"), "{reason}")
        }
        other => panic!("expected SessionTerminated, got {other:?}"),
    }
    assert_eq!(fake.count("POST /ping"), 0, "codes need no probe");
    assert_eq!(fake.count("GET /env/tools"), 1);
}

fn header<'a>(req: &'a FakeRequest, name: &str) -> Option<&'a str> {
    req.headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_can_be_bounded_in_time() {
    let srv = crate::support::server().await;
    let c = Client::builder(srv.url().to_string())
        .no_api_key()
        .call_timeout(Some(Duration::from_millis(300)))
        .build()
        .unwrap();
    let s = c
        .environment("conformance")
        .session_at("train", 0)
        .await
        .unwrap();
    match s.call("sleep", json!({"ms": 30_000})).await {
        Err(Error::Timeout(m)) => assert!(m.contains("sleep"), "{m}"),
        other => panic!("expected a timeout, got {other:?}"),
    }
    s.close().await.unwrap();
    srv.shutdown().await;
}

/// The `task_id` a call body names.
fn named_id(req: &FakeRequest) -> Option<String> {
    let body: serde_json::Value = serde_json::from_str(&req.body).ok()?;
    body["task_id"].as_str().map(str::to_owned)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_server_that_takes_client_ids_a_call_cut_before_task_id_is_resent_under_its_id() {
    // PROTOCOL_NOTES row `client-task-id`: the server says so in a header; every call then
    // names itself, and a resend of the same id cannot run the tool twice.
    let fake = Fake::start(|req, n| {
        let resp = match req.line.as_str() {
            // The connection breaks before anything of the answer arrives.
            "POST /env/call" if n == 0 => FakeResponse::raw(|conn| async move { drop(conn) }),
            "POST /env/call" => {
                let id = named_id(req).unwrap_or_default();
                FakeResponse::sse(&RESULT.replace("data: t1", &format!("data: {id}")))
            }
            _ => FakeResponse::json(200, r#"{"sid":"sid-1"}"#),
        };
        resp.header("x-ors-client-task-ids", "1")
    })
    .await;
    let s = open(&fake).await;
    assert_eq!(s.call("t", json!({})).await.unwrap().reward, Some(0.5));
    s.call("t", json!({})).await.unwrap();
    let ids: Vec<String> = fake
        .requests()
        .iter()
        .filter(|r| r.line == "POST /env/call")
        .map(|r| named_id(r).expect("every call names its id"))
        .collect();
    assert_eq!(ids.len(), 3);
    assert_eq!(ids[0], ids[1], "the resend names the same call");
    assert_ne!(ids[1], ids[2], "the next call has its own id");
    assert!(ids
        .iter()
        .all(|id| id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit())));
    s.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_server_that_does_not_take_client_ids_a_call_cut_before_task_id_is_not_resent() {
    // The reference treats any task_id as a reconnect: calls carry none, and one whose
    // connection broke before the server's task_id is not sent again (it may have run).
    let fake = Fake::start(|req, _| match req.line.as_str() {
        "POST /env/call" => FakeResponse::raw(|conn| async move { drop(conn) }),
        _ => FakeResponse::json(200, r#"{"sid":"sid-1"}"#),
    })
    .await;
    let s = open(&fake).await;
    match s.call("t", json!({})).await {
        Err(Error::Transport(m)) => assert!(m.contains("not retried"), "{m}"),
        other => panic!("expected a transport error, got {other:?}"),
    }
    let calls: Vec<FakeRequest> = fake
        .requests()
        .into_iter()
        .filter(|r| r.line == "POST /env/call")
        .collect();
    assert_eq!(calls.len(), 1);
    assert_eq!(named_id(&calls[0]), None);
    s.close().await.unwrap();
}
