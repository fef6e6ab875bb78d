//! Tool calls over raw HTTP: the SSE bytes, chunking, errors, panics, timeouts, progress,
//! keep-alives, reconnects, ordering and parallelism.

use std::time::Duration;

use crate::support::*;
use ors_server::prelude::*;
use serde_json::{json, Value};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_streams_task_id_then_end() {
    let server = start().await;
    let addr = server.local_addr();
    let sid = episode(addr, task(2)).await;
    let r = call(addr, &sid, "submit", json!({"text": "4"})).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    assert_eq!(r.header("cache-control"), Some("no-cache"));
    // A call that finishes at once is answered as one complete body, which a proxy may
    // buffer (only a live stream asks it not to).
    assert!(!r.chunked);
    assert_eq!(r.header("x-accel-buffering"), None);
    assert_eq!(
        r.header("content-length"),
        Some(r.body.len().to_string().as_str())
    );
    // The exact bytes of the PROTOCOL_NOTES wire example.
    let text = r.text();
    let (head, end) = text.split_once("\n\n").unwrap();
    let task_id = head.strip_prefix("event: task_id\ndata: ").unwrap();
    assert_eq!(task_id.len(), 32);
    assert!(task_id.chars().all(|c| c.is_ascii_hexdigit()));
    let data = end
        .strip_prefix("event: end\ndata: ")
        .and_then(|d| d.strip_suffix("\n\n"))
        .unwrap();
    // Exactly ors-core's encoding, one line ...
    let expected = RunToolOutput::from(ToolOutput::text("Correct!").with_reward(1.0).finish());
    assert_eq!(data, expected.to_json());
    // ... which means the same as the PROTOCOL_NOTES wire example.
    let example: Value = serde_json::from_str(
        r#"{"ok":true,"output":{"blocks":[{"text":"Correct!","detail":null,"type":"text"}],"metadata":null,"reward":1.0,"finished":true}}"#,
    )
    .unwrap();
    assert_eq!(serde_json::from_str::<Value>(data).unwrap(), example);
    // The server returns SSE whatever the Accept header says (a new episode: that one finished).
    let sid = episode(addr, task(2)).await;
    let r = post_s(
        addr,
        &sid,
        "/lab/call",
        r#"{"name": "echo", "input": {"text": "hi"}}"#,
    )
    .await;
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    let v = result_of(&r);
    assert_eq!(v["output"]["metadata"], json!({"length": 2}));
    assert_eq!(v["output"]["reward"], 0.0);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_errors_are_ok_false_results() {
    // PROTOCOL_NOTES row `tool-error-ok-false`.
    let server = start().await;
    let addr = server.local_addr();
    let sid = episode(addr, task(1)).await;

    let v = result_of(&call(addr, &sid, "nope", json!({})).await);
    assert_eq!(v["ok"], false);
    let err = v["error"].as_str().unwrap();
    assert!(
        err.contains("unknown tool 'nope'") && err.contains("echo"),
        "{err}"
    );

    let v = result_of(&call(addr, &sid, "echo", json!({"txt": "x"})).await);
    assert_eq!(v["ok"], false);
    assert!(v["error"].as_str().unwrap().contains("'echo'"), "{v}");

    let v = result_of(&call(addr, &sid, "fail", json!({"text": "not today"})).await);
    assert_eq!(v, json!({"ok": false, "error": "not today"}));

    // A body that is not a call at all is a 400 naming the field.
    let r = post_s(addr, &sid, "/lab/call", r#"{"name": "echo", "input": "x"}"#).await;
    r.assert_error(400, "invalid_request");
    assert!(r.detail().contains("'input'"), "{}", r.detail());
    let r = post_s(addr, &sid, "/lab/call", r#"{"input": {}}"#).await;
    r.assert_error(400, "invalid_request");
    assert!(
        r.detail().contains("missing field 'name'"),
        "{}",
        r.detail()
    );
    // An empty body is said to be one.
    let r = post_s(addr, &sid, "/lab/call", "").await;
    r.assert_error(400, "invalid_request");
    assert_eq!(
        r.detail(),
        "the request body is empty; expected a JSON object with 'name'"
    );
    // A misspelt `name` is a missing one; an extra field beside a good call is ignored.
    let r = post_s(addr, &sid, "/lab/call", r#"{"nmae": "echo", "input": {}}"#).await;
    r.assert_error(400, "invalid_request");
    let r = call_body(
        addr,
        &sid,
        r#"{"name": "echo", "input": {"text": "hi"}, "trace_id": "t-1"}"#,
    )
    .await;
    assert_eq!(text_of(&r), "hi");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_is_an_error_event_and_the_session_survives() {
    // PROTOCOL_NOTES row `tool-crash-error-event`.
    let server = start().await;
    let addr = server.local_addr();
    let sid = episode(addr, task(1)).await;
    assert_eq!(text_of(&call(addr, &sid, "counter", json!({})).await), "1");
    let r = call(addr, &sid, "boom", json!({})).await;
    assert_eq!(r.status, 200);
    let events = r.events();
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(events[0].0, "task_id");
    assert_eq!(
        events[1],
        (
            "error".to_owned(),
            "tool 'boom' panicked: the tool blew up".to_owned()
        )
    );
    assert_eq!(text_of(&call(addr, &sid, "counter", json!({})).await), "2");
    assert_eq!(get(addr, "/health").await.status, 200);
    server.shutdown().await;
}

/// The result JSON of `echo` for a text, encoded by ors-core as the server does.
fn echo_json(text: &str) -> String {
    let mut meta = JsonObject::new();
    meta.insert("length".into(), json!(text.chars().count()));
    RunToolOutput::from(ToolOutput::text(text).with_reward(0.0).with_metadata(meta)).to_json()
}

/// Data of the `chunk`/`end` events of a reply.
fn pieces(r: &Reply) -> Vec<(String, String)> {
    r.events()
        .into_iter()
        .filter(|(n, _)| n == "chunk" || n == "end")
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_over_4096_bytes_are_chunked() {
    // PROTOCOL_NOTES row `chunking`.
    let server = start().await;
    let addr = server.local_addr();
    let sid = episode(addr, task(1)).await;
    // Our JSON layout must match the server's for the sizes below to mean anything.
    let probe = call(addr, &sid, "echo", json!({"text": "x".repeat(4000)})).await;
    let joined: String = pieces(&probe).into_iter().map(|(_, d)| d).collect();
    assert_eq!(joined, echo_json(&"x".repeat(4000)));
    let overhead = echo_json(&"x".repeat(4000)).len() - 4000;

    // Exactly 4096 bytes: one `end`.
    let text = "x".repeat(4096 - overhead);
    assert_eq!(echo_json(&text).len(), 4096);
    let r = call(addr, &sid, "echo", json!({"text": text})).await;
    let p = pieces(&r);
    assert_eq!(p.len(), 1, "{p:?}");
    assert_eq!(p[0].0, "end");
    assert_eq!(p[0].1.len(), 4096);

    // 4097 bytes: a 4096-byte `chunk` and a 1-byte `end`.
    let text = "x".repeat(4097 - overhead);
    let r = call(addr, &sid, "echo", json!({"text": text})).await;
    let p = pieces(&r);
    assert_eq!(p.len(), 2, "{p:?}");
    assert_eq!((p[0].0.as_str(), p[0].1.len()), ("chunk", 4096));
    assert_eq!((p[1].0.as_str(), p[1].1.as_str()), ("end", "}"));
    assert_eq!(result_of(&r)["output"]["blocks"][0]["text"], text);

    // Large: every piece at most 4096 bytes, reassembled exactly.
    let text = "y".repeat(50_000);
    let r = call(addr, &sid, "echo", json!({"text": text})).await;
    let p = pieces(&r);
    assert_eq!(p.len(), 13);
    assert!(p.iter().all(|(_, d)| d.len() <= 4096));
    assert_eq!(result_of(&r)["output"]["blocks"][0]["text"], text);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunks_never_split_a_multibyte_character() {
    let server = start().await;
    let addr = server.local_addr();
    let sid = episode(addr, task(1)).await;
    // Where the text starts in the result JSON.
    let prefix_len = echo_json("Z").find('Z').unwrap();
    for ch in ['é', '€', '😀'] {
        let width = ch.len_utf8();
        // The character starts one byte before the 4096 boundary, so a byte cut would split it.
        let mut text = "a".repeat(4095 - prefix_len);
        text.push(ch);
        text.push_str(&"b".repeat(100));
        let json_text = echo_json(&text);
        assert_eq!(json_text.find(ch), Some(4095));
        let r = call(addr, &sid, "echo", json!({"text": text})).await;
        let p = pieces(&r);
        assert_eq!(p.len(), 2, "{ch}: {p:?}");
        assert_eq!(
            p[0].1.len(),
            4095,
            "{ch}: the cut moves back to the boundary"
        );
        assert!(p[1].1.starts_with(ch));
        assert_eq!(p[0].1.len() + p[1].1.len(), json_text.len());
        assert_eq!(
            result_of(&r)["output"]["blocks"][0]["text"],
            text,
            "{ch} width {width}"
        );
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_events_come_before_the_result() {
    let server = start().await;
    let addr = server.local_addr();
    let sid = episode(addr, task(1)).await;
    let r = call(addr, &sid, "progress", json!({"steps": 3})).await;
    let names: Vec<String> = r.events().into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        ["task_id", "progress", "progress", "progress", "end"]
    );
    let data: Vec<Value> = r
        .events()
        .into_iter()
        .filter(|(n, _)| n == "progress")
        .map(|(_, d)| serde_json::from_str(&d).unwrap())
        .collect();
    assert_eq!(
        data,
        vec![json!({"step": 0}), json!({"step": 1}), json!({"step": 2})]
    );
    assert_eq!(text_of(&r), "done");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_of_a_call_that_never_waits_is_delivered_too() {
    let server = start().await;
    let addr = server.local_addr();
    let sid = episode(addr, task(1)).await;
    let r = call(addr, &sid, "announce", json!({})).await;
    let events = r.events();
    assert_eq!(
        events[1],
        ("progress".to_owned(), "\"starting\"".to_owned())
    );
    assert_eq!(events[2].0, "end");
    assert_eq!(text_of(&r), "announced");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keepalive_comments_flow_during_long_calls() {
    // PROTOCOL_NOTES rows `keep-alive` and `keep-alive-interval`, with a short interval for the test.
    let server = start_with(|c| c.keepalive = Duration::from_millis(50)).await;
    let addr = server.local_addr();
    let sid = episode(addr, task(1)).await;
    let r = call(
        addr,
        &sid,
        "sleep",
        json!({"ms": 600, "key": "keepalive-call"}),
    )
    .await;
    assert!(r.text().contains(": ping\n\n"), "{}", r.text());
    // Comments are invisible to event parsing.
    assert_eq!(text_of(&r), "slept 1");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_drop_the_tool_and_fire_its_token() {
    let server = start_with(|c| c.tool_timeout = Some(Duration::from_millis(200))).await;
    let addr = server.local_addr();
    let sid = episode(addr, task(1)).await;
    let v = result_of(&call(addr, &sid, "hang", json!({"key": "timeout-hang"})).await);
    assert_eq!(
        v,
        json!({"ok": false, "error": "tool 'hang' timed out after 0.2s"})
    );
    assert_eq!(wait_count("timeout-hang:cancelled", 1).await, 1);
    // The session is still usable.
    assert_eq!(text_of(&call(addr, &sid, "counter", json!({})).await), "1");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_tool_timeouts_override_the_server_one() {
    let server = start_with(|c| {
        c.tool_timeouts
            .insert("sleep".into(), Duration::from_millis(100));
    })
    .await;
    let addr = server.local_addr();
    let sid = episode(addr, task(1)).await;
    let v = result_of(&call(addr, &sid, "sleep", json!({"ms": 5000, "key": "per-tool"})).await);
    assert_eq!(
        v,
        json!({"ok": false, "error": "tool 'sleep' timed out after 0.1s"})
    );
    // Other tools have no limit.
    assert_eq!(
        text_of(&call(addr, &sid, "progress", json!({"steps": 30})).await),
        "done"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnect_returns_the_same_result_without_running_again() {
    // PROTOCOL_NOTES rows `task-id-bound-to-session` and `client-task-id`.
    let server = start().await;
    let addr = server.local_addr();
    let sid = episode(addr, task(1)).await;

    // Finished call: the lingering result, byte for byte.
    let first = call(
        addr,
        &sid,
        "sleep",
        json!({"ms": 1, "key": "reconnect-done"}),
    )
    .await;
    let task_id = first.events()[0].1.clone();
    let again = post_s(addr, &sid, "/lab/call", &reconnect_body("sleep", &task_id)).await;
    assert_eq!(again.body, first.body);
    assert_eq!(count("reconnect-done"), 1);

    // Running call: disconnect mid-call, the call goes on, reconnect gets its result.
    let body = json!({"name": "sleep", "input": {"ms": 500, "key": "reconnect-running"}});
    let (stream, task_id, _) = open_call(addr, &sid, &body.to_string()).await;
    drop(stream);
    let r = post_s(addr, &sid, "/lab/call", &reconnect_body("sleep", &task_id)).await;
    assert_eq!(r.events()[0], ("task_id".to_owned(), task_id.clone()));
    assert_eq!(text_of(&r), "slept 1");
    assert_eq!(count("reconnect-running"), 1, "the call ran once");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_stream_asks_proxies_not_to_buffer_it() {
    let server = start().await;
    let addr = server.local_addr();
    let sid = episode(addr, task(1)).await;
    // `patient` waits for its cancellation: the answer is a stream for as long as it runs.
    let body = json!({"name": "patient", "input": {}}).to_string();
    let (stream, _, _) = open_call(addr, &sid, &body).await;
    assert_eq!(
        stream.head.header("content-type"),
        Some("text/event-stream")
    );
    assert_eq!(stream.head.header("x-accel-buffering"), Some("no"));
    drop(stream);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disconnected_client_does_not_cancel_the_call() {
    let server = start().await;
    let addr = server.local_addr();
    let sid = episode(addr, task(1)).await;
    let body = json!({"name": "sleep", "input": {"ms": 200, "key": "disconnect"}});
    let (stream, _, _) = open_call(addr, &sid, &body.to_string()).await;
    drop(stream);
    // The sleep tool bumps the counter when it finishes; the next call sees that.
    assert_eq!(text_of(&call(addr, &sid, "counter", json!({})).await), "2");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_ids_are_bound_to_their_session() {
    // PROTOCOL_NOTES rows `task-id-bound-to-session` and `client-task-id`: another session's
    // id is unknown here, so it starts a call of this session, never reaching the other's.
    let server = start().await;
    let addr = server.local_addr();
    let a = episode(addr, task(1)).await;
    let b = episode(addr, task(1)).await;
    let r = call(addr, &a, "echo", json!({"text": "private to a"})).await;
    let task_id = r.events()[0].1.clone();

    let r = post_s(addr, &b, "/lab/call", &reconnect_body("counter", &task_id)).await;
    assert!(!r.text().contains("private to a"), "{}", r.text());
    assert_eq!(r.events()[0], ("task_id".to_owned(), task_id.clone()));
    assert_eq!(text_of(&r), "1", "a call of b ran under that id");
    // And a's result is still a's.
    let r = post_s(addr, &a, "/lab/call", &reconnect_body("echo", &task_id)).await;
    assert_eq!(text_of(&r), "private to a");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_task_id_starts_a_call_that_a_resend_never_runs_again() {
    // PROTOCOL_NOTES row `client-task-id`: a client whose connection broke before the
    // task_id event resends the same request, and the tool runs once.
    let server = start().await;
    let addr = server.local_addr();
    let sid = episode(addr, task(1)).await;
    let body =
        json!({"name": "sleep", "input": {"ms": 300, "key": "client-id"}, "task_id": "mine-1"})
            .to_string();
    let (stream, task_id, _) = open_call(addr, &sid, &body).await;
    assert_eq!(task_id, "mine-1", "the call runs under the client's id");
    assert_eq!(wait_count("client-id", 1).await, 1);
    drop(stream);
    // The resend while it runs listens to it; one after it finished gets its result.
    let resent = call_body(addr, &sid, &body).await;
    assert_eq!(text_of(&resent), "slept 1");
    let again = call_body(addr, &sid, &body).await;
    assert_eq!(again.body, resent.body);
    assert_eq!(count("client-id"), 1, "the tool ran once");
    // Two sends of a call never started, racing each other: still one run.
    let body =
        json!({"name": "sleep", "input": {"ms": 50, "key": "client-id-race"}, "task_id": "mine-2"})
            .to_string();
    let (x, y) = tokio::join!(call_body(addr, &sid, &body), call_body(addr, &sid, &body));
    assert_eq!(text_of(&x), text_of(&y));
    assert_eq!(count("client-id-race"), 1);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answer_says_the_server_takes_client_task_ids() {
    // The client names its calls only where this header says it may (the reference would
    // take any named call for a reconnect and run nothing).
    let server = start().await;
    let addr = server.local_addr();
    let sid = new_sid(addr).await;
    for r in [
        get(addr, "/health").await,
        post_s(
            addr,
            &sid,
            "/create",
            &json!({"task_spec": task(1)}).to_string(),
        )
        .await,
        call(addr, &sid, "counter", json!({})).await,
        get(addr, "/nope").await,
    ] {
        assert_eq!(r.header("x-ors-client-task-ids"), Some("1"), "{}", r.text());
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_ids_a_client_chooses_are_checked() {
    let server = start().await;
    let addr = server.local_addr();
    let sid = episode(addr, task(1)).await;
    for bad in [
        json!(""),
        json!("a b"),
        json!("x".repeat(129)),
        json!("tab\t"),
    ] {
        let body = json!({"name": "counter", "input": {}, "task_id": bad}).to_string();
        let r = call_body(addr, &sid, &body).await;
        r.assert_error(400, "invalid_request");
        assert!(r.detail().contains("'task_id'"), "{}", r.detail());
    }
    assert_eq!(
        text_of(&call(addr, &sid, "counter", json!({})).await),
        "1",
        "nothing ran"
    );
    server.shutdown().await;
}

// Paused time, as the reaper tests: the linger timer reads tokio's clock, which stands still
// while a request is on the wire (requests run on blocking threads), so the result is seen
// lingering however slowly the machine answers, and then released when the clock moves.
#[tokio::test(start_paused = true)]
async fn results_are_released_on_time_and_a_late_reconnect_runs_nothing() {
    let server = start_with(|c| c.linger = Duration::from_millis(300)).await;
    let addr = server.local_addr();
    let sid = episode(addr, task(1)).await;
    let body = json!({"name": "echo", "input": {"text": "x".repeat(1 << 20)}, "task_id": "late"})
        .to_string();
    assert_eq!(text_of(&call_body(addr, &sid, &body).await).len(), 1 << 20);
    assert!(server.stats().lingering_result_bytes > 1 << 20);
    // Released by the timer, with no other request to trigger it.
    for _ in 0..1000 {
        if server.stats().lingering_result_bytes == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        server.stats().lingering_result_bytes,
        0,
        "released after the linger time"
    );
    // PROTOCOL_NOTES row `client-task-id`: the id is remembered; the call does not run again.
    let body = json!({"name": "counter", "input": {}, "task_id": "late"}).to_string();
    let r = call_body(addr, &sid, &body).await;
    let events = r.events();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].0, "error");
    assert!(events[0].1.contains("has expired"), "{}", events[0].1);
    assert!(events[0].1.contains("not run again"), "{}", events[0].1);
    assert_eq!(text_of(&call(addr, &sid, "counter", json!({})).await), "1");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lingering_results_are_bounded_server_wide_oldest_first() {
    let server = start_with(|c| c.max_lingering_bytes = 5 << 20).await;
    let addr = server.local_addr();
    let text = "x".repeat(2 << 20);
    let mut sessions = Vec::new();
    for i in 0..4 {
        let sid = episode(addr, task(1)).await;
        let body = json!({"name": "echo", "input": {"text": text}, "task_id": format!("big-{i}")})
            .to_string();
        assert_eq!(text_of(&call_body(addr, &sid, &body).await).len(), 2 << 20);
        assert!(server.stats().lingering_result_bytes <= 5 << 20);
        sessions.push((sid, body));
    }
    // The oldest went first: their reconnects hear "expired"; the newest is still there.
    let (sid, body) = &sessions[0];
    let r = call_body(addr, sid, body).await;
    assert_eq!(r.events()[0].0, "error", "{}", r.text());
    let (sid, body) = &sessions[3];
    assert_eq!(text_of(&call_body(addr, sid, body).await).len(), 2 << 20);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_on_one_session_run_in_arrival_order() {
    // PROTOCOL_NOTES row `calls-serialized`: one at a time, in arrival order, even when the earlier call
    // is slower.
    let server = start().await;
    let addr = server.local_addr();
    let sid = episode(addr, task(1)).await;
    let mut open = Vec::new();
    for ms in [300, 200, 100, 0] {
        let body = json!({"name": "sleep", "input": {"ms": ms, "key": "ordered"}});
        open.push(open_call(addr, &sid, &body.to_string()).await);
    }
    let mut results = Vec::new();
    for (stream, _, raw) in open {
        results.push(text_of(&finish(stream, raw).await));
    }
    assert_eq!(results, ["slept 1", "slept 2", "slept 3", "slept 4"]);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_run_in_parallel() {
    // A short grace: shutdown gives the hanging call that long before dropping it.
    let server = start_with(|c| c.shutdown_grace = Duration::from_millis(100)).await;
    let addr = server.local_addr();
    let a = episode(addr, task(1)).await;
    let b = episode(addr, task(1)).await;
    // A call on `a` that only ends when cancelled; `b` must not wait for it.
    let body = json!({"name": "hang", "input": {"key": "parallel-hang"}});
    let (_stream, _, _) = open_call(addr, &a, &body.to_string()).await;
    assert_eq!(wait_count("parallel-hang:started", 1).await, 1);
    assert_eq!(text_of(&call(addr, &b, "counter", json!({})).await), "1");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_sessions_at_once() {
    let server = start().await;
    let addr = server.local_addr();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..200i64 {
        tasks.spawn(async move {
            let sid = episode(addr, task(i)).await;
            let prompt = get_s(addr, &sid, "/lab/prompt").await.json();
            assert_eq!(prompt[0]["text"], format!("What is {i}+{i}?"));
            let echoed = text_of(&call(addr, &sid, "echo", json!({"text": sid})).await);
            assert_eq!(echoed, sid);
            assert_eq!(text_of(&call(addr, &sid, "counter", json!({})).await), "1");
            let v =
                result_of(&call(addr, &sid, "submit", json!({"text": (2 * i).to_string()})).await);
            assert_eq!(v["output"]["reward"], 1.0);
            assert_eq!(post_s(addr, &sid, "/delete", "").await.status, 200);
        });
    }
    let mut done = 0;
    while let Some(r) = tasks.join_next().await {
        r.expect("a session task failed");
        done += 1;
    }
    assert_eq!(done, 200);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_context_carries_session_and_call_ids() {
    let server = start().await;
    let addr = server.local_addr();
    let sid = episode(addr, task(1)).await;
    let r = call(addr, &sid, "whoami", json!({})).await;
    let task_id = r.events()[0].1.clone();
    assert_eq!(text_of(&r), format!("{sid} {task_id}"));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_session_cancels_its_running_call() {
    let server = start_with(|c| c.shutdown_grace = Duration::from_millis(200)).await;
    let addr = server.local_addr();
    let sid = episode(addr, tagged(1, "delete-running")).await;
    let body = json!({"name": "hang", "input": {"key": "delete-running-call"}});
    let (stream, _, raw) = open_call(addr, &sid, &body.to_string()).await;
    assert_eq!(wait_count("delete-running-call:started", 1).await, 1);
    assert_eq!(post_s(addr, &sid, "/delete", "").await.status, 200);
    assert_eq!(count("delete-running-call:cancelled"), 1, "the token fired");
    assert_eq!(count("delete-running:teardown"), 1);
    let r = finish(stream, raw).await;
    let last = r.events().pop().unwrap();
    assert_eq!(last.0, "error");
    assert!(last.1.contains("was deleted"), "{}", last.1);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_cannot_queue_more_calls_than_the_limit() {
    let srv = start_with(|c| c.max_queued_calls = 2).await;
    let addr = srv.local_addr();
    let sid = episode(addr, task(1)).await;
    let body = json!({"name": "sleep", "input": {"ms": 1500, "key": "queue-limit"}});
    // One call running and one waiting its turn: the session is at its limit.
    let first = open_call(addr, &sid, &body.to_string()).await;
    let second = open_call(addr, &sid, &body.to_string()).await;
    let r = call(addr, &sid, "echo", json!({"text": "one too many"})).await;
    r.assert_error(429, "too_many_calls");
    assert_eq!(r.header("retry-after"), Some("1"));
    assert!(
        r.detail().contains("2 calls running or queued"),
        "{}",
        r.detail()
    );
    // Nothing was lost: both queued calls finish, then the session takes calls again.
    for (stream, _, raw) in [first, second] {
        assert_eq!(finish(stream, raw).await.status, 200);
    }
    assert_eq!(count("queue-limit"), 2);
    let r = call(addr, &sid, "echo", json!({"text": "room again"})).await;
    assert_eq!(text_of(&r), "room again");
    srv.shutdown().await;
}
