//! The code environment's commands leave nothing behind: a runaway command is stopped at its
//! timeout, teardown removes the episode's directory, and deleting a session while `run` is
//! running (behind a server) kills what it started and removes the directory.
#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a failed assumption is a failed test

use std::sync::Arc;
use std::time::Duration;

use ors_client::Client;
use ors_conformance::http::{Request, Target};
use ors_examples::code::{exercises, Code};
use ors_server::prelude::*;
use ors_server::runtime::env::call_tool;
use ors_server::Server;
use serde_json::json;

fn running_with(marker: &str) -> usize {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .filter(|cmd| String::from_utf8_lossy(cmd).contains(marker))
        .count()
}

#[tokio::test]
async fn deleting_a_session_mid_run_kills_its_processes_and_removes_its_directory() {
    let server = Server::new()
        .port(0)
        .environment::<Code>()
        .bind()
        .await
        .expect("bind");
    let client = Client::new(server.url()).expect("client");
    let session = Arc::new(
        client
            .environment("code")
            .session_at("train", 0)
            .await
            .expect("session"),
    );
    let pwd = session
        .call("run", json!({"command": "pwd"}))
        .await
        .expect("pwd");
    let report = pwd.blocks[0].as_text().unwrap_or_default().to_owned();
    let dir = report
        .lines()
        .nth(2)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| panic!("no directory in {report}"));
    assert!(dir.is_dir(), "{}", dir.display());

    let marker = "ors-delete-mid-run-51c2";
    let running = Arc::clone(&session);
    let call = tokio::spawn(async move {
        running
            .call_raw(
                "run",
                json!({"command": format!("sleep 100 & sleep 101; : {marker}"), "timeout_secs": 60}),
            )
            .await
    });
    let mut seen = false;
    for _ in 0..200 {
        if running_with(marker) > 0 {
            seen = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(seen, "the command never started");

    let target = Target::from_addr(server.local_addr());
    let sid = session.sid().to_owned();
    let deleted = tokio::task::spawn_blocking(move || {
        Request::new("POST", "/delete").sid(&sid).send(&target)
    })
    .await
    .expect("join")
    .expect("delete");
    assert_eq!(deleted.status(), 200);
    let mut gone = false;
    for _ in 0..200 {
        if running_with(marker) == 0 && !dir.exists() {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(
        gone,
        "processes: {}, dir exists: {}",
        running_with(marker),
        dir.exists()
    );
    let _ = tokio::time::timeout(Duration::from_secs(30), call).await;
    server.shutdown().await;
}

fn text_of(out: &RunToolOutput) -> String {
    match out {
        RunToolOutput::Success(o) => o.blocks[0].as_text().unwrap_or_default().to_owned(),
        RunToolOutput::Error(e) => e.error.clone(),
    }
}

#[tokio::test]
async fn a_runaway_command_times_out_leaving_no_process_and_teardown_removes_the_dir() {
    let mut env = Code::new(exercises("train").unwrap().remove(0), Secrets::default())
        .await
        .unwrap();
    let dir = env.dir().unwrap().path().to_owned();
    assert!(dir.is_dir());
    let marker = "ors-runaway-7f3a";
    let out = tokio::time::timeout(
        Duration::from_secs(30),
        call_tool(
            &mut env,
            ToolContext::detached(),
            "run",
            json!({"command": format!("while true; do :; done; : {marker}"), "timeout_secs": 1}),
        ),
    )
    .await
    .expect("answered within its timeout");
    assert!(!out.is_ok());
    assert!(
        text_of(&out).contains("timed out after 1 s"),
        "{}",
        text_of(&out)
    );
    assert_eq!(running_with(marker), 0);
    let ok = call_tool(
        &mut env,
        ToolContext::detached(),
        "run",
        json!({"command": "echo done"}),
    )
    .await;
    assert!(
        text_of(&ok).contains("[exit code 0]\n--- stdout ---\ndone"),
        "{}",
        text_of(&ok)
    );
    env.teardown().await;
    assert!(!dir.exists(), "teardown left {}", dir.display());
}
