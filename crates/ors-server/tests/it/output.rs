//! What the library prints: nothing. `Server::bind` (what tests and embedding programs
//! call) writes no ready line; only `serve` / `serve_from_env`, meant for binaries, do (checked
//! on the example binaries in `examples/tests/binaries.rs`). Stdout of a test process is not
//! captured from direct writes, so the check runs a child copy of this test binary.

use std::process::Command;

use crate::support::*;

/// Set in the child process that binds a server.
const CHILD: &str = "ORS_SERVER_IT_BIND_CHILD";

/// The child's half of `bind_prints_nothing`: bind, answer one request, shut down. In a
/// normal run (without the variable) it does nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bind_child() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let server = start().await;
    assert_eq!(get(server.local_addr(), "/health").await.status, 200);
    server.shutdown().await;
    println!("bind child done");
}

#[test]
fn bind_prints_nothing() {
    let exe = std::env::current_exe().expect("the test binary's path");
    let out = Command::new(exe)
        .args([
            "--exact",
            "output::bind_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .output()
        .expect("the test binary runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The child really bound and served (its marker is there) ...
    assert!(stdout.contains("bind child done"), "{stdout}");
    // ... and the server wrote nothing of its own.
    assert!(!stdout.contains("listening on"), "{stdout}");
}
