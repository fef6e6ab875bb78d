//! The `mcp` environment: tools from elsewhere served as an ORS environment. It takes the
//! tools of one MCP server (a command speaking MCP on stdio, or a streamable-HTTP URL) and
//! any number of webhook tools, and serves them to every episode; the tasks come from a JSONL
//! file (one split, `default`), and the prompt is the task's `prompt` field.
//!
//! Each episode gets its own MCP connection (for a command, its own server process), so what
//! one episode does to the server's state another never sees; the connection ends with the
//! episode. A server that crashes fails the calls of that episode with `ok: false`, and the
//! next episode starts it again.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//!
//! use ors_examples::mcp_env::{self, McpEnv, Setup};
//! use ors_server::external::ExternalTools;
//! use ors_server::mcp::McpServer;
//! use ors_server::{Server, ServerConfig};
//!
//! let tools = Arc::new(
//!     ExternalTools::builder()
//!         .mcp(McpServer::parse_command("python3 server.py")?)
//!         .build()
//!         .await?,
//! );
//! Server::with_config(ServerConfig::from_env()?)
//!     .environment_with::<McpEnv>(Setup::new(Arc::clone(&tools), mcp_env::one_empty_task()))
//!     .serve()
//!     .await?;
//! tools.close().await; // the MCP connections still open
//! # Ok(())
//! # }
//! ```

use std::path::Path;
use std::sync::Arc;

use ors_server::external::{ExternalSession, ExternalTools};
use ors_server::prelude::*;
use ors_server::runtime::env::ToolEntry;
use ors_server::tasks::TaskFile;

/// The one split.
pub const SPLIT: &str = "default";

/// The prompt of a task without a `prompt` field.
pub const DEFAULT_PROMPT: &str = "Use the tools to complete the task.";

/// What the environment serves, its start-up state: the tools from elsewhere (listed once,
/// at start-up) and the tasks.
#[derive(Debug)]
pub struct Setup {
    tools: Arc<ExternalTools>,
    tasks: TaskFile<JsonObject>,
}

impl Setup {
    /// Serve `tools` with `tasks`. The tools are shared so the caller can close their
    /// connections when the server is done ([`ExternalTools::close`]).
    pub fn new(tools: Arc<ExternalTools>, tasks: TaskFile<JsonObject>) -> Self {
        Self { tools, tasks }
    }

    /// The tools from elsewhere.
    pub fn tools(&self) -> &Arc<ExternalTools> {
        &self.tools
    }

    /// The tools as the environment's table lists them: each call run by the episode's own
    /// connection.
    fn tool_entries(&self) -> Vec<ToolEntry<McpEnv>> {
        self.tools.entries(|e: &McpEnv| &e.tools)
    }
}

/// Why the tasks could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// The task file could not be read.
    #[error(transparent)]
    Tasks(#[from] ors_server::tasks::DataError),
    /// A task file with no task.
    #[error("{0}: no task in the file")]
    NoTasks(String),
}

/// The tasks when no file is given: one task with no fields.
pub fn one_empty_task() -> TaskFile<JsonObject> {
    TaskFile::from_vec(vec![JsonObject::new()], "(one empty task)")
}

/// Tasks from a JSONL file (one JSON object a line).
pub fn tasks_from(path: impl AsRef<Path>) -> Result<TaskFile<JsonObject>, SetupError> {
    let tasks = TaskFile::open(path.as_ref())?;
    if tasks.is_empty() {
        return Err(SetupError::NoTasks(path.as_ref().display().to_string()));
    }
    Ok(tasks)
}

/// An episode: its task and its tools (its own MCP connection).
#[derive(Debug)]
pub struct McpEnv {
    task: JsonObject,
    tools: ExternalSession,
}

fn check_split(split: &str) -> Result<(), EnvError> {
    if split == SPLIT {
        Ok(())
    } else {
        Err(EnvError::msg(format!(
            "unknown split '{split}' (the only split is '{SPLIT}')"
        )))
    }
}

/// Every tool comes from elsewhere: listed by `/tools` from the start-up state, and run by the
/// episode's own connection.
#[environment(name = "mcp", dynamic_tools = Setup::tool_entries)]
impl Environment for McpEnv {
    type Task = JsonObject;
    type State = Setup;

    fn splits() -> Vec<Split> {
        vec![Split::train(SPLIT)]
    }

    async fn num_tasks(setup: &Setup, split: &str) -> Result<Option<usize>, EnvError> {
        check_split(split)?;
        Ok(Some(setup.tasks.len()))
    }

    async fn task(setup: &Setup, split: &str, index: usize) -> Result<JsonObject, EnvError> {
        check_split(split)?;
        Ok(setup.tasks.get(index).await?)
    }

    async fn task_range(
        setup: &Setup,
        split: &str,
        start: usize,
        stop: usize,
    ) -> Result<Vec<JsonObject>, EnvError> {
        check_split(split)?;
        Ok(setup.tasks.range(start, stop).await?)
    }

    async fn new(setup: &Setup, task: JsonObject, _secrets: Secrets) -> Result<Self, EnvError> {
        if task.get("prompt").is_some_and(|p| !p.is_string()) {
            return Err(EnvError::InvalidTask(
                "the task's `prompt` must be a string".to_owned(),
            ));
        }
        let tools = setup.tools.session().await.map_err(EnvError::msg)?;
        Ok(Self { task, tools })
    }

    async fn prompt(&self) -> Result<Blocks, EnvError> {
        let text = self
            .task
            .get("prompt")
            .and_then(|p| p.as_str())
            .unwrap_or(DEFAULT_PROMPT);
        Ok(vec![Block::text(text)])
    }
}
