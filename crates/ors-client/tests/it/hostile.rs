//! The client against broken and hostile servers (scripted fakes, real HTTP over TCP): one
//! behaviour per test. Each asserts the error the caller gets and that the client's buffers
//! never held more than its limits (the client's own byte count, not RSS); where it matters,
//! that the connection was dropped, the call not retried, and the session still usable.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ors_client::{Client, ClientBuilder, Error, SizeLimit};
use ors_core::sse;
use ors_core::{RunToolOutput, ToolOutput};
use serde_json::json;

use crate::fake::{
    call_start, drip, event, write_forever, Fake, FakeRequest, FakeResponse, SSE_HEAD,
};
use crate::support::eventually;

/// The result limit of these tests' clients.
const RESULT_LIMIT: usize = 1 << 20;
/// The JSON body limit of these tests' clients.
const BODY_LIMIT: usize = 256 << 10;
/// What a line may add to the result limit: its field name.
const FIELD_ROOM: usize = 64;

fn builder(url: &str) -> ClientBuilder {
    Client::builder(url)
        .no_api_key()
        .ping_interval(None)
        .max_retries(2)
        .reconnect_attempts(2)
        .backoff(Duration::from_millis(5), Duration::from_millis(20))
        .max_result_bytes(RESULT_LIMIT)
        .max_body_bytes(BODY_LIMIT)
        .request_timeout(Duration::from_secs(20))
        .heartbeat_timeout(Duration::from_secs(20))
}

fn client(url: &str) -> Client {
    builder(url).build().unwrap()
}

/// The client never held more than its limits.
fn assert_bounded(c: &Client) {
    let peak = c.peak_buffered_bytes();
    assert!(
        peak <= RESULT_LIMIT + FIELD_ROOM,
        "the client held {peak} bytes of one response"
    );
}

/// A good call stream.
fn good_result() -> FakeResponse {
    let mut body = sse::encode_task_id("t-good");
    body.extend(sse::encode_result(&RunToolOutput::from(ToolOutput::text(
        "fine",
    ))));
    FakeResponse::sse(&String::from_utf8(body).unwrap())
}

/// A call stream of the given raw bytes after the SSE head; the connection then closes.
fn stream(bytes: Vec<u8>) -> FakeResponse {
    FakeResponse::raw(move |mut conn| async move {
        use tokio::io::AsyncWriteExt;
        let mut all = SSE_HEAD.to_vec();
        all.extend(bytes);
        let _ = conn.write_all(&all).await;
    })
}

/// A flag a script raises when the client has gone away.
#[derive(Clone, Default)]
struct Gone(Arc<AtomicBool>);

impl Gone {
    fn raise(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    async fn wait(&self) -> bool {
        let flag = Arc::clone(&self.0);
        eventually(move || {
            let flag = Arc::clone(&flag);
            async move { flag.load(Ordering::SeqCst) }
        })
        .await
    }
}

/// The script of the first call: write `head`, then `piece` until the client goes away.
fn flood(gone: &Gone, head: Vec<u8>, piece: Vec<u8>) -> FakeResponse {
    let gone = gone.clone();
    FakeResponse::raw(move |conn| async move {
        write_forever(conn, &head, &piece).await;
        gone.raise();
    })
}

/// An episode whose first call is answered by `first` and later ones by a good result.
async fn episode(first: impl Fn() -> FakeResponse + Send + Sync + 'static) -> Fake {
    Fake::episode(
        |_| FakeResponse::json(200, "{}"),
        move |n| if n == 0 { first() } else { good_result() },
    )
    .await
}

/// The session is still usable: the next call gets the good result.
async fn still_usable(s: &ors_client::Session) {
    let out = s
        .call("tool", json!({}))
        .await
        .expect("the next call works");
    assert_eq!(out.blocks[0].as_text(), Some("fine"));
    assert!(!s.is_terminated());
}

fn call_count(fake: &Fake) -> usize {
    fake.count("POST /env/call")
}

/// The tool calls the fake received, in order.
fn calls(fake: &Fake) -> Vec<FakeRequest> {
    let mut all = fake.requests();
    all.retain(|r| r.line == "POST /env/call");
    all
}

/// A session of the fake's episode.
async fn open(c: &Client) -> ors_client::Session {
    c.environment("env")
        .session_at("train", 0)
        .await
        .expect("the session opens")
}

// ---------------------------------------------------------------------------------------
// Limits

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_chunk_flood_stops_at_the_result_limit() {
    let gone = Gone::default();
    let g = gone.clone();
    let fake = episode(move || {
        let chunk = event("chunk", &"x".repeat(sse::CHUNK_SIZE));
        flood(&g, call_start("t1", b""), chunk)
    })
    .await;
    let c = client(&fake.url);
    let s = open(&c).await;
    match s.call("tool", json!({})).await {
        Err(
            e @ Error::ResponseTooLarge {
                limit: RESULT_LIMIT,
                kind: SizeLimit::Result,
                ..
            },
        ) => {
            let msg = e.to_string();
            assert!(msg.contains("the result of tool 'tool'"), "{msg}");
            assert!(msg.contains("ORS_CLIENT_MAX_RESULT_BYTES"), "{msg}");
        }
        other => panic!("expected ResponseTooLarge, got {other:?}"),
    }
    assert_bounded(&c);
    assert!(
        c.peak_buffered_bytes() > RESULT_LIMIT / 2,
        "the count saw the flood"
    );
    assert_eq!(call_count(&fake), 1, "not retried");
    assert!(gone.wait().await, "the flooding connection was dropped");
    still_usable(&s).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_without_end_stops_at_the_result_limit() {
    let gone = Gone::default();
    let g = gone.clone();
    let fake = episode(move || {
        flood(
            &g,
            call_start("t1", b"event: end\ndata: "),
            vec![b'y'; 8192],
        )
    })
    .await;
    let c = client(&fake.url);
    let s = open(&c).await;
    match s.call("tool", json!({})).await {
        Err(Error::ResponseTooLarge { what, kind, .. }) => {
            assert_eq!(kind, SizeLimit::Result);
            assert!(what.contains("line"), "{what}");
        }
        other => panic!("expected ResponseTooLarge, got {other:?}"),
    }
    assert_bounded(&c);
    assert_eq!(call_count(&fake), 1);
    assert!(gone.wait().await, "the connection was dropped");
    still_usable(&s).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_json_body_stops_at_the_body_limit() {
    let gone = Gone::default();
    let g = gone.clone();
    let fake = Fake::start(move |_, _| {
        // No Content-Length: the body runs until the connection closes.
        let head =
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n[";
        flood(&g, head.to_vec(), br#""env","#.repeat(1000))
    })
    .await;
    let c = client(&fake.url);
    match c.environments().await {
        Err(Error::ResponseTooLarge {
            limit: BODY_LIMIT,
            kind: SizeLimit::Body,
            what,
        }) => assert!(what.contains("GET /list_environments"), "{what}"),
        other => panic!("expected ResponseTooLarge, got {other:?}"),
    }
    let peak = c.peak_buffered_bytes();
    assert!(peak <= BODY_LIMIT && peak > 0, "held {peak} bytes");
    assert_eq!(fake.count("GET /list_environments"), 1, "not retried");
    assert!(gone.wait().await, "the connection was dropped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_10_gb_content_length_is_refused_before_reading() {
    let gone = Gone::default();
    let g = gone.clone();
    let fake = Fake::start(move |_, _| {
        let head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\
                     Content-Length: 10000000000\r\n\r\n[";
        flood(&g, head.to_vec(), br#""env","#.repeat(1000))
    })
    .await;
    let c = client(&fake.url);
    match c.environment("env").splits().await {
        Err(e @ Error::ResponseTooLarge { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains("Content-Length: 9.3 GiB"), "{msg}");
            assert!(msg.contains("ORS_CLIENT_MAX_BODY_BYTES"), "{msg}");
        }
        other => panic!("expected ResponseTooLarge, got {other:?}"),
    }
    assert_eq!(c.peak_buffered_bytes(), 0, "nothing of it was read");
    assert_eq!(fake.count("GET /env/splits"), 1);
    assert!(gone.wait().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keepalives_and_progress_hold_a_call_only_until_call_timeout() {
    let fake = episode(|| {
        let head = call_start("t1", b"");
        let mut piece = sse::KEEPALIVE.to_vec();
        piece.extend(sse::encode_progress(&json!({"pct": 1})));
        FakeResponse::raw(move |conn| async move {
            drip(conn, &head, &piece, Duration::from_millis(2)).await;
        })
    })
    .await;
    let c = builder(&fake.url)
        .heartbeat_timeout(Duration::from_millis(500))
        .call_timeout(Some(Duration::from_millis(1500)))
        .build()
        .unwrap();
    let s = open(&c).await;
    let progress = Arc::new(AtomicBool::new(false));
    let p = Arc::clone(&progress);
    match s
        .call_with_progress("tool", json!({}), move |_| p.store(true, Ordering::SeqCst))
        .await
    {
        Err(Error::Timeout(m)) => assert!(m.contains("within 1.5s"), "{m}"),
        other => panic!("expected the call timeout, got {other:?}"),
    }
    assert!(
        progress.load(Ordering::SeqCst),
        "the stream was alive until then"
    );
    assert_eq!(call_count(&fake), 1, "alive streams are not reconnected");
    assert_bounded(&c);
    still_usable(&s).await;
}

// ---------------------------------------------------------------------------------------
// Slow and silent servers

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_dripping_a_byte_per_second_without_line_breaks_times_out() {
    let fake = Fake::episode(
        |_| FakeResponse::json(200, "{}"),
        |_| {
            let head = call_start("t1", b": ");
            FakeResponse::raw(move |conn| async move {
                drip(conn, &head, b"z", Duration::from_secs(1)).await;
            })
        },
    )
    .await;
    let c = builder(&fake.url)
        .heartbeat_timeout(Duration::from_millis(1500))
        .reconnect_attempts(1)
        .build()
        .unwrap();
    let s = open(&c).await;
    let e = s.call("tool", json!({})).await.unwrap_err();
    let m = timeout(&e);
    assert!(m.contains("no complete line"), "{m}");
    assert!(m.contains("gave up after 1 reconnects"), "{m}");
    let calls = calls(&fake);
    assert_eq!(calls.len(), 2, "one reconnect");
    assert!(
        calls[1].body.contains(r#""task_id":"t1""#),
        "{}",
        calls[1].body
    );
    assert_bounded(&c);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_json_body_dripping_a_byte_per_second_times_out() {
    let fake = Fake::start(|_, _| {
        let head =
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n";
        FakeResponse::raw(move |conn| async move {
            drip(conn, head, b"[\"a\",", Duration::from_secs(1)).await;
        })
    })
    .await;
    let c = builder(&fake.url)
        .request_timeout(Duration::from_millis(1500))
        .max_retries(0)
        .build()
        .unwrap();
    let e = c.environments().await.unwrap_err();
    assert!(timeout(&e).contains("took longer than"), "{e}");
    assert_bounded(&c);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_header_that_never_ends_fails_without_growing() {
    let gone = Gone::default();
    let g = gone.clone();
    let fake = Fake::start(move |_, _| {
        flood(
            &g,
            b"HTTP/1.1 200 OK\r\nX-Junk: ".to_vec(),
            vec![b'a'; 4096],
        )
    })
    .await;
    let c = client(&fake.url);
    match c.environments().await {
        Err(Error::Protocol(m)) => assert!(m.contains("response head"), "{m}"),
        other => panic!("expected a protocol error, got {other:?}"),
    }
    assert_eq!(fake.count("GET /list_environments"), 1, "not retried");
    assert_eq!(c.peak_buffered_bytes(), 0);
    assert!(gone.wait().await);

    // The same header at a byte per second runs into the request timeout.
    let fake = Fake::start(|_, _| {
        FakeResponse::raw(|conn| async move {
            drip(
                conn,
                b"HTTP/1.1 200 OK\r\n",
                b"X-A: b\r\n",
                Duration::from_secs(1),
            )
            .await;
        })
    })
    .await;
    let c = builder(&fake.url)
        .request_timeout(Duration::from_millis(1500))
        .max_retries(0)
        .build()
        .unwrap();
    let e = c.environments().await.unwrap_err();
    assert!(timeout(&e).contains("no response"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_accepts_and_says_nothing_times_out() {
    let silent = || {
        FakeResponse::raw(|conn| async move {
            let _held_open = conn;
            tokio::time::sleep(Duration::from_secs(3600)).await;
        })
    };
    let fake = Fake::episode(|_| FakeResponse::json(200, "{}"), move |_| silent()).await;
    let c = builder(&fake.url)
        .request_timeout(Duration::from_millis(800))
        .max_retries(1)
        .build()
        .unwrap();
    let s = open(&c).await;
    let e = s.call("tool", json!({})).await.unwrap_err();
    let m = timeout(&e);
    assert!(m.contains("no response to POST /env/call"), "{m}");
    assert!(m.contains("not retried"), "{m}");
    assert_eq!(call_count(&fake), 1, "the tool may have run: not repeated");

    let quiet = Fake::start(move |_, _| silent()).await;
    let c = builder(&quiet.url)
        .request_timeout(Duration::from_millis(800))
        .max_retries(1)
        .build()
        .unwrap();
    assert!(matches!(c.environments().await, Err(Error::Timeout(_))));
    assert_eq!(quiet.count("GET /list_environments"), 2, "a GET is retried");
    assert_bounded(&c);
}

// ---------------------------------------------------------------------------------------
// Broken protocol

/// Run one call against a first answer of `bytes` (after the SSE head) and return its error.
async fn call_error(bytes: Vec<u8>) -> (Error, Fake) {
    let fake = episode(move || stream(bytes.clone())).await;
    let c = client(&fake.url);
    let s = open(&c).await;
    let err = s
        .call("tool", json!({}))
        .await
        .expect_err("the broken stream fails the call");
    assert_bounded(&c);
    still_usable(&s).await;
    (err, fake)
}

fn protocol(e: &Error) -> &str {
    match e {
        Error::Protocol(m) => m,
        other => panic!("expected a protocol error, got {other:?}"),
    }
}

fn timeout(e: &Error) -> &str {
    match e {
        Error::Timeout(m) => m,
        other => panic!("expected a timeout, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn end_data_that_is_not_a_result_is_a_protocol_error() {
    let mut bytes = event("task_id", "t1");
    bytes.extend(event("end", "<html>oops</html>"));
    let (e, fake) = call_error(bytes).await;
    assert!(protocol(&e).contains("not JSON"), "{e}");
    assert!(protocol(&e).contains("<html>oops"), "{e}");
    assert_eq!(call_count(&fake), 2, "one failed call, one good one");

    let mut bytes = event("task_id", "t1");
    bytes.extend(event("end", r#"{"answer": 42}"#));
    let (e, _) = call_error(bytes).await;
    assert!(protocol(&e).contains("not a RunToolOutput"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_after_end_are_a_protocol_error() {
    let mut bytes = event("task_id", "t1");
    bytes.extend(sse::encode_result(&RunToolOutput::error("x")));
    bytes.extend(event("chunk", "more"));
    let (e, _) = call_error(bytes).await;
    assert!(protocol(&e).contains("after the call's last event"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_or_empty_task_id_is_a_protocol_error() {
    let (e, fake) = call_error(sse::encode_result(&RunToolOutput::error("x"))).await;
    assert!(protocol(&e).contains("before the task_id"), "{e}");
    assert_eq!(call_count(&fake), 2, "not retried");

    let mut bytes = event("task_id", "");
    bytes.extend(sse::encode_result(&RunToolOutput::error("x")));
    let (e, _) = call_error(bytes).await;
    assert!(protocol(&e).contains("task_id event is empty"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunks_without_end_reconnect_a_bounded_number_of_times() {
    let fake = Fake::episode(
        |_| FakeResponse::json(200, "{}"),
        |_| {
            let mut bytes = event("task_id", "t1");
            bytes.extend(event("chunk", r#"{"ok": true, "#));
            stream(bytes)
        },
    )
    .await;
    let c = client(&fake.url);
    let s = open(&c).await;
    let e = s.call("tool", json!({})).await.unwrap_err();
    let m = protocol(&e);
    assert!(m.contains("without its end event"), "{m}");
    assert!(m.contains("gave up after 2 reconnects"), "{m}");
    let calls = calls(&fake);
    assert_eq!(calls.len(), 3);
    assert!(calls[1..]
        .iter()
        .all(|r| r.body.contains(r#""task_id":"t1""#)));
    assert_bounded(&c);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_200_that_is_not_an_event_stream_is_a_protocol_error() {
    let fake = episode(|| FakeResponse {
        content_type: "text/html",
        ..FakeResponse::json(200, "<html><body>Welcome to nginx!</body></html>")
    })
    .await;
    let c = client(&fake.url);
    let s = open(&c).await;
    let e = s.call("tool", json!({})).await.unwrap_err();
    let m = protocol(&e);
    assert!(m.contains("\"text/html\""), "{m}");
    assert!(m.contains("Welcome to nginx"), "{m}");
    assert_eq!(call_count(&fake), 1);
    still_usable(&s).await;
    assert_bounded(&c);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_json_body_of_the_wrong_shape_is_a_protocol_error() {
    let fake = Fake::start(|_, _| FakeResponse::json(200, r#"{"not": "a list"}"#)).await;
    let c = client(&fake.url);
    let e = c.environments().await.unwrap_err();
    assert!(protocol(&e).contains("/list_environments"), "{e}");
    assert_eq!(fake.count("GET /list_environments"), 1, "not retried");
    assert_bounded(&c);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_utf8_is_a_protocol_error() {
    let mut bytes = event("task_id", "t1");
    bytes.extend_from_slice(b"event: end\ndata: {\"ok\":false,\"error\":\"\xff\xfe\"}\n\n");
    let (e, _) = call_error(bytes).await;
    assert!(protocol(&e).contains("UTF-8"), "{e}");

    let fake = Fake::start(|_, _| {
        FakeResponse::raw(|mut conn| async move {
            use tokio::io::AsyncWriteExt;
            let _ = conn
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\n[\"\xff\xfe\"]")
                .await;
        })
    })
    .await;
    let c = client(&fake.url);
    let e = c.environments().await.unwrap_err();
    assert!(protocol(&e).contains("/list_environments"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_shorter_than_its_content_length_is_a_protocol_error() {
    let fake = Fake::start(|_, _| {
        FakeResponse::raw(|mut conn| async move {
            use tokio::io::AsyncWriteExt;
            let _ = conn
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n[\"a\",\"b\"")
                .await;
        })
    })
    .await;
    let c = builder(&fake.url).max_retries(1).build().unwrap();
    let e = c.environments().await.unwrap_err();
    assert!(
        protocol(&e).contains("ended after 8 of the 1000 bytes"),
        "{e}"
    );
    assert_eq!(
        fake.count("GET /list_environments"),
        2,
        "a cut connection may be retried"
    );
    assert_bounded(&c);
}

// ---------------------------------------------------------------------------------------
// Redirects

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirects_are_followed_within_the_origin() {
    let fake = Fake::start(|req, _| match req.line.as_str() {
        "GET /env/splits" => FakeResponse::json(307, "").header("Location", "/moved/splits"),
        "GET /moved/splits" => FakeResponse::json(200, r#"[{"name":"train","type":"train"}]"#),
        "POST /env/num_tasks" => FakeResponse::json(308, "").header("Location", "../v2/num_tasks"),
        "POST /v2/num_tasks" if req.body.contains("\"split\"") => {
            FakeResponse::json(200, r#"{"num_tasks": 7}"#)
        }
        _ => FakeResponse::json(404, r#"{"detail":"Not Found"}"#),
    })
    .await;
    let c = client(&fake.url);
    let env = c.environment("env");
    assert_eq!(env.splits().await.unwrap()[0].name, "train");
    assert_eq!(
        env.num_tasks("train").await.unwrap(),
        7,
        "a POST keeps its body"
    );
    assert_bounded(&c);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_redirected_with_308_is_followed() {
    let fake = Fake::start(|req, _| match req.line.as_str() {
        "POST /create_session" => FakeResponse::json(200, r#"{"sid":"sid-1"}"#),
        "POST /create" | "POST /delete" => FakeResponse::json(200, "{}"),
        "POST /env/call" => FakeResponse::json(308, "").header("Location", "/real/call"),
        "POST /real/call" if req.body.contains("\"tool\"") => good_result(),
        _ => FakeResponse::json(404, r#"{"detail":"Not Found"}"#),
    })
    .await;
    let c = client(&fake.url);
    let s = open(&c).await;
    still_usable(&s).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirect_loops_other_origins_and_method_changes_are_refused() {
    let elsewhere = Fake::start(|_, _| FakeResponse::json(200, "[]")).await;
    let away = format!("{}/list_environments", elsewhere.url);
    let fake = Fake::start(move |req, _| match req.line.as_str() {
        "GET /env/tools" => FakeResponse::json(307, "").header("Location", "/env/tools"),
        "GET /list_environments" => FakeResponse::json(302, "").header("Location", away.clone()),
        "POST /env/tasks" => FakeResponse::json(303, "").header("Location", "/tasks"),
        _ => FakeResponse::json(404, r#"{"detail":"Not Found"}"#),
    })
    .await;
    let c = client(&fake.url);

    let e = c.environment("env").tools().await.unwrap_err();
    assert!(protocol(&e).contains("more than 5 times"), "{e}");
    assert_eq!(
        fake.count("GET /env/tools"),
        6,
        "5 redirects followed, not retried"
    );

    let e = c.environments().await.unwrap_err();
    assert!(protocol(&e).contains("another server"), "{e}");
    assert_eq!(elsewhere.count("GET /list_environments"), 0);

    let e = c.environment("env").tasks("train").await.unwrap_err();
    assert!(protocol(&e).contains("303"), "{e}");
    assert_eq!(fake.count("GET /tasks"), 0);
    assert_bounded(&c);
}

// ---------------------------------------------------------------------------------------
// A hostile model server (`ors eval`'s other peer)

/// The step timeout of the hostile-model runs: a model request, retries included, ends by it.
const STEP: Duration = Duration::from_secs(3);
/// The model answer limit of the hostile-model runs.
const MODEL_LIMIT: usize = 1 << 20;

/// A good OpenAI answer to `body` (a request of an episode of the fixture): submit the sum.
fn good_model_answer(body: &str) -> FakeResponse {
    let request: serde_json::Value = serde_json::from_str(body).unwrap();
    let prompt = request["messages"].to_string();
    let (a, b) = ors_examples::scripted_model::sum_question(&prompt).unwrap();
    let answer = json!({"answer": (a + b).to_string()}).to_string();
    let reply = json!({"id": "r", "object": "chat.completion", "choices": [{"index": 0,
        "message": {"role": "assistant", "content": null, "tool_calls": [{"id": "c1",
        "type": "function", "function": {"name": "submit", "arguments": answer}}]},
        "finish_reason": "tool_calls"}], "usage": {"prompt_tokens": 10, "completion_tokens": 5}});
    FakeResponse::json(200, &reply.to_string())
}

/// A model server hostile to the episode of task 0 ("What is 0+0?") only, by `hostile`;
/// tasks 1 and 2 are answered well.
async fn hostile_model(hostile: impl Fn() -> FakeResponse + Send + Sync + 'static) -> Fake {
    Fake::start(move |req: &FakeRequest, _| {
        if req.body.contains("What is 0+0?") {
            hostile()
        } else {
            good_model_answer(&req.body)
        }
    })
    .await
}

/// Tasks 0 to 2 of the fixture, three at once, by an agent of `model` (step timeout
/// [`STEP`], answers at most `limit` bytes): the report, and the most the client held.
async fn eval_against(model: &Fake, limit: usize) -> (ors_client::EvalReport, usize) {
    eval_within(model, limit, STEP).await
}

/// [`eval_against`] with a step timeout of `step`.
async fn eval_within(
    model: &Fake,
    limit: usize,
    step: Duration,
) -> (ors_client::EvalReport, usize) {
    let srv = crate::support::server().await;
    let c = builder(&srv.url())
        .call_timeout(Some(step))
        .build()
        .unwrap();
    let agent = ors_client::agent::ModelOptions::new(
        ors_client::Api::OpenAi,
        format!("{}/v1", model.url),
        "m",
    )
    .timeout(step)
    .max_response_bytes(limit)
    .connect(&c)
    .unwrap();
    let report = tokio::time::timeout(
        Duration::from_secs(60),
        ors_client::evaluate(
            &c.environment("conformance"),
            "train",
            0..3,
            Arc::new(ors_client::Agent::new(agent)),
            ors_client::EvalOptions::default().concurrency(3),
        ),
    )
    .await
    .expect("the run ends");
    srv.shutdown().await;
    (report, c.peak_buffered_bytes())
}

/// Task 0 ended in an error of `kind` (returned); tasks 1 and 2 were played to the end.
fn only_task_0_failed(report: &ors_client::EvalReport, kind: &str) -> ors_client::EpisodeError {
    let by_index = |i: i64| report.episodes.iter().find(|e| e.index == i).unwrap();
    for i in [1, 2] {
        let ep = by_index(i);
        assert_eq!(ep.total_reward, 1.0, "task {i} goes on: {:?}", ep.error);
    }
    let ep = by_index(0);
    assert_eq!(ep.stop_reason, ors_client::StopReason::Error);
    let error = ep.error.clone().expect("task 0 records its error");
    assert_eq!(error.kind, kind, "{}", error.message);
    error
}

const CHUNKED_HEAD: &[u8] =
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";

/// One chunk of 64 KiB of `x`.
fn chunk() -> Vec<u8> {
    let mut c = format!("{:x}\r\n", 64 << 10).into_bytes();
    c.extend(std::iter::repeat_n(b'x', 64 << 10));
    c.extend_from_slice(b"\r\n");
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_answer_over_the_limit_ends_its_episode_only_and_is_not_asked_again() {
    // 150 MB announced; then an endless chunked body.
    let announced = hostile_model(|| {
        FakeResponse::raw(|mut conn| async move {
            use tokio::io::AsyncWriteExt;
            let head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\
                         Content-Length: 157286400\r\n\r\n{\"id\":\"";
            let _ = conn.write_all(head).await;
            tokio::time::sleep(Duration::from_secs(30)).await;
        })
    })
    .await;
    let gone = Gone::default();
    let g = gone.clone();
    let endless = hostile_model(move || {
        let g = g.clone();
        FakeResponse::raw(move |conn| async move {
            write_forever(conn, CHUNKED_HEAD, &chunk()).await;
            g.raise();
        })
    })
    .await;
    for model in [&announced, &endless] {
        let (report, peak) = eval_against(model, MODEL_LIMIT).await;
        let error = only_task_0_failed(&report, "too_large");
        assert!(error.message.contains("1 MiB"), "{}", error.message);
        assert!(
            error.message.contains("--max-response-bytes"),
            "{}",
            error.message
        );
        assert!(
            peak <= MODEL_LIMIT + FIELD_ROOM,
            "the client held {peak} bytes"
        );
        let asked = model
            .requests()
            .iter()
            .filter(|r| r.body.contains("What is 0+0?"))
            .count();
        assert_eq!(asked, 1, "an answer too large is not asked for again");
    }
    assert!(
        gone.wait().await,
        "the endless body's connection was dropped"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_or_trickling_model_ends_its_episode_at_the_step_timeout_retries_included() {
    let silent = hostile_model(|| {
        FakeResponse::raw(|conn| async move {
            // Holds the connection open, answering nothing.
            let _conn = conn;
            tokio::time::sleep(Duration::from_secs(30)).await;
        })
    })
    .await;
    let trickle = hostile_model(|| {
        FakeResponse::raw(|conn| async move {
            let head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\
                         Content-Length: 100\r\n\r\n";
            drip(conn, head, b"{\"choices\":[", Duration::from_millis(100)).await;
        })
    })
    .await;
    for model in [&silent, &trickle] {
        let (report, _) = eval_against(model, MODEL_LIMIT).await;
        let error = only_task_0_failed(&report, "timeout");
        assert!(
            error.message.contains("step timeout of 3 s"),
            "{}",
            error.message
        );
        let asked = model
            .requests()
            .iter()
            .filter(|r| r.body.contains("What is 0+0?"))
            .count();
        assert_eq!(
            asked, 1,
            "the step timeout covers the retries: none was left time"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_model_answer_ends_its_episode_naming_what_came() {
    let model = hostile_model(|| {
        FakeResponse::json(200, r#"{"choices": [{"message": {"role": "assistant""#)
    })
    .await;
    let (report, _) = eval_against(&model, MODEL_LIMIT).await;
    let error = only_task_0_failed(&report, "model");
    assert!(error.message.contains("not the API's"), "{}", error.message);
    assert!(error.message.contains(r#"{"choices""#), "{}", error.message);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_call_with_megabytes_of_arguments_ends_its_episode_at_the_servers_limit() {
    let model = hostile_model(|| {
        let text = "x".repeat(12 << 20);
        let arguments = json!({ "text": text }).to_string();
        let reply = json!({"id": "r", "object": "chat.completion", "choices": [{"index": 0,
            "message": {"role": "assistant", "content": null, "tool_calls": [{"id": "c1",
            "type": "function", "function": {"name": "echo", "arguments": arguments}}]},
            "finish_reason": "tool_calls"}]});
        FakeResponse::json(200, &reply.to_string())
    })
    .await;
    let limit = ors_client::agent::DEFAULT_MAX_RESPONSE_BYTES;
    // Time enough to make and move 12 MB in a debug build: the size is what is tested.
    let (report, peak) = eval_within(&model, limit, Duration::from_secs(30)).await;
    let error = only_task_0_failed(&report, "http");
    assert_eq!(error.status, Some(413), "{}", error.message);
    assert!(error.message.contains("10485760"), "{}", error.message);
    assert!(peak <= limit, "the client held {peak} bytes");
}
