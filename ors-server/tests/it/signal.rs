//! `Server::serve` stops gracefully on SIGTERM. The signal goes to the whole test process;
//! only a server started with `serve` listens for it, and no other test in this binary starts
//! one (the output checks run `serve` in child processes).

#![cfg(unix)]

use std::time::Duration;

use crate::support::*;
use ors_server::{Server, ServerConfig};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_shuts_down_and_tears_sessions_down() {
    let port = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap().port()
    };
    let config = ServerConfig {
        port,
        ..ServerConfig::default()
    };
    let serving = tokio::spawn(Server::with_config(config).environment::<Lab>().serve());
    let addr: std::net::SocketAddr = ([127, 0, 0, 1], port).into();
    let mut up = false;
    for _ in 0..500 {
        if tokio::net::TcpStream::connect(addr).await.is_ok() {
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(up, "the server came up");
    ready_episode(addr, tagged(1, "sigterm")).await;

    let status = std::process::Command::new("kill")
        .args(["-TERM", &std::process::id().to_string()])
        .status()
        .expect("run kill");
    assert!(status.success());

    let result = tokio::time::timeout(Duration::from_secs(30), serving)
        .await
        .expect("serve returned after SIGTERM")
        .expect("the serve task did not panic");
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(count("sigterm:teardown"), 1);
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
}
