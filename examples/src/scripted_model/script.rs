//! What a script sees of a valid request, in either API, and what it answers.

use std::time::Duration;

use serde_json::Value;

/// The API a request came in on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// OpenAI Chat Completions.
    OpenAi,
    /// Anthropic Messages.
    Anthropic,
}

/// A tool result the model is reading, in either API.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    /// Its text (text parts joined).
    pub text: String,
    /// Image parts it carried (Anthropic `image` blocks inside the result; for OpenAI, image
    /// parts of the user message that follows the tool messages).
    pub images: usize,
    /// Whether it was marked as an error (Anthropic's `is_error`; OpenAI has no such flag).
    pub is_error: bool,
}

/// What the script sees of a (valid) request.
#[derive(Debug, Clone)]
pub struct Exchange {
    /// The API.
    pub api: Api,
    /// The model asked for.
    pub model: String,
    /// The text of the first user message.
    pub first_user_text: String,
    /// Image parts in user messages (tool results' images not counted).
    pub user_images: usize,
    /// Assistant turns so far.
    pub assistant_turns: usize,
    /// The results answering the last assistant turn, in order (empty if it called no tool).
    pub tool_results: Vec<ToolResult>,
    /// The text of the last message when it is a plain user message (a nudge), else empty.
    pub last_user_text: String,
    /// The names of the tools offered.
    pub tools: Vec<String>,
    /// The request body.
    pub body: Value,
    /// Its size in bytes.
    pub request_bytes: usize,
    /// Requests this server received before this one.
    pub request_index: usize,
}

impl Exchange {
    /// A request on `api` for `model` offering `tools`, before its messages are read.
    pub(super) fn new(api: Api, model: &str, tools: Vec<String>) -> Self {
        Self {
            api,
            model: model.to_owned(),
            first_user_text: String::new(),
            user_images: 0,
            assistant_turns: 0,
            tool_results: Vec::new(),
            last_user_text: String::new(),
            tools,
            body: Value::Null,
            request_bytes: 0,
            request_index: 0,
        }
    }
}

/// What the script answers.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// Call these tools, in order: `(name, arguments as JSON text)`. The arguments go out
    /// verbatim on OpenAI (so they may be malformed); on Anthropic they must be an object.
    Tools(Vec<(String, String)>),
    /// Answer with text and no tool call.
    Text(String),
    /// Fail with this status and message, in the API's error shape, with `Retry-After`
    /// (seconds) and `retry-after-ms` headers when given.
    Error {
        /// The status.
        status: u16,
        /// The message.
        message: String,
        /// The delay to ask for.
        retry_after: Option<Duration>,
    },
}

impl Reply {
    /// One call of `name` with `arguments`.
    pub fn call(name: &str, arguments: Value) -> Self {
        Reply::Tools(vec![(name.to_owned(), arguments.to_string())])
    }
}
