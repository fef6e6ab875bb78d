//! Sessions: every way to open one, prompt, tools, calls and their errors, close and drop.

use std::sync::{Arc, Mutex};

use ors_client::{Block, Error, Provider, RunToolOutput, SecretsMode, TaskRef, ToolErrorReason};
use ors_examples::conformance::ConformanceTask;
use serde::Serialize;
use serde_json::json;

use crate::support::{
    client, client_without_ping, deleted, eventually, fixture_session, ok, raw_post, server,
    server_with, text,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_episode_from_split_and_index() {
    let srv = server().await;
    let env = client(&srv.url().to_string()).environment("conformance");
    let s = env.session_at("train", 3).await.unwrap();
    assert!(!s.sid().is_empty());
    assert_eq!(s.task(), &TaskRef::at("train", 3));
    assert_eq!(text(&s.prompt().await.unwrap()), "What is 3+3?");

    let tools = s.tools().await.unwrap();
    assert!(
        tools.iter().any(|t| t.name == "hint"),
        "task_tools includes hint"
    );
    let openai = s.tools_for(Provider::OpenAi).await.unwrap();
    assert_eq!(openai.len(), tools.len());

    let hint = s.call("hint", serde_json::Value::Null).await.unwrap();
    assert_eq!(text(&hint.blocks), "The answer is 6");

    #[derive(Serialize)]
    struct Submit<'a> {
        answer: &'a str,
    }
    let out = s.call_as("submit", &Submit { answer: "6" }).await.unwrap();
    assert_eq!(text(&out.blocks), "Correct!");
    assert_eq!(out.reward, Some(1.0));
    assert!(out.finished);
    s.close().await.unwrap();
    srv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_episode_from_a_typed_or_json_task() {
    let srv = server().await;
    let env = client(&srv.url().to_string()).environment("conformance");

    let typed = env.session_for(&ConformanceTask::with_id(7)).await.unwrap();
    assert_eq!(text(&typed.prompt().await.unwrap()), "What is 7+7?");
    typed.close().await.unwrap();

    let task = json!({"id": 9, "question": "Custom?", "answer": "x"});
    let js = env.session(task.clone()).await.unwrap();
    assert_eq!(js.task(), &TaskRef::Spec(task));
    assert_eq!(text(&js.prompt().await.unwrap()), "Custom?");
    let out = js.call("submit", json!({"answer": "x"})).await.unwrap();
    assert_eq!(out.reward, Some(1.0));
    js.close().await.unwrap();

    assert!(matches!(
        TaskRef::spec(&json!([1, 2])),
        Err(Error::InvalidArgument(_))
    ));
    srv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outputs_carry_metadata_images_and_large_chunked_text() {
    let srv = server().await;
    let s = fixture_session(&client(&srv.url().to_string())).await;

    let echo = s.call("echo", json!({"text": "héllo"})).await.unwrap();
    assert_eq!(text(&echo.blocks), "héllo");
    assert_eq!(echo.metadata.unwrap()["length"], 5);
    assert_eq!(echo.reward, Some(0.0));
    assert!(!echo.finished);

    let image = s.call("image", json!({})).await.unwrap();
    match &image.blocks[..] {
        [Block::Text(t), Block::Image(i)] => {
            assert_eq!(t.text, "image");
            assert_eq!(i.mime_type, "image/png");
            assert!(!i.data.is_empty());
        }
        other => panic!("unexpected blocks {other:?}"),
    }

    // Well over one 4096-byte chunk, so the result arrives as chunk events and an end.
    let big = s.call("big", json!({"bytes": 20_000})).await.unwrap();
    let t = text(&big.blocks);
    assert_eq!(t.len(), 20_000);
    assert!(t.bytes().all(|b| b == b'x'));
    s.close().await.unwrap();
    srv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_errors_and_crashes_leave_the_session_usable() {
    let srv = server().await;
    let s = fixture_session(&client(&srv.url().to_string())).await;

    match s.call("fail", json!({"message": "boom"})).await {
        Err(Error::ToolError { message, .. }) => assert_eq!(message, "boom"),
        other => panic!("expected a tool error, got {other:?}"),
    }
    assert_eq!(
        s.call_raw("fail", json!({"message": "boom"}))
            .await
            .unwrap(),
        RunToolOutput::error("boom")
    );
    match s.call("nosuch", json!({})).await {
        Err(Error::ToolError { message, .. }) => assert!(message.contains("nosuch"), "{message}"),
        other => panic!("expected a tool error, got {other:?}"),
    }
    match s.call("panic", json!({})).await {
        Err(Error::ToolCrashed { message }) => assert!(!message.is_empty()),
        other => panic!("expected a crash, got {other:?}"),
    }
    assert!(matches!(
        s.call("echo", json!("not an object")).await,
        Err(Error::InvalidArgument(_))
    ));
    // Still alive: the counter of this session counts from 1.
    let n = s.call("counter", json!({})).await.unwrap();
    assert_eq!(text(&n.blocks), "1");
    assert!(!s.is_terminated());
    s.close().await.unwrap();
    srv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_reach_the_environment_in_body_and_header_form() {
    let srv = server().await;
    let url = srv.url().to_string();
    for mode in [SecretsMode::Body, SecretsMode::Header, SecretsMode::Both] {
        let c = ors_client::Client::builder(&url)
            .no_api_key()
            .secrets_mode(mode)
            .build()
            .unwrap();
        let s = c
            .environment("conformance")
            .session(TaskRef::at("train", 0))
            .secret("TOKEN", "t0p-s3cret")
            .open()
            .await
            .unwrap();
        let out = s.call("secret", json!({"name": "TOKEN"})).await.unwrap();
        assert_eq!(text(&out.blocks), "t0p-s3cret", "{mode:?}");
        s.close().await.unwrap();
    }
    srv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_events_reach_the_callbacks() {
    let srv = server().await;
    let env = client(&srv.url().to_string()).environment("progressive");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&seen);
    let s = env
        .session(TaskRef::at("test", 0))
        .on_progress(move |p| {
            assert_eq!(p.tool, "work");
            sink.lock().unwrap().push(p.value["step"].as_u64().unwrap());
        })
        .await
        .unwrap();
    let out = s.call("work", json!({"steps": 3})).await.unwrap();
    assert_eq!(text(&out.blocks), "done");
    assert_eq!(*seen.lock().unwrap(), [1, 2, 3]);

    let own = Arc::new(Mutex::new(0));
    let o = Arc::clone(&own);
    s.call_with_progress("work", json!({"steps": 2}), move |_| {
        *o.lock().unwrap() += 1
    })
    .await
    .unwrap();
    assert_eq!(*own.lock().unwrap(), 2);
    assert_eq!(
        seen.lock().unwrap().len(),
        3,
        "the per-call callback replaces the session's"
    );
    s.close().await.unwrap();
    srv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_deletes_and_drop_deletes_too() {
    let srv = server().await;
    let url = srv.url().to_string();
    let env = client(&url).environment("conformance");

    let s = env.session_at("train", 0).await.unwrap();
    let sid = s.sid().to_owned();
    assert_eq!(raw_post(&url, "/ping", &sid).await, ok());
    s.close().await.unwrap();
    assert_eq!(raw_post(&url, "/ping", &sid).await, deleted());

    let s = env.session_at("train", 1).await.unwrap();
    let sid = s.sid().to_owned();
    drop(s);
    assert!(
        eventually(|| async { raw_post(&url, "/ping", &sid).await == deleted() }).await,
        "a dropped session is deleted"
    );
    srv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_deleted_elsewhere_fails_fast_with_the_cause() {
    let srv = server().await;
    let url = srv.url().to_string();
    let s = fixture_session(&client_without_ping(&url)).await;
    assert_eq!(raw_post(&url, "/delete", s.sid()).await, ok());

    match s.call("echo", json!({"text": "x"})).await {
        Err(Error::SessionTerminated { sid, reason }) => {
            assert_eq!(sid, s.sid());
            assert!(reason.contains("410 (session_deleted)"), "{reason}");
        }
        other => panic!("expected SessionTerminated, got {other:?}"),
    }
    assert!(s.is_terminated());
    // Later calls fail without asking the server.
    assert!(s.prompt().await.unwrap_err().is_session_terminated());
    // Closing a session the server already forgot is not an error.
    s.close().await.unwrap();
    srv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opening_on_a_bad_task_reports_the_server_error() {
    let srv = server().await;
    let env = client(&srv.url().to_string()).environment("conformance");
    let err = env.session_at("nosuch", 0).await.unwrap_err();
    assert_eq!(err.status(), Some(400), "{err}");
    let err = client(&srv.url().to_string())
        .environment("nosuch")
        .session_at("train", 0)
        .await
        .unwrap_err();
    assert_eq!(err.status(), Some(404), "{err}");
    srv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_reaped_by_the_server_fails_with_the_timed_out_code() {
    // PROTOCOL_NOTES row `gone-vs-not-found`: reaped is 404 session_timed_out, decided by code.
    let srv = server_with(|c| {
        c.session_timeout = std::time::Duration::from_millis(300);
        c.reaper_interval = std::time::Duration::from_millis(50);
    })
    .await;
    let url = srv.url().to_string();
    let s = fixture_session(&client_without_ping(&url)).await;
    // Every probe counts as activity, so each wait is longer than the timeout and the last
    // (a loaded machine may run the reaper late).
    let timed_out = (404, Some("session_timed_out".to_owned()));
    let mut wait = std::time::Duration::from_millis(800);
    while raw_post(&url, "/ping", s.sid()).await != timed_out {
        assert!(
            wait.as_secs() < 30,
            "the reaper never removed the idle session"
        );
        tokio::time::sleep(wait).await;
        wait *= 2;
    }
    match s.prompt().await {
        Err(Error::SessionTerminated { reason, .. }) => {
            assert!(reason.contains("404 (session_timed_out)"), "{reason}");
            assert!(reason.contains("of inactivity"), "{reason}");
        }
        other => panic!("expected SessionTerminated, got {other:?}"),
    }
    // Closing a session the server timed out is not an error.
    s.close().await.unwrap();
    srv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_may_select_a_named_toolset() {
    let srv = server().await;
    let c = client(&srv.url().to_string());
    let env = c.environment("conformance");
    let loud = env
        .session(TaskRef::at("train", 1))
        .toolset("codex")
        .await
        .unwrap();
    let names: Vec<String> = loud
        .tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert!(names.contains(&"shout".to_owned()), "{names:?}");
    let out = loud.call("shout", json!({"text": "hi"})).await.unwrap();
    assert_eq!(text(&out.blocks), "HI");
    // Another session of the same environment does not have the toolset.
    let plain = fixture_session(&c).await;
    let err = plain
        .call("shout", json!({"text": "hi"}))
        .await
        .unwrap_err();
    assert!(
        matches!(
            &err,
            Error::ToolError {
                reason: Some(ToolErrorReason::NotFound),
                ..
            }
        ),
        "{err:?}"
    );
    // An unknown name is refused when the session opens, naming the known one.
    let err = env
        .session(TaskRef::at("train", 1))
        .toolset("claude-code")
        .await
        .unwrap_err();
    assert_eq!(err.status(), Some(400), "{err}");
    assert!(err.to_string().contains("codex"), "{err}");
}
