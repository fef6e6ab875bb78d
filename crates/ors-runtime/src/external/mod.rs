//! Tools from elsewhere: MCP servers ([`mcp`], feature `mcp`) and webhooks ([`webhook`],
//! feature `webhooks`), gathered by [`ExternalTools`] at start-up and handed to each episode
//! as an [`ExternalSession`]: the tools listed once and shared (specs and compiled input
//! schemas), and the episode's own MCP connections their calls run on. An episode costs its
//! connections, whatever the number of tools.
//!
//! The [`ExternalTools`] are part of the environment's start-up state (`type State`), built
//! before serving; each episode opens its session in `new`. Two ways to serve them:
//! - an environment whose tools all come from elsewhere lists them in `/tools`:
//!   `#[environment(dynamic_tools = ...)]` names a function of the state returning
//!   [`ExternalTools::entries`] (the `mcp_env` example does this);
//! - an environment with `#[tool]` methods too serves the episode's external tools from
//!   `task_tools` and `call_task_tool` (listed per episode); [`ExternalToolsBuilder::reserve`]
//!   takes its own tool names, so a collision is an error at start-up (give the MCP server a
//!   prefix), never a tool silently hidden:
//!
//! ```no_run
//! use ors_runtime::external::{ExternalSession, ExternalTools};
//! use ors_runtime::mcp::McpServer;
//! use ors_runtime::webhook::WebhookTool;
//! # use ors_runtime::{EnvError, Environment, ToolContext};
//! # use ors_core::types::{Blocks, JsonObject, RunToolOutput, Secrets, Split, ToolSpec};
//! # use serde_json::Value;
//!
//! struct Agent {
//!     tools: ExternalSession,
//! }
//!
//! // In `#[environment] impl Environment for Agent`, with `type State = ExternalTools;`:
//! impl Agent {
//!     async fn new(tools: &ExternalTools, _task: JsonObject, _secrets: Secrets)
//!         -> Result<Self, EnvError> {
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
//! // The state, given to the server with `Server::environment_with::<Agent>(tools)`.
//! let tools = ExternalTools::builder()
//!     .mcp(McpServer::parse_command("python3 server.py")?.prefix("py_"))
//!     .webhooks(WebhookTool::load("webhooks.json")?)
//!     .reserve(["submit"])
//!     .build()
//!     .await?;
//! # Ok(()) }
//! ```

mod error;
mod http;
#[cfg(feature = "mcp")]
pub mod mcp;
#[cfg(feature = "mcp")]
mod mcp_http;
#[cfg(feature = "mcp")]
mod mcp_stdio;
pub mod webhook;

use std::collections::HashMap;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde_json::Value;

use ors_core::types::{RunToolOutput, ToolErrorReason, ToolSpec};

use crate::env::{DynamicTool, ToolContext, ToolEntry, ToolTableError};
pub use error::ExternalError;
use webhook::WebhookTool;

#[cfg(feature = "mcp")]
use mcp::{Conn, McpServer, McpToolset};

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

    /// Reserve tool names: an external tool of one of them is an error.
    pub fn reserve(mut self, names: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.reserved.extend(names.into_iter().map(Into::into));
        self
    }

    /// Connect to the MCP servers and list their tools, check the webhooks, and check that
    /// no two tools share a name.
    pub async fn build(self) -> Result<ExternalTools, ExternalError> {
        let hooks = self.webhooks.into_iter().map(WebhookTool::into_tool);
        let hooks = hooks.collect::<Result<Vec<_>, _>>()?;
        let mut entries = Vec::new();
        #[cfg(feature = "mcp")]
        let mut toolsets = Vec::with_capacity(self.servers.len());
        #[cfg(feature = "mcp")]
        for server in self.servers {
            let t = McpToolset::connect(server).await?;
            let toolset = toolsets.len();
            entries.extend((0..t.tools().len()).map(|tool| Runs::Mcp { toolset, tool }));
            toolsets.push(t);
        }
        entries.extend(self.tools.into_iter().chain(hooks).map(Runs::Here));
        let mut catalog = Catalog {
            #[cfg(feature = "mcp")]
            toolsets,
            entries,
            by_name: self.reserved.into_iter().map(|n| (n, usize::MAX)).collect(),
        };
        for (i, entry) in catalog.entries.iter().enumerate() {
            let name = catalog.spec(entry).name.clone();
            if catalog.by_name.insert(name.clone(), i).is_some() {
                return Err(ExternalError::Tool(ToolTableError::Duplicate(name)));
            }
        }
        catalog.by_name.retain(|_, i| *i != usize::MAX);
        Ok(ExternalTools {
            catalog: Arc::new(catalog),
        })
    }
}

/// Who runs a tool of the catalog.
enum Runs {
    /// The `tool`th tool of the `toolset`th MCP server, on the episode's connection to it.
    #[cfg(feature = "mcp")]
    Mcp { toolset: usize, tool: usize },
    /// A tool defined here (a webhook, code).
    Here(DynamicTool),
}

/// Every external tool, made once and shared by every episode.
struct Catalog {
    #[cfg(feature = "mcp")]
    toolsets: Vec<McpToolset>,
    entries: Vec<Runs>,
    by_name: HashMap<String, usize>,
}

impl Catalog {
    fn spec<'a>(&'a self, entry: &'a Runs) -> &'a ToolSpec {
        match entry {
            #[cfg(feature = "mcp")]
            Runs::Mcp { toolset, tool } => &self.toolsets[*toolset].tools()[*tool].spec,
            Runs::Here(t) => t.spec(),
        }
    }

    fn specs(&self) -> Vec<ToolSpec> {
        self.entries.iter().map(|e| self.spec(e).clone()).collect()
    }
}

/// An environment's tools from elsewhere, set up once at start-up.
pub struct ExternalTools {
    catalog: Arc<Catalog>,
}

impl std::fmt::Debug for ExternalTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<String> = self.specs().into_iter().map(|s| s.name).collect();
        f.debug_struct("ExternalTools")
            .field("tools", &names)
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
        self.catalog.specs()
    }

    /// The tools of a new episode (opening its MCP connections).
    pub async fn session(&self) -> Result<ExternalSession, ExternalError> {
        #[cfg(feature = "mcp")]
        let mut conns = Vec::with_capacity(self.catalog.toolsets.len());
        #[cfg(feature = "mcp")]
        for t in &self.catalog.toolsets {
            conns.push(t.connection().await?);
        }
        Ok(ExternalSession {
            catalog: Arc::clone(&self.catalog),
            #[cfg(feature = "mcp")]
            conns: conns.into(),
        })
    }

    /// The tools as entries of `E`'s tool table: listed by `/tools` like `#[tool]` methods,
    /// each call run by the episode's own [`ExternalSession`], which `session_of` finds in
    /// the episode. What `#[environment(dynamic_tools = ...)]` takes, for an environment whose
    /// tools come from elsewhere:
    ///
    /// ```text
    /// #[environment(dynamic_tools = Setup::tool_entries)]  // with `type State = Setup;`
    ///
    /// impl Setup {
    ///     fn tool_entries(&self) -> Vec<ToolEntry<Agent>> {
    ///         self.tools.entries(|agent: &Agent| &agent.tools)
    ///     }
    /// }
    /// ```
    pub fn entries<E: 'static>(&self, session_of: fn(&E) -> &ExternalSession) -> Vec<ToolEntry<E>> {
        self.specs()
            .into_iter()
            .map(|spec| {
                let name = spec.name.clone();
                ToolEntry::new(spec, true, move |env: &mut E, ctx, input| {
                    // External tools take their input as a value (they validate it).
                    let call = crate::env::as_value(&name, input).and_then(|input| {
                        let call = session_of(env).call(ctx, &name, input);
                        call.ok_or_else(|| {
                            let msg = format!("the tool '{name}' is not open in this episode");
                            RunToolOutput::refused(ToolErrorReason::NotFound, msg)
                        })
                    });
                    call.unwrap_or_else(|out| Box::pin(async move { out }))
                })
            })
            .collect()
    }

    /// End the MCP connections still open (at shutdown): their programs are killed at once.
    pub async fn close(&self) {
        #[cfg(feature = "mcp")]
        for t in &self.catalog.toolsets {
            t.close().await;
        }
    }
}

/// The external tools of one episode: the shared catalog, and the episode's own MCP
/// connections (one per MCP server, or the shared one). Dropping the last clone closes its
/// connections (stopping their programs). Cheap to clone.
#[derive(Clone)]
pub struct ExternalSession {
    catalog: Arc<Catalog>,
    #[cfg(feature = "mcp")]
    conns: Arc<[Arc<Conn>]>,
}

impl std::fmt::Debug for ExternalSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExternalSession")
            .field("tools", &self.catalog.entries.len())
            .finish_non_exhaustive()
    }
}

impl ExternalSession {
    /// The specs, in the order of [`ExternalTools::specs`].
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.catalog.specs()
    }

    /// Call a tool: its input is validated against its schema first (a mismatch is `ok:
    /// false` naming the field), then the call runs on this episode's connection. `None`
    /// when there is no tool of that name.
    pub fn call(
        &self,
        ctx: ToolContext,
        name: &str,
        input: Value,
    ) -> Option<BoxFuture<'static, RunToolOutput>> {
        let entry = &self.catalog.entries[*self.catalog.by_name.get(name)?];
        Some(match entry {
            #[cfg(feature = "mcp")]
            Runs::Mcp { toolset, tool } => {
                let t = &self.catalog.toolsets[*toolset].tools()[*tool];
                let (conn, mcp_name) = (Arc::clone(&self.conns[*toolset]), t.mcp_name.clone());
                match crate::env::checked_input(&t.validator, &t.spec.name, input) {
                    Ok(input) => Box::pin(async move { conn.call(&ctx, &mcp_name, input).await }),
                    Err(out) => Box::pin(async move { out }),
                }
            }
            Runs::Here(t) => t.call(ctx, input),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ors_core::types::JsonObject;
    use serde_json::json;

    fn echo(name: &str) -> DynamicTool {
        DynamicTool::new(
            name,
            "Echo the text.",
            json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
            |_ctx: ToolContext, input: JsonObject| async move {
                input["text"].as_str().unwrap_or_default().to_owned()
            },
        )
        .unwrap()
    }

    #[tokio::test]
    async fn episodes_share_the_catalog_made_at_start_up() {
        let tools = ExternalTools::builder()
            .tool(echo("a"))
            .tool(echo("b"))
            .build()
            .await
            .unwrap();
        let (one, two) = (
            tools.session().await.unwrap(),
            tools.session().await.unwrap(),
        );
        assert!(Arc::ptr_eq(&one.catalog, &tools.catalog));
        assert!(Arc::ptr_eq(&two.catalog, &tools.catalog));
        let names: Vec<String> = one.specs().into_iter().map(|s| s.name).collect();
        assert_eq!(names, ["a", "b"]);
        let out = one
            .call(ToolContext::detached(), "b", json!({"text": "hi"}))
            .unwrap()
            .await;
        assert_eq!(out.output().unwrap().blocks[0].as_text(), Some("hi"));
        let bad = one
            .call(ToolContext::detached(), "a", json!({"text": 1}))
            .unwrap()
            .await;
        assert!(!bad.is_ok(), "validated against its schema");
        assert!(one.call(ToolContext::detached(), "c", json!({})).is_none());
    }

    #[tokio::test]
    async fn two_tools_of_one_name_or_a_reserved_name_fail_the_build() {
        let twice = ExternalTools::builder().tool(echo("a")).tool(echo("a"));
        assert!(matches!(
            twice.build().await,
            Err(ExternalError::Tool(ToolTableError::Duplicate(n))) if n == "a"
        ));
        let reserved = ExternalTools::builder().reserve(["a"]).tool(echo("a"));
        assert!(reserved.build().await.is_err());
        let apart = ExternalTools::builder().reserve(["z"]).tool(echo("a"));
        let tools = apart.build().await.unwrap();
        let episode = tools.session().await.unwrap();
        assert!(episode
            .call(ToolContext::detached(), "z", json!({}))
            .is_none());
    }
}
