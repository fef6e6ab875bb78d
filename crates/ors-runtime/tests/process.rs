//! `ors_runtime::process`: nothing a program starts outlives its call, output is capped, the
//! environment is clean, limits apply, and lines stream as progress.
#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a failed assumption is a failed test

use std::path::PathBuf;
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use ors_runtime::process::{Exit, Finished, Limits, ProcessError, Program, WorkDir};
use ors_runtime::ToolContext;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

mod support;

/// Only turns a hang into a failure: the processes a test waits for end in milliseconds.
const LIMIT: Duration = Duration::from_secs(30);

/// A FIFO the program opens as fd 3 before it starts anything (see [`Holders::open`]), so
/// every process it starts holds its write end. The kernel closes a process's files when it
/// exits, so the FIFO's reader seeing its end is the event that every one of them is gone:
/// no polling of the process table, and no pid reused meanwhile can fool it.
struct Holders {
    dir: PathBuf,
    ended: mpsc::Receiver<std::io::Result<u64>>,
}

impl Holders {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("ors-process-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success(), "mkfifo {}", fifo.display());
        let (tx, ended) = mpsc::channel();
        // Opening blocks until the program opens its end; reading, until the last holder exits.
        std::thread::spawn(move || {
            let read = std::fs::File::open(&fifo)
                .and_then(|mut f| std::io::copy(&mut f, &mut std::io::sink()));
            let _ = tx.send(read);
        });
        Self { dir, ended }
    }

    /// The shell command that opens the FIFO as fd 3 for everything started after it.
    fn open(&self) -> String {
        format!("exec 3>'{}'; ", self.dir.join("fifo").display())
    }

    /// Wait (up to [`LIMIT`]) until every process holding the FIFO has exited.
    async fn all_exited(self) -> bool {
        tokio::task::spawn_blocking(move || {
            let ended = self.ended.recv_timeout(LIMIT);
            let _ = std::fs::remove_dir_all(&self.dir);
            matches!(ended, Ok(Ok(_)))
        })
        .await
        .unwrap()
    }
}

/// Run `program` (a shell that starts two sleeps named by `marker` in the background, holding
/// `holders`) under a context cancelled by `token`, and return once the shell has said both
/// pids (as progress lines) and both are running: the call, and the pids it started.
async fn two_sleeps(
    marker: &'static str,
    holders: &Holders,
    token: CancellationToken,
    program: impl FnOnce(Program) -> Program,
) -> (
    tokio::task::JoinHandle<Result<Finished, ProcessError>>,
    Vec<u32>,
) {
    let (tx, mut lines) = tokio::sync::mpsc::unbounded_channel();
    let sink = Arc::new(move |v: Value| {
        if let Some(line) = v["line"].as_str() {
            let _ = tx.send(line.to_owned());
        }
    });
    let ctx = ToolContext::new("s", "c", token, Some(sink));
    let script = format!(
        "{}sleep {marker}1 & echo pid $!; sleep {marker}2 & echo pid $!; wait",
        holders.open()
    );
    let program = program(Program::shell(script));
    let run = tokio::spawn(async move { program.run(&ctx).await });
    let mut pids = Vec::new();
    while pids.len() < 2 {
        let line = lines
            .recv()
            .await
            .expect("the shell printed its sleeps' pids");
        pids.extend(
            line.strip_prefix("pid ")
                .and_then(|p| p.parse::<u32>().ok()),
        );
    }
    for &pid in &pids {
        // The shell's child, so not reaped (nor its pid reused) before the shell waits.
        assert!(
            support::running(pid),
            "sleep {pid} ({marker}) is not running"
        );
    }
    (run, pids)
}

#[tokio::test(start_paused = true)]
async fn a_timeout_kills_the_whole_process_group() {
    // Paused time: the timeout is tokio's, and tokio does not jump the clock to it while a
    // blocking task runs, so only the test's advance() fires it, once both sleeps are seen
    // running. The same task bounds the test in real time: it ends when `release` drops.
    let (release, held) = mpsc::channel::<()>();
    let mut still = tokio::task::spawn_blocking(move || held.recv_timeout(LIMIT));
    let holders = Holders::new("timeout");
    let (run, pids) = two_sleeps("1000.10", &holders, CancellationToken::new(), |p| {
        p.timeout(Duration::from_millis(300))
    })
    .await;
    tokio::time::advance(Duration::from_millis(300)).await;
    let done = tokio::select! {
        done = run => done.unwrap().unwrap(),
        _ = &mut still => panic!("the call outlived its timeout by {LIMIT:?}"),
    };
    drop(release);
    assert_eq!(done.exit, Exit::TimedOut);
    assert!(done.report().contains("timed out"), "{}", done.report());
    assert!(
        holders.all_exited().await,
        "a sleep of {pids:?} outlived its call"
    );
}

#[tokio::test]
async fn background_processes_die_when_the_program_exits() {
    let holders = Holders::new("background");
    let done = Program::shell(format!(
        "{}sleep 1000.201 >/dev/null 2>&1 & echo started",
        holders.open()
    ))
    .run(&ToolContext::detached())
    .await
    .unwrap();
    assert_eq!(done.exit, Exit::Code(0));
    assert_eq!(done.stdout, "started\n");
    // The forked sleep held the FIFO from its start: it ran, and is gone.
    assert!(
        holders.all_exited().await,
        "the background sleep outlived its call"
    );
}

#[tokio::test]
async fn cancellation_and_dropping_the_call_kill_the_group() {
    // Cancelling the call's token: the call ends as cancelled, and both sleeps with it.
    let token = CancellationToken::new();
    let holders = Holders::new("cancel");
    let (run, pids) = two_sleeps("1000.30", &holders, token.clone(), |p| p).await;
    token.cancel();
    let done = tokio::time::timeout(LIMIT, run)
        .await
        .expect("the cancelled call returned")
        .unwrap()
        .unwrap();
    assert_eq!(done.exit, Exit::Cancelled);
    assert!(holders.all_exited().await, "cancelling left {pids:?}");

    // Dropping the call's future (its task aborted): both sleeps die too.
    let holders = Holders::new("drop");
    let (run, pids) = two_sleeps("1000.40", &holders, CancellationToken::new(), |p| p).await;
    run.abort();
    let _ = run.await;
    assert!(
        holders.all_exited().await,
        "dropping the call left {pids:?}"
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
            .ends_with("[... output truncated at the 100 B limit: 4918 more bytes]\n"),
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
