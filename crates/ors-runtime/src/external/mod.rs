//! Tools from elsewhere: MCP servers ([`mcp`], feature `mcp`) and webhooks ([`webhook`],
//! feature `webhooks`), gathered by [`ExternalTools`] at start-up and handed to each episode
//! as an [`ExternalSession`] (a [`DynamicTools`] set whose MCP tools run on that episode's
//! connection).
//!
//! Two ways to serve them:
//! - an environment whose tools all come from elsewhere lists them in `/tools` with a tool
//!   table written by hand ([`ExternalTools::table`]; the `mcp_env` example does this);
//! - an environment with `#[tool]` methods too serves the episode's external tools from
//!   `task_tools` and `call_task_tool` (listed per episode); [`ExternalToolsBuilder::beside`]
//!   reserves its own tool names, so a collision is an error at start-up (give the MCP
//!   server a prefix), never a tool silently hidden:
//!
//! ```no_run
//! use std::sync::OnceLock;
//!
//! use ors_runtime::external::{ExternalSession, ExternalTools};
//! use ors_runtime::mcp::McpServer;
//! use ors_runtime::webhook::WebhookTool;
//! # use ors_runtime::{EnvError, Environment, ToolContext};
//! # use ors_core::types::{Blocks, JsonObject, RunToolOutput, Secrets, Split, ToolSpec};
//! # use serde_json::Value;
//!
//! static TOOLS: OnceLock<ExternalTools> = OnceLock::new();
//!
//! struct Agent {
//!     tools: ExternalSession,
//! }
//!
//! // In `#[environment] impl Environment for Agent`:
//! impl Agent {
//!     async fn new(_task: JsonObject, _secrets: Secrets) -> Result<Self, EnvError> {
//!         let tools = TOOLS.get().ok_or_else(|| EnvError::msg("tools not set up"))?;
//!         Ok(Self { tools: tools.session().await.map_err(EnvError::msg)? })
//!     }
//!     fn task_tools(&self) -> Vec<ToolSpec> {
//!         self.tools.specs()
//!     }
//!     async fn call_task_tool(&mut self, ctx: ToolContext, name: &str, input: Value)
//!         -> Option<RunToolOutput> {
//!         Some(self.tools.call(ctx, name, input)?.await)
//!     }
//! }
//!
//! # async fn start() -> Result<(), Box<dyn std::error::Error>> {
//! let tools = ExternalTools::builder()
//!     .mcp(McpServer::parse_command("python3 server.py")?.prefix("py_"))
//!     .webhooks(WebhookTool::load("webhooks.json")?)
//!     .build()
//!     .await?;
//! let _ = TOOLS.set(tools);
//! # Ok(()) }
//! ```

mod http;
#[cfg(feature = "mcp")]
pub mod mcp;
#[cfg(feature = "mcp")]
mod mcp_http;
pub mod webhook;

use std::collections::HashSet;

use ors_core::types::{RunToolOutput, ToolErrorReason, ToolSpec};

use crate::env::{DynamicTool, DynamicTools, Environment, ToolEntry, ToolTable, ToolTableError};
use webhook::WebhookTool;

#[cfg(feature = "mcp")]
use mcp::{McpServer, McpToolset};

/// Why tools from elsewhere could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum ExternalError {
    /// A configuration (file, command line, URL) is unusable.
    #[error("{0}")]
    Config(String),
    /// An MCP server could not be started, reached or listed.
    #[error("MCP server '{server}': {reason}")]
    Mcp {
        /// The server (its program or URL).
        server: String,
        /// What went wrong.
        reason: String,
    },
    /// A tool's name or schema is unusable, or two tools share a name.
    #[error(transparent)]
    Tool(#[from] ToolTableError),
}

/// Collects the sources of an environment's external tools; [`ExternalToolsBuilder::build`]
/// connects and lists them.
#[derive(Default)]
#[must_use = "call .build().await to connect"]
pub struct ExternalToolsBuilder {
    #[cfg(feature = "mcp")]
    servers: Vec<McpServer>,
    webhooks: Vec<WebhookTool>,
    tools: Vec<DynamicTool>,
    reserved: Vec<String>,
}

impl ExternalToolsBuilder {
    /// Take the tools of an MCP server.
    #[cfg(feature = "mcp")]
    pub fn mcp(mut self, server: McpServer) -> Self {
        self.servers.push(server);
        self
    }

    /// Add a webhook tool.
    pub fn webhook(mut self, hook: WebhookTool) -> Self {
        self.webhooks.push(hook);
        self
    }

    /// Add webhook tools.
    pub fn webhooks(mut self, hooks: impl IntoIterator<Item = WebhookTool>) -> Self {
        self.webhooks.extend(hooks);
        self
    }

    /// Add a tool defined in code.
    pub fn tool(mut self, tool: DynamicTool) -> Self {
        self.tools.push(tool);
        self
    }

    /// Reserve the names of `E`'s own tools: an external tool of the same name is an error.
    pub fn beside<E: Environment>(mut self) -> Self {
        self.reserved
            .extend(E::tool_table().all_specs().map(|s| s.name.clone()));
        self
    }

    /// Reserve tool names: an external tool of one of them is an error.
    pub fn reserve(mut self, names: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.reserved.extend(names.into_iter().map(Into::into));
        self
    }

    /// Connect to the MCP servers and list their tools, check the webhooks, and check that
    /// no two tools share a name.
    pub async fn build(self) -> Result<ExternalTools, ExternalError> {
        let mut shared: Vec<DynamicTool> = self.tools;
        for hook in self.webhooks {
            shared.push(hook.into_tool()?);
        }
        #[cfg(feature = "mcp")]
        let mut toolsets = Vec::with_capacity(self.servers.len());
        #[cfg(feature = "mcp")]
        for server in self.servers {
            toolsets.push(McpToolset::connect(server).await?);
        }
        let tools = ExternalTools {
            #[cfg(feature = "mcp")]
            toolsets,
            shared,
        };
        let mut seen: HashSet<String> = self.reserved.into_iter().collect();
        for spec in tools.specs() {
            if !seen.insert(spec.name.clone()) {
                return Err(ExternalError::Tool(ToolTableError::Duplicate(spec.name)));
            }
        }
        Ok(tools)
    }
}

/// An environment's tools from elsewhere, set up once at start-up.
pub struct ExternalTools {
    #[cfg(feature = "mcp")]
    toolsets: Vec<McpToolset>,
    shared: Vec<DynamicTool>,
}

impl std::fmt::Debug for ExternalTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExternalTools")
            .field(
                "tools",
                &self
                    .specs()
                    .iter()
                    .map(|s| s.name.clone())
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl ExternalTools {
    /// A builder.
    pub fn builder() -> ExternalToolsBuilder {
        ExternalToolsBuilder::default()
    }

    /// The specs of every tool, MCP servers' first, in the order they were added.
    pub fn specs(&self) -> Vec<ToolSpec> {
        let mut specs = Vec::new();
        #[cfg(feature = "mcp")]
        for t in &self.toolsets {
            specs.extend(t.specs());
        }
        specs.extend(self.shared.iter().map(|t| t.spec().clone()));
        specs
    }

    /// The tools of a new episode (opening its MCP connections).
    pub async fn session(&self) -> Result<ExternalSession, ExternalError> {
        let mut tools = Vec::new();
        #[cfg(feature = "mcp")]
        for t in &self.toolsets {
            tools.extend(t.session_tools().await?);
        }
        tools.extend(self.shared.iter().cloned());
        Ok(DynamicTools::new(tools)?)
    }

    /// The tools as entries of `E`'s tool table: listed by `/tools` like `#[tool]` methods,
    /// each call run by the episode's own [`ExternalSession`], which `session_of` finds in
    /// the episode. For an environment whose tools all come from elsewhere, that writes its
    /// `EnvironmentMeta::tool_table` by hand (see [`ExternalTools::table`]).
    pub fn entries<E: 'static>(&self, session_of: fn(&E) -> &ExternalSession) -> Vec<ToolEntry<E>> {
        self.specs()
            .into_iter()
            .map(|spec| {
                let name = spec.name.clone();
                ToolEntry::new(spec, true, move |env: &mut E, ctx, input| {
                    // External tools take their input as a value (they validate it).
                    let input = match crate::env::as_value(&name, input) {
                        Ok(input) => input,
                        Err(out) => return Box::pin(async move { out }),
                    };
                    match session_of(env).call(ctx, &name, input) {
                        Some(call) => call,
                        None => {
                            let msg = format!("the tool '{name}' is not open in this episode");
                            Box::pin(async move {
                                RunToolOutput::refused(ToolErrorReason::NotFound, msg)
                            })
                        }
                    }
                })
            })
            .collect()
    }

    /// A tool table of these tools only (see [`ExternalTools::entries`]):
    ///
    /// ```no_run
    /// # use std::sync::OnceLock;
    /// # use ors_runtime::external::{ExternalSession, ExternalTools};
    /// # use ors_runtime::{EnvironmentMeta, ToolTable};
    /// # static TOOLS: OnceLock<ExternalTools> = OnceLock::new();
    /// struct Agent {
    ///     tools: ExternalSession,
    /// }
    ///
    /// // With `impl Environment for Agent` written without `#[environment]`.
    /// impl EnvironmentMeta for Agent {
    ///     const NAME: &'static str = "agent";
    ///     fn tool_table() -> &'static ToolTable<Self> {
    ///         static TABLE: OnceLock<ToolTable<Agent>> = OnceLock::new();
    ///         // Built on first use: set TOOLS up before serving.
    ///         TABLE.get_or_init(|| match TOOLS.get() {
    ///             Some(tools) => tools.table(|a: &Agent| &a.tools),
    ///             None => ToolTable::new(Vec::new()),
    ///         })
    ///     }
    /// }
    /// ```
    pub fn table<E: 'static>(&self, session_of: fn(&E) -> &ExternalSession) -> ToolTable<E> {
        ToolTable::new(self.entries(session_of))
    }

    /// End the MCP connections still open (at shutdown).
    pub async fn close(&self) {
        #[cfg(feature = "mcp")]
        for t in &self.toolsets {
            t.close().await;
        }
    }
}

/// The external tools of one episode: a [`DynamicTools`] set whose MCP tools run on the
/// episode's own connections. Dropping it closes them (stopping their server processes).
pub type ExternalSession = DynamicTools;
