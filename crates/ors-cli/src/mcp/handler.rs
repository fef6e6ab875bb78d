//! The MCP server of one episode: tools, the `task` prompt and resource, and how ORS results
//! become MCP results.

use std::borrow::Cow;
use std::sync::Arc;

use ors_client::{Block, Blocks, RunToolOutput, ToolSpec};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorCode,
    GetPromptRequestParams, GetPromptResponse, GetPromptResult, Implementation,
    InitializeRequestParams, InitializeResult, JsonObject, ListPromptsResult, ListResourcesResult,
    ListToolsResult, PaginatedRequestParams, Prompt, PromptMessage, ProtocolVersion,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
    ResourceContents, Role, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{json, Value};

use super::episode::{Episode, EpisodeError};

/// The name of the prompt (and resource) holding the episode's task.
pub const PROMPT_NAME: &str = "task";

/// The key of a tool result's `_meta` under which reward and finished are repeated.
pub const META_KEY: &str = "ors";

/// Which MCP protocol eras the server offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Eras {
    /// Every version rmcp knows: the stdio server, where the connection is the session.
    All,
    /// Only versions with the `initialize` handshake: over HTTP an ORS episode belongs to an
    /// MCP session (`Mcp-Session-Id`), which the stateless 2026-07-28 era no longer has. A
    /// client probing `server/discover` sees no modern version and falls back to `initialize`.
    Handshake,
}

/// The MCP server of one episode. Cheap to clone (rmcp may hold several handles).
#[derive(Clone)]
pub struct EpisodeServer {
    episode: Arc<Episode>,
    eras: Eras,
    _closing: Option<Arc<Closing>>,
}

/// Closes an episode (deleting its ORS session) when the last handle of its server is dropped.
struct Closing(Arc<Episode>);

impl Drop for Closing {
    fn drop(&mut self) {
        let episode = Arc::clone(&self.0);
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move { episode.close().await });
        }
    }
}

impl EpisodeServer {
    /// A server for `episode`.
    pub fn new(episode: Arc<Episode>, eras: Eras) -> Self {
        Self {
            episode,
            eras,
            _closing: None,
        }
    }

    /// This server closing its episode when rmcp drops it: over HTTP, when the MCP session is
    /// deleted by the client, expires, or ends at shutdown.
    pub fn closing_on_drop(mut self) -> Self {
        self._closing = Some(Arc::new(Closing(Arc::clone(&self.episode))));
        self
    }

    fn resource_uri(&self) -> String {
        format!("ors://{}/{PROMPT_NAME}", self.episode.env_name())
    }

    /// What the `task` prompt is.
    fn task_description(&self) -> String {
        format!("The task of this episode of '{}'", self.episode.env_name())
    }
}

/// The JSON-RPC error of an `initialize` refused because every slot is taken (JSON-RPC's
/// range for server errors).
pub const FULL: ErrorCode = ErrorCode(-32000);

/// An MCP error for a failure outside any tool.
fn mcp_error(e: EpisodeError) -> ErrorData {
    let (code, data) = match e {
        EpisodeError::Finished => (ErrorCode::INVALID_REQUEST, None),
        EpisodeError::Full(max) => (FULL, Some(json!({ "max_sessions": max }))),
        EpisodeError::Ors(_) => (ErrorCode::INTERNAL_ERROR, None),
    };
    ErrorData::new(code, e.to_string(), data)
}

/// An ORS tool as an MCP tool: name, description and input schema unchanged. A tool without
/// input gets the empty object schema (MCP requires one). The ORS `output_schema` describes
/// `metadata.structured`, not the structured content sent here, so it is not declared: MCP
/// clients validate `structuredContent` against a declared `outputSchema`.
pub fn mcp_tool(spec: &ToolSpec) -> Tool {
    let schema = spec.input_schema.clone();
    let schema = Arc::new(schema.unwrap_or_else(ors_core::provider::empty_object_schema));
    Tool::new(spec.name.clone(), spec.description.clone(), schema)
}

/// ORS blocks as MCP content: text as text, images as images.
pub fn mcp_content(blocks: &Blocks) -> Vec<ContentBlock> {
    blocks
        .iter()
        .map(|b| match b {
            Block::Text(t) => ContentBlock::text(t.text.clone()),
            Block::Image(i) => ContentBlock::image(i.data.clone(), i.mime_type.clone()),
        })
        .collect()
}

/// An ORS result as an MCP tool result: the blocks as content, `isError` for `ok: false`, and
/// reward and finished in the structured content and in `_meta.ors` (with the ORS session id,
/// to find the episode in the environment's logs).
pub fn mcp_result(out: &RunToolOutput, sid: &str) -> CallToolResult {
    let (mut result, o) = match out {
        RunToolOutput::Success(o) => (CallToolResult::success(mcp_content(&o.blocks)), Some(o)),
        RunToolOutput::Error(err) => (
            CallToolResult::error(vec![ContentBlock::text(err.error.clone())]),
            None,
        ),
    };
    let (reward, finished) = (o.and_then(|o| o.reward), o.is_some_and(|o| o.finished));
    // `{"reward": r, "finished": f}`, plus the output's `metadata` when it has one.
    let mut summary = json!({"reward": reward, "finished": finished});
    if let Some(metadata) = o.and_then(|o| o.metadata.clone()) {
        summary["metadata"] = Value::Object(metadata);
    }
    let ors = json!({"reward": reward, "finished": finished, "session_id": sid});
    result.meta = Some(JsonObject::from_iter([(META_KEY.into(), ors)]).into());
    result.structured_content = Some(summary);
    result
}

impl ServerHandler for EpisodeServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_prompts()
                .enable_resources()
                .build(),
        )
        .with_server_info(Implementation::new("ors-mcp", env!("CARGO_PKG_VERSION")))
        .with_instructions(format!(
            "One episode of the ORS environment '{}'. Read the `{PROMPT_NAME}` prompt, then \
             call the tools; the episode ends when a result says finished (structuredContent \
             and _meta.{META_KEY} carry reward and finished).",
            self.episode.env_name()
        ))
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        let all = ProtocolVersion::KNOWN_VERSIONS;
        match self.eras {
            Eras::All => Cow::Borrowed(all),
            Eras::Handshake => all.iter().filter(|v| v.has_initialize()).cloned().collect(),
        }
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        let _busy = self.episode.busy();
        // The handshake is where the episode starts: a task that cannot be created fails it,
        // naming why, instead of the first tool call.
        self.episode.session().await.map_err(mcp_error)?;
        context.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let _busy = self.episode.busy();
        let tools = self.episode.tools().await.map_err(mcp_error)?;
        Ok(ListToolsResult::with_all_items(
            tools.iter().map(mcp_tool).collect(),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let _busy = self.episode.busy();
        let input = request.arguments.map(Value::Object).unwrap_or(json!({}));
        let started = std::time::Instant::now();
        match self.episode.call(&request.name, input).await {
            Ok((out, sid)) => {
                tracing::info!(
                    sid = %sid,
                    env = self.episode.env_name(),
                    tool = %request.name,
                    ok = out.is_ok(),
                    duration_ms = started.elapsed().as_millis() as u64,
                    "tool call"
                );
                Ok(mcp_result(&out, &sid).into())
            }
            Err(e @ (EpisodeError::Finished | EpisodeError::Full(_))) => Err(mcp_error(e)),
            // The server or the connection failed: the agent sees why, as a tool error.
            Err(EpisodeError::Ors(e)) => {
                let why = ContentBlock::text(format!("the ORS call failed: {e}"));
                Ok(CallToolResult::error(vec![why]).into())
            }
        }
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let _busy = self.episode.busy();
        let prompt = Prompt::new(PROMPT_NAME, Some(self.task_description()), None);
        Ok(ListPromptsResult::with_all_items(vec![prompt]))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let _busy = self.episode.busy();
        let name = &request.name;
        if name != PROMPT_NAME {
            return Err(ErrorData::invalid_params(
                format!("unknown prompt '{name}'; the prompt is '{PROMPT_NAME}'"),
                None,
            ));
        }
        let blocks = self.episode.prompt().await.map_err(mcp_error)?;
        let message = |c| PromptMessage::new(Role::User, c);
        let messages = mcp_content(&blocks).into_iter().map(message).collect();
        Ok(GetPromptResult::new(messages)
            .with_description(self.task_description())
            .into())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let _busy = self.episode.busy();
        let resource = Resource::new(self.resource_uri(), PROMPT_NAME)
            .with_description("The episode's prompt (its task)")
            .with_mime_type("text/plain");
        Ok(ListResourcesResult::with_all_items(vec![resource]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let _busy = self.episode.busy();
        let uri = self.resource_uri();
        let asked = &request.uri;
        if *asked != uri {
            return Err(ErrorData::resource_not_found(
                format!("unknown resource '{asked}'; the resource is '{uri}'"),
                None,
            ));
        }
        let blocks = self.episode.prompt().await.map_err(mcp_error)?;
        let contents = blocks
            .iter()
            .map(|b| match b {
                Block::Text(t) => ResourceContents::text(t.text.clone(), uri.clone()),
                Block::Image(i) => ResourceContents::BlobResourceContents {
                    uri: uri.clone(),
                    mime_type: Some(i.mime_type.clone()),
                    blob: i.data.clone(),
                    meta: None,
                },
            })
            .collect();
        Ok(ReadResourceResult::new(contents).into())
    }
}
