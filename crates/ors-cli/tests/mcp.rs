//! MCP both ways without Python: `ors mcp` serving an episode of the conformance fixture,
//! consumed by the runtime's `McpToolset` (over stdio, and over streamable HTTP through the
//! runtime's own HTTP client), so an ORS environment's tools come back as ORS tools. The
//! official Python SDK's side is checked by `cargo xtask test`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a failed assumption is a failed test

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::json;

use ors_core::types::{RunToolOutput, STRUCTURED_KEY};
use ors_examples::conformance::Conformance;
use ors_server::external::ExternalTools;
use ors_server::mcp::{Connection, McpServer};
use ors_server::{RunningServer, Server, ServerConfig, ToolContext};

/// Only turns a hang into a failure.
const LIMIT: Duration = Duration::from_secs(60);

async fn server() -> RunningServer {
    let cfg = ServerConfig {
        host: "127.0.0.1".into(),
        port: 0,
        ..ServerConfig::default()
    };
    Server::with_config(cfg)
        .environment::<Conformance>()
        .bind()
        .await
        .expect("the test server starts")
}

/// `ors mcp` arguments for task train[3] ("What is 3+3?") of the fixture at `url`.
fn episode_args(url: &str) -> Vec<String> {
    [
        "--url",
        url,
        "mcp",
        "conformance",
        "--split",
        "train",
        "--index",
        "3",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect()
}

fn error_of(out: &RunToolOutput) -> String {
    match out {
        RunToolOutput::Error(m) => m.error.clone(),
        RunToolOutput::Success(o) => panic!("expected ok: false, got {o:?}"),
    }
}

/// Wait until the ORS server holds `n` sessions (bounded: a hang fails).
async fn sessions_become(server: &RunningServer, n: usize) {
    let waited = tokio::time::timeout(LIMIT, async {
        while server.stats().sessions != n {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(
        waited.is_ok(),
        "the server holds {} sessions, want {n}",
        server.stats().sessions
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ors_episode_served_by_ors_mcp_comes_back_as_ors_tools() {
    let srv = server().await;
    let cmd = McpServer::command(env!("CARGO_BIN_EXE_ors"), episode_args(&srv.url())).prefix("c_");
    let tools = tokio::time::timeout(LIMIT, ExternalTools::builder().mcp(cmd).build())
        .await
        .expect("in time")
        .expect("ors mcp starts and lists its tools");
    let names: Vec<String> = tools.specs().into_iter().map(|s| s.name).collect();
    assert!(names.contains(&"c_echo".to_owned()), "{names:?}");
    let echo = tools
        .specs()
        .into_iter()
        .find(|s| s.name == "c_echo")
        .unwrap();
    assert_eq!(
        echo.input_schema.as_ref().unwrap()["required"],
        json!(["text"]),
        "the schema passes through twice unchanged"
    );
    // The listing connection is gone; its ORS session with it.
    sessions_become(&srv, 0).await;

    let episode = tokio::time::timeout(LIMIT, tools.session())
        .await
        .expect("in time")
        .expect("an episode's connection opens");
    let call = |name: &str, input| {
        let fut = episode
            .call(ToolContext::detached(), name, input)
            .expect("a tool of the episode");
        async move { tokio::time::timeout(LIMIT, fut).await.expect("in time") }
    };
    let out = call("c_echo", json!({"text": "hi"})).await;
    assert_eq!(out.output().unwrap().blocks[0].as_text(), Some("hi"));
    sessions_become(&srv, 1).await;

    let failed = call("c_fail", json!({"message": "as asked"})).await;
    assert!(error_of(&failed).contains("as asked"));
    let invalid = call("c_echo", json!({"text": 5})).await;
    assert!(error_of(&invalid).contains("text"), "refused before MCP");

    let done = call("c_submit", json!({"answer": "6"})).await;
    let structured = &done.output().unwrap().metadata.as_ref().unwrap()[STRUCTURED_KEY];
    assert_eq!(
        (&structured["reward"], &structured["finished"]),
        (&json!(1.0), &json!(true))
    );
    let after = call("c_echo", json!({"text": "again"})).await;
    assert!(error_of(&after).contains("episode finished"));

    // Ending the episode closes its `ors mcp`, which deletes its ORS session.
    drop(episode);
    sessions_become(&srv, 0).await;
    srv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ors_mcp_over_http_serves_mcp_toolset_and_deletes_its_sessions_on_sigterm() {
    let srv = server().await;
    let mut child = Command::new(env!("CARGO_BIN_EXE_ors"))
        .args(episode_args(&srv.url()))
        .args(["--http", "127.0.0.1:0"])
        .env_remove("ORS_API_KEY")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("ors mcp starts");
    let stdout = child.stdout.take().expect("piped");
    let ready = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        line
    });
    let line = tokio::time::timeout(LIMIT, ready)
        .await
        .expect("a ready line")
        .unwrap();
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no URL in {line:?}"))
        .to_owned();

    let server = McpServer::url(url).connection(Connection::Shared);
    let tools = tokio::time::timeout(LIMIT, ExternalTools::builder().mcp(server).build())
        .await
        .expect("in time")
        .expect("the MCP endpoint lists its tools");
    let episode = tools.session().await.expect("the shared connection");
    let fut = episode
        .call(
            ToolContext::detached(),
            "echo",
            json!({"text": "over http"}),
        )
        .expect("echo");
    let out = tokio::time::timeout(LIMIT, fut).await.expect("in time");
    assert_eq!(out.output().unwrap().blocks[0].as_text(), Some("over http"));
    sessions_become(&srv, 1).await;

    let pid = child.id().to_string();
    let killed = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill runs");
    assert!(killed.success());
    let exited = tokio::task::spawn_blocking(move || child.wait());
    let status = tokio::time::timeout(LIMIT, exited)
        .await
        .expect("ors mcp exits")
        .unwrap();
    assert!(status.expect("waited").success(), "SIGTERM is a clean exit");
    sessions_become(&srv, 0).await;
    srv.shutdown().await;
}
