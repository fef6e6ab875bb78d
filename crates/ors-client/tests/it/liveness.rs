//! The background ping keeps sessions alive past the reaper; dead sessions are noticed.

use std::time::Duration;

use ors_client::{Client, Error};
use serde_json::json;

use crate::fake::{Fake, FakeResponse};
use crate::support::{eventually, ok, raw_post, server_with};

fn client(url: &str, ping: Option<Duration>) -> Client {
    Client::builder(url)
        .no_api_key()
        .ping_interval(ping)
        .max_retries(1)
        .backoff(Duration::from_millis(10), Duration::from_millis(20))
        .build()
        .unwrap()
}

/// Wait for the session to be declared dead, at most 30 s.
async fn death(s: &ors_client::Session) -> String {
    tokio::time::timeout(Duration::from_secs(30), s.terminated())
        .await
        .expect("the session was declared dead")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pings_keep_a_session_alive_past_the_reaper() {
    let srv = server_with(|c| {
        c.session_timeout = Duration::from_secs(2);
        c.reaper_interval = Duration::from_millis(100);
    })
    .await;
    let url = srv.url().to_string();
    let env_pinged = client(&url, Some(Duration::from_millis(200))).environment("conformance");
    let env_silent = client(&url, None).environment("conformance");
    let pinged = env_pinged.session_at("train", 0).await.unwrap();
    let silent = env_silent.session_at("train", 0).await.unwrap();

    // The silent session is reaped: the control that shows the reaper runs in this test.
    // Every probe counts as activity, so each wait is longer than the last and than the
    // timeout (a loaded machine may run the reaper late).
    let mut wait = Duration::from_secs(3);
    let reason = loop {
        tokio::time::sleep(wait).await;
        match silent.call("echo", json!({"text": "x"})).await {
            Ok(_) if wait < Duration::from_secs(40) => wait *= 2,
            Ok(_) => panic!("the silent session was never reaped"),
            Err(Error::SessionTerminated { reason, .. }) => break reason,
            Err(e) => panic!("unexpected error {e}"),
        }
    };
    // Reaped, not deleted: the server says so by code (row `gone-vs-not-found`).
    assert!(reason.contains("404 (session_timed_out)"), "{reason}");

    let out = pinged
        .call("echo", json!({"text": "still here"}))
        .await
        .unwrap();
    assert_eq!(out.blocks[0].as_text(), Some("still here"));
    assert!(!pinged.is_terminated());
    pinged.close().await.unwrap();
    srv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ping_answered_410_ends_the_session() {
    let srv = server_with(|_| {}).await;
    let url = srv.url().to_string();
    let env = client(&url, Some(Duration::from_millis(100))).environment("conformance");
    let s = env.session_at("train", 0).await.unwrap();
    assert_eq!(raw_post(&url, "/delete", s.sid()).await, ok());

    let reason = death(&s).await;
    assert!(
        reason.contains("ping answered HTTP 410 (session_deleted)"),
        "{reason}"
    );
    match s.call("echo", json!({"text": "x"})).await {
        Err(Error::SessionTerminated { reason: r, .. }) => assert_eq!(r, reason),
        other => panic!("expected SessionTerminated, got {other:?}"),
    }
    srv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vanished_server_ends_the_session_and_a_call_in_flight() {
    let srv = server_with(|c| c.shutdown_grace = Duration::from_millis(200)).await;
    let url = srv.url().to_string();
    let env = client(&url, Some(Duration::from_millis(100))).environment("conformance");
    let s = env.session_at("train", 0).await.unwrap();
    let s = std::sync::Arc::new(s);

    let in_flight = {
        let s = std::sync::Arc::clone(&s);
        tokio::spawn(async move { s.call("sleep", json!({"ms": 60_000})).await })
    };
    // The server goes once the call runs there, so it is a call in flight that it ends.
    assert!(
        eventually(|| async { srv.stats().running_calls == 1 }).await,
        "the call never started"
    );
    srv.shutdown().await;

    let reason = death(&s).await;
    assert!(reason.contains("unreachable"), "{reason}");
    let r = tokio::time::timeout(Duration::from_secs(30), in_flight)
        .await
        .expect("the call in flight ends")
        .unwrap();
    assert!(r.is_err(), "the call in flight fails: {r:?}");
    assert!(s.prompt().await.unwrap_err().is_session_terminated());
}

/// What `deploy/nginx/ors.conf` answers for a session whose replica stopped answering.
fn replica_unreachable() -> FakeResponse {
    FakeResponse::json(
        502,
        r#"{"detail":"the replica of session sid-1 does not answer (stopped or crashed): the session cannot go on"}"#,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxy_that_cannot_reach_the_sessions_server_ends_the_session() {
    let fake = Fake::episode(|_| FakeResponse::json(200, "{}"), |_| replica_unreachable()).await;
    let env = client(&fake.url, None).environment("env");
    let s = env.session_at("train", 0).await.unwrap();
    let e = s.call("tool", json!({})).await.unwrap_err();
    let Error::SessionTerminated { reason, .. } = &e else {
        panic!("expected SessionTerminated, got {e:?}");
    };
    assert!(
        reason.contains("unreachable") && reason.contains("502"),
        "{reason}"
    );
    // Known dead from now on: the next request fails at once, without asking.
    let calls = fake.count("POST /env/call");
    assert!(s.prompt().await.unwrap_err().is_session_terminated());
    assert_eq!(fake.count("POST /env/call"), calls);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ping_through_a_proxy_that_cannot_reach_the_server_ends_the_session() {
    let fake = Fake::start(|req, _| match req.line.as_str() {
        "POST /create_session" => FakeResponse::json(200, r#"{"sid":"sid-1"}"#),
        "POST /create" => FakeResponse::json(200, r#"{"sid":"sid-1"}"#),
        "POST /ping" => replica_unreachable(),
        _ => FakeResponse::json(200, "{}"),
    })
    .await;
    let env = client(&fake.url, Some(Duration::from_millis(100))).environment("env");
    let s = env.session_at("train", 0).await.unwrap();
    let reason = death(&s).await;
    assert!(
        reason.contains("unreachable") && reason.contains("502"),
        "{reason}"
    );
}
