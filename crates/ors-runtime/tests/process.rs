//! `ors_runtime::process`: nothing a program starts outlives its call, output is capped, the
//! environment is clean, limits apply, and lines stream as progress.
#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a failed assumption is a failed test

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ors_runtime::process::{Exit, Limits, Program, WorkDir};
use ors_runtime::ToolContext;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

/// Processes whose command line contains `marker` (read from /proc).
fn running_with(marker: &str) -> usize {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    dir.filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .filter(|cmd| String::from_utf8_lossy(cmd).contains(marker))
        .count()
}

/// Wait (up to a generous bound, to turn a hang into a failure) until no process matches.
async fn none_left(marker: &str) -> bool {
    for _ in 0..100 {
        if running_with(marker) == 0 {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

#[tokio::test]
async fn a_timeout_kills_the_whole_process_group() {
    // Odd durations name these sleeps in the process table.
    let done = Program::shell("sleep 100.101 & sleep 100.102")
        .timeout(Duration::from_millis(300))
        .run(&ToolContext::detached())
        .await
        .unwrap();
    assert_eq!(done.exit, Exit::TimedOut);
    assert!(done.report().contains("timed out"), "{}", done.report());
    assert!(none_left("100.10").await, "a sleep outlived its call");
}

#[tokio::test]
async fn background_processes_die_when_the_program_exits() {
    let done = Program::shell("sleep 100.201 >/dev/null 2>&1 & echo started")
        .run(&ToolContext::detached())
        .await
        .unwrap();
    assert_eq!(done.exit, Exit::Code(0));
    assert_eq!(done.stdout, "started\n");
    assert!(none_left("100.201").await);
}

#[tokio::test]
async fn cancellation_and_dropping_the_call_kill_the_group() {
    let token = CancellationToken::new();
    let ctx = ToolContext::new("s", "c", token.clone(), None);
    let run = tokio::spawn(async move {
        Program::shell("sleep 100.301 & sleep 100.302")
            .run(&ctx)
            .await
            .unwrap()
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    token.cancel();
    let done = tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(done.exit, Exit::Cancelled);
    assert!(none_left("100.30").await);

    let run = tokio::spawn(async {
        Program::shell("sleep 100.401 & sleep 100.402")
            .run(&ToolContext::detached())
            .await
    });
    for _ in 0..100 {
        if running_with("100.40") == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    run.abort();
    let _ = run.await;
    assert!(
        none_left("100.40").await,
        "dropping the call left its processes"
    );
}

#[tokio::test]
async fn output_is_capped_with_a_marker_and_streamed_as_progress() {
    let lines: Arc<Mutex<Vec<Value>>> = Arc::default();
    let sink = Arc::clone(&lines);
    let ctx = ToolContext::new(
        "s",
        "c",
        CancellationToken::new(),
        Some(Arc::new(move |v| sink.lock().unwrap().push(v))),
    );
    let done = Program::shell(
        "for i in 1 2 3; do echo line$i; done; echo err >&2; head -c 5000 /dev/zero | tr '\\0' x",
    )
    .max_output_bytes(100)
    .run(&ctx)
    .await
    .unwrap();
    assert!(done.stdout_truncated);
    assert!(
        done.stdout.starts_with("line1\nline2\nline3\nxxxx"),
        "{}",
        done.stdout
    );
    assert!(
        done.stdout
            .ends_with("[... output truncated: 4918 more bytes]\n"),
        "{}",
        done.stdout
    );
    assert_eq!(done.stderr, "err\n");
    let lines = lines.lock().unwrap();
    assert!(
        lines.contains(&json!({"stream": "stdout", "line": "line2"})),
        "{lines:?}"
    );
    assert!(
        lines.contains(&json!({"stream": "stderr", "line": "err"})),
        "{lines:?}"
    );
}

#[tokio::test]
async fn the_environment_is_clean_unless_inherited() {
    let dir = WorkDir::create("ors-process-test-").unwrap();
    // Cargo sets CARGO_PKG_NAME for tests: a variable of the server the program must not see.
    let done = Program::shell("env")
        .current_dir(dir.path())
        .env("GREETING", "hi")
        .run(&ToolContext::detached())
        .await
        .unwrap();
    assert!(!done.stdout.contains("CARGO_PKG_NAME"), "{}", done.stdout);
    assert!(done.stdout.contains("GREETING=hi"));
    assert!(done
        .stdout
        .contains(&format!("HOME={}", dir.path().display())));
    let done = Program::shell("env")
        .inherit_env()
        .run(&ToolContext::detached())
        .await
        .unwrap();
    assert!(done.stdout.contains("CARGO_PKG_NAME"));
    let done = Program::shell("pwd")
        .current_dir(dir.path())
        .run(&ToolContext::detached())
        .await
        .unwrap();
    assert_eq!(
        done.stdout.trim(),
        dir.path().canonicalize().unwrap().to_str().unwrap()
    );
}

#[tokio::test]
async fn resource_limits_apply_to_the_program() {
    let limits = Limits {
        cpu_secs: Some(7),
        memory_bytes: Some(512 * 1024 * 1024),
        processes: None,
    };
    let done = Program::new("/bin/sh")
        .args(["-c", "ulimit -t; ulimit -v"])
        .limits(limits)
        .run(&ToolContext::detached())
        .await
        .unwrap();
    assert_eq!(done.stdout, "7\n524288\n");
    // A CPU-bound loop is stopped by the kernel at its CPU limit.
    let done = Program::shell("while :; do :; done")
        .limits(Limits {
            cpu_secs: Some(1),
            ..Limits::default()
        })
        .timeout(Duration::from_secs(60))
        .run(&ToolContext::detached())
        .await
        .unwrap();
    assert!(matches!(done.exit, Exit::Signal(_)), "{:?}", done.exit);
}

#[tokio::test]
async fn a_missing_program_is_a_spawn_error() {
    let err = Program::new("/nonexistent/tool")
        .run(&ToolContext::detached())
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("could not start /nonexistent/tool"),
        "{err}"
    );
}
