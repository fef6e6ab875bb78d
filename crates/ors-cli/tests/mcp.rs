//! MCP both ways without Python: `ors mcp` serving an episode of the conformance fixture,
//! consumed by the runtime's `McpToolset` (over stdio, and over streamable HTTP through the
//! runtime's own HTTP client), so an ORS environment's tools come back as ORS tools. The
//! official Python SDK's side is checked by `cargo xtask test`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a failed assumption is a failed test

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use ors_conformance::http::{Request, Response, Target};
use serde_json::{json, Value};

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

/// The token the tests give `ors mcp --http`.
const TOKEN: &str = "test-token-0123456789";

/// A running `ors mcp --http`, killed and reaped when dropped: a test that fails halfway
/// leaves no process holding the test's stderr (which would keep CI waiting for it).
struct McpChild(Child);

impl McpChild {
    /// SIGTERM, as a supervisor stops it.
    fn terminate(&self) {
        let killed = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(killed.success());
    }
}

impl Drop for McpChild {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `ors mcp --http 127.0.0.1:0` for the fixture at `ors_url`, with `extra` arguments: the
/// process and its MCP URL (from its ready line). `--token` is the caller's to give.
async fn ors_mcp_http(ors_url: &str, extra: &[&str], stderr: Stdio) -> (McpChild, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ors"))
        .args(episode_args(ors_url))
        .args(["--http", "127.0.0.1:0"])
        .args(extra)
        .env_remove("ORS_API_KEY")
        .env_remove("ORS_MCP_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .expect("ors mcp starts");
    let stdout = child.stdout.take().expect("piped");
    let child = McpChild(child);
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
    (child, url)
}

/// The `ors mcp --http` endpoint's address for raw requests.
fn target_of(mcp_url: &str) -> Target {
    Target::from_url(mcp_url.trim_end_matches("/mcp"), None).unwrap()
}

/// A JSON-RPC request to `/mcp`, with the token when given (and the session, once there is one).
fn mcp_post(body: &Value, token: Option<&str>, session: Option<&str>) -> Request {
    let mut r = Request::new("POST", "/mcp")
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2025-06-18")
        .json(body);
    if let Some(t) = token {
        r = r.header("Authorization", format!("Bearer {t}"));
    }
    if let Some(s) = session {
        r = r.header("Mcp-Session-Id", s);
    }
    r
}

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"}}})
}

/// Send on a blocking thread.
async fn send(request: Request, target: &Target) -> Response {
    let target = target.clone();
    tokio::task::spawn_blocking(move || request.send(&target))
        .await
        .unwrap()
        .unwrap()
}

/// The JSON-RPC message of an answer (the one `data:` of its event stream, or its JSON body).
fn message(r: &Response) -> Value {
    let text = r.text();
    let data = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .find(|d| d.starts_with('{'))
        .unwrap_or(text.as_str());
    serde_json::from_str(data).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// Initialize an MCP session with the token: its `Mcp-Session-Id` and the answer.
async fn open_mcp_session(target: &Target) -> (Option<String>, Value) {
    let r = send(mcp_post(&initialize(), Some(TOKEN), None), target).await;
    assert_eq!(r.status(), 200, "{}", r.text());
    let sid = r.header("mcp-session-id").map(str::to_owned);
    if let Some(sid) = &sid {
        let done = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        send(mcp_post(&done, Some(TOKEN), Some(sid)), target).await;
    }
    (sid, message(&r))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ors_mcp_over_http_serves_mcp_toolset_and_deletes_its_sessions_on_sigterm() {
    let srv = server().await;
    let (child, url) = ors_mcp_http(&srv.url(), &["--token", TOKEN], Stdio::inherit()).await;

    let server = McpServer::url(url)
        .bearer_token(TOKEN)
        .connection(Connection::Shared);
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

    child.terminate();
    let exited = tokio::task::spawn_blocking(move || {
        let mut child = child;
        let status = child.0.wait();
        (status, child)
    });
    let (status, _child) = tokio::time::timeout(LIMIT, exited)
        .await
        .expect("ors mcp exits")
        .unwrap();
    assert!(status.expect("waited").success(), "SIGTERM is a clean exit");
    sessions_become(&srv, 0).await;
    srv.shutdown().await;
}

/// The reproduction: a page at another origin (or any local process without the
/// token) initialising an MCP session and reading the episode's secret.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ors_mcp_over_http_refuses_a_foreign_origin_and_requests_without_the_token() {
    let srv = server().await;
    let args = [
        "--token",
        TOKEN,
        "--secret",
        "K=SUPERSECRET",
        "--allow-origin",
        "http://app.example:8080",
    ];
    let (child, url) = ors_mcp_http(&srv.url(), &args, Stdio::inherit()).await;
    let target = target_of(&url);

    let evil = mcp_post(&initialize(), Some(TOKEN), None).header("Origin", "http://evil.example");
    let r = send(evil, &target).await;
    assert_eq!(r.status(), 403, "{}", r.text());
    assert!(r.text().contains("--allow-origin"), "{}", r.text());
    assert!(r.header("mcp-session-id").is_none());

    for token in [None, Some("wrong-token")] {
        let r = send(mcp_post(&initialize(), token, None), &target).await;
        assert_eq!(r.status(), 401, "{token:?}: {}", r.text());
        assert_eq!(r.header("www-authenticate"), Some("Bearer"));
        assert!(r.text().contains("ORS_MCP_TOKEN"), "{}", r.text());
    }
    // A DNS-rebound name reaches the port but not the server.
    let rebound = Target {
        host: "evil.example".into(),
        ..target.clone()
    };
    let r = send(mcp_post(&initialize(), Some(TOKEN), None), &rebound).await;
    assert_eq!(r.status(), 403, "{}", r.text());
    assert_eq!(
        srv.stats().sessions,
        0,
        "no ORS session for a refused request"
    );

    // The allowed origin with the token plays the episode.
    let app =
        mcp_post(&initialize(), Some(TOKEN), None).header("Origin", "http://app.example:8080");
    let r = send(app, &target).await;
    assert_eq!(r.status(), 200, "{}", r.text());
    let sid = r.header("mcp-session-id").unwrap().to_owned();
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "secret", "arguments": {"name": "K"}}});
    let r = send(mcp_post(&call, Some(TOKEN), Some(&sid)), &target).await;
    assert!(r.text().contains("SUPERSECRET"), "{}", r.text());
    let stolen = send(
        mcp_post(&call, Some(TOKEN), Some(&sid)).header("Origin", "http://evil.example"),
        &target,
    )
    .await;
    assert_eq!(stolen.status(), 403, "an open session is no way in either");
    drop(child);
    srv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ors_mcp_over_http_prints_a_generated_token_once_when_none_is_given() {
    let srv = server().await;
    let (mut child, url) = ors_mcp_http(&srv.url(), &[], Stdio::piped()).await;
    let stderr = child.0.stderr.take().unwrap();
    let line = tokio::task::spawn_blocking(move || {
        BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
            .find(|l| l.contains("Bearer"))
    });
    let line = tokio::time::timeout(LIMIT, line).await.unwrap().unwrap();
    let line = line.expect("the token is printed on stderr");
    let token = line
        .split("Bearer ")
        .nth(1)
        .and_then(|rest| rest.split('`').next())
        .unwrap()
        .to_owned();
    assert_eq!(token.len(), 64, "{line}");
    let target = target_of(&url);
    let r = send(mcp_post(&initialize(), None, None), &target).await;
    assert_eq!(r.status(), 401);
    let r = send(mcp_post(&initialize(), Some(&token), None), &target).await;
    assert_eq!(r.status(), 200, "{}", r.text());
    drop(child);
    srv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ors_mcp_over_http_caps_its_sessions_and_opens_no_episode_beyond() {
    let srv = server().await;
    let args = ["--token", TOKEN, "--max-sessions", "2"];
    let (child, url) = ors_mcp_http(&srv.url(), &args, Stdio::inherit()).await;
    let target = target_of(&url);
    let (a, _) = open_mcp_session(&target).await;
    let (_b, _) = open_mcp_session(&target).await;
    sessions_become(&srv, 2).await;

    let (_, refused) = open_mcp_session(&target).await;
    let error = &refused["error"];
    assert_eq!(error["code"], json!(-32000), "{refused}");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("--max-sessions"),
        "{refused}"
    );
    assert_eq!(error["data"]["max_sessions"], json!(2));
    assert_eq!(
        srv.stats().sessions,
        2,
        "no ORS session for the refused one"
    );

    // Ending one frees its place: once the DELETE is answered, its ORS session is gone and
    // a new initialize finds room (the client need not wait or retry).
    let delete = Request::new("DELETE", "/mcp")
        .header("Authorization", format!("Bearer {TOKEN}"))
        .header("Mcp-Session-Id", a.unwrap());
    let r = send(delete, &target).await;
    assert!(r.status() < 300, "{}", r.status());
    assert_eq!(
        srv.stats().sessions,
        1,
        "the DELETE waits for the ORS delete"
    );
    let (_, again) = open_mcp_session(&target).await;
    assert!(again.get("result").is_some(), "{again}");
    sessions_become(&srv, 2).await;
    drop(child);
    srv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ors_mcp_over_http_ends_idle_sessions_but_not_one_waiting_for_a_call() {
    let srv = server().await;
    let args = ["--token", TOKEN, "--idle-timeout", "1"];
    let (child, url) = ors_mcp_http(&srv.url(), &args, Stdio::inherit()).await;
    let target = target_of(&url);
    let (sid, _) = open_mcp_session(&target).await;
    let sid = sid.unwrap();
    sessions_become(&srv, 1).await;

    // A call longer than the idle timeout is not idleness.
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "sleep", "arguments": {"ms": 2500}}});
    let r = send(mcp_post(&call, Some(TOKEN), Some(&sid)), &target).await;
    assert!(r.text().contains("slept"), "{}", r.text());

    // Then nothing: the MCP session ends, its ORS session with it.
    sessions_become(&srv, 0).await;
    let later = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"});
    let r = send(mcp_post(&later, Some(TOKEN), Some(&sid)), &target).await;
    assert_eq!(r.status(), 404, "{}", r.text());
    drop(child);
    srv.shutdown().await;
}
