//! Serve the `mcp` environment: the tools of an MCP server and webhook tools over ORS.
//!
//! ```text
//! cargo run -p ors-examples --bin mcp_env -- --mcp-command "python3 server.py" \
//!     --tasks tasks.jsonl --webhooks hooks.json
//! ```

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use ors_examples::cli::{self, ServeArgs};
use ors_examples::mcp_env::{self, McpEnv, Setup};
use ors_server::external::ExternalTools;
use ors_server::mcp::{Connection, McpServer};
use ors_server::webhook::WebhookTool;

/// Serve the tools of an MCP server (and webhook tools) as the ORS environment `mcp`.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    #[command(flatten)]
    serve: ServeArgs,
    /// The MCP server to start for each episode, as a command line ("python3 server.py");
    /// words with spaces in quotes.
    #[arg(long, value_name = "COMMAND", conflicts_with = "mcp_url")]
    mcp_command: Option<String>,
    /// The MCP server's streamable-HTTP endpoint (http://127.0.0.1:8000/mcp).
    #[arg(long, value_name = "URL")]
    mcp_url: Option<String>,
    /// Put this before the MCP server's tool names (to avoid a clash with a webhook's).
    #[arg(long, value_name = "PREFIX", default_value = "")]
    mcp_prefix: String,
    /// One MCP connection for every episode instead of one each (for servers without state).
    #[arg(long)]
    mcp_shared: bool,
    /// Webhook tools: a JSON file with a list of {"name", "description", "input_schema",
    /// "url", "secret" | "secret_env", "timeout_secs", "retries"}.
    #[arg(long, value_name = "FILE")]
    webhooks: Option<PathBuf>,
    /// The tasks of split `default`, one JSON object a line; a task's `prompt` field is its
    /// prompt [default: one empty task].
    #[arg(long, value_name = "FILE")]
    tasks: Option<PathBuf>,
}

/// With the cargo feature `jemalloc` (the benchmarks build with it): jemalloc, configured in
/// `.cargo/config.toml` to hand freed pages back to the OS within about a second (glibc kept
/// the memory of deleted sessions in its arenas).
#[cfg(feature = "jemalloc")]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

async fn set_up(args: &Args) -> Result<Setup, String> {
    let mut builder = ExternalTools::builder();
    let server = match (&args.mcp_command, &args.mcp_url) {
        (Some(cmd), _) => Some(McpServer::parse_command(cmd).map_err(|e| e.to_string())?),
        (None, Some(url)) => Some(McpServer::url(url)),
        (None, None) => None,
    };
    if let Some(server) = server {
        let connection = if args.mcp_shared {
            Connection::Shared
        } else {
            Connection::PerSession
        };
        builder = builder.mcp(server.prefix(&args.mcp_prefix).connection(connection));
    }
    if let Some(file) = &args.webhooks {
        builder = builder.webhooks(WebhookTool::load(file).map_err(|e| e.to_string())?);
    }
    let tools = builder.build().await.map_err(|e| e.to_string())?;
    if tools.specs().is_empty() {
        return Err("no tools: give --mcp-command, --mcp-url or --webhooks".to_owned());
    }
    let tasks = match &args.tasks {
        Some(file) => mcp_env::tasks_from(file).map_err(|e| e.to_string())?,
        None => mcp_env::one_empty_task(),
    };
    Ok(Setup::new(Arc::new(tools), tasks))
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    let setup = match set_up(&args).await {
        Ok(setup) => setup,
        Err(e) => {
            eprintln!("mcp_env: {e}");
            return ExitCode::FAILURE;
        }
    };
    let tools = Arc::clone(setup.tools());
    let code = cli::serve::<McpEnv>("mcp_env", &args.serve, setup).await;
    // The MCP connections still open (a shared one, and those of episodes left at shutdown).
    tools.close().await;
    code
}
