//! OpenAI Chat Completions: the conversation as its request, and its answer read back.
//!
//! Tool messages of this API carry text only, so the images of a tool's output follow the
//! turn's tool messages in one user message that says which call they came from.

use ors_core::Block;
use serde::Deserialize;
use serde_json::{json, Value};

use super::model::{Body, ChatRequest, ModelOptions, ModelReply};
use crate::rollout::trace::{Message, ModelCall, ToolCall, Usage};

/// The request body.
pub(crate) fn request_body<'a>(opts: &'a ModelOptions, req: &ChatRequest<'a>) -> Body<'a> {
    let mut fields = vec![
        ("model", Value::String(opts.model.clone())),
        ("messages", Value::Array(messages(req.messages))),
    ];
    fields.extend(opts.temperature.map(|t| ("temperature", json!(t))));
    fields.extend(opts.max_tokens.map(|n| ("max_tokens", json!(n))));
    Body {
        fields,
        tools: req.tools,
        extra: &opts.extra,
    }
}

/// A user message's content: a plain string for one text block (what every compatible server
/// reads), else an array of `text` and `image_url` parts.
fn user_content(blocks: &[Block]) -> Value {
    if let [Block::Text(t)] = blocks {
        return Value::String(t.text.clone());
    }
    Value::Array(blocks.iter().map(part).collect())
}

fn part(block: &Block) -> Value {
    match block {
        Block::Text(t) => json!({"type": "text", "text": t.text}),
        Block::Image(i) => json!({
            "type": "image_url",
            "image_url": {"url": format!("data:{};base64,{}", i.mime_type, i.data)},
        }),
    }
}

/// The text of a tool's output for a `tool` message (which cannot hold images).
fn tool_text(blocks: &[Block]) -> String {
    let text: Vec<&str> = blocks.iter().filter_map(Block::as_text).collect();
    let images = blocks.len() - text.len();
    let mut out = text.join("\n");
    if images > 0 {
        let sep = if out.is_empty() { "" } else { "\n" };
        out += &format!("{sep}[{images} image(s), attached in the next user message]");
    }
    out
}

/// The conversation in this API's message format.
pub(crate) fn messages(conversation: &[Message]) -> Vec<Value> {
    let mut out = Vec::with_capacity(conversation.len() + 1);
    // Images of the tool messages just written: sent as one user message after them (a tool
    // message must directly follow its assistant message, so they cannot go in between).
    let mut images: Vec<Value> = Vec::new();
    for m in conversation {
        if !matches!(m, Message::Tool { .. }) && !images.is_empty() {
            out.push(json!({"role": "user", "content": std::mem::take(&mut images)}));
        }
        match m {
            Message::System { content } => out.push(json!({"role": "system", "content": content})),
            Message::User { content } => {
                out.push(json!({"role": "user", "content": user_content(content)}));
            }
            Message::Assistant {
                content,
                tool_calls,
            } => {
                let mut msg = json!({"role": "assistant", "content": content});
                if !tool_calls.is_empty() {
                    msg["tool_calls"] = tool_calls
                        .iter()
                        .map(|c| {
                            json!({
                                "id": c.id,
                                "type": "function",
                                "function": {"name": c.name, "arguments": c.arguments},
                            })
                        })
                        .collect();
                }
                out.push(msg);
            }
            Message::Tool {
                tool_call_id,
                name,
                content,
                ..
            } => {
                out.push(json!({
                    "role": "tool",
                    "tool_call_id": tool_call_id,
                    "content": tool_text(content),
                }));
                let pictures: Vec<Value> = content
                    .iter()
                    .filter(|b| matches!(b, Block::Image(_)))
                    .map(part)
                    .collect();
                if !pictures.is_empty() {
                    images.push(json!({
                        "type": "text",
                        "text": format!("The image(s) returned by {name} (call {tool_call_id}):"),
                    }));
                    images.extend(pictures);
                }
            }
        }
    }
    if !images.is_empty() {
        out.push(json!({"role": "user", "content": images}));
    }
    out
}

/// The parts of a Chat Completions answer the agent reads (unknown fields are ignored).
#[derive(Debug, Deserialize)]
pub(crate) struct Response {
    id: Option<String>,
    choices: Vec<Choice>,
    usage: Option<WireUsage>,
    /// vLLM with `return_token_ids: true`.
    prompt_token_ids: Option<Vec<u64>>,
}

#[derive(Debug, Deserialize)]
struct Choice {
    message: AssistantMessage,
    finish_reason: Option<String>,
    logprobs: Option<Value>,
    /// vLLM with `return_token_ids: true`.
    token_ids: Option<Vec<u64>>,
}

#[derive(Debug, Deserialize)]
struct AssistantMessage {
    content: Option<Value>,
    tool_calls: Option<Vec<WireToolCall>>,
}

#[derive(Debug, Deserialize)]
struct WireToolCall {
    id: Option<String>,
    function: WireFunction,
}

#[derive(Debug, Deserialize)]
struct WireFunction {
    name: String,
    /// A JSON string as the API documents; some servers send the object itself.
    #[serde(default)]
    arguments: Value,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct WireUsage {
    prompt_tokens: u64,
    completion_tokens: u64,
}

/// The agent's view of an answer; an error names what is missing.
pub(crate) fn reply(resp: Response, attempts: u32) -> Result<ModelReply, String> {
    let choice = resp
        .choices
        .into_iter()
        .next()
        .ok_or("the answer has no choices")?;
    // `null` is no content, like an empty one (left out below).
    let content = choice.message.content.map(|content| match content {
        Value::Null => String::new(),
        Value::String(s) => s,
        // Some servers answer with an array of text parts.
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        other => other.to_string(),
    });
    let tool_calls = choice
        .message
        .tool_calls
        .unwrap_or_default()
        .into_iter()
        .map(|c| ToolCall {
            id: c.id.unwrap_or_default(),
            name: c.function.name,
            arguments: match c.function.arguments {
                Value::String(s) => s,
                Value::Null => String::new(),
                other => other.to_string(),
            },
        })
        .collect();
    Ok(ModelReply {
        content: content.filter(|c| !c.is_empty()),
        tool_calls,
        record: ModelCall {
            attempts,
            usage: resp.usage.map(|u| Usage {
                input_tokens: u.prompt_tokens,
                output_tokens: u.completion_tokens,
            }),
            finish_reason: choice.finish_reason,
            response_id: resp.id,
            logprobs: choice.logprobs.filter(|l| !l.is_null()),
            token_ids: choice.token_ids,
            prompt_token_ids: resp.prompt_token_ids,
            ..ModelCall::default()
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(id: &str, content: Vec<Block>) -> Message {
        Message::Tool {
            tool_call_id: id.into(),
            name: "look".into(),
            content,
            is_error: false,
        }
    }

    #[test]
    fn tool_images_follow_the_tool_messages_in_a_user_message() {
        let conversation = vec![
            Message::User {
                content: vec![Block::text("Look.")],
            },
            Message::Assistant {
                content: None,
                tool_calls: vec![
                    ToolCall {
                        id: "a".into(),
                        name: "look".into(),
                        arguments: "{}".into(),
                    },
                    ToolCall {
                        id: "b".into(),
                        name: "look".into(),
                        arguments: "{}".into(),
                    },
                ],
            },
            tool(
                "a",
                vec![Block::text("seen"), Block::image("AAAA", "image/png")],
            ),
            tool("b", vec![Block::text("nothing")]),
        ];
        let m = messages(&conversation);
        assert_eq!(m.len(), 5);
        assert_eq!(m[0], json!({"role": "user", "content": "Look."}));
        assert_eq!(m[1]["tool_calls"][1]["function"]["arguments"], "{}");
        assert_eq!(m[1]["content"], Value::Null);
        assert_eq!(m[2]["role"], "tool");
        assert_eq!(m[2]["tool_call_id"], "a");
        assert!(m[2]["content"]
            .as_str()
            .unwrap()
            .starts_with("seen\n[1 image"));
        assert_eq!(m[3]["tool_call_id"], "b");
        assert_eq!(m[4]["role"], "user");
        assert_eq!(
            m[4]["content"][1]["image_url"]["url"],
            "data:image/png;base64,AAAA"
        );
    }

    #[test]
    fn answers_are_read_with_usage_logprobs_and_token_ids() {
        let resp: Response = serde_json::from_value(json!({
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_1", "type": "function",
                     "function": {"name": "submit", "arguments": "{\"answer\": \"4\"}"}},
                    {"type": "function", "function": {"name": "echo", "arguments": {"text": "x"}}}
                ]},
                "finish_reason": "tool_calls",
                "logprobs": {"content": [{"token": "x", "logprob": -0.1}]},
                "token_ids": [1, 2, 3]
            }],
            "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13},
            "prompt_token_ids": [7, 8]
        }))
        .unwrap();
        let r = reply(resp, 2).unwrap();
        assert_eq!(r.content, None);
        assert_eq!(r.tool_calls[0].arguments, r#"{"answer": "4"}"#);
        assert_eq!(r.tool_calls[1].id, "", "filled in by the agent");
        assert_eq!(r.tool_calls[1].arguments, r#"{"text":"x"}"#);
        assert_eq!(r.record.attempts, 2);
        assert_eq!(r.record.usage.unwrap().total(), 13);
        assert_eq!(r.record.token_ids, Some(vec![1, 2, 3]));
        assert_eq!(r.record.prompt_token_ids, Some(vec![7, 8]));
        assert!(r.record.logprobs.is_some());
        let empty: Response = serde_json::from_value(json!({"choices": []})).unwrap();
        assert!(reply(empty, 1).is_err());
    }
}
