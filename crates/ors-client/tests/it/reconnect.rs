//! Calls survive a dropped or silent connection by reconnecting with their `task_id`, and the
//! tool runs once. Our server takes client-chosen ids (row `client-task-id`), so even a
//! connection cut before the server's `task_id` event is resent safely.

use std::time::Duration;

use ors_client::{Client, Error};
use serde_json::json;

use crate::support::{a_cut_call_runs_once, behind_proxy, fixture_session, text, Cut};

fn client(url: &str, heartbeat: Duration) -> Client {
    Client::builder(url)
        .no_api_key()
        .heartbeat_timeout(heartbeat)
        .backoff(Duration::from_millis(20), Duration::from_millis(100))
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_after_task_id_reconnects_and_the_tool_runs_once() {
    let (srv, proxy) = behind_proxy().await;
    let s = fixture_session(&client(&proxy.url, Duration::from_secs(30))).await;

    a_cut_call_runs_once(&s, &proxy).await;

    // A cut in the middle of a longer call, and of a chunked result.
    proxy.plan(&[Cut::Drop, Cut::Drop]);
    let slept = s.call("sleep", json!({"ms": 200})).await.unwrap();
    assert_eq!(text(&slept.blocks), "slept");
    let big = s.call("big", json!({"bytes": 10_000})).await.unwrap();
    assert_eq!(text(&big.blocks).len(), 10_000);
    assert_eq!(proxy.pending(), 0);

    s.close().await.unwrap();
    srv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_stream_is_a_drop_after_the_heartbeat_timeout() {
    let (srv, proxy) = behind_proxy().await;
    let s = fixture_session(&client(&proxy.url, Duration::from_millis(500))).await;

    proxy.plan(&[Cut::Stall]);
    let out = s.call("counter", json!({})).await.unwrap();
    assert_eq!(proxy.pending(), 0);
    assert_eq!(text(&out.blocks), "1");
    let out = s.call("counter", json!({})).await.unwrap();
    assert_eq!(text(&out.blocks), "2", "the stalled call ran once");
    s.close().await.unwrap();
    srv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_before_task_id_is_resent_and_the_tool_runs_once() {
    let (srv, proxy) = behind_proxy().await;
    let s = fixture_session(&client(&proxy.url, Duration::from_secs(30))).await;

    // The request reached the server (which started the call) and the answer was cut before
    // its first event: the client resends under its own id, and gets that call's result.
    proxy.plan(&[Cut::Early]);
    let first = s.call("counter", json!({})).await.unwrap();
    assert_eq!(proxy.pending(), 0, "the call was cut");
    assert_eq!(text(&first.blocks), "1");
    // Had the resend run the tool again, this would say 3.
    let second = s.call("counter", json!({})).await.unwrap();
    assert_eq!(text(&second.blocks), "2");
    assert!(!s.is_terminated());
    s.close().await.unwrap();
    srv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnects_are_bounded() {
    let (srv, proxy) = behind_proxy().await;
    let c = Client::builder(&proxy.url)
        .no_api_key()
        .reconnect_attempts(2)
        .heartbeat_timeout(Duration::from_millis(300))
        .backoff(Duration::from_millis(10), Duration::from_millis(20))
        .build()
        .unwrap();
    let s = fixture_session(&c).await;
    // Reconnects carry the task_id, which the proxy lets through; so stall the first call and
    // make the server's answer to every reconnect unreachable by a long sleep instead.
    proxy.plan(&[Cut::Stall]);
    match s.call("sleep", json!({"ms": 5_000})).await {
        Err(Error::Timeout(m)) => assert!(m.contains("gave up after 2 reconnects"), "{m}"),
        other => panic!("expected a timeout, got {other:?}"),
    }
    s.close().await.unwrap();
    srv.shutdown().await;
}
