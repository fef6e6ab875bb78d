//! MCP servers as ORS tools: [`McpToolset`] connects to an MCP server (a command over stdio,
//! or a streamable-HTTP URL) through the official Rust MCP SDK, lists its tools once at
//! start-up, and gives every episode those tools as [`DynamicTool`]s that forward their calls.
//!
//! - Schemas are served verbatim (names get the toolset's prefix, and characters an ORS name
//!   cannot have become `_`), and every input is validated against its schema before the MCP
//!   server sees it.
//! - An MCP result with `isError` is `ok: false`; text and image content become blocks (audio
//!   and resources become text describing them); `structuredContent` goes to
//!   `metadata.structured`.
//! - Connections: [`Connection::PerSession`] (the default) starts one MCP connection (one
//!   server process, for a command) per episode, because MCP servers keep state (files
//!   written, a browser page, a database) and an episode must not see another's;
//!   [`Connection::Shared`] uses one connection for every episode, for servers without state
//!   (a calculator, a search API), and saves a process per episode.
//! - A server that exits or crashes makes the calls that need it `ok: false`, saying so; the
//!   next episode starts it again (a shared connection is reopened by the next episode).

use std::sync::{Arc, Mutex};

use rmcp::model::{CallToolRequestParams, CallToolResult, ContentBlock, ResourceContents};
use rmcp::service::{RoleClient, RunningService, ServiceError};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::ServiceExt;
use serde_json::Value;

use ors_core::types::{Block, JsonObject, RunToolOutput, ToolOutput, ToolSpec, STRUCTURED_KEY};

use super::http::{check_url, HttpClient};
use super::ExternalError;
use crate::env::{valid_tool_name, DynamicTool, ToolContext};

/// How an MCP server is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpTransport {
    /// A program started for the connection, speaking MCP on its stdin/stdout.
    Command {
        /// The program.
        program: String,
        /// Its arguments.
        args: Vec<String>,
        /// Variables set for it (on top of this process's environment).
        env: Vec<(String, String)>,
    },
    /// A streamable-HTTP endpoint (`http://host:port/mcp`).
    Url(String),
}

/// Whether episodes share one MCP connection (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Connection {
    /// One connection (one server process) per episode: episodes never see each other's
    /// state.
    #[default]
    PerSession,
    /// One connection for every episode, reopened after the server dies.
    Shared,
}

/// An MCP server to take tools from.
///
/// ```
/// use ors_runtime::mcp::{Connection, McpServer};
///
/// let fs = McpServer::parse_command("npx -y @modelcontextprotocol/server-filesystem /tmp")
///     .unwrap()
///     .prefix("fs_");
/// let search = McpServer::url("http://127.0.0.1:9000/mcp").connection(Connection::Shared);
/// # let _ = (fs, search);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServer {
    /// How it is reached.
    pub transport: McpTransport,
    /// Put before each of its tool names (`fs_` makes `read_file` `fs_read_file`).
    pub prefix: String,
    /// One connection per episode, or one for all.
    pub connection: Connection,
}

impl McpServer {
    /// A server started as `program args...`.
    pub fn command(
        program: impl Into<String>,
        args: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        Self::of(McpTransport::Command {
            program: program.into(),
            args: args.into_iter().map(Into::into).collect(),
            env: Vec::new(),
        })
    }

    /// A server started by a command line: words split on whitespace, `'...'` and `"..."`
    /// quoting a word with spaces.
    pub fn parse_command(line: &str) -> Result<Self, ExternalError> {
        let words = split_words(line)?;
        let (program, args) = words
            .split_first()
            .ok_or_else(|| ExternalError::Config("the MCP command is empty".to_owned()))?;
        Ok(Self::command(program.clone(), args.to_vec()))
    }

    /// A server at a streamable-HTTP URL.
    pub fn url(url: impl Into<String>) -> Self {
        Self::of(McpTransport::Url(url.into()))
    }

    fn of(transport: McpTransport) -> Self {
        Self {
            transport,
            prefix: String::new(),
            connection: Connection::default(),
        }
    }

    /// Prefix its tool names.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// One connection per episode or shared.
    pub fn connection(mut self, connection: Connection) -> Self {
        self.connection = connection;
        self
    }

    /// Set a variable for a command's process.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        if let McpTransport::Command { env, .. } = &mut self.transport {
            env.push((key.into(), value.into()));
        }
        self
    }

    /// A short name for messages: the command (the program's file name and its arguments),
    /// or the URL.
    pub fn label(&self) -> String {
        match &self.transport {
            McpTransport::Command { program, args, .. } => {
                let name = std::path::Path::new(program)
                    .file_name()
                    .map_or_else(|| program.clone(), |n| n.to_string_lossy().into_owned());
                std::iter::once(name)
                    .chain(args.iter().cloned())
                    .collect::<Vec<_>>()
                    .join(" ")
            }
            McpTransport::Url(url) => url.clone(),
        }
    }

    /// Open a connection: start the program (or reach the URL) and initialize.
    async fn open(&self) -> Result<Client, String> {
        match &self.transport {
            McpTransport::Command { program, args, env } => {
                let mut cmd = tokio::process::Command::new(program);
                cmd.args(args).envs(env.iter().map(|(k, v)| (k, v)));
                let (child, _) = TokioChildProcess::builder(cmd)
                    .stderr(std::process::Stdio::inherit())
                    .spawn()
                    .map_err(|e| format!("cannot start '{program}': {e}"))?;
                ().serve(child).await.map_err(|e| e.to_string())
            }
            McpTransport::Url(url) => {
                check_url(url)?;
                let transport = StreamableHttpClientTransport::with_client(
                    HttpClient::new(),
                    StreamableHttpClientTransportConfig::with_uri(url.as_str()),
                );
                ().serve(transport).await.map_err(|e| e.to_string())
            }
        }
    }
}

/// Split a command line into words; quotes group words with spaces.
fn split_words(line: &str) -> Result<Vec<String>, ExternalError> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            (None, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if quote.is_some() {
        return Err(ExternalError::Config(format!(
            "the MCP command has an unclosed quote: {line}"
        )));
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
}

/// A running MCP client connection.
type Client = RunningService<RoleClient, ()>;

/// One MCP connection, shared by the tools of an episode (or of every episode).
struct Conn {
    client: Client,
    label: String,
}

impl Conn {
    fn alive(&self) -> bool {
        !self.client.is_closed() && !self.client.is_transport_closed()
    }

    async fn call(&self, ctx: &ToolContext, tool: &str, input: JsonObject) -> RunToolOutput {
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(input);
        let result = tokio::select! {
            r = self.client.call_tool(params) => r,
            () = ctx.cancelled() => {
                return RunToolOutput::error(format!("the call of MCP tool '{tool}' was cancelled"))
            }
        };
        match result {
            Ok(result) => from_mcp(result),
            Err(ServiceError::TransportClosed | ServiceError::TransportSend(_)) => {
                RunToolOutput::error(format!(
                    "the MCP server '{}' is not running (it exited or crashed), so tool '{tool}' \
                     cannot run in this episode; a new episode starts it again",
                    self.label
                ))
            }
            Err(ServiceError::McpError(e)) => RunToolOutput::error(format!(
                "the MCP server '{}' refused the call of '{tool}': {}",
                self.label, e.message
            )),
            Err(e) => RunToolOutput::error(format!(
                "the call of MCP tool '{tool}' on '{}' failed: {e}",
                self.label
            )),
        }
    }
}

/// An MCP tool result as an ORS result.
pub fn from_mcp(result: CallToolResult) -> RunToolOutput {
    let mut blocks: Vec<Block> = result.content.iter().map(block).collect();
    if result.is_error == Some(true) {
        let text: Vec<&str> = blocks.iter().filter_map(Block::as_text).collect();
        let message = if text.is_empty() {
            "the MCP tool failed without a message".to_owned()
        } else {
            text.join("\n")
        };
        return RunToolOutput::error(message);
    }
    let mut metadata = None;
    if let Some(value) = result.structured_content {
        if blocks.is_empty() {
            blocks.push(Block::text(value.to_string()));
        }
        let mut m = JsonObject::new();
        m.insert(STRUCTURED_KEY.to_owned(), value);
        metadata = Some(m);
    }
    if blocks.is_empty() {
        blocks.push(Block::text(""));
    }
    let mut out = ToolOutput::blocks(blocks);
    out.metadata = metadata;
    RunToolOutput::Success(out)
}

/// One MCP content block as an ORS block.
fn block(content: &ContentBlock) -> Block {
    match content {
        ContentBlock::Text(t) => Block::text(t.text.clone()),
        ContentBlock::Image(i) => Block::image(i.data.clone(), i.mime_type.clone()),
        ContentBlock::Audio(a) => Block::text(format!(
            "[audio {}, {} bytes of base64 not shown]",
            a.mime_type,
            a.data.len()
        )),
        ContentBlock::Resource(r) => match &r.resource {
            ResourceContents::TextResourceContents { text, .. } => Block::text(text.clone()),
            ResourceContents::BlobResourceContents { uri, mime_type, .. } => Block::text(format!(
                "[resource {uri} ({}), binary, not shown]",
                mime_type.as_deref().unwrap_or("unknown type")
            )),
            _ => Block::text("[resource of an unknown kind]"),
        },
        ContentBlock::ResourceLink(link) => Block::text(format!("[resource {}]", link.uri)),
        _ => Block::text("[MCP content of an unknown kind]"),
    }
}

/// `name` with every character an ORS tool name cannot have replaced by `_`.
fn ors_name(prefix: &str, name: &str) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{prefix}{cleaned}")
}

/// One tool of the server: its ORS spec and the name the MCP server knows it by.
#[derive(Debug, Clone)]
struct ToolInfo {
    mcp_name: String,
    spec: ToolSpec,
    schema: Value,
}

/// The tools of one MCP server, listed at start-up (see the module docs).
pub struct McpToolset {
    server: McpServer,
    tools: Vec<ToolInfo>,
    /// The shared connection ([`Connection::Shared`]); reopened when it died.
    shared: tokio::sync::Mutex<Option<Arc<Conn>>>,
    /// Per-session connections still open, so [`McpToolset::close`] can end them.
    open: Mutex<Vec<std::sync::Weak<Conn>>>,
}

impl std::fmt::Debug for McpToolset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpToolset")
            .field("server", &self.server)
            .field(
                "tools",
                &self.tools.iter().map(|t| &t.spec.name).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl McpToolset {
    /// Connect to the server and list its tools (once: a server whose tools change later is
    /// still served the start-up list). Fails naming the server when it cannot be started
    /// or reached, or when a tool's name or schema cannot be an ORS tool's.
    pub async fn connect(server: McpServer) -> Result<Self, ExternalError> {
        let label = server.label();
        let failed = |reason: String| ExternalError::Mcp {
            server: label.clone(),
            reason,
        };
        let client = server.open().await.map_err(failed)?;
        let listed = client
            .list_all_tools()
            .await
            .map_err(|e| failed(format!("listing its tools: {e}")))?;
        let mut tools = Vec::with_capacity(listed.len());
        for tool in listed {
            let name = ors_name(&server.prefix, &tool.name);
            if !valid_tool_name(&name) {
                return Err(failed(format!(
                    "its tool '{}' cannot be served as '{name}': an ORS tool name is 1 to 64 \
                     characters from `A-Z a-z 0-9 _ -`",
                    tool.name
                )));
            }
            let schema = Value::Object((*tool.input_schema).clone());
            let description = tool
                .description
                .as_deref()
                .filter(|d| !d.trim().is_empty())
                .map(str::to_owned)
                .unwrap_or_else(|| format!("The MCP tool '{}'", tool.name));
            let Value::Object(obj) = schema.clone() else {
                continue;
            };
            tools.push(ToolInfo {
                mcp_name: tool.name.to_string(),
                spec: ToolSpec::new(name, description, Some(obj)),
                schema,
            });
        }
        let toolset = Self {
            tools,
            shared: tokio::sync::Mutex::new(None),
            open: Mutex::new(Vec::new()),
            server,
        };
        // The tools must be valid ORS tools now, not at the first episode.
        toolset.tools_on(None).map_err(|e| failed(e.to_string()))?;
        if toolset.server.connection == Connection::Shared {
            *toolset.shared.lock().await = Some(Arc::new(Conn { client, label }));
        } else {
            drop(client);
        }
        tracing::info!(
            server = %toolset.server.label(),
            tools = toolset.tools.len(),
            "MCP server listed"
        );
        Ok(toolset)
    }

    /// The server.
    pub fn server(&self) -> &McpServer {
        &self.server
    }

    /// The specs of its tools, as ORS lists them.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools.iter().map(|t| t.spec.clone()).collect()
    }

    /// The tools forwarding to `conn` (`None`: tools whose every call fails, to check them).
    fn tools_on(&self, conn: Option<Arc<Conn>>) -> Result<Vec<DynamicTool>, ExternalError> {
        self.tools
            .iter()
            .map(|t| {
                let conn = conn.clone();
                let mcp_name = t.mcp_name.clone();
                DynamicTool::new(
                    t.spec.name.clone(),
                    t.spec.description.clone(),
                    t.schema.clone(),
                    move |ctx: ToolContext, input: JsonObject| {
                        let conn = conn.clone();
                        let mcp_name = mcp_name.clone();
                        async move {
                            match conn {
                                Some(conn) => conn.call(&ctx, &mcp_name, input).await,
                                None => RunToolOutput::error("no MCP connection"),
                            }
                            .into_result()
                        }
                    },
                )
                .map_err(ExternalError::Tool)
            })
            .collect()
    }

    /// The tools for a new episode: on a connection of its own, or on the shared one (opened
    /// again when the server died since).
    pub async fn session_tools(&self) -> Result<Vec<DynamicTool>, ExternalError> {
        let failed = |reason: String| ExternalError::Mcp {
            server: self.server.label(),
            reason,
        };
        let conn = match self.server.connection {
            Connection::PerSession => {
                let client = self.server.open().await.map_err(failed)?;
                let conn = Arc::new(Conn {
                    client,
                    label: self.server.label(),
                });
                if let Ok(mut open) = self.open.lock() {
                    open.retain(|w| w.strong_count() > 0);
                    open.push(Arc::downgrade(&conn));
                }
                conn
            }
            Connection::Shared => {
                let mut shared = self.shared.lock().await;
                match shared.as_ref().filter(|c| c.alive()) {
                    Some(conn) => Arc::clone(conn),
                    None => {
                        if shared.is_some() {
                            tracing::warn!(server = %self.server.label(), "the shared MCP connection died; reopening it");
                        }
                        let client = self.server.open().await.map_err(failed)?;
                        let conn = Arc::new(Conn {
                            client,
                            label: self.server.label(),
                        });
                        *shared = Some(Arc::clone(&conn));
                        conn
                    }
                }
            }
        };
        self.tools_on(Some(conn))
    }

    /// End every connection still open (at server shutdown): their processes are stopped.
    pub async fn close(&self) {
        let shared = self.shared.lock().await.take();
        let open: Vec<Arc<Conn>> = self
            .open
            .lock()
            .map(|mut o| o.drain(..).filter_map(|w| w.upgrade()).collect())
            .unwrap_or_default();
        for conn in shared.into_iter().chain(open) {
            conn.client.cancellation_token().cancel();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::ContentBlock;
    use serde_json::json;

    #[test]
    fn command_lines_split_on_spaces_and_keep_quoted_words() {
        assert_eq!(
            split_words(r#"python3 server.py --name "two words" 'x y'"#).unwrap(),
            vec!["python3", "server.py", "--name", "two words", "x y"]
        );
        assert!(split_words("python3 'open").is_err());
        assert!(McpServer::parse_command("   ").is_err());
    }

    #[test]
    fn names_get_the_prefix_and_lose_what_ors_names_cannot_have() {
        assert_eq!(ors_name("fs_", "read_file"), "fs_read_file");
        assert_eq!(ors_name("", "files.read/v2"), "files_read_v2");
    }

    #[test]
    fn mcp_results_become_ors_results() {
        let ok = CallToolResult::success(vec![
            ContentBlock::text("hello"),
            ContentBlock::image("aGk=", "image/png"),
        ]);
        let out = from_mcp(ok);
        let o = out.output().unwrap();
        assert_eq!(o.blocks[0].as_text(), Some("hello"));
        assert!(matches!(&o.blocks[1], Block::Image(i) if i.mime_type == "image/png"));

        let err = from_mcp(CallToolResult::error(vec![ContentBlock::text(
            "no such file",
        )]));
        assert_eq!(err, RunToolOutput::error("no such file"));

        let structured = from_mcp(CallToolResult::structured(json!({"sum": 3})));
        let o = structured.output().unwrap();
        assert_eq!(
            o.metadata.as_ref().unwrap()[STRUCTURED_KEY],
            json!({"sum": 3})
        );
        assert_eq!(o.blocks.len(), 1, "the text the server sent with it");

        let empty = from_mcp(CallToolResult::success(vec![]));
        assert_eq!(
            empty.output().unwrap().blocks.len(),
            1,
            "an output always has a block"
        );
    }
}
