//! The code environment's commands leave nothing behind: a runaway command is stopped at its
//! timeout with nothing left running and its sandbox kept, teardown ends the sandbox (its
//! workspace goes with it), and deleting a session while `run` is running (behind a server)
//! stops what it started before the delete is answered.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a failed assumption is a failed test

use std::sync::Arc;

use ors_client::Client;
use ors_conformance::http::{Request, Target};
use ors_examples::code::{exercises, sandboxes, Code};
use ors_server::prelude::*;
use ors_server::runtime::env::{DynSession as _, EnvHandle};
use ors_server::Server;
use serde_json::json;

/// Host processes running `sleep MARKER` (exactly: not the shells, nor `setsid` before it
/// becomes the sleep, whose command lines hold the marker too).
fn running_with(marker: &str) -> usize {
    let want = format!("sleep\0{marker}\0");
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .filter(|cmd| String::from_utf8_lossy(cmd) == want)
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_session_mid_run_stops_its_processes_before_it_is_answered() {
    let server = Server::new()
        .port(0)
        .environment_with::<Code>(sandboxes().unwrap())
        .bind()
        .await
        .expect("bind");
    let client = Client::new(server.url()).expect("client");
    let (up_tx, up_rx) = tokio::sync::oneshot::channel();
    let up_tx = std::sync::Mutex::new(Some(up_tx));
    let session = Arc::new(
        client
            .environment("code")
            .session(ors_client::TaskRef::at("train", 0))
            .on_progress(move |p| {
                if p.value["line"] == "up" {
                    if let Some(tx) = up_tx.lock().unwrap().take() {
                        let _ = tx.send(());
                    }
                }
            })
            .open()
            .await
            .expect("session"),
    );
    // Odd durations name these sleeps in the host's process table.
    let marker = "987.6547";
    let running = Arc::clone(&session);
    let call = tokio::spawn(async move {
        running
            .call_raw(
                "run",
                // "up" once both sleeps run (the sandbox's own /proc lists only its processes).
                json!({"command": format!(
                    "setsid sleep {marker} & sleep {marker} & \
                     until [ \"$(cat /proc/[0-9]*/comm 2>/dev/null | grep -cx sleep)\" = 2 ]; \
                     do :; done; echo up; wait"),
                       "timeout_secs": 60}),
            )
            .await
    });
    up_rx.await.expect("the command started");
    assert_eq!(running_with(marker), 2);

    let target = Target::from_addr(server.local_addr());
    let sid = session.sid().to_owned();
    let deleted = tokio::task::spawn_blocking(move || {
        Request::new("POST", "/delete").sid(&sid).send(&target)
    })
    .await
    .expect("join")
    .expect("delete");
    assert_eq!(deleted.status(), 200);
    // Answered after teardown, which returns once the sandbox is gone: nothing to wait for.
    assert_eq!(running_with(marker), 0);
    let _ = call.await;
    server.shutdown().await;
}

fn text_of(out: &RunToolOutput) -> String {
    match out {
        RunToolOutput::Success(o) => o.blocks[0].as_text().unwrap_or_default().to_owned(),
        RunToolOutput::Error(e) => e.error.clone(),
    }
}

#[tokio::test]
async fn a_runaway_command_times_out_leaving_no_process_and_teardown_ends_the_sandbox() {
    let mut env = EnvHandle::<Code>::new(sandboxes().unwrap())
        .episode(exercises("train").unwrap().remove(0), Secrets::default())
        .await
        .unwrap();
    let marker = "987.6548";
    let run = |command: String, secs: u64| json!({"command": command, "timeout_secs": secs});
    let wrote = env
        .call(
            ToolContext::detached(),
            "write_file",
            json!({"path": "kept.txt", "content": "kept"}),
        )
        .await;
    assert!(wrote.is_ok(), "{}", text_of(&wrote));
    let out = env
        .call(
            ToolContext::detached(),
            "run",
            run(format!("setsid sleep {marker} & while true; do :; done"), 1),
        )
        .await;
    assert!(!out.is_ok());
    assert!(
        text_of(&out).starts_with("the command exceeded the time limit of 1 s"),
        "{}",
        text_of(&out)
    );
    assert_eq!(running_with(marker), 0);
    let ok = env
        .call(
            ToolContext::detached(),
            "run",
            run("cat kept.txt".to_owned(), 10),
        )
        .await;
    assert!(
        text_of(&ok).contains("[exit code 0]\n--- stdout ---\nkept"),
        "{}",
        text_of(&ok)
    );
    assert!(env.get().unwrap().sandbox().is_started());
    env.teardown().await;
    assert!(!env.get().unwrap().sandbox().is_started());
}
