//! The example binaries as a user runs them: stdout carries exactly the ready line that
//! scripts wait for (printed by `Server::serve`, not the library's `bind`), and logs go to
//! stderr as plain text when stderr is not a terminal.

#![cfg(unix)]

use std::io::{BufRead, BufReader, Read};
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

#[test]
fn serve_prints_one_ready_line_and_plain_logs() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_conformance"))
        .args(["--host", "127.0.0.1", "--port", "0"])
        .env("RUST_LOG", "info")
        .env_remove("ORS_API_KEY")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the conformance binary starts");
    let stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let (ready, mut stdout) = within(&mut child, "the ready line", move || {
        let mut reader = BufReader::new(stdout);
        let mut line = String::new();
        let _ = reader.read_line(&mut line);
        (line, reader)
    });
    let port = ready
        .trim_end()
        .strip_prefix("ors-server listening on http://127.0.0.1:")
        .unwrap_or_else(|| panic!("unexpected first line {ready:?}"));
    assert!(port.parse::<u16>().is_ok_and(|p| p != 0), "{ready:?}");

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
    assert_eq!(rest, "", "nothing but the ready line on stdout");
    assert!(logs.contains("ors-server ready"), "{logs}");
    assert!(logs.contains("ors-server stopped"), "{logs}");
    assert!(
        !logs.contains('\u{1b}'),
        "no ANSI colours in a pipe: {logs:?}"
    );
}
