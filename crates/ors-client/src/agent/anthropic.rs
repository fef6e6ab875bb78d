//! Anthropic Messages: the conversation as its request, and its answer read back.
//!
//! The system prompt is the top-level `system`; tool results are `tool_result` blocks of a
//! user message (images included), all of one turn's results in one message; empty text and
//! empty assistant turns, which the API refuses, are left out.

use ors_core::Block;
use serde::Deserialize;
use serde_json::{json, Value};

use super::model::{Body, ChatRequest, ModelOptions, ModelReply};
use crate::rollout::trace::{Message, ModelCall, ToolCall, Usage};

/// The `anthropic-version` header sent.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// The completion limit sent when none is set (the API requires one).
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// The request body.
pub(crate) fn request_body<'a>(opts: &'a ModelOptions, req: &ChatRequest<'a>) -> Body<'a> {
    let max_tokens = opts.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS);
    let mut fields = vec![
        ("model", Value::String(opts.model.clone())),
        ("max_tokens", json!(max_tokens)),
    ];
    let system: Vec<&str> = req
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::System { content } => Some(content.as_str()),
            _ => None,
        })
        .collect();
    if !system.is_empty() {
        fields.push(("system", Value::String(system.join("\n\n"))));
    }
    fields.push(("messages", Value::Array(messages(req.messages))));
    fields.extend(opts.temperature.map(|t| ("temperature", json!(t))));
    Body {
        fields,
        tools: req.tools,
        extra: &opts.extra,
    }
}

/// Text and image blocks as content blocks (empty text left out).
fn blocks(content: &[Block]) -> Vec<Value> {
    content
        .iter()
        .filter(|b| b.as_text() != Some(""))
        .map(|b| match b {
            Block::Text(t) => json!({"type": "text", "text": t.text}),
            Block::Image(i) => json!({
                "type": "image",
                "source": {"type": "base64", "media_type": i.mime_type, "data": i.data},
            }),
        })
        .collect()
}

/// Append `content` to the conversation as the user's: to the last message when it is the
/// user's (so one turn's tool results share a message), else as a new message.
fn push_user(out: &mut Vec<Value>, content: Vec<Value>) {
    if content.is_empty() {
        return;
    }
    let last = out.last_mut().filter(|m| m["role"] == "user");
    match last.and_then(|m| m["content"].as_array_mut()) {
        Some(parts) => parts.extend(content),
        None => out.push(json!({"role": "user", "content": content})),
    }
}

/// The conversation (without the system prompt) in this API's message format.
pub(crate) fn messages(conversation: &[Message]) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::with_capacity(conversation.len());
    for m in conversation {
        match m {
            Message::System { .. } => {}
            Message::User { content } => push_user(&mut out, blocks(content)),
            Message::Assistant {
                content,
                tool_calls,
            } => {
                let mut parts = Vec::new();
                if let Some(text) = content.as_deref().filter(|t| !t.is_empty()) {
                    parts.push(json!({"type": "text", "text": text}));
                }
                for c in tool_calls {
                    // Calls that came from this API carry an object; a malformed one (from a
                    // model of another API) is sent as an empty input.
                    let input = serde_json::from_str::<Value>(&c.arguments)
                        .ok()
                        .filter(Value::is_object)
                        .unwrap_or_else(|| json!({}));
                    parts.push(json!({
                        "type": "tool_use", "id": c.id, "name": c.name, "input": input,
                    }));
                }
                if !parts.is_empty() {
                    out.push(json!({"role": "assistant", "content": parts}));
                }
            }
            Message::Tool {
                tool_call_id,
                content,
                is_error,
                ..
            } => {
                let mut result = json!({"type": "tool_result", "tool_use_id": tool_call_id});
                let inner = blocks(content);
                if !inner.is_empty() {
                    result["content"] = Value::Array(inner);
                }
                if *is_error {
                    result["is_error"] = json!(true);
                }
                push_user(&mut out, vec![result]);
            }
        }
    }
    out
}

/// The parts of a Messages answer the agent reads (unknown fields are ignored).
#[derive(Debug, Deserialize)]
pub(crate) struct Response {
    id: Option<String>,
    content: Vec<ContentBlock>,
    stop_reason: Option<String>,
    usage: Option<WireUsage>,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ContentBlock {
    Text {
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        #[serde(default)]
        input: Value,
    },
    /// Thinking and any block type this version does not know.
    #[serde(other)]
    Other,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct WireUsage {
    input_tokens: u64,
    output_tokens: u64,
    cache_creation_input_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
}

/// The agent's view of an answer (every answer of this API has one).
pub(crate) fn reply(resp: Response, attempts: u32) -> Result<ModelReply, String> {
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    for block in resp.content {
        match block {
            ContentBlock::Text { text: t } => text.push_str(&t),
            ContentBlock::ToolUse { id, name, input } => tool_calls.push(ToolCall {
                id,
                name,
                arguments: input.to_string(),
            }),
            ContentBlock::Other => {}
        }
    }
    Ok(ModelReply {
        content: Some(text).filter(|t| !t.is_empty()),
        tool_calls,
        record: ModelCall {
            attempts,
            // Cached prompt tokens are prompt tokens too.
            usage: resp.usage.map(|u| Usage {
                input_tokens: u.input_tokens
                    + u.cache_creation_input_tokens.unwrap_or(0)
                    + u.cache_read_input_tokens.unwrap_or(0),
                output_tokens: u.output_tokens,
            }),
            finish_reason: resp.stop_reason,
            response_id: resp.id,
            ..ModelCall::default()
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_of_tool_results_is_one_user_message_with_images() {
        let call = |id: &str| ToolCall {
            id: id.into(),
            name: "look".into(),
            arguments: "{\"at\": 1}".into(),
        };
        let conversation = vec![
            Message::System {
                content: "Be brief.".into(),
            },
            Message::User {
                content: vec![Block::text("Look."), Block::image("AAAA", "image/png")],
            },
            Message::Assistant {
                content: Some(String::new()),
                tool_calls: vec![call("a"), call("b")],
            },
            Message::Tool {
                tool_call_id: "a".into(),
                name: "look".into(),
                content: vec![Block::image("BBBB", "image/png")],
                is_error: false,
            },
            Message::Tool {
                tool_call_id: "b".into(),
                name: "look".into(),
                content: vec![Block::text("Error: no")],
                is_error: true,
            },
            Message::User {
                content: vec![Block::text("Go on.")],
            },
        ];
        let m = messages(&conversation);
        assert_eq!(m.len(), 3, "{m:#?}");
        assert_eq!(m[0]["content"][1]["source"]["media_type"], "image/png");
        assert_eq!(
            m[1]["content"].as_array().unwrap().len(),
            2,
            "no empty text"
        );
        assert_eq!(m[1]["content"][0]["input"], json!({"at": 1}));
        let results = m[2]["content"].as_array().unwrap();
        assert_eq!(results[0]["tool_use_id"], "a");
        assert_eq!(results[0]["content"][0]["type"], "image");
        assert_eq!(results[1]["is_error"], true);
        assert_eq!(results[2]["text"], "Go on.");
    }

    #[test]
    fn answers_are_read_with_cached_tokens_counted() {
        let resp: Response = serde_json::from_value(json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "m",
            "content": [
                {"type": "thinking", "thinking": "hm", "signature": "s"},
                {"type": "text", "text": "Let me submit."},
                {"type": "tool_use", "id": "toolu_1", "name": "submit", "input": {"answer": "4"}}
            ],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 5, "output_tokens": 7, "cache_read_input_tokens": 100}
        }))
        .unwrap();
        let r = reply(resp, 1).unwrap();
        assert_eq!(r.content.as_deref(), Some("Let me submit."));
        assert_eq!(r.tool_calls[0].arguments, r#"{"answer":"4"}"#);
        assert_eq!(r.record.usage.unwrap().input_tokens, 105);
        assert_eq!(r.record.finish_reason.as_deref(), Some("tool_use"));
    }
}
