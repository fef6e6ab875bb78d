//! `Server::serve` drains on SIGTERM, then stops gracefully. The signal goes to the whole
//! test process; only a server started with `serve` listens for it, and no other test in
//! this binary starts one (the output checks run `serve` in child processes), so the two
//! scenarios run one after the other in one test.

#![cfg(unix)]

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::json;

use crate::support::*;
use ors_server::{Server, ServerConfig, ServerError};

/// `serve` on a free port with this drain time; returns its address and task.
async fn serve(drain: Duration) -> (SocketAddr, tokio::task::JoinHandle<Result<(), ServerError>>) {
    let port = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap().port()
    };
    let config = ServerConfig {
        port,
        drain,
        ..ServerConfig::default()
    };
    let serving = tokio::spawn(Server::with_config(config).environment::<Lab>().serve());
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    for _ in 0..500 {
        if tokio::net::TcpStream::connect(addr).await.is_ok() {
            return (addr, serving);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the server did not come up");
}

fn sigterm() {
    let status = std::process::Command::new("kill")
        .args(["-TERM", &std::process::id().to_string()])
        .status()
        .expect("run kill");
    assert!(status.success());
}

/// Wait until `/ready` answers 503 (the drain has begun).
async fn until_not_ready(addr: SocketAddr) {
    for _ in 0..1000 {
        if get(addr, "/ready").await.status == 503 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("/ready never turned 503");
}

async fn stopped(serving: tokio::task::JoinHandle<Result<(), ServerError>>) {
    let result = tokio::time::timeout(Duration::from_secs(30), serving)
        .await
        .expect("serve returned")
        .expect("the serve task did not panic");
    assert!(result.is_ok(), "{result:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_then_shuts_down_and_a_second_one_skips_the_wait() {
    // The drain lasts until the last episode ends.
    let (addr, serving) = serve(Duration::from_secs(600)).await;
    let sid = ready_episode(addr, tagged(1, "sigterm")).await;
    sigterm();
    until_not_ready(addr).await;
    post(addr, "/create_session", "")
        .await
        .assert_error(503, "shutting_down");
    assert_eq!(
        text_of(&call(addr, &sid, "submit", json!({"text": "2"})).await),
        "Correct!"
    );
    assert!(!serving.is_finished(), "a live episode holds the drain");
    assert_eq!(post_s(addr, &sid, "/delete", "").await.status, 200);
    stopped(serving).await;
    assert_eq!(count("sigterm:teardown"), 1);
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());

    // A second SIGTERM ends the drain at once; what is left is torn down.
    let (addr, serving) = serve(Duration::from_secs(600)).await;
    ready_episode(addr, tagged(2, "sigterm-twice")).await;
    sigterm();
    until_not_ready(addr).await;
    sigterm();
    stopped(serving).await;
    assert_eq!(count("sigterm-twice:teardown"), 1);
}
