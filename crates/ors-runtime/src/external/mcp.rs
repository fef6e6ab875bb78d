//! MCP servers as ORS tools: [`McpToolset`] connects to an MCP server (a command over stdio,
//! or a streamable-HTTP URL) through the official Rust MCP SDK, lists its tools once at
//! start-up, and gives every episode a connection its tools' calls are forwarded to (see
//! [`super::ExternalTools`]).
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
//! - Bounded ([`McpLimits`]): one message of the server (a stdio line, an SSE event, a JSON
//!   body) is at most [`McpLimits::max_line_bytes`], and its tool listing at most
//!   [`McpLimits::max_tools`] tools and [`McpLimits::max_listing_bytes`] bytes (past those,
//!   start-up fails naming the limit). A message over the limit, or a line that is not a
//!   JSON-RPC message, breaks the connection at once: the calls waiting on it are `ok: false`
//!   naming what the server sent and the limit, and so is every later call of that episode
//!   on it (its program is stopped; a shared connection is reopened by the next episode).
//! - A command's program runs in its own process group, killed whole when its connection
//!   ends, its episode ends, or the server shuts down ([`McpToolset::close`]).
//! - The listing, and each tool's compiled input schema, are made once at start-up and
//!   shared by every episode: an episode costs its connection, whatever the number of tools.

use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ContentBlock, PaginatedRequestParams, ResourceContents,
    Tool,
};
use rmcp::service::{RoleClient, RunningService, ServiceError};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::ServiceExt;
use serde_json::Value;

use ors_core::types::{Block, JsonObject, RunToolOutput, ToolOutput, ToolSpec, STRUCTURED_KEY};

use super::error::ExternalError;
use super::http::check_url;
use super::mcp_http::McpHttpClient;
use super::mcp_stdio::{self, Broken, Process};
use crate::env::{valid_tool_name, ToolContext};
use crate::schema::InputValidator;

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

/// What one MCP server may send (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct McpLimits {
    /// One message: a line over stdio, an SSE event or a JSON body over HTTP.
    pub max_line_bytes: usize,
    /// The tools it lists.
    pub max_tools: usize,
    /// Its whole tool listing, every page, as JSON.
    pub max_listing_bytes: usize,
}

impl McpLimits {
    /// 16 MiB a message (rmcp's own default), 1 000 tools, 8 MiB of listing.
    pub const DEFAULT: Self = Self {
        max_line_bytes: 16 << 20,
        max_tools: 1000,
        max_listing_bytes: 8 << 20,
    };
}

impl Default for McpLimits {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// A bearer token sent to an MCP server over HTTP; never shown by `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub struct BearerToken(String);

impl std::fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BearerToken(..)")
    }
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
    /// What it may send.
    pub limits: McpLimits,
    /// Sent as `Authorization: Bearer TOKEN` to a server reached over HTTP.
    pub bearer_token: Option<BearerToken>,
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
            limits: McpLimits::DEFAULT,
            bearer_token: None,
        }
    }

    /// The most bytes one message of the server may have (default 16 MiB).
    pub fn max_line_bytes(mut self, bytes: usize) -> Self {
        self.limits.max_line_bytes = bytes;
        self
    }

    /// The most tools it may list (default 1 000).
    pub fn max_tools(mut self, tools: usize) -> Self {
        self.limits.max_tools = tools;
        self
    }

    /// The most bytes its tool listing may have, as JSON (default 8 MiB).
    pub fn max_listing_bytes(mut self, bytes: usize) -> Self {
        self.limits.max_listing_bytes = bytes;
        self
    }

    /// Send `Authorization: Bearer TOKEN` (a server reached over HTTP, such as `ors mcp
    /// --http`).
    pub fn bearer_token(mut self, token: impl Into<String>) -> Self {
        self.bearer_token = Some(BearerToken(token.into()));
        self
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
                [vec![name], args.clone()].concat().join(" ")
            }
            McpTransport::Url(url) => url.clone(),
        }
    }

    /// Why this server could not be started, reached or listed.
    fn failed(&self, reason: String) -> ExternalError {
        ExternalError::Mcp {
            server: self.label(),
            reason,
        }
    }

    /// Open a connection: start the program (or reach the URL) and initialize.
    async fn open(&self) -> Result<Conn, String> {
        let broken = Broken::default();
        let (served, process) = match &self.transport {
            McpTransport::Command { program, args, env } => {
                let mut cmd = tokio::process::Command::new(program);
                cmd.args(args).envs(env.iter().map(|(k, v)| (k, v)));
                let (transport, process) =
                    mcp_stdio::start(cmd, self.limits.max_line_bytes, Arc::clone(&broken))
                        .map_err(|e| format!("cannot start '{program}': {e}"))?;
                let served = ().serve(transport).await;
                if served.is_err() {
                    process.kill();
                }
                (served, Some(process))
            }
            McpTransport::Url(url) => {
                check_url(url)?;
                let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                    .max_sse_event_size(self.limits.max_line_bytes)
                    .max_json_response_size(self.limits.max_line_bytes);
                if let Some(BearerToken(token)) = &self.bearer_token {
                    config = config.auth_header(token.clone());
                }
                let transport = StreamableHttpClientTransport::with_client(
                    McpHttpClient::new(Arc::clone(&broken)),
                    config,
                );
                (().serve(transport).await, None)
            }
        };
        let client = served.map_err(|e| match broken.get() {
            Some(reason) => format!("the server {reason}"),
            None => e.to_string(),
        })?;
        Ok(Conn {
            client,
            label: self.label(),
            broken,
            process,
        })
    }
}

/// Split a command line into words; quotes group words with spaces.
fn split_words(line: &str) -> Result<Vec<String>, ExternalError> {
    let mut words = Vec::new();
    // The word being read (`Some("")` after an empty quoted word), and the open quote.
    let mut word: Option<String> = None;
    let mut quote: Option<char> = None;
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (None, '\'' | '"') => {
                quote = Some(c);
                word.get_or_insert_with(String::new);
            }
            (None, c) if c.is_whitespace() => words.extend(word.take()),
            (_, c) => word.get_or_insert_with(String::new).push(c),
        }
    }
    if quote.is_some() {
        return Err(ExternalError::Config(format!(
            "the MCP command has an unclosed quote: {line}"
        )));
    }
    words.extend(word);
    Ok(words)
}

/// A running MCP client connection.
type Client = RunningService<RoleClient, ()>;

/// One MCP connection, shared by the tools of an episode (or of every episode). Dropping the
/// last handle ends it (and its program: see [`Process::end`]).
pub(crate) struct Conn {
    client: Client,
    label: String,
    /// Set when this side broke the connection (a message over the limit, or not JSON-RPC).
    broken: Broken,
    /// A command's program.
    process: Option<Arc<Process>>,
}

impl Conn {
    fn alive(&self) -> bool {
        self.broken.get().is_none()
            && !self.client.is_closed()
            && !self.client.is_transport_closed()
    }

    /// `ok: false` for a call that cannot be made, or was not answered, because the
    /// connection broke.
    fn broken_call(&self, tool: &str) -> Option<RunToolOutput> {
        let reason = self.broken.get()?;
        Some(RunToolOutput::error(format!(
            "the MCP server '{}' {reason}, so the call of '{tool}' failed; the connection is \
             closed, so this episode's other calls of its tools fail too (a new episode \
             connects again)",
            self.label
        )))
    }

    pub(crate) async fn call(
        &self,
        ctx: &ToolContext,
        tool: &str,
        input: JsonObject,
    ) -> RunToolOutput {
        if let Some(out) = self.broken_call(tool) {
            return out;
        }
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(input);
        let error = tokio::select! {
            r = self.client.call_tool(params) => match r {
                Ok(result) => return from_mcp(result),
                Err(e) => e,
            },
            () = ctx.cancelled() => {
                return RunToolOutput::error(format!("the call of MCP tool '{tool}' was cancelled"))
            }
        };
        if let Some(out) = self.broken_call(tool) {
            self.stop();
            return out;
        }
        match error {
            ServiceError::TransportClosed | ServiceError::TransportSend(_) => {
                // The program exited or crashed: nothing of its group stays.
                if let Some(process) = &self.process {
                    process.kill();
                }
                RunToolOutput::error(format!(
                    "the MCP server '{}' is not running (it exited or crashed), so tool '{tool}' \
                     cannot run in this episode; a new episode starts it again",
                    self.label
                ))
            }
            ServiceError::McpError(e) => RunToolOutput::error(format!(
                "the MCP server '{}' refused the call of '{tool}': {}",
                self.label, e.message
            )),
            e => RunToolOutput::error(format!(
                "the call of MCP tool '{tool}' on '{}' failed: {e}",
                self.label
            )),
        }
    }

    /// End the connection: its service stops, which ends its program.
    fn stop(&self) {
        self.client.cancellation_token().cancel();
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.stop();
    }
}

/// An MCP tool result as an ORS result.
pub fn from_mcp(result: CallToolResult) -> RunToolOutput {
    let mut blocks: Vec<Block> = result.content.iter().map(block).collect();
    if result.is_error == Some(true) {
        let text: Vec<&str> = blocks.iter().filter_map(Block::as_text).collect();
        if text.is_empty() {
            return RunToolOutput::error("the MCP tool failed without a message");
        }
        return RunToolOutput::error(text.join("\n"));
    }
    let metadata = result.structured_content.map(|value| {
        if blocks.is_empty() {
            blocks.push(Block::text(value.to_string()));
        }
        JsonObject::from_iter([(STRUCTURED_KEY.to_owned(), value)])
    });
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
    let cleaned = name.replace(
        |c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'),
        "_",
    );
    format!("{prefix}{cleaned}")
}

/// One tool of the server: its ORS spec, its compiled input schema, and the name the MCP
/// server knows it by. Made once, at start-up.
#[derive(Debug)]
pub(crate) struct McpTool {
    pub(crate) mcp_name: String,
    pub(crate) spec: ToolSpec,
    pub(crate) validator: Arc<InputValidator>,
}

/// The tools of one MCP server, listed at start-up (see the module docs).
pub struct McpToolset {
    server: McpServer,
    tools: Vec<McpTool>,
    /// The shared connection ([`Connection::Shared`]); reopened when it died.
    shared: tokio::sync::Mutex<Option<Arc<Conn>>>,
    /// The programs started and not ended yet, so [`McpToolset::close`] can end them.
    programs: Mutex<Vec<std::sync::Weak<Process>>>,
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

/// Every tool the server lists, page by page, within its limits.
async fn list_tools(client: &Client, limits: McpLimits) -> Result<Vec<Tool>, String> {
    let mut tools: Vec<Tool> = Vec::new();
    let mut bytes = 0usize;
    let mut cursor = None;
    loop {
        let params = PaginatedRequestParams::default().with_cursor(cursor);
        let page = client.list_tools(Some(params)).await;
        let page = page.map_err(|e| format!("listing its tools: {e}"))?;
        if tools.len().saturating_add(page.tools.len()) > limits.max_tools {
            return Err(format!(
                "it lists more than {} tools, the limit (McpServer::max_tools); serve fewer, \
                 or raise the limit",
                limits.max_tools
            ));
        }
        for tool in &page.tools {
            bytes = bytes.saturating_add(serde_json::to_vec(tool).map_or(0, |v| v.len()));
        }
        if bytes > limits.max_listing_bytes {
            return Err(format!(
                "its tool listing is more than {} bytes, the limit \
                 (McpServer::max_listing_bytes)",
                limits.max_listing_bytes
            ));
        }
        tools.extend(page.tools);
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return Ok(tools),
        }
    }
}

impl McpToolset {
    /// Connect to the server and list its tools (once: a server whose tools change later is
    /// still served the start-up list). Fails naming the server when it cannot be started
    /// or reached, when its listing is over the limits, or when a tool's name or schema
    /// cannot be an ORS tool's.
    pub async fn connect(server: McpServer) -> Result<Self, ExternalError> {
        let mut toolset = Self {
            tools: Vec::new(),
            shared: tokio::sync::Mutex::new(None),
            programs: Mutex::new(Vec::new()),
            server,
        };
        let conn = toolset.open().await?;
        let failed = |reason| toolset.server.failed(reason);
        let (prefix, limits) = (&toolset.server.prefix, toolset.server.limits);
        let listed = list_tools(&conn.client, limits).await;
        let listed = listed.map_err(|e| match conn.broken.get() {
            Some(reason) => failed(format!("listing its tools: the server {reason}")),
            None => failed(e),
        })?;
        let tools = listed.into_iter().map(|t| ors_tool(prefix, t));
        toolset.tools = tools.collect::<Result<_, _>>().map_err(failed)?;
        if toolset.server.connection == Connection::Shared {
            *toolset.shared.get_mut() = Some(conn);
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

    /// Its tools, made at start-up.
    pub(crate) fn tools(&self) -> &[McpTool] {
        &self.tools
    }

    /// The connection of a new episode: one of its own, or the shared one (opened again when
    /// the server died since).
    pub(crate) async fn connection(&self) -> Result<Arc<Conn>, ExternalError> {
        if self.server.connection == Connection::PerSession {
            return self.open().await;
        }
        let mut shared = self.shared.lock().await;
        if let Some(conn) = shared.as_ref().filter(|c| c.alive()) {
            return Ok(Arc::clone(conn));
        }
        if shared.is_some() {
            tracing::warn!(server = %self.server.label(), "the shared MCP connection died; reopening it");
        }
        let conn = self.open().await?;
        *shared = Some(Arc::clone(&conn));
        Ok(conn)
    }

    /// A new connection, its program (if it has one) remembered for [`McpToolset::close`].
    async fn open(&self) -> Result<Arc<Conn>, ExternalError> {
        let opened = self.server.open().await;
        let conn = opened.map_err(|reason| self.server.failed(reason))?;
        if let (Some(process), Ok(mut all)) = (&conn.process, self.programs.lock()) {
            all.retain(|w| w.strong_count() > 0);
            all.push(Arc::downgrade(process));
        }
        Ok(Arc::new(conn))
    }

    /// End every connection still open (at server shutdown), whatever still holds it: each
    /// program gets its input closed and a short grace to exit, then its process group is
    /// killed. Returns once they are all gone (within a few seconds).
    pub async fn close(&self) {
        if let Some(shared) = self.shared.lock().await.take() {
            shared.stop();
        }
        let programs: Vec<Arc<Process>> = self
            .programs
            .lock()
            .map(|mut o| o.drain(..).filter_map(|w| w.upgrade()).collect())
            .unwrap_or_default();
        futures_util::future::join_all(programs.iter().map(|p| p.end())).await;
    }
}

/// An MCP tool as an ORS tool: its name prefixed and cleaned, its schema compiled.
fn ors_tool(prefix: &str, tool: Tool) -> Result<McpTool, String> {
    let name = ors_name(prefix, &tool.name);
    if !valid_tool_name(&name) {
        return Err(format!(
            "its tool '{}' cannot be served as '{name}': an ORS tool name is 1 to 64 \
             characters from `A-Z a-z 0-9 _ -`",
            tool.name
        ));
    }
    let schema = Value::Object(Arc::unwrap_or_clone(tool.input_schema));
    let (validator, schema) = InputValidator::from_value(schema)
        .map_err(|e| format!("the input schema of its tool '{}': {e}", tool.name))?;
    let description = match tool.description.as_deref().filter(|d| !d.trim().is_empty()) {
        Some(d) => d.to_owned(),
        None => format!("The MCP tool '{}'", tool.name),
    };
    Ok(McpTool {
        mcp_name: tool.name.to_string(),
        spec: ToolSpec::new(name, description, Some(schema)),
        validator: Arc::new(validator),
    })
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
