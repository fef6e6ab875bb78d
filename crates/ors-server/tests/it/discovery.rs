//! Discovery endpoints, routing, and request-level errors, over raw HTTP.

use crate::support::*;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_and_list_environments() {
    let server = start().await;
    let addr = server.local_addr();

    let r = get(addr, "/health").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.json(), json!({"status": "ok"}));

    let r = get(addr, "/list_environments").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json(), json!(["lab", "other"]));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_lists_only_shared_tools_with_schemas() {
    let server = start().await;
    let addr = server.local_addr();
    let r = get(addr, "/lab/tools").await;
    assert_eq!(r.status, 200);
    let tools = r.json()["tools"].as_array().unwrap().clone();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"echo") && names.contains(&"counter"));
    assert!(
        !names.contains(&"hint"),
        "task-specific tools are not in /tools"
    );
    let echo = tools.iter().find(|t| t["name"] == "echo").unwrap();
    assert_eq!(echo["description"], "Echo the text back.");
    assert_eq!(echo["input_schema"]["properties"]["text"]["type"], "string");
    let counter = tools.iter().find(|t| t["name"] == "counter").unwrap();
    assert!(
        counter["input_schema"].is_null(),
        "no-input tools have a null schema"
    );

    let other = get(addr, "/other/tools").await.json();
    assert_eq!(other["tools"][0]["name"], "which");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn env_routes_without_prefix_go_to_the_default_env() {
    // PROTOCOL_NOTES row `default-env-routes`: no redirect, the first registered environment answers.
    let server = start().await;
    let addr = server.local_addr();
    let bare = get(addr, "/tools").await;
    assert_eq!(bare.status, 200);
    assert_eq!(bare.json(), get(addr, "/lab/tools").await.json());
    let splits = get(addr, "/splits").await;
    assert_eq!(splits.status, 200);
    let n = post(addr, "/num_tasks", r#"{"split": "train"}"#).await;
    assert_eq!(n.json(), json!({"num_tasks": 5}));
    // Names are matched without case.
    assert_eq!(get(addr, "/LAB/tools").await.status, 200);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_environment_is_404_naming_it() {
    let server = start().await;
    let addr = server.local_addr();
    for r in [
        get(addr, "/nope/tools").await,
        get(addr, "/nope/splits").await,
        post(addr, "/nope/tasks", r#"{"split":"train"}"#).await,
        post(addr, "/nope/call", r#"{"name":"echo"}"#).await,
    ] {
        r.assert_error(404, "unknown_environment");
        assert_eq!(
            r.detail(),
            "unknown environment 'nope'; available environments: lab, other"
        );
    }
    let r = post(addr, "/create", r#"{"env_name": "nope", "task_spec": {}}"#).await;
    r.assert_error(400, "invalid_request"); // missing X-Session-ID is checked first
    let sid = new_sid(addr).await;
    let r = post_s(
        addr,
        &sid,
        "/create",
        r#"{"env_name": "nope", "task_spec": {}}"#,
    )
    .await;
    r.assert_error(404, "unknown_environment");
    assert_eq!(
        r.detail(),
        "unknown environment 'nope'; available environments: lab, other"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn splits_use_the_bare_name_rule() {
    let server = start().await;
    let r = get(server.local_addr(), "/lab/splits").await;
    assert_eq!(
        r.json(),
        json!([
            {"name": "train", "type": "train"},
            {"name": "test", "type": "test"},
            {"name": "hard", "type": "validation"},
        ])
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_num_tasks_task_and_ranges() {
    let server = start().await;
    let addr = server.local_addr();

    let r = post(addr, "/lab/tasks", r#"{"split": "test"}"#).await;
    assert_eq!(r.status, 200);
    let v = r.json();
    assert_eq!(v["env_name"], "lab");
    assert_eq!(v["tasks"].as_array().unwrap().len(), 2);
    assert_eq!(v["tasks"][0]["id"], 100);
    // Served from the cache the second time, same bytes.
    assert_eq!(
        post(addr, "/lab/tasks", r#"{"split": "test"}"#).await.body,
        r.body
    );

    let r = post(addr, "/lab/num_tasks", r#"{"split": "train"}"#).await;
    assert_eq!(r.json(), json!({"num_tasks": 5}));

    // Both names of the single-task endpoint (PROTOCOL_NOTES row `get-task-aliases`).
    for path in ["/lab/task", "/lab/get_task"] {
        let r = post(addr, path, r#"{"split": "train", "index": 3}"#).await;
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(r.json()["task"]["id"], 3);
    }
    for path in ["/lab/task_range", "/lab/get_task_range"] {
        let r = post(addr, path, r#"{"split": "train", "start": 1, "stop": 3}"#).await;
        assert_eq!(r.status, 200, "{path}");
        let ids: Vec<i64> = r.json()["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["id"].as_i64().unwrap())
            .collect();
        assert_eq!(ids, vec![1, 2]);
    }
    // Python slice rules (row `task-range-slices`): negatives count from the end, bounds clamp, start > stop
    // is empty, both optional.
    let range = |body: &'static str| async move {
        post(addr, "/lab/task_range", body).await.json()["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["id"].as_i64().unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        range(r#"{"split": "train", "start": -2}"#).await,
        vec![3, 4]
    );
    assert_eq!(range(r#"{"split": "train", "stop": -3}"#).await, vec![0, 1]);
    assert_eq!(
        range(r#"{"split": "train", "start": 3, "stop": 99}"#).await,
        vec![3, 4]
    );
    assert_eq!(
        range(r#"{"split": "train", "start": 4, "stop": 1}"#).await,
        Vec::<i64>::new()
    );
    assert_eq!(range(r#"{"split": "train"}"#).await, vec![0, 1, 2, 3, 4]);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_errors_are_400_with_the_reason() {
    let server = start().await;
    let addr = server.local_addr();
    let r = post(addr, "/lab/tasks", r#"{"split": "nope"}"#).await;
    r.assert_error(400, "invalid_request");
    assert!(r.detail().starts_with("Invalid split"), "{}", r.detail());
    assert!(r.detail().contains("'nope'"));
    // The error names the splits there are.
    assert!(
        r.detail()
            .ends_with("; available splits: train, test, hard"),
        "{}",
        r.detail()
    );
    let r = post(addr, "/lab/num_tasks", r#"{"split": "nope"}"#).await;
    r.assert_error(400, "invalid_request");
    let r = post(addr, "/lab/task", r#"{"split": "train", "index": 5}"#).await;
    r.assert_error(400, "invalid_request");
    assert!(r.detail().starts_with("Invalid index"), "{}", r.detail());
    // Row `negative-index`: a negative index is not Python indexing here.
    let r = post(addr, "/lab/task", r#"{"split": "train", "index": -1}"#).await;
    r.assert_error(400, "invalid_request");
    assert!(r.detail().starts_with("Invalid index"));
    let r = post(addr, "/lab/task_range", r#"{"split": "nope"}"#).await;
    r.assert_error(400, "invalid_request");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn body_validation_is_400_naming_the_field() {
    // PROTOCOL_NOTES row `bad-body-400`: 400, not FastAPI's 422.
    let server = start().await;
    let addr = server.local_addr();
    let cases = [
        ("/lab/tasks", r#"{}"#, "missing field 'split'"),
        ("/lab/tasks", r#"{"split": 3}"#, "invalid field 'split'"),
        (
            "/lab/task",
            r#"{"split": "train"}"#,
            "missing field 'index'",
        ),
        (
            "/lab/task",
            r#"{"split": "train", "index": "1"}"#,
            "invalid field 'index'",
        ),
        (
            "/lab/task_range",
            r#"{"split": "train", "start": 1.5}"#,
            "invalid field 'start'",
        ),
        ("/lab/tasks", r#"["train"]"#, "must be a JSON object"),
        ("/lab/tasks", r#"{"split": "#, "not valid JSON"),
        (
            "/lab/tasks",
            r#"{"split": "train"} trailing"#,
            "not valid JSON",
        ),
    ];
    for (path, body, expected) in cases {
        let r = post(addr, path, body).await;
        r.assert_error(400, "invalid_request");
        assert!(
            r.detail().contains(expected),
            "{path} {body}: {}",
            r.detail()
        );
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_body_fields_are_ignored_but_a_misspelt_required_one_is_missing() {
    // PROTOCOL_NOTES row `unknown-fields-ignored`: a newer client or an extended peer works.
    let server = start().await;
    let addr = server.local_addr();
    let r = post(addr, "/lab/tasks", r#"{"split": "test", "extra": 1}"#).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["tasks"].as_array().unwrap().len(), 2);
    let r = post(
        addr,
        "/lab/task",
        r#"{"split": "train", "index": 3, "trace": {"id": "t-1"}}"#,
    )
    .await;
    assert_eq!(r.json()["task"]["id"], 3);
    let r = post(addr, "/lab/task", r#"{"split": "train", "indx": 3}"#).await;
    r.assert_error(400, "invalid_request");
    assert!(
        r.detail().contains("missing field 'index'"),
        "{}",
        r.detail()
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_paths_404_and_wrong_methods_405_with_allow() {
    let server = start().await;
    let addr = server.local_addr();
    let r = get(addr, "/nothing/here/at/all").await;
    r.assert_error(404, "no_route");
    assert!(r.detail().contains("no route"), "{}", r.detail());
    let r = get(addr, "/lab/nope").await;
    r.assert_error(404, "no_route");

    let r = get(addr, "/lab/call").await;
    r.assert_error(405, "method_not_allowed");
    assert_eq!(r.header("allow"), Some("POST"));
    let r = post(addr, "/health", "{}").await;
    r.assert_error(405, "method_not_allowed");
    assert_eq!(r.header("allow"), Some("GET"));
    let r = send(addr, "DELETE", "/create", &[], None).await;
    r.assert_error(405, "method_not_allowed");
    assert_eq!(r.header("allow"), Some("POST"));
    assert!(r.detail().contains("DELETE"));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn query_strings_are_ignored_by_routing() {
    let server = start().await;
    let r = get(server.local_addr(), "/health?probe=1").await;
    assert_eq!(r.status, 200);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn body_over_the_limit_is_413() {
    let server = start_with(|c| c.max_body_bytes = 1024).await;
    let addr = server.local_addr();
    let big = format!(r#"{{"split": "{}"}}"#, "x".repeat(2000));
    let r = post(addr, "/lab/tasks", &big).await;
    r.assert_error(413, "payload_too_large");
    assert!(r.detail().contains("1024"), "{}", r.detail());

    // Without a Content-Length (chunked upload) the limit holds while reading.
    let chunk = "x".repeat(1500);
    let raw = format!(
        "POST /lab/tasks HTTP/1.1\r\nHost: t\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{chunk}\r\n0\r\n\r\n",
        chunk.len()
    );
    let r = send_raw(addr, "POST", raw.into_bytes()).await;
    r.assert_error(413, "payload_too_large");

    // Just under the limit is fine.
    let ok = post(addr, "/lab/tasks", r#"{"split": "train"}"#).await;
    assert_eq!(ok.status, 200);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_headers_are_431() {
    let server = start_with(|c| c.max_header_bytes = 4096).await;
    let addr = server.local_addr();
    let big = "a".repeat(6000);
    let r = send(addr, "GET", "/health", &[("X-Filler", &big)], None).await;
    assert_eq!(r.status, 431);
    let r = send(addr, "GET", "/health", &[("X-Filler", "small")], None).await;
    assert_eq!(r.status, 200);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_alive_connections_serve_several_requests() {
    let server = start().await;
    let one = "GET /health HTTP/1.1\r\nHost: t\r\n\r\n";
    let last = "GET /list_environments HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
    let replies = send_pipelined(
        server.local_addr(),
        format!("{one}{one}{last}").into_bytes(),
        3,
    )
    .await;
    let statuses: Vec<u16> = replies.iter().map(|r| r.status).collect();
    assert_eq!(statuses, [200, 200, 200]);
    assert_eq!(replies[1].json(), json!({"status": "ok"}));
    assert_eq!(replies[2].json(), json!(["lab", "other"]));
    server.shutdown().await;
}
