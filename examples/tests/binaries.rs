//! The example binaries as a user runs them: stdout carries exactly the ready line that
//! scripts wait for (printed by `Server::serve`, not the library's `bind`), and logs go to
//! stderr as plain text when stderr is not a terminal.

#![cfg(unix)]

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::time::Duration;

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
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut ready = String::new();
    // A hang here fails the test: the watchdog kills the child, which ends the read.
    let pid = child.id();
    let watchdog = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(60));
        let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).status();
    });
    stdout.read_line(&mut ready).expect("read the ready line");
    let port = ready
        .trim_end()
        .strip_prefix("ors-server listening on http://127.0.0.1:")
        .unwrap_or_else(|| panic!("unexpected first line {ready:?}"));
    assert!(port.parse::<u16>().is_ok_and(|p| p != 0), "{ready:?}");

    let status = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success());
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).expect("read stdout");
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut stderr)
        .expect("read stderr");
    let exit = child.wait().expect("the binary exits");
    drop(watchdog);
    assert!(exit.success(), "{exit:?}\n{stderr}");
    assert_eq!(rest, "", "nothing but the ready line on stdout");
    assert!(stderr.contains("ors-server ready"), "{stderr}");
    assert!(stderr.contains("ors-server stopped"), "{stderr}");
    assert!(!stderr.contains('\u{1b}'), "no ANSI colours in a pipe: {stderr:?}");
}
