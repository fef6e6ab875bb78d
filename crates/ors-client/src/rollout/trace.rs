//! The model's side of a trajectory ([`super::Episode::agent`]): the conversation, in a form of
//! its own that each model API's format is made from, and the model calls, as an agent
//! records them.

use ors_core::{Block, JsonObject};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A tool call the model asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ToolCall {
    /// The id linking the call to its result (the API's, or made up when it sent none).
    pub id: String,
    /// The tool name.
    pub name: String,
    /// The arguments exactly as the model wrote them (JSON text, which may be malformed).
    pub arguments: String,
}

/// One message of the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    /// The system prompt.
    System {
        /// Its text.
        content: String,
    },
    /// The user: the environment's prompt first, then any nudge.
    User {
        /// Text and image blocks.
        content: Vec<Block>,
    },
    /// The model.
    Assistant {
        /// What it wrote, if anything.
        #[serde(default)]
        content: Option<String>,
        /// The tools it called, in order.
        #[serde(default)]
        tool_calls: Vec<ToolCall>,
    },
    /// The result of one tool call.
    Tool {
        /// The id of the call.
        tool_call_id: String,
        /// The tool's name.
        name: String,
        /// Its output (or the error) as blocks.
        content: Vec<Block>,
        /// Whether the call failed (a tool error, a crash, arguments that were not JSON).
        #[serde(default)]
        is_error: bool,
    },
}

/// Tokens used.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Usage {
    /// Tokens read (the prompt).
    pub input_tokens: u64,
    /// Tokens written (the completion).
    pub output_tokens: u64,
}

impl Usage {
    /// Input and output together.
    pub fn total(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }

    pub(crate) fn add(&mut self, other: Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
    }
}

/// One request to the model, as recorded.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ModelCall {
    /// The step it was made in, from 1.
    pub step: usize,
    /// Time to the answer, retries included, in milliseconds.
    pub latency_ms: f64,
    /// Attempts made (1 without retries).
    pub attempts: u32,
    /// Tokens used, when the API said.
    #[serde(default)]
    pub usage: Option<Usage>,
    /// Why the model stopped (`stop`, `tool_calls`, `length`, `end_turn`, `tool_use`, ...).
    #[serde(default)]
    pub finish_reason: Option<String>,
    /// The response's id.
    #[serde(default)]
    pub response_id: Option<String>,
    /// The log-probabilities of the completion as the server returned them (OpenAI-style
    /// `logprobs`, when asked for with `logprobs: true`).
    #[serde(default)]
    pub logprobs: Option<Value>,
    /// The completion's token ids (vLLM with `return_token_ids: true`).
    #[serde(default)]
    pub token_ids: Option<Vec<u64>>,
    /// The prompt's token ids (vLLM with `return_token_ids: true`).
    #[serde(default)]
    pub prompt_token_ids: Option<Vec<u64>>,
}

/// The model's side of an episode, recorded in the trajectory by an [`crate::Agent`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct AgentTrace {
    /// The API spoken: `openai` or `anthropic`.
    pub api: String,
    /// The model server's base URL.
    pub base_url: String,
    /// The model name.
    pub model: String,
    /// The sampling options sent.
    pub sampling: Sampling,
    /// The whole conversation, in order.
    pub messages: Vec<Message>,
    /// Every model request, in order.
    pub model_calls: Vec<ModelCall>,
    /// The tokens of all model calls.
    pub usage: Usage,
}

/// The sampling options of the model requests.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Sampling {
    /// `temperature`, when set.
    #[serde(default)]
    pub temperature: Option<f64>,
    /// The completion token limit, when set.
    #[serde(default)]
    pub max_tokens: Option<u32>,
    /// Other body fields passed through as given.
    #[serde(default)]
    pub extra: JsonObject,
}
