//! The OpenAI Chat Completions API, checked as strictly as OpenAI's server checks it, and
//! its answers.

use serde_json::{json, Map, Value};

use super::rules::{check_tools, invalid, tokens, valid_name, Rejection, ToolShape};
use super::script::{Api, Exchange, Reply, ToolResult};

/// The body fields accepted: OpenAI's, and the sampling extensions of vLLM (whose server is
/// the main OpenAI-compatible target).
const KNOWN_FIELDS: &[&str] = &[
    "model",
    "messages",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "temperature",
    "top_p",
    "n",
    "stop",
    "max_tokens",
    "max_completion_tokens",
    "presence_penalty",
    "frequency_penalty",
    "logit_bias",
    "logprobs",
    "top_logprobs",
    "seed",
    "user",
    "stream",
    "response_format",
    "reasoning_effort",
    // vLLM
    "top_k",
    "min_p",
    "repetition_penalty",
    "return_token_ids",
    "chat_template_kwargs",
];

/// What OpenAI allows in a function name.
const MAX_NAME: usize = 64;

fn text_parts(content: &Value, at: &str, images: bool) -> Result<(String, usize), Rejection> {
    match content {
        Value::String(s) => Ok((s.clone(), 0)),
        Value::Array(parts) if !parts.is_empty() => {
            let mut text = String::new();
            let mut count = 0;
            for (i, p) in parts.iter().enumerate() {
                match p["type"].as_str() {
                    Some("text") => {
                        let t = p["text"].as_str().ok_or_else(|| {
                            invalid(format!("{at}.content[{i}].text: expected a string"))
                        })?;
                        text.push_str(t);
                    }
                    Some("image_url") if images => {
                        let url = p["image_url"]["url"].as_str().unwrap_or("");
                        let data_url = url.starts_with("data:image/") && url.contains(";base64,");
                        if !(data_url || url.starts_with("https://") || url.starts_with("http://"))
                        {
                            return Err(invalid(format!(
                                "{at}.content[{i}].image_url.url: expected a URL or a base64 \
                                 data URL, got {:.40}",
                                url
                            )));
                        }
                        count += 1;
                    }
                    other => {
                        return Err(invalid(format!(
                            "Invalid value for '{at}.content[{i}].type': {other:?} is not \
                             allowed here"
                        )))
                    }
                }
            }
            Ok((text, count))
        }
        _ => Err(invalid(format!(
            "{at}.content: expected a string or a non-empty array of content parts"
        ))),
    }
}

/// The Chat Completions tool: `{"type": "function", "function": {name, description,
/// parameters}}`.
const TOOL: ToolShape = ToolShape {
    max_name: MAX_NAME,
    schema_key: "parameters",
    schema_optional: true,
    definition: |i, t| {
        if t["type"] == "function" {
            Ok(&t["function"])
        } else {
            Err(invalid(format!("tools[{i}].type: expected 'function'")))
        }
    },
};

/// Check a request body; what the script sees of it.
pub(crate) fn check(body: &Value) -> Result<Exchange, Rejection> {
    let obj = body
        .as_object()
        .ok_or_else(|| invalid("expected an object"))?;
    if let Some(k) = obj.keys().find(|k| !KNOWN_FIELDS.contains(&k.as_str())) {
        return Err(invalid(format!(
            "Unrecognized request argument supplied: {k}"
        )));
    }
    let model = body["model"].as_str().filter(|m| !m.is_empty());
    let model = model.ok_or_else(|| invalid("model: a model name is required"))?;
    if body.get("stream").is_some_and(|s| s != &json!(false)) {
        return Err(invalid("stream: this server only answers stream: false"));
    }
    if let Some(t) = body.get("temperature") {
        if !t.as_f64().is_some_and(|t| (0.0..=2.0).contains(&t)) {
            return Err(invalid("temperature: expected a number from 0 to 2"));
        }
    }
    for field in ["max_tokens", "max_completion_tokens"] {
        if let Some(n) = body.get(field) {
            if n.as_u64().is_none_or(|n| n < 1) {
                return Err(invalid(format!(
                    "{field}: expected an integer of at least 1"
                )));
            }
        }
    }
    let tools = check_tools(body, &TOOL)?;
    let messages = body["messages"]
        .as_array()
        .filter(|m| !m.is_empty())
        .ok_or_else(|| invalid("messages: expected a non-empty array"))?;

    let mut x = Exchange::new(Api::OpenAi, model, tools);
    let mut seen_user = false;
    // Ids of the last assistant turn's calls still waiting for their tool message.
    let mut awaited: Vec<String> = Vec::new();
    // Whether the messages since the last assistant turn are only its tool messages so far.
    let mut in_results = false;
    for (i, m) in messages.iter().enumerate() {
        let at = format!("messages[{i}]");
        let role = m["role"].as_str().unwrap_or("");
        if role != "tool" && !awaited.is_empty() {
            return Err(invalid(format!(
                "An assistant message with 'tool_calls' must be followed by tool messages \
                 responding to each 'tool_call_id'. The following tool_call_ids did not have \
                 response messages: {}",
                awaited.join(", ")
            )));
        }
        match role {
            "system" | "developer" => {
                text_parts(&m["content"], &at, false)?;
            }
            "user" => {
                let (text, images) = text_parts(&m["content"], &at, true)?;
                if in_results {
                    // Images of the tool results just given, sent after them.
                    if let Some(last) = x.tool_results.last_mut() {
                        last.images += images;
                    }
                    in_results = false;
                    if images > 0 {
                        continue;
                    }
                } else {
                    x.user_images += images;
                }
                if !seen_user {
                    x.first_user_text = text.clone();
                    seen_user = true;
                }
                x.tool_results.clear();
                x.last_user_text = text;
            }
            "assistant" => {
                let calls = m.get("tool_calls").filter(|c| !c.is_null());
                let content = m.get("content").filter(|c| !c.is_null());
                if let Some(c) = content {
                    text_parts(c, &at, false)?;
                } else if calls.is_none() {
                    return Err(invalid(format!(
                        "{at}: 'content' is required unless 'tool_calls' is given"
                    )));
                }
                if let Some(calls) = calls {
                    let calls = calls.as_array().filter(|c| !c.is_empty()).ok_or_else(|| {
                        invalid(format!("{at}.tool_calls: expected a non-empty array"))
                    })?;
                    for (j, c) in calls.iter().enumerate() {
                        let id = c["id"].as_str().filter(|id| !id.is_empty());
                        let ok = id.is_some()
                            && c["type"] == "function"
                            && c["function"]["name"]
                                .as_str()
                                .is_some_and(|n| valid_name(n, MAX_NAME))
                            && c["function"]["arguments"].is_string();
                        if !ok {
                            return Err(invalid(format!(
                                "{at}.tool_calls[{j}]: expected {{id, type: 'function', \
                                 function: {{name, arguments: string}}}}"
                            )));
                        }
                        awaited.extend(id.map(str::to_owned));
                    }
                }
                x.assistant_turns += 1;
                x.tool_results.clear();
                x.last_user_text.clear();
                in_results = true;
            }
            "tool" => {
                let id = m["tool_call_id"]
                    .as_str()
                    .ok_or_else(|| invalid(format!("{at}.tool_call_id: a string is required")))?;
                let Some(pos) = awaited.iter().position(|a| a == id) else {
                    return Err(invalid(format!(
                        "Invalid parameter: messages with role 'tool' must be a response to a \
                         preceeding message with 'tool_calls' ({at} answers {id:?})"
                    )));
                };
                awaited.remove(pos);
                let (text, _) = text_parts(&m["content"], &at, false)?;
                x.tool_results.push(ToolResult {
                    text,
                    images: 0,
                    is_error: false,
                });
            }
            other => {
                return Err(invalid(format!(
                    "Invalid value for '{at}.role': {other:?} (expected system, developer, \
                     user, assistant or tool)"
                )))
            }
        }
    }
    if !awaited.is_empty() {
        return Err(invalid(format!(
            "The following tool_call_ids did not have response messages: {}",
            awaited.join(", ")
        )));
    }
    if !seen_user {
        return Err(invalid("messages: a user message is required"));
    }
    Ok(x)
}

/// The answer for `reply`, as Chat Completions sends it (with `logprobs` and vLLM's token ids
/// when they were asked for).
pub(crate) fn answer(x: &Exchange, reply: &Reply, index: usize) -> Result<Value, String> {
    let mut message = Map::new();
    message.insert("role".into(), json!("assistant"));
    let (finish, written) = match reply {
        Reply::Text(t) => {
            message.insert("content".into(), json!(t));
            ("stop", t.clone())
        }
        Reply::Tools(calls) => {
            message.insert("content".into(), Value::Null);
            let calls: Vec<Value> = calls
                .iter()
                .enumerate()
                .map(|(i, (name, args))| {
                    json!({
                        "id": format!("call_{index}_{i}"),
                        "type": "function",
                        "function": {"name": name, "arguments": args},
                    })
                })
                .collect();
            let written = Value::Array(calls.clone()).to_string();
            message.insert("tool_calls".into(), Value::Array(calls));
            ("tool_calls", written)
        }
        Reply::Error { .. } => return Err("an error is not an answer".into()),
    };
    let output_tokens = tokens(written.len());
    let input_tokens = tokens(x.request_bytes);
    let mut choice = json!({
        "index": 0,
        "message": message,
        "finish_reason": finish,
        "logprobs": null,
    });
    if x.body["logprobs"] == json!(true) {
        choice["logprobs"] = json!({"content": [{"token": "x", "logprob": -0.5, "bytes": [120], "top_logprobs": []}]});
    }
    let mut out = json!({
        "id": format!("chatcmpl-{index}"),
        "object": "chat.completion",
        "created": 1_700_000_000u64 + index as u64,
        "model": x.model,
        "choices": [choice],
        "usage": {
            "prompt_tokens": input_tokens,
            "completion_tokens": output_tokens,
            "total_tokens": input_tokens + output_tokens,
        },
    });
    if x.body["return_token_ids"] == json!(true) {
        out["prompt_token_ids"] = json!((0..input_tokens).collect::<Vec<u64>>());
        out["choices"][0]["token_ids"] = json!((0..output_tokens).collect::<Vec<u64>>());
    }
    Ok(out)
}
