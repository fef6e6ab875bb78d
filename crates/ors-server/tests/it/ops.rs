//! The operator routes and behaviours: `/metrics`, `/ready`, draining, and replica-addressed
//! session ids.

use std::time::Duration;

use serde_json::json;

use crate::support::*;

/// The value of the metric line starting with `series` (name and labels), if present.
fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}

async fn scrape(addr: std::net::SocketAddr, key: &str) -> String {
    let r = send(addr, "GET", "/metrics", &[("X-API-Key", key)], None).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(
        r.header("content-type")
            .is_some_and(|t| t.starts_with("application/openmetrics-text")),
        "{:?}",
        r.header("content-type")
    );
    r.text()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_sessions_calls_rewards_and_rejections_behind_the_api_key() {
    let server = start_with(|c| {
        c.api_key = Some("k3y".into());
        c.max_sessions = 2;
    })
    .await;
    let addr = server.local_addr();
    let key = [("X-API-Key", "k3y")];
    get(addr, "/metrics")
        .await
        .assert_error(401, "unauthorized");

    let mut sids = Vec::new();
    for id in [1, 2] {
        let r = send(addr, "POST", "/create_session", &key, None).await;
        let sid = r.json()["sid"].as_str().expect("sid").to_owned();
        let body = json!({ "env_name": "lab", "task_spec": task(id) });
        let created = create_with(addr, &sid, &key, &body).await;
        assert_eq!(created.status, 200, "{}", created.text());
        sids.push(sid);
    }
    let call = |sid: String, name: &'static str, input: serde_json::Value| async move {
        let body = json!({ "name": name, "input": input }).to_string();
        let headers = [
            ("X-API-Key", "k3y"),
            ("X-Session-ID", sid.as_str()),
            ("Accept", "text/event-stream"),
        ];
        send(addr, "POST", "/lab/call", &headers, Some(&body)).await
    };
    // A right answer (reward 1), a tool error, a panic.
    assert_eq!(
        text_of(&call(sids[0].clone(), "submit", json!({"text": "2"})).await),
        "Correct!"
    );
    let failed = result_of(&call(sids[0].clone(), "fail", json!({"text": "no"})).await);
    assert_eq!(failed["ok"], false);
    let boom = call(sids[1].clone(), "boom", json!({})).await;
    assert!(boom.events().iter().any(|(e, _)| e == "error"));
    // The third session is over the limit: a rejection.
    let r = send(addr, "POST", "/create_session", &key, None).await;
    r.assert_error(503, "too_many_sessions");

    let text = scrape(addr, "k3y").await;
    let expect = [
        (r#"ors_sessions_active{env="lab"}"#, 2.0),
        (r#"ors_sessions_active{env="other"}"#, 0.0),
        ("ors_sessions_created_total", 2.0),
        (
            r#"ors_calls_total{env="lab",tool="submit",outcome="ok"}"#,
            1.0,
        ),
        (
            r#"ors_calls_total{env="lab",tool="fail",outcome="tool_error"}"#,
            1.0,
        ),
        (
            r#"ors_calls_total{env="lab",tool="boom",outcome="crashed"}"#,
            1.0,
        ),
        (
            r#"ors_call_duration_seconds_count{env="lab",tool="submit"}"#,
            1.0,
        ),
        (r#"ors_reward_total{env="lab"}"#, 1.0),
        (
            r#"ors_requests_rejected_total{reason="too_many_sessions"}"#,
            1.0,
        ),
        (r#"ors_requests_rejected_total{reason="auth"}"#, 1.0),
        (r#"ors_requests_total{route="create",status="200"}"#, 2.0),
        (r#"ors_requests_total{route="metrics",status="401"}"#, 1.0),
        ("ors_calls_in_flight", 0.0),
        ("ors_sessions_max", 2.0),
        ("ors_draining", 0.0),
    ];
    for (series, value) in expect {
        assert_eq!(metric(&text, series), Some(value), "{series} in:\n{text}");
    }
    assert!(
        metric(&text, "ors_connections").is_some_and(|n| n >= 1.0),
        "{text}"
    );

    // Deleting counts; the gauge follows.
    let delete = [("X-API-Key", "k3y"), ("X-Session-ID", sids[0].as_str())];
    assert_eq!(
        send(addr, "POST", "/delete", &delete, None).await.status,
        200
    );
    let text = scrape(addr, "k3y").await;
    assert_eq!(
        metric(&text, "ors_sessions_deleted_total"),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        metric(&text, r#"ors_sessions_active{env="lab"}"#),
        Some(1.0),
        "{text}"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnects_timeouts_and_reaped_sessions_are_counted() {
    let server = start_with(|c| {
        c.tool_timeouts
            .insert("sleep".into(), Duration::from_millis(100));
    })
    .await;
    let addr = server.local_addr();
    let sid = ready_episode(addr, task(1)).await;
    let first = call(addr, &sid, "counter", json!({})).await;
    let task_id = first
        .events()
        .into_iter()
        .find(|(e, _)| e == "task_id")
        .map(|(_, d)| d)
        .expect("task_id");
    let again = call_body(addr, &sid, &reconnect_body("counter", &task_id)).await;
    assert_eq!(text_of(&again), "1", "the reconnect got the first result");
    let slow = call(
        addr,
        &sid,
        "sleep",
        json!({"ms": 5000, "key": "ops-timeout"}),
    )
    .await;
    assert_eq!(result_of(&slow)["ok"], false);
    let text = get(addr, "/metrics").await.text();
    assert_eq!(
        metric(&text, "ors_sse_reconnects_total"),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        metric(
            &text,
            r#"ors_calls_total{env="lab",tool="sleep",outcome="timed_out"}"#
        ),
        Some(1.0),
        "{text}"
    );
    server.shutdown().await;

    let server = start_with(|c| {
        c.session_timeout = Duration::from_millis(50);
        c.reaper_interval = Duration::from_millis(20);
    })
    .await;
    let addr = server.local_addr();
    ready_episode(addr, task(2)).await;
    let mut reaped = None;
    for _ in 0..500 {
        let text = get(addr, "/metrics").await.text();
        reaped = metric(&text, "ors_sessions_reaped_total").filter(|n| *n >= 1.0);
        if reaped.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(reaped, Some(1.0));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_can_be_turned_off() {
    let server = start_with(|c| c.metrics = false).await;
    get(server.local_addr(), "/metrics")
        .await
        .assert_error(404, "no_route");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ready_says_whether_new_sessions_are_taken_and_needs_no_key() {
    let server = start_with(|c| {
        c.api_key = Some("k3y".into());
        c.max_sessions = 1;
    })
    .await;
    let addr = server.local_addr();
    let r = get(addr, "/ready").await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.json(),
        json!({"ready": true, "sessions": 0, "max_sessions": 1})
    );
    let key = [("X-API-Key", "k3y")];
    let sid = send(addr, "POST", "/create_session", &key, None)
        .await
        .json()["sid"]
        .as_str()
        .expect("sid")
        .to_owned();
    let body = json!({ "env_name": "lab", "task_spec": task(1) });
    assert_eq!(create_with(addr, &sid, &key, &body).await.status, 200);
    // At capacity: not ready, same body.
    let r = get(addr, "/ready").await;
    assert_eq!(r.status, 503, "{}", r.text());
    assert_eq!(
        r.json(),
        json!({"ready": false, "sessions": 1, "max_sessions": 1})
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_refuses_new_sessions_and_lets_live_ones_finish() {
    let server = std::sync::Arc::new(start().await);
    let addr = server.local_addr();
    let sid = ready_episode(addr, tagged(1, "ops-drain")).await;
    // An id issued before the drain: its client is opening a session only this replica
    // can serve.
    let early = new_sid(addr).await;
    let draining = {
        let server = std::sync::Arc::clone(&server);
        tokio::spawn(async move { server.drain(Duration::from_secs(60)).await })
    };
    let mut refused = None;
    for _ in 0..500 {
        let r = get(addr, "/ready").await;
        if r.status == 503 {
            refused = Some(r);
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let r = refused.expect("/ready turned 503");
    assert_eq!(r.json()["ready"], false);
    assert_eq!(r.json()["sessions"], 1);
    let r = post(addr, "/create_session", "").await;
    r.assert_error(503, "shutting_down");
    assert!(r.header("retry-after").is_some());
    let body = json!({ "env_name": "lab", "task_spec": task(2) });
    assert_eq!(create_with(addr, &early, &[], &body).await.status, 200);
    assert_eq!(post_s(addr, &early, "/delete", "").await.status, 200);
    // The live episode carries on: calls, prompt, delete.
    assert_eq!(
        text_of(&call(addr, &sid, "submit", json!({"text": "2"})).await),
        "Correct!"
    );
    assert_eq!(get_s(addr, &sid, "/lab/prompt").await.status, 200);
    assert!(!draining.is_finished());
    let text = get(addr, "/metrics").await.text();
    assert_eq!(metric(&text, "ors_draining"), Some(1.0), "{text}");
    assert_eq!(post_s(addr, &sid, "/delete", "").await.status, 200);
    let left = tokio::time::timeout(Duration::from_secs(30), draining)
        .await
        .expect("the drain ended with the last session")
        .expect("the drain task did not panic");
    assert_eq!(left, 0);
    assert_eq!(count("ops-drain:teardown"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_gives_up_after_its_time() {
    let server = start().await;
    let addr = server.local_addr();
    ready_episode(addr, tagged(1, "ops-drain-timeout")).await;
    assert_eq!(server.drain(Duration::from_millis(200)).await, 1);
    server.shutdown().await;
    assert_eq!(count("ops-drain-timeout:teardown"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_issues_ids_naming_it_that_its_peers_accept() {
    let shared = ors_server::SessionKey::Shared("one key for every replica".into());
    let seven = start_with(|c| {
        c.replica_id = Some(7);
        c.session_key = shared.clone();
    })
    .await;
    let three = start_with(|c| {
        c.replica_id = Some(3);
        c.session_key = shared.clone();
    })
    .await;
    let sid = new_sid(seven.local_addr()).await;
    assert!(sid.starts_with("00000007-"), "{sid}");
    let u = uuid_version_and_variant(&sid);
    assert_eq!(u, Some((4, 2)), "{sid}");
    // The key, not the replica, decides whether an id is ours.
    let body = json!({ "env_name": "lab", "task_spec": task(1) });
    assert_eq!(
        create_with(three.local_addr(), &sid, &[], &body)
            .await
            .status,
        200
    );
    // An id moved to another replica's number is refused.
    let moved = format!("00000003{}", &new_sid(seven.local_addr()).await[8..]);
    create_with(three.local_addr(), &moved, &[], &body)
        .await
        .assert_error(400, "unknown_session_id");
    seven.shutdown().await;
    three.shutdown().await;
}

/// The version digit and the variant's top two bits of a UUID string.
fn uuid_version_and_variant(sid: &str) -> Option<(u32, u32)> {
    let hex: String = sid.chars().filter(|c| *c != '-').collect();
    let version = hex.get(12..13)?.chars().next()?.to_digit(16)?;
    let variant = hex.get(16..17)?.chars().next()?.to_digit(16)? >> 2;
    Some((version, variant))
}
