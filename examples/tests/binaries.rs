//! The example binaries as a user runs them: stdout carries exactly the ready line that
//! scripts wait for (printed by `Server::serve`, not the library's `bind`), logs go to
//! stderr as plain text when stderr is not a terminal (JSON lines with `ORS_LOG_FORMAT=json`),
//! and SIGTERM with no session left exits 0 at once.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a failed assumption is a failed test
#![cfg(unix)]

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// Generous: only turns a hang into a failure.
const LIMIT: Duration = Duration::from_secs(60);

/// Run `work` on a thread; if it has not finished within [`LIMIT`], kill `child` (still ours:
/// it has not been waited for) and fail.
fn within<T: Send + 'static>(
    child: &mut Child,
    what: &str,
    work: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(work());
    });
    match rx.recv_timeout(LIMIT) {
        Ok(v) => v,
        Err(_) => {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} took longer than {LIMIT:?}");
        }
    }
}

/// The conformance binary on a free port with these extra variables, up and serving: its
/// port, and the child with stdout (after the ready line) and stderr still to read.
fn start(vars: &[(&str, &str)]) -> (Child, u16, BufReader<std::process::ChildStdout>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_conformance"))
        .args(["--host", "127.0.0.1", "--port", "0"])
        .env("RUST_LOG", "info")
        .env_remove("ORS_API_KEY")
        .env_remove("ORS_LOG_FORMAT")
        .envs(vars.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the conformance binary starts");
    let stdout = child.stdout.take().expect("stdout");
    let (ready, stdout) = within(&mut child, "the ready line", move || {
        let mut reader = BufReader::new(stdout);
        let mut line = String::new();
        let _ = reader.read_line(&mut line);
        (line, reader)
    });
    let port = ready
        .trim_end()
        .strip_prefix("ors-server listening on http://127.0.0.1:")
        .and_then(|p| p.parse::<u16>().ok())
        .filter(|p| *p != 0)
        .unwrap_or_else(|| panic!("unexpected first line {ready:?}"));
    (child, port, stdout)
}

/// SIGTERM the child and read the rest of its stdout and its stderr until it exits; fails
/// unless it exits 0.
fn stop(mut child: Child, mut stdout: BufReader<std::process::ChildStdout>) -> (String, String) {
    let mut stderr = child.stderr.take().expect("stderr");
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(status.success());
    let (rest, logs) = within(&mut child, "the shutdown", move || {
        let mut rest = String::new();
        let _ = stdout.read_to_string(&mut rest);
        let mut logs = String::new();
        let _ = stderr.read_to_string(&mut logs);
        (rest, logs)
    });
    let exit = child.wait().expect("the binary exits");
    assert!(exit.success(), "{exit:?}\n{logs}");
    (rest, logs)
}

#[test]
fn serve_prints_one_ready_line_and_plain_logs() {
    let (child, _port, stdout) = start(&[]);
    let (rest, logs) = stop(child, stdout);
    assert_eq!(rest, "", "nothing but the ready line on stdout");
    assert!(logs.contains("ors-server ready"), "{logs}");
    assert!(logs.contains("ors-server stopped"), "{logs}");
    assert!(
        !logs.contains('\u{1b}'),
        "no ANSI colours in a pipe: {logs:?}"
    );
}

#[test]
fn json_logs_are_one_object_per_line_with_the_request_span() {
    let (child, port, stdout) =
        start(&[("ORS_LOG_FORMAT", "json"), ("RUST_LOG", "ors_server=debug")]);
    let mut conn = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    conn.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .expect("send");
    let mut reply = String::new();
    let _ = conn.read_to_string(&mut reply);
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    let (_, logs) = stop(child, stdout);
    let lines: Vec<serde_json::Value> = logs
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let message = |v: &serde_json::Value| v["fields"]["message"].as_str().map(str::to_owned);
    assert!(
        lines
            .iter()
            .all(|v| v["level"].is_string() && v["timestamp"].is_string()),
        "{logs}"
    );
    assert!(
        lines
            .iter()
            .any(|v| message(v).as_deref() == Some("ors-server ready")),
        "{logs}"
    );
    let request = lines
        .iter()
        .find(|v| message(v).as_deref() == Some("request"))
        .unwrap_or_else(|| panic!("no request line in {logs}"));
    assert_eq!(request["span"]["path"], "/health", "{request}");
    assert_eq!(request["span"]["status"], 200, "{request}");
}
