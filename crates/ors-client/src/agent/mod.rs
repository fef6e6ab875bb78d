//! The agent loop: a language model playing episodes through its API's tool calling.
//!
//! An [`Agent`] is a [`Policy`], so [`crate::evaluate`] runs it like any other. Per episode:
//! the prompt becomes the first user message (text and images); the session's tools become
//! the model's tools (through [`ors_core::provider`]); each answer's tool calls are made on the
//! session in order, and each result goes back as the API's tool-result message (images too).
//! Arguments that are not a JSON object go back as an error result for the model to fix. The
//! episode ends when a call says `finished`, when the model answers without a tool call, at
//! the step limit, or when the token budget is spent. An answer without a tool call goes to
//! the environment's terminal tool when its tools listing names one (its text in the tool's
//! one input field, as openreward's harness does; the call is the trajectory's last, its
//! reward the episode's); without one the episode stops there (or, with [`OnText::Nudge`],
//! the model is told to go on). The whole exchange is kept in the trajectory
//! ([`AgentTrace`]).
//!
//! ```no_run
//! use std::sync::Arc;
//! use ors_client::{evaluate, Agent, Api, Client, EvalOptions, ModelOptions};
//!
//! # async fn run() -> Result<(), ors_client::Error> {
//! let client = Client::new("http://127.0.0.1:8080")?;
//! // vLLM serving Qwen; OpenAI itself would be https://api.openai.com/v1 (key: OPENAI_API_KEY).
//! let model = ModelOptions::new(Api::OpenAi, "http://127.0.0.1:8000/v1", "Qwen/Qwen3-8B")
//!     .temperature(0.6)
//!     .connect(&client)?;
//! let agent = Arc::new(Agent::new(model));
//! let env = client.environment("gsm8k");
//! let report = evaluate(&env, "test", 0..50, agent, EvalOptions::default().max_steps(8)).await;
//! println!("mean reward {}", report.mean_reward());
//! for episode in &report.episodes {
//!     println!("{}", serde_json::to_string(episode).unwrap()); // one trajectory per line
//! }
//! # Ok(())
//! # }
//! ```

mod anthropic;
mod model;
mod openai;

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use futures_util::future::BoxFuture;
use http::header::{HeaderName, HeaderValue, AUTHORIZATION};
use ors_core::provider::Provider;
use ors_core::{Block, ToolSpec};
use serde_json::Value;

use crate::call::object_input;
use crate::client::Client;
use crate::error::Result;
use crate::http::secret_header;
use crate::rollout::{Action, Call, Observation, Outcome, Policy, PolicyError, StopReason, Turn};
use model::Endpoint;

pub use anthropic::{ANTHROPIC_VERSION, DEFAULT_MAX_TOKENS as ANTHROPIC_DEFAULT_MAX_TOKENS};
pub use model::{
    Api, ChatModel, ChatRequest, ModelInfo, ModelOptions, ModelReply, DEFAULT_MAX_RESPONSE_BYTES,
};
// The conversation and its record belong to the trajectory (rollout/trace.rs); these are the
// agent's words too.
pub use crate::rollout::trace::{AgentTrace, Message, ModelCall, Sampling, ToolCall, Usage};

// Here, above both implementations, so that the model's vocabulary (model.rs) needs neither.
impl ModelOptions {
    /// The model these options describe, sending through `client`'s transport (so its TLS
    /// roots, CA file and limits apply to the model server too).
    pub fn connect(self, client: &Client) -> Result<Arc<dyn ChatModel>> {
        let mut endpoint = Endpoint::new(client, self)?;
        if endpoint.opts.api == Api::Anthropic {
            endpoint.headers.push((
                HeaderName::from_static("anthropic-version"),
                HeaderValue::from_static(ANTHROPIC_VERSION),
            ));
        }
        if let Some(key) = &endpoint.opts.api_key {
            let (name, value) = match endpoint.opts.api {
                Api::OpenAi => (AUTHORIZATION, format!("Bearer {key}")),
                Api::Anthropic => (HeaderName::from_static("x-api-key"), key.clone()),
            };
            let value = secret_header(&value, "the model API key")?;
            endpoint.headers.push((name, value));
        }
        Ok(Arc::new(endpoint))
    }
}

impl ChatModel for Endpoint {
    fn provider(&self) -> Provider {
        self.opts.api.provider()
    }

    fn info(&self) -> ModelInfo {
        ModelInfo {
            api: self.opts.api.as_str().to_owned(),
            base_url: self.opts.base_url.clone(),
            model: self.opts.model.clone(),
            sampling: self.opts.sampling(),
        }
    }

    fn complete<'a>(&'a self, req: ChatRequest<'a>) -> BoxFuture<'a, Result<ModelReply>> {
        Box::pin(async move {
            match self.opts.api {
                Api::OpenAi => {
                    let body = openai::request_body(&self.opts, &req);
                    self.post("/chat/completions", &body, openai::reply).await
                }
                Api::Anthropic => {
                    let body = anthropic::request_body(&self.opts, &req);
                    self.post("/v1/messages", &body, anthropic::reply).await
                }
            }
        })
    }
}

/// The nudge of [`OnText::nudge`].
pub const DEFAULT_NUDGE: &str = "Continue the task by calling one of the tools.";

/// What the agent does when the model answers without calling a tool.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum OnText {
    /// End the episode ([`StopReason::NoToolCall`]).
    #[default]
    Stop,
    /// Reply with this user message and ask again (each answer counts as a step).
    Nudge(String),
}

impl OnText {
    /// Nudge with [`DEFAULT_NUDGE`].
    pub fn nudge() -> Self {
        OnText::Nudge(DEFAULT_NUDGE.to_owned())
    }
}

/// How an [`Agent`] plays.
#[derive(Debug, Clone, Default)]
pub struct AgentOptions {
    /// A system prompt, sent before the environment's prompt.
    pub system: Option<String>,
    /// What to do when the model answers without a tool call and the environment has no
    /// terminal tool (with one, the answer goes to it).
    pub on_text: OnText,
    /// End the episode once the model has read and written this many tokens in all.
    pub token_budget: Option<u64>,
}

/// A language model as a [`Policy`].
pub struct Agent {
    model: Arc<dyn ChatModel>,
    options: AgentOptions,
    /// The last tool list converted to the model's format: episodes of one environment
    /// usually share it, and converting schemas is work.
    tools: Mutex<Option<ConvertedTools>>,
}

/// Tool specs and their conversion to a model's format.
type ConvertedTools = (Vec<ToolSpec>, Arc<[Value]>);

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("model", &self.model.info())
            .field("options", &self.options)
            .finish()
    }
}

impl Agent {
    /// An agent of `model` with the default options (stop on an answer without tools, no
    /// system prompt, no token budget).
    pub fn new(model: Arc<dyn ChatModel>) -> Self {
        Self::with_options(model, AgentOptions::default())
    }

    /// An agent of `model` playing by `options`.
    pub fn with_options(model: Arc<dyn ChatModel>, options: AgentOptions) -> Self {
        Self {
            model,
            options,
            tools: Mutex::new(None),
        }
    }

    /// `specs` in the model's tool format (from the cache when they are the last ones seen).
    fn tools_for(&self, specs: &[ToolSpec]) -> Arc<[Value]> {
        // The cache is only ever replaced whole, so a poisoned one is still sound.
        let mut cache = self.tools.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, converted)) = cache.as_ref().filter(|(seen, _)| seen == specs) {
            return Arc::clone(converted);
        }
        let converted: Arc<[Value]> = self.model.provider().tools(specs).into();
        *cache = Some((specs.to_vec(), Arc::clone(&converted)));
        converted
    }

    /// Its model.
    pub fn model(&self) -> &Arc<dyn ChatModel> {
        &self.model
    }
}

/// A call of the last answer, waiting for its result.
#[derive(Debug)]
struct Pending {
    id: String,
    name: String,
    /// Why it was not made (its arguments were not a JSON object), to tell the model; else it
    /// was made on the session and its result is in the history.
    refused: Option<String>,
}

/// What an [`Agent`] keeps during one episode: the conversation and the record of its model
/// calls.
#[derive(Debug)]
pub struct AgentState {
    tools: Arc<[Value]>,
    messages: Vec<Message>,
    calls: Vec<ModelCall>,
    usage: Usage,
    pending: Vec<Pending>,
    pending_step: usize,
}

impl AgentState {
    /// The results of the last answer's calls, as tool messages, in the order of the calls.
    /// Calls never made (the episode ended first) get none.
    fn answer_pending(&mut self, history: &[Turn]) {
        let mut made = history.iter().filter(|t| t.step == self.pending_step);
        let error = |text: String| (vec![Block::text(text)], true);
        for Pending { id, name, refused } in std::mem::take(&mut self.pending) {
            let (content, is_error) = match refused {
                Some(why) => error(format!(
                    "Error: the arguments of {name} are not a JSON object ({why}). Call {name} \
                     again with valid JSON arguments."
                )),
                None => {
                    let Some(turn) = made.next() else { break };
                    match &turn.outcome {
                        Outcome::Output(o) if o.blocks.is_empty() => {
                            (vec![Block::text("(no output)")], false)
                        }
                        Outcome::Output(o) => (o.blocks.clone(), false),
                        Outcome::ToolError(m) => error(format!("Error: {m}")),
                        Outcome::Crashed(m) => error(format!("The tool crashed: {m}")),
                    }
                }
            };
            self.messages.push(Message::Tool {
                tool_call_id: id,
                name,
                content,
                is_error,
            });
        }
    }
}

/// The input of a call from the model's argument text: a JSON object (empty text or `null`
/// mean no input).
fn parse_arguments(text: &str) -> Result<Value, String> {
    let text = if text.trim().is_empty() { "null" } else { text };
    let value = serde_json::from_str(text).map_err(|e| format!("invalid JSON: {e}"))?;
    object_input(value).map_err(|kind| format!("got {kind}"))
}

impl Policy for Agent {
    type State = AgentState;

    fn start(&self, obs: Observation<'_>) -> AgentState {
        let mut messages = Vec::with_capacity(8);
        let system = self.options.system.clone();
        messages.extend(system.map(|content| Message::System { content }));
        messages.push(Message::User {
            content: obs.prompt.to_vec(),
        });
        AgentState {
            tools: self.tools_for(obs.tools),
            messages,
            calls: Vec::new(),
            usage: Usage::default(),
            pending: Vec::new(),
            pending_step: 0,
        }
    }

    async fn act(
        &self,
        state: &mut AgentState,
        obs: Observation<'_>,
    ) -> Result<Action, PolicyError> {
        state.answer_pending(obs.history);
        let spent = state.usage.total();
        if self
            .options
            .token_budget
            .is_some_and(|budget| spent >= budget)
        {
            return Ok(Action::Stop(StopReason::TokenBudget));
        }
        let step = obs.steps + 1;
        let started = Instant::now();
        let request = ChatRequest {
            messages: &state.messages,
            tools: &state.tools,
        };
        let reply = self.model.complete(request).await?;
        let mut record = reply.record;
        record.step = step;
        record.latency_ms = started.elapsed().as_secs_f64() * 1e3;
        if let Some(u) = record.usage {
            state.usage.add(u);
        }
        state.calls.push(record);

        // Ids link results to calls: make up the missing and repeated ones.
        let mut tool_calls = reply.tool_calls;
        let mut seen = HashSet::new();
        for (i, c) in tool_calls.iter_mut().enumerate() {
            if c.id.is_empty() || !seen.insert(c.id.clone()) {
                c.id = format!("call_{step}_{i}");
                seen.insert(c.id.clone());
            }
        }
        state.messages.push(Message::Assistant {
            content: reply.content.clone(),
            tool_calls: tool_calls.clone(),
        });
        if tool_calls.is_empty() {
            // A plain answer goes to the terminal tool (PROTOCOL_NOTES row `terminal-tool`), as
            // openreward's harness does: its text in the tool's one field.
            if let Some(term) = obs.terminal_tool {
                let input = term.input(reply.content.as_deref().unwrap_or(""));
                return Ok(Action::Final(Call::new(&term.name, input)));
            }
            return Ok(match &self.options.on_text {
                OnText::Stop => Action::Stop(StopReason::NoToolCall),
                OnText::Nudge(text) => {
                    state.messages.push(Message::User {
                        content: vec![Block::text(text)],
                    });
                    Action::Calls(Vec::new())
                }
            });
        }
        let mut calls = Vec::with_capacity(tool_calls.len());
        state.pending_step = step;
        for c in tool_calls {
            // A call whose arguments are refused is not made; the model hears why.
            let refused = parse_arguments(&c.arguments)
                .map(|input| calls.push(Call::new(&c.name, input).with_id(&c.id)))
                .err();
            state.pending.push(Pending {
                id: c.id,
                name: c.name,
                refused,
            });
        }
        Ok(Action::Calls(calls))
    }

    fn finish(&self, mut state: AgentState, obs: Observation<'_>) -> Option<AgentTrace> {
        state.answer_pending(obs.history);
        let info = self.model.info();
        Some(AgentTrace {
            api: info.api,
            base_url: info.base_url,
            model: info.model,
            sampling: info.sampling,
            messages: state.messages,
            model_calls: state.calls,
            usage: state.usage,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_api_is_named_after_its_tool_format() {
        for api in Api::ALL {
            assert_eq!(api.as_str(), api.provider().as_str());
            assert_eq!(api.to_string().parse(), Ok(api));
        }
        assert!("gemini"
            .parse::<Api>()
            .unwrap_err()
            .contains("openai or anthropic"));
    }

    #[test]
    fn arguments_must_be_a_json_object() {
        assert_eq!(
            parse_arguments(r#"{"answer": "4"}"#),
            Ok(serde_json::json!({"answer": "4"}))
        );
        assert_eq!(parse_arguments(""), Ok(serde_json::json!({})));
        assert_eq!(parse_arguments("null"), Ok(serde_json::json!({})));
        assert!(parse_arguments(r#"{"answer": "4""#)
            .unwrap_err()
            .starts_with("invalid JSON"));
        assert_eq!(parse_arguments("[1]"), Err("got an array".to_owned()));
    }
}
