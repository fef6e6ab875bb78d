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
//! use ors_examples::mcp_env::{self, McpEnv};
//! use ors_server::external::ExternalTools;
//! use ors_server::mcp::McpServer;
//! use ors_server::{Server, ServerConfig};
//!
//! let tools = ExternalTools::builder()
//!     .mcp(McpServer::parse_command("python3 server.py")?)
//!     .build()
//!     .await?;
//! mcp_env::set_up(tools, mcp_env::one_empty_task())?;
//! Server::with_config(ServerConfig::from_env()?)
//!     .environment::<McpEnv>()
//!     .serve()
//!     .await?;
//! # Ok(())
//! # }
//! ```

use std::path::Path;
use std::sync::OnceLock;

use ors_server::external::{ExternalSession, ExternalTools};
use ors_server::prelude::*;
use ors_server::runtime::ToolTable;
use ors_server::tasks::TaskFile;

/// The one split.
pub const SPLIT: &str = "default";

/// The prompt of a task without a `prompt` field.
pub const DEFAULT_PROMPT: &str = "Use the tools to complete the task.";

/// What the environment serves, set once at start-up by [`set_up`].
struct Setup {
    tools: ExternalTools,
    tasks: TaskFile<JsonObject>,
}

static SETUP: OnceLock<Setup> = OnceLock::new();

fn setup() -> Result<&'static Setup, EnvError> {
    SETUP
        .get()
        .ok_or_else(|| EnvError::msg("the mcp environment was not set up (mcp_env::set_up)"))
}

/// Why the environment could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// [`set_up`] was called before.
    #[error("the mcp environment is already set up")]
    AlreadySetUp,
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

/// Serve `tools` with `tasks`; once per process, before serving.
pub fn set_up(tools: ExternalTools, tasks: TaskFile<JsonObject>) -> Result<(), SetupError> {
    SETUP
        .set(Setup { tools, tasks })
        .map_err(|_| SetupError::AlreadySetUp)
}

/// End the MCP connections still open (at shutdown).
pub async fn close() {
    if let Some(s) = SETUP.get() {
        s.tools.close().await;
    }
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

/// Written by hand rather than by `#[environment]`: every tool comes from elsewhere, listed by
/// `/tools` (the table is built on first use, after [`set_up`]) and run by the episode's own
/// connection.
impl EnvironmentMeta for McpEnv {
    const NAME: &'static str = "mcp";

    fn tool_table() -> &'static ToolTable<Self> {
        static TABLE: OnceLock<ToolTable<McpEnv>> = OnceLock::new();
        TABLE.get_or_init(|| match SETUP.get() {
            Some(s) => s.tools.table(|e: &McpEnv| &e.tools),
            None => ToolTable::new(Vec::new()),
        })
    }
}

impl Environment for McpEnv {
    type Task = JsonObject;

    fn splits() -> Vec<Split> {
        vec![Split::train(SPLIT)]
    }

    async fn num_tasks(split: &str) -> Result<Option<usize>, EnvError> {
        check_split(split)?;
        Ok(Some(setup()?.tasks.len()))
    }

    async fn task(split: &str, index: usize) -> Result<JsonObject, EnvError> {
        check_split(split)?;
        Ok(setup()?.tasks.get(index).await?)
    }

    async fn task_range(
        split: &str,
        start: usize,
        stop: usize,
    ) -> Result<Vec<JsonObject>, EnvError> {
        check_split(split)?;
        Ok(setup()?.tasks.range(start, stop).await?)
    }

    async fn new(task: JsonObject, _secrets: Secrets) -> Result<Self, EnvError> {
        if task.get("prompt").is_some_and(|p| !p.is_string()) {
            return Err(EnvError::InvalidTask(
                "the task's `prompt` must be a string".to_owned(),
            ));
        }
        let tools = setup()?.tools.session().await.map_err(EnvError::msg)?;
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
