//! Session lifecycle over raw HTTP: create_session, create, ping, prompt, task_tools,
//! delete, delete_session, the reaper, limits, and secrets.

use std::time::Duration;

use crate::support::*;
use base64::Engine as _;
use ors_server::SessionKey;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_session_negotiates_json_or_sse() {
    // PROTOCOL_NOTES row `create-session-reply`.
    let server = start().await;
    let addr = server.local_addr();

    let r = post(addr, "/create_session", "").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/json"));
    let sid = r.json()["sid"].as_str().unwrap().to_owned();
    let parsed = uuid::Uuid::parse_str(&sid).expect("a UUID");
    assert_eq!(parsed.get_version_num(), 4);

    // The reference client sends Accept: text/event-stream and a `{}` body.
    let r = send(
        addr,
        "POST",
        "/create_session",
        &[("Accept", "text/event-stream")],
        Some("{}"),
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    let text = r.text();
    let sid = text
        .strip_prefix("event: task_id\ndata: ")
        .and_then(|rest| rest.strip_suffix("\n\nevent: end\ndata: \n\n"))
        .unwrap_or_else(|| panic!("unexpected SSE body {text:?}"));
    assert!(uuid::Uuid::parse_str(sid).is_ok());
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_quick_start_flow() {
    let server = start().await;
    let addr = server.local_addr();
    let sid = new_sid(addr).await;
    let body = json!({"env_name": "lab", "task_spec": task(2), "secrets": {}}).to_string();
    let r = post_s(addr, &sid, "/create", &body).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json(), json!({"sid": sid}));

    let r = get_s(addr, &sid, "/lab/prompt").await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.json(),
        json!([{"text": "What is 2+2?", "detail": null, "type": "text"}])
    );

    let r = call(addr, &sid, "submit", json!({"text": "4"})).await;
    assert_eq!(
        result_of(&r),
        json!({"ok": true, "output": {
            "blocks": [{"text": "Correct!", "detail": null, "type": "text"}],
            "metadata": null, "reward": 1.0, "finished": true}})
    );

    let r = post_s(addr, &sid, "/ping", "").await;
    assert_eq!(r.json(), json!({"status": "ok"}));

    let r = post_s(addr, &sid, "/delete", "").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json(), json!({"sid": sid}));
    let r = post_s(addr, &sid, "/delete_session", "").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json(), json!({"sid": sid}));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_by_split_and_index_and_default_env() {
    let server = start().await;
    let addr = server.local_addr();
    let sid = new_sid(addr).await;
    // No env_name: the default environment.
    let r = post_s(addr, &sid, "/create", r#"{"split": "test", "index": 1}"#).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = get_s(addr, &sid, "/lab/prompt").await;
    assert_eq!(r.json()[0]["text"], "What is 101+101?");

    let sid = new_sid(addr).await;
    let r = post_s(
        addr,
        &sid,
        "/create",
        r#"{"env_name": "other", "split": "train", "index": 0}"#,
    )
    .await;
    assert_eq!(r.status, 200);
    // Row `path-env-not-validated`: the session decides the environment, not the path.
    let r = get_s(addr, &sid, "/lab/prompt").await;
    assert_eq!(r.json()[0]["text"], "other prompt");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_validates_its_body() {
    let server = start().await;
    let addr = server.local_addr();
    let cases = [
        ("{}", "neither was given"),
        ("", "neither was given"),
        (
            r#"{"task_spec": {"id": 1}, "split": "train", "index": 0}"#,
            "not both",
        ),
        (r#"{"split": "train"}"#, "without index"),
        (r#"{"index": 0}"#, "without split"),
        (r#"{"task_spec": [1]}"#, "task_spec must be a JSON object"),
        (
            r#"{"task_spec": {}, "secrets": {"A": 1}}"#,
            "invalid field 'secrets.A'",
        ),
        (r#"{"split": "train", "idx": 0}"#, "without index"),
        (r#"{"split": "nope", "index": 0}"#, "Invalid split"),
        (r#"{"split": "train", "index": 99}"#, "Invalid index"),
        (r#"{"split": "train", "index": -1}"#, "Invalid index"),
    ];
    for (body, expected) in cases {
        let sid = new_sid(addr).await;
        let r = post_s(addr, &sid, "/create", body).await;
        r.assert_error(400, "invalid_request");
        assert!(r.detail().contains(expected), "{body}: {}", r.detail());
        // Nothing was created.
        post_s(addr, &sid, "/ping", "")
            .await
            .assert_error(404, "no_episode_yet");
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_ignores_fields_it_does_not_know() {
    // PROTOCOL_NOTES row `unknown-fields-ignored`: newer clients send fields we do not know.
    let server = start().await;
    let addr = server.local_addr();
    let sid = new_sid(addr).await;
    let body = json!({"task_spec": task(2), "x-extension": {"a": 1}, "x-trace": [1]});
    assert_eq!(create_with(addr, &sid, &[], &body).await.status, 200);
    assert_eq!(
        text_of(&call(addr, &sid, "submit", json!({"text": "4", "note": "extra"})).await),
        "Correct!"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_id_header_rules() {
    let server = start().await;
    let addr = server.local_addr();
    for path in ["/create", "/ping", "/delete", "/delete_session"] {
        let r = post(addr, path, "{}").await;
        r.assert_error(400, "invalid_request");
        assert_eq!(r.detail(), "X-Session-ID header is required");
    }
    for path in ["/lab/prompt", "/lab/task_tools"] {
        let r = get(addr, path).await;
        assert_eq!(r.status, 400, "{path}");
    }
    let r = post(addr, "/lab/call", r#"{"name": "echo"}"#).await;
    assert_eq!(r.status, 400);

    let long = "a".repeat(129);
    let body = json!({"task_spec": task(1)}).to_string();
    let r = post_s(addr, &long, "/create", &body).await;
    r.assert_error(400, "invalid_request");
    assert!(r.detail().contains("128"), "{}", r.detail());
    server.shutdown().await;

    // With ids unchecked (ORS_SESSION_KEY=off), any id up to 128 bytes names a session.
    let server = start_with(|c| c.session_key = SessionKey::Off).await;
    let addr = server.local_addr();
    let max = "b".repeat(128);
    assert_eq!(post_s(addr, &max, "/create", &body).await.status, 200);
    // Surrounding whitespace is trimmed, as the reference does.
    assert_eq!(
        post_s(addr, &format!(" {max} "), "/ping", "").await.status,
        200
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_refuses_ids_the_server_did_not_issue_before_reading_the_body() {
    // One client could fill the session limit with ids it invented and keep them alive
    // with pings. Now /create takes only ids /create_session issued.
    let server = start_with(|c| c.body_timeout = Duration::from_secs(60)).await;
    let addr = server.local_addr();
    let body = json!({"task_spec": task(1)}).to_string();
    let invented = [
        "my-own-session".to_owned(),
        uuid::Uuid::new_v4().to_string(),
        // An issued id spelt another way is another id.
        new_sid(addr).await.to_uppercase(),
    ];
    for sid in &invented {
        let r = post_s(addr, sid, "/create", &body).await;
        r.assert_error(400, "unknown_session_id");
        assert!(
            r.detail().contains("POST /create_session"),
            "{}",
            r.detail()
        );
        post_s(addr, sid, "/ping", "")
            .await
            .assert_error(404, "session_not_found");
    }
    assert_eq!(server.stats().sessions, 0);
    // The refusal comes before the body is read: a body that never arrives does not delay it.
    let head = "POST /create HTTP/1.1\r\nHost: t\r\nX-Session-ID: squatter\r\n\
                Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{";
    let r = send_raw(addr, "POST", head.as_bytes().to_vec()).await;
    r.assert_error(400, "unknown_session_id");
    // An issued id works, and one issued but not yet created says what to do.
    let sid = new_sid(addr).await;
    let r = post_s(addr, &sid, "/ping", "").await;
    r.assert_error(404, "no_episode_yet");
    assert!(r.detail().contains("POST /create first"), "{}", r.detail());
    assert_eq!(post_s(addr, &sid, "/create", &body).await.status, 200);
    assert_eq!(post_s(addr, &sid, "/ping", "").await.status, 200);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_sharing_a_key_accept_each_others_ids() {
    let key = "a secret every replica is given";
    let one = start_with(|c| c.session_key = SessionKey::Shared(key.into())).await;
    let two = start_with(|c| c.session_key = SessionKey::Shared(key.into())).await;
    let other = start().await;
    let sid = new_sid(one.local_addr()).await;
    let body = json!({"task_spec": task(1)}).to_string();
    assert_eq!(
        post_s(two.local_addr(), &sid, "/create", &body)
            .await
            .status,
        200
    );
    post_s(other.local_addr(), &sid, "/create", &body)
        .await
        .assert_error(400, "unknown_session_id");
    for server in [one, two, other] {
        server.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicate_create_is_400() {
    let server = start().await;
    let addr = server.local_addr();
    let sid = episode(addr, task(1)).await;
    let body = json!({"task_spec": task(1)}).to_string();
    let r = post_s(addr, &sid, "/create", &body).await;
    r.assert_error(400, "session_exists");
    assert!(r.detail().contains("already exists"), "{}", r.detail());
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleted_sessions_are_410_and_unknown_ones_404() {
    // PROTOCOL_NOTES rows `gone-vs-not-found` and `delete-unknown`.
    let server = start().await;
    let addr = server.local_addr();
    let sid = ready_episode(addr, tagged(1, "gone-410")).await;
    assert_eq!(post_s(addr, &sid, "/delete", "").await.status, 200);
    assert_eq!(
        count("gone-410:teardown"),
        1,
        "delete tears the episode down first"
    );

    for r in [
        get_s(addr, &sid, "/lab/prompt").await,
        get_s(addr, &sid, "/lab/task_tools").await,
        call(addr, &sid, "echo", json!({"text": "x"})).await,
        post_s(addr, &sid, "/ping", "").await,
        post_s(addr, &sid, "/delete", "").await,
    ] {
        r.assert_error(410, "session_deleted");
        assert!(r.detail().contains("was deleted"), "{}", r.detail());
    }
    for r in [
        get_s(addr, "never-seen", "/lab/prompt").await,
        get_s(addr, "never-seen", "/lab/task_tools").await,
        call(addr, "never-seen", "echo", json!({"text": "x"})).await,
        post_s(addr, "never-seen", "/ping", "").await,
        post_s(addr, "never-seen", "/delete", "").await,
    ] {
        r.assert_error(404, "session_not_found");
        assert!(r.detail().contains("not found"), "{}", r.detail());
    }
    // delete_session is optional cleanup: always 200.
    assert_eq!(
        post_s(addr, "never-seen", "/delete_session", "")
            .await
            .status,
        200
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_session_also_tears_down() {
    let server = start().await;
    let addr = server.local_addr();
    let sid = ready_episode(addr, tagged(1, "del-session")).await;
    assert_eq!(post_s(addr, &sid, "/delete_session", "").await.status, 200);
    assert_eq!(count("del-session:teardown"), 1);
    post_s(addr, &sid, "/ping", "")
        .await
        .assert_error(410, "session_deleted");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_wait_for_a_slow_setup() {
    let server = start().await;
    let addr = server.local_addr();
    let t = json!({"id": 3, "answer": "6", "setup_ms": 1000, "tag": "slow-setup"});
    let sid = episode(addr, t).await;
    // `create` answered before setup finished.
    assert_eq!(count("slow-setup:setup"), 0);
    // Ping does not wait; the prompt does.
    assert_eq!(post_s(addr, &sid, "/ping", "").await.status, 200);
    let r = get_s(addr, &sid, "/lab/prompt").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()[0]["text"], "What is 3+3?");
    assert_eq!(count("slow-setup:setup"), 1);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_setup_answers_later_requests_with_the_error() {
    let server = start().await;
    let addr = server.local_addr();
    let t = json!({"id": 1, "answer": "2", "setup_ms": 50, "fail_setup": "no GPU available"});
    let sid = episode(addr, t).await;
    let r = get_s(addr, &sid, "/lab/prompt").await;
    r.assert_error(500, "setup_failed");
    assert!(r.detail().contains("no GPU available"), "{}", r.detail());
    let r = call(addr, &sid, "echo", json!({"text": "x"})).await;
    r.assert_error(500, "setup_failed");
    assert!(r.detail().contains("no GPU available"));
    // Still deletable.
    assert_eq!(post_s(addr, &sid, "/delete", "").await.status, 200);

    // A panicking constructor is an error too, and the server keeps going.
    let t = json!({"id": 1, "answer": "2", "fail_setup": "panic"});
    let sid = episode(addr, t).await;
    let r = get_s(addr, &sid, "/lab/task_tools").await;
    r.assert_error(500, "setup_failed");
    assert!(r.detail().contains("setup exploded"), "{}", r.detail());
    assert_eq!(get(addr, "/health").await.status, 200);

    // A task_spec that does not fit the task type is the client's mistake: 400.
    let sid = episode(addr, json!({"id": "not a number"})).await;
    let r = get_s(addr, &sid, "/lab/prompt").await;
    r.assert_error(400, "setup_failed");
    assert!(r.detail().contains("task_spec"), "{}", r.detail());
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_during_setup_is_clean() {
    let server = start().await;
    let addr = server.local_addr();
    // A constructor that never finishes by itself.
    let t = json!({"id": 1, "answer": "2", "hold_setup": true, "tag": "del-during-setup"});
    let sid = episode(addr, t).await;
    assert_eq!(wait_count("del-during-setup:setup-started", 1).await, 1);
    // The delete is answered without waiting for the setup, and the session is gone.
    let r = post_s(addr, &sid, "/delete", "").await;
    assert_eq!(r.status, 200);
    get_s(addr, &sid, "/lab/prompt")
        .await
        .assert_error(410, "session_deleted");
    // The constructor was dropped (what it held is let go), so it never finished, and there
    // was no episode to tear down.
    assert_eq!(
        wait_count("del-during-setup:setup-dropped", 1).await,
        1,
        "deleting the session left its setup running"
    );
    assert_eq!(count("del-during-setup:setup"), 0);
    assert_eq!(count("del-during-setup:teardown"), 0);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_tools_adds_task_specific_tools() {
    let server = start().await;
    let addr = server.local_addr();
    let sid = episode(addr, task(4)).await;
    let r = get_s(addr, &sid, "/lab/task_tools").await;
    assert_eq!(r.status, 200);
    let names: Vec<String> = r.json()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    assert!(names.contains(&"hint".to_owned()) && names.contains(&"echo".to_owned()));
    assert_eq!(
        text_of(&call(addr, &sid, "hint", json!({})).await),
        "The answer is 8"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_come_from_the_body_and_the_x_secrets_header() {
    // PROTOCOL_NOTES row `secrets-header`.
    let server = start().await;
    let addr = server.local_addr();

    let sid = new_sid(addr).await;
    let body = json!({"task_spec": task(1), "secrets": {"API_KEY": "from-body"}}).to_string();
    assert_eq!(post_s(addr, &sid, "/create", &body).await.status, 200);
    assert_eq!(
        text_of(&call(addr, &sid, "secrets", json!({})).await),
        "API_KEY from-body"
    );

    // What the reference client sends: base64 of {"KEY": {"value": "V"}}.
    let header = base64::engine::general_purpose::STANDARD
        .encode(r#"{"API_KEY": {"value": "from-header"}, "OTHER": {"value": "o"}}"#);
    let from_header = [("X-Secrets", header.as_str())];
    let cases = [
        (json!({"task_spec": task(1)}), "API_KEY,OTHER from-header"),
        // Both: the body wins for a name given twice.
        (
            json!({"task_spec": task(1), "secrets": {"API_KEY": "body"}}),
            "API_KEY,OTHER body",
        ),
    ];
    for (body, expected) in cases {
        let sid = new_sid(addr).await;
        assert_eq!(
            create_with(addr, &sid, &from_header, &body).await.status,
            200
        );
        assert_eq!(
            text_of(&call(addr, &sid, "secrets", json!({})).await),
            expected
        );
    }

    // A malformed header is a 400 that does not echo it.
    let sid = new_sid(addr).await;
    let r = create_with(
        addr,
        &sid,
        &[("X-Secrets", "c2VjcmV0LXZhbHVl")],
        &json!({"task_spec": task(1)}),
    )
    .await;
    r.assert_error(400, "invalid_request");
    assert!(r.detail().contains("X-Secrets"));
    assert!(!r.text().contains("secret-value") && !r.text().contains("c2VjcmV0"));
    server.shutdown().await;
}

// The reaper tests run in paused time: the server's session clock and its reaper read tokio's
// clock, which moves only when the test advances it or when the runtime has nothing to do
// (then it jumps to the next timer). Requests run on blocking threads, which hold it still,
// so no request sees a session age while it is on the wire.

#[tokio::test(start_paused = true)]
async fn the_reaper_deletes_idle_sessions() {
    let server = start_with(|c| {
        c.session_timeout = Duration::from_millis(1000);
        c.reaper_interval = Duration::from_millis(50);
    })
    .await;
    let addr = server.local_addr();
    let idle = episode(addr, tagged(1, "reaped-idle")).await;
    let kept = episode(addr, tagged(1, "reaped-kept")).await;
    // Keep one alive with pings (well inside the timeout) while the other idles past it.
    for _ in 0..25 {
        tokio::time::advance(Duration::from_millis(100)).await;
        assert_eq!(post_s(addr, &kept, "/ping", "").await.status, 200);
    }
    assert_eq!(wait_count("reaped-idle:teardown", 1).await, 1);
    // PROTOCOL_NOTES row `gone-vs-not-found`: reaped is 404 and says why, for every route.
    for r in [
        post_s(addr, &idle, "/ping", "").await,
        get_s(addr, &idle, "/lab/prompt").await,
        call(addr, &idle, "echo", json!({"text": "x"})).await,
        post_s(addr, &idle, "/delete", "").await,
    ] {
        r.assert_error(404, "session_timed_out");
        assert_eq!(
            r.detail(),
            format!("session '{idle}' timed out after 1 s of inactivity")
        );
    }
    assert_eq!(count("reaped-kept:teardown"), 0);
    assert_eq!(get_s(addr, &kept, "/lab/prompt").await.status, 200);
    server.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn the_reaper_spares_a_session_with_a_running_call() {
    let server = start_with(|c| {
        c.session_timeout = Duration::from_millis(100);
        c.reaper_interval = Duration::from_millis(20);
    })
    .await;
    let addr = server.local_addr();
    let sid = episode(addr, tagged(1, "reaper-busy")).await;
    // An idle session beside it: its reaping shows a reaper pass ran once both were old.
    let witness = episode(addr, tagged(1, "reaper-busy-witness")).await;
    let body = json!({"name": "sleep", "input": {"ms": 2000, "key": "reaper-busy-call"}});
    let (stream, _, raw) = open_call(addr, &sid, &body.to_string()).await;
    assert_eq!(wait_count("reaper-busy-call", 1).await, 1);
    assert_eq!(post_s(addr, &witness, "/ping", "").await.status, 200);
    // Long past the idle timeout, but the call is still running and its client listens.
    tokio::time::advance(Duration::from_millis(500)).await;
    assert_eq!(wait_count("reaper-busy-witness:teardown", 1).await, 1);
    assert_eq!(post_s(addr, &sid, "/ping", "").await.status, 200);
    tokio::time::advance(Duration::from_millis(2000)).await;
    assert_eq!(text_of(&finish(stream, raw).await), "slept 1");
    assert_eq!(count("reaper-busy:teardown"), 0);
    server.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn the_reaper_takes_a_session_whose_hung_call_nobody_listens_to() {
    let server = start_with(|c| {
        c.session_timeout = Duration::from_millis(500);
        c.reaper_interval = Duration::from_millis(50);
        c.shutdown_grace = Duration::from_millis(100);
        // A client that went away is noticed when the stream next writes (a keep-alive).
        c.keepalive = Duration::from_millis(100);
    })
    .await;
    let addr = server.local_addr();
    let sid = episode(addr, tagged(1, "reap-hung")).await;
    let body = json!({"name": "hang", "input": {"key": "reap-hung-call"}});
    let (stream, _, _) = open_call(addr, &sid, &body.to_string()).await;
    assert_eq!(wait_count("reap-hung-call:started", 1).await, 1);
    // The client goes away; the tool never returns.
    drop(stream);
    assert_eq!(wait_count("reap-hung:teardown", 1).await, 1, "reaped");
    assert_eq!(wait_count("reap-hung-call:cancelled", 1).await, 1);
    post_s(addr, &sid, "/ping", "")
        .await
        .assert_error(404, "session_timed_out");
    // The tool's slot is let go a moment before the call stops counting as running.
    let stopped = async {
        while server.stats().running_calls > 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    };
    assert!(
        tokio::time::timeout(Duration::from_secs(10), stopped)
            .await
            .is_ok(),
        "a reaped session's hung call still counts as running"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_limit_is_503_with_retry_after() {
    let server = start_with(|c| c.max_sessions = 2).await;
    let addr = server.local_addr();
    // Issued while there was room; created once there is none.
    let early = new_sid(addr).await;
    let a = episode(addr, task(1)).await;
    let _b = episode(addr, task(1)).await;
    let r = post(addr, "/create_session", "").await;
    r.assert_error(503, "too_many_sessions");
    assert!(r.header("retry-after").is_some());
    let create = json!({"task_spec": task(1)}).to_string();
    let r = post_s(addr, &early, "/create", &create).await;
    r.assert_error(503, "too_many_sessions");
    assert!(r.header("retry-after").is_some());
    assert!(r.detail().contains("2 live sessions"), "{}", r.detail());
    // Room again after a delete.
    assert_eq!(post_s(addr, &a, "/delete", "").await.status, 200);
    let r = post_s(addr, &early, "/create", &create).await;
    assert_eq!(r.status, 200);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_are_isolated() {
    let server = start().await;
    let addr = server.local_addr();
    let a = episode(addr, task(1)).await;
    let b = episode(addr, task(2)).await;
    for _ in 0..3 {
        call(addr, &a, "counter", json!({})).await;
    }
    assert_eq!(text_of(&call(addr, &b, "counter", json!({})).await), "1");
    assert_eq!(text_of(&call(addr, &a, "counter", json!({})).await), "4");
    assert_eq!(
        get_s(addr, &b, "/lab/prompt").await.json()[0]["text"],
        "What is 2+2?"
    );
    // Deleting one leaves the other alone.
    post_s(addr, &a, "/delete", "").await;
    assert_eq!(text_of(&call(addr, &b, "counter", json!({})).await), "2");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_id_can_be_created_again() {
    let server = start().await;
    let addr = server.local_addr();
    let sid = episode(addr, task(1)).await;
    post_s(addr, &sid, "/delete", "").await;
    let r = post_s(
        addr,
        &sid,
        "/create",
        &json!({"task_spec": task(5)}).to_string(),
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(
        get_s(addr, &sid, "/lab/prompt").await.json()[0]["text"],
        "What is 5+5?"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_episode_is_not_torn_down_automatically() {
    // PROTOCOL_NOTES row `finished-no-teardown`: `finished: true` tears nothing down (later
    // calls are refused, row `finished-latch`, but the prompt is served); the client deletes.
    let server = start().await;
    let addr = server.local_addr();
    let sid = episode(addr, tagged(3, "finished-stays")).await;
    let v = result_of(&call(addr, &sid, "submit", json!({"text": "6"})).await);
    assert_eq!(v["output"]["finished"], true);
    assert_eq!(count("finished-stays:teardown"), 0);
    assert_eq!(get_s(addr, &sid, "/lab/prompt").await.status, 200);
    assert_eq!(post_s(addr, &sid, "/delete", "").await.status, 200);
    assert_eq!(count("finished-stays:teardown"), 1);
    server.shutdown().await;
}
