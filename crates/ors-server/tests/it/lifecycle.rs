//! Graceful shutdown and the optional API key, over raw HTTP.

use std::time::Duration;

use std::sync::Arc;

use crate::support::*;
use futures_util::future::BoxFuture;
use ors_server::prelude::*;
use ors_server::runtime::env::{DynEnvironment, DynSession, TaskError, ToolTableError};
use ors_server::{Server, ServerConfig, ServerError};
use serde_json::{json, Value};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_tears_every_session_down() {
    let server = start().await;
    let addr = server.local_addr();
    for i in 0..3 {
        ready_episode(addr, tagged(i, &format!("shutdown-teardown-{i}"))).await;
    }
    server.shutdown().await;
    for i in 0..3 {
        assert_eq!(
            count(&format!("shutdown-teardown-{i}:teardown")),
            1,
            "session {i}"
        );
    }
    // Nothing listens any more.
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
}

// Paused time, an async client: nothing holds the clock, so a shutdown that waited for the
// grace period would jump to its end instead of hanging the test.
#[tokio::test(start_paused = true)]
async fn shutdown_closes_an_idle_keep_alive_connection_at_once() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let server = start_with(|c| c.shutdown_grace = Duration::from_secs(600)).await;
    let mut tcp = tokio::net::TcpStream::connect(server.local_addr())
        .await
        .unwrap();
    tcp.write_all(b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n")
        .await
        .unwrap();
    let mut buf = [0u8; 4096];
    let n = tcp.read(&mut buf).await.unwrap();
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"));
    // The connection stays open for the next request; shutdown closes it without waiting.
    let start = tokio::time::Instant::now();
    server.shutdown().await;
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(tcp.read(&mut buf).await.unwrap(), 0, "closed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_lets_an_in_flight_call_finish() {
    let server = start().await;
    let addr = server.local_addr();
    let sid = episode(addr, tagged(1, "shutdown-inflight")).await;
    let body = json!({"name": "sleep", "input": {"ms": 300, "key": "shutdown-inflight-call"}});
    let (stream, _, raw) = open_call(addr, &sid, &body.to_string()).await;
    let stopping = tokio::spawn(server.shutdown());
    let r = finish(stream, raw).await;
    assert_eq!(text_of(&r), "slept 1");
    stopping.await.unwrap();
    assert_eq!(count("shutdown-inflight:teardown"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_stops_a_call_that_outlives_the_grace_period() {
    let server = start_with(|c| c.shutdown_grace = Duration::from_millis(200)).await;
    let addr = server.local_addr();
    let sid = episode(addr, tagged(1, "shutdown-hang")).await;
    let body = json!({"name": "hang", "input": {"key": "shutdown-hang-call"}});
    let (stream, _, raw) = open_call(addr, &sid, &body.to_string()).await;
    assert_eq!(wait_count("shutdown-hang-call:started", 1).await, 1);
    server.shutdown().await;
    assert_eq!(count("shutdown-hang:teardown"), 1);
    assert_eq!(wait_count("shutdown-hang-call:cancelled", 1).await, 1);
    let r = finish(stream, raw).await;
    let last = r.events().pop().unwrap();
    assert_eq!(last.0, "error");
    assert!(last.1.contains("shut down"), "{}", last.1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_outliving_the_grace_period_always_ends_with_an_error_event() {
    // A tool that answers `ok: false` when cancelled used to end either that way or with the
    // shutdown's `error`, by a race between the two. Now it is always the `error` event.
    for round in 0..3 {
        let server = start_with(|c| c.shutdown_grace = Duration::from_millis(100)).await;
        let addr = server.local_addr();
        let sid = episode(addr, task(1)).await;
        let body = json!({"name": "patient", "input": {}});
        let (stream, _, raw) = open_call(addr, &sid, &body.to_string()).await;
        server.shutdown().await;
        let r = finish(stream, raw).await;
        let names: Vec<String> = r.events().into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["task_id", "error"], "round {round}: {}", r.text());
        assert!(
            r.text().contains("shut down while tool 'patient'"),
            "{}",
            r.text()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_key_guards_everything_but_health() {
    // PROTOCOL_NOTES row `api-key`.
    let server = start_with(|c| c.api_key = Some("s3cret-key".into())).await;
    let addr = server.local_addr();
    let with_key = |header: &'static str, value: &'static str| async move {
        send(addr, "GET", "/list_environments", &[(header, value)], None).await
    };

    assert_eq!(get(addr, "/health").await.status, 200);
    for r in [
        get(addr, "/list_environments").await,
        get(addr, "/lab/tools").await,
        post(addr, "/create_session", "").await,
        get(addr, "/no/such/route/here").await,
        with_key("X-API-Key", "wrong").await,
        with_key("Authorization", "Bearer wrong").await,
        with_key("Authorization", "Basic s3cret-key").await,
    ] {
        r.assert_error(401, "unauthorized");
        assert_eq!(r.header("www-authenticate"), Some("Bearer"));
        assert!(r.detail().contains("API key"));
        assert!(!r.text().contains("s3cret"));
    }
    assert_eq!(with_key("X-API-Key", "s3cret-key").await.status, 200);
    assert_eq!(
        with_key("Authorization", "Bearer s3cret-key").await.status,
        200
    );

    // A whole episode with the key, as the reference client sends it.
    let key = [("X-API-Key", "s3cret-key")];
    let r = send(addr, "POST", "/create_session", &key, Some("{}")).await;
    let sid = r.json()["sid"].as_str().unwrap().to_owned();
    let body = json!({"task_spec": task(1)});
    assert_eq!(create_with(addr, &sid, &key, &body).await.status, 200);
    let with = [("X-API-Key", "s3cret-key"), ("X-Session-ID", sid.as_str())];
    let r = send(addr, "GET", "/lab/prompt", &with, None).await;
    assert_eq!(r.status, 200);
    get_s(addr, &sid, "/lab/prompt")
        .await
        .assert_error(401, "unauthorized");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bind_rejects_bad_setups() {
    let err = Server::new().port(0).bind().await.unwrap_err();
    assert!(matches!(err, ServerError::NoEnvironments), "{err}");

    let err = Server::new()
        .port(0)
        .environment::<Lab>()
        .environment::<Lab>()
        .bind()
        .await
        .unwrap_err();
    assert!(
        matches!(err, ServerError::DuplicateEnvironment(ref n) if n == "lab"),
        "{err}"
    );

    let config = ServerConfig {
        port: 0,
        keepalive: Duration::ZERO,
        ..ServerConfig::default()
    };
    let err = Server::with_config(config)
        .environment::<Lab>()
        .bind()
        .await
        .unwrap_err();
    assert!(err.to_string().contains("keepalive"), "{err}");

    // A port in use is a bind error naming the address.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let err = Server::new()
        .port(port)
        .environment::<Lab>()
        .bind()
        .await
        .unwrap_err();
    assert!(err.to_string().contains(&port.to_string()), "{err}");
}

/// An environment whose tool table is broken, hosted through the type-erased layer.
struct Broken {
    errors: Vec<ToolTableError>,
}

impl DynEnvironment for Broken {
    fn name(&self) -> &str {
        "broken"
    }
    fn splits(&self) -> &[Split] {
        &[]
    }
    fn tools(&self) -> &[ToolSpec] {
        &[]
    }
    fn table_errors(&self) -> &[ToolTableError] {
        &self.errors
    }
    fn tasks(&self, split: &str) -> BoxFuture<'_, Result<Vec<Value>, TaskError>> {
        let err = TaskError::unknown_split(split, &[]);
        Box::pin(async move { Err(err) })
    }
    fn num_tasks(&self, split: &str) -> BoxFuture<'_, Result<usize, TaskError>> {
        let err = TaskError::unknown_split(split, &[]);
        Box::pin(async move { Err(err) })
    }
    fn task(&self, split: &str, _index: i64) -> BoxFuture<'_, Result<Value, TaskError>> {
        let err = TaskError::unknown_split(split, &[]);
        Box::pin(async move { Err(err) })
    }
    fn task_range(
        &self,
        split: &str,
        _start: Option<i64>,
        _stop: Option<i64>,
    ) -> BoxFuture<'_, Result<Vec<Value>, TaskError>> {
        let err = TaskError::unknown_split(split, &[]);
        Box::pin(async move { Err(err) })
    }
    fn create(
        &self,
        _task: Value,
        _secrets: Secrets,
        _toolset: Option<&str>,
    ) -> BoxFuture<'static, Result<Box<dyn DynSession>, TaskError>> {
        Box::pin(async { Err(TaskError::unknown_split("none", &[])) })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_tool_table_stops_bind_naming_the_problem() {
    let broken = Broken {
        errors: vec![ToolTableError::Duplicate("echo".into())],
    };
    let err = Server::new()
        .port(0)
        .environment::<Lab>()
        .environment_handle(Arc::new(broken))
        .bind()
        .await
        .unwrap_err();
    assert!(matches!(err, ServerError::ToolTable { ref env, .. } if env == "broken"));
    assert!(err.to_string().contains("'echo' is defined twice"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn url_and_address_of_a_running_server() {
    let server = Server::new()
        .port(0)
        .environment::<Lab>()
        .bind()
        .await
        .unwrap();
    let addr = server.local_addr();
    assert_ne!(addr.port(), 0);
    assert_eq!(server.url(), format!("http://127.0.0.1:{}", addr.port()));
    // Only one environment: it is the default, and the bare routes reach it.
    assert_eq!(get(addr, "/list_environments").await.json(), json!(["lab"]));
    assert_eq!(get(addr, "/tools").await.status, 200);
    server.shutdown().await;
}
