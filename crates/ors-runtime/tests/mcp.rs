//! MCP servers started as programs, misbehaving: a result line over the limit, a line that is
//! not JSON-RPC, a listing over its bounds, a server that ignores the end of its input and
//! leaves a process behind. The server is a `/bin/sh` script (no Python, no SDK), so the bytes
//! it sends are exactly the ones each test wants.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a failed assumption is a failed test

use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;

use ors_core::types::RunToolOutput;
use ors_runtime::external::{ExternalError, ExternalTools};
use ors_runtime::mcp::McpServer;
use ors_runtime::ToolContext;

mod support;

/// Only turns a hang into a failure (the defects these tests pin down were hangs).
const LIMIT: Duration = Duration::from_secs(30);

/// The MCP server: answers `initialize`, lists the tools in `tools.json`, and answers
/// `tools/call` by the tool's name: `echo` with "ok", `big` with one line of `BIG` bytes of
/// text, `garbage` with a line that is not JSON. Each process appends its pid, and that of a
/// `sleep` it starts, to `pids`; on the end of its input it keeps running (as a server that
/// does not watch stdin would).
const SERVER: &str = r#"
dir=$(dirname "$0")
sleep 1000 &
echo $$ >> "$dir/pids"
echo $! >> "$dir/pids"
while IFS= read -r line; do
  id=$(printf '%s' "$line" | grep -o '"id":[0-9]*' | head -n 1 | cut -d: -f2)
  method=$(printf '%s' "$line" | grep -o '"method":"[^"]*"' | head -n 1 | cut -d'"' -f4)
  [ -z "$id" ] && continue
  case "$method" in
    initialize)
      printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"sh","version":"0"}}}\n' "$id" ;;
    tools/list)
      printf '{"jsonrpc":"2.0","id":%s,"result":' "$id"; cat "$dir/tools.json"; printf '}\n' ;;
    tools/call)
      case "$line" in
        *'"name":"big"'*)
          printf '{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"' "$id"
          head -c "$BIG" /dev/zero | tr '\000' x
          printf '"}]}}\n' ;;
        *'"name":"garbage"'*)
          printf 'this is not JSON-RPC\n' ;;
        *)
          printf '{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"ok"}]}}\n' "$id" ;;
      esac ;;
    *)
      printf '{"jsonrpc":"2.0","id":%s,"result":{}}\n' "$id" ;;
  esac
done
sleep 1000
"#;

/// A directory with the server script and its listing of `tools`.
struct Fixture {
    dir: PathBuf,
}

impl Fixture {
    fn new(name: &str, tools: &[&str]) -> Self {
        let dir = std::env::temp_dir().join(format!("ors-mcp-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("server.sh"), SERVER).unwrap();
        let listing: Vec<_> = tools
            .iter()
            .map(|t| json!({"name": t, "description": format!("the {t} tool"), "inputSchema": {"type": "object"}}))
            .collect();
        std::fs::write(
            dir.join("tools.json"),
            json!({ "tools": listing }).to_string(),
        )
        .unwrap();
        Self { dir }
    }

    fn server(&self) -> McpServer {
        McpServer::command(
            "/bin/sh",
            [self.dir.join("server.sh").display().to_string()],
        )
        .env("BIG", "17000000")
    }

    /// The pids the server processes wrote so far.
    fn pids(&self) -> Vec<u32> {
        std::fs::read_to_string(self.dir.join("pids"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Wait (bounded) until none of `pids` runs; the ones still running otherwise.
async fn all_gone(pids: &[u32]) -> Vec<u32> {
    let _ = tokio::time::timeout(LIMIT, async {
        while pids.iter().any(|p| support::running(*p)) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    pids.iter()
        .copied()
        .filter(|p| support::running(*p))
        .collect()
}

fn error_of(out: &RunToolOutput) -> String {
    match out {
        RunToolOutput::Error(e) => e.error.clone(),
        RunToolOutput::Success(o) => panic!("expected ok: false, got {o:?}"),
    }
}

async fn call(tools: &ors_runtime::external::ExternalSession, name: &str) -> RunToolOutput {
    let fut = tools
        .call(ToolContext::detached(), name, json!({}))
        .expect("a tool of the episode");
    tokio::time::timeout(LIMIT, fut)
        .await
        .expect("the call ends instead of waiting for an answer that never comes")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_line_over_the_limit_fails_the_call_at_once_naming_the_limit() {
    let fx = Fixture::new("long-line", &["echo", "big"]);
    let tools = ExternalTools::builder()
        .mcp(fx.server())
        .build()
        .await
        .unwrap();
    let episode = tools.session().await.unwrap();
    let out = call(&episode, "big").await;
    let msg = error_of(&out);
    assert!(msg.contains("more than 16777216 bytes"), "{msg}");
    assert!(msg.contains("max_line_bytes"), "{msg}");
    // The connection is broken for the rest of the episode, saying why.
    let again = error_of(&call(&episode, "echo").await);
    assert!(again.contains("more than 16777216 bytes"), "{again}");
    // A new episode starts the server again.
    let next = tools.session().await.unwrap();
    assert!(call(&next, "echo").await.is_ok());
    drop((episode, next));
    tools.close().await;
    assert_eq!(all_gone(&fx.pids()).await, Vec::<u32>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_that_is_not_json_rpc_fails_the_call_at_once() {
    let fx = Fixture::new("garbage", &["garbage"]);
    let tools = ExternalTools::builder()
        .mcp(fx.server())
        .build()
        .await
        .unwrap();
    let episode = tools.session().await.unwrap();
    let msg = error_of(&call(&episode, "garbage").await);
    assert!(msg.contains("not JSON"), "{msg}");
    assert!(
        msg.contains("this is not JSON-RPC"),
        "shows what it sent: {msg}"
    );
    drop(episode);
    tools.close().await;
    assert_eq!(all_gone(&fx.pids()).await, Vec::<u32>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_process_of_an_mcp_server_outlives_its_episode_or_the_shutdown() {
    let fx = Fixture::new("children", &["echo"]);
    let tools = ExternalTools::builder()
        .mcp(fx.server())
        .build()
        .await
        .unwrap();
    // The listing connection is gone with what it started, although it ignores its stdin.
    let listing = fx.pids();
    assert_eq!(listing.len(), 2, "{listing:?}");
    assert_eq!(all_gone(&listing).await, Vec::<u32>::new());

    let ended = tools.session().await.unwrap();
    assert!(call(&ended, "echo").await.is_ok());
    let running_now = tools.session().await.unwrap();
    assert!(call(&running_now, "echo").await.is_ok());
    let pids = fx.pids();
    assert_eq!(pids.len(), 6, "{pids:?}");
    // An episode that ends takes its server with it.
    drop(ended);
    assert_eq!(all_gone(&pids[2..4]).await, Vec::<u32>::new());
    assert!(
        pids[4..].iter().all(|p| support::running(*p)),
        "the other episode's server runs on"
    );
    // Shutdown kills what is still open, whoever holds it.
    tools.close().await;
    assert_eq!(all_gone(&pids).await, Vec::<u32>::new());
    drop(running_now);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_listing_over_its_bounds_fails_start_up_naming_the_limit() {
    let names: Vec<String> = (0..5).map(|i| format!("t{i}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let fx = Fixture::new("listing", &names);
    let too_many = ExternalTools::builder()
        .mcp(fx.server().max_tools(4))
        .build()
        .await
        .unwrap_err();
    assert!(matches!(too_many, ExternalError::Mcp { .. }), "{too_many}");
    let msg = too_many.to_string();
    assert!(
        msg.contains("more than 4 tools") && msg.contains("max_tools"),
        "{msg}"
    );
    let too_big = ExternalTools::builder()
        .mcp(fx.server().max_listing_bytes(100))
        .build()
        .await
        .unwrap_err()
        .to_string();
    assert!(
        too_big.contains("more than 100 bytes") && too_big.contains("max_listing_bytes"),
        "{too_big}"
    );
    let fine = ExternalTools::builder()
        .mcp(fx.server())
        .build()
        .await
        .unwrap();
    assert_eq!(fine.specs().len(), 5);
    fine.close().await;
    assert_eq!(all_gone(&fx.pids()).await, Vec::<u32>::new());
}
