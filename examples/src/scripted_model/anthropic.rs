//! The Anthropic Messages API, checked as strictly as Anthropic's server checks it, and its
//! answers.

use serde_json::{json, Value};

use super::rules::{check_tools, invalid, tokens, valid_name, Rejection, ToolShape};
use super::script::{Api, Exchange, Reply, ToolResult};

/// The body fields accepted.
const KNOWN_FIELDS: &[&str] = &[
    "model",
    "messages",
    "max_tokens",
    "system",
    "tools",
    "tool_choice",
    "temperature",
    "top_p",
    "top_k",
    "stop_sequences",
    "metadata",
    "stream",
    "thinking",
    "service_tier",
];

const IMAGE_TYPES: &[&str] = &["image/jpeg", "image/png", "image/gif", "image/webp"];

/// What Anthropic allows in a tool name.
const MAX_NAME: usize = 128;

/// A text or image block (of a message or inside a tool result); the text, if any.
fn check_block(b: &Value, at: &str) -> Result<Option<String>, Rejection> {
    match b["type"].as_str() {
        Some("text") => match b["text"].as_str() {
            Some("") => Err(invalid(format!(
                "{at}: text content blocks must be non-empty"
            ))),
            Some(t) => Ok(Some(t.to_owned())),
            None => Err(invalid(format!("{at}.text: Field required"))),
        },
        Some("image") => {
            let src = &b["source"];
            let ok = src["type"] == "base64"
                && src["media_type"]
                    .as_str()
                    .is_some_and(|m| IMAGE_TYPES.contains(&m))
                && src["data"].as_str().is_some_and(|d| !d.is_empty());
            if ok {
                Ok(None)
            } else {
                Err(invalid(format!(
                    "{at}.source: expected {{type: 'base64', media_type: one of {IMAGE_TYPES:?}, \
                     data}}"
                )))
            }
        }
        other => Err(invalid(format!("{at}.type: {other:?} is not allowed here"))),
    }
}

/// The Messages tool: `{"type": "custom" (or absent), name, description, input_schema}`.
const TOOL: ToolShape = ToolShape {
    max_name: MAX_NAME,
    schema_key: "input_schema",
    schema_optional: false,
    definition: |i, t| {
        if t["type"].is_null() || t["type"] == "custom" {
            Ok(t)
        } else {
            Err(invalid(format!("tools.{i}.type: expected 'custom'")))
        }
    },
};

/// The content of a message as blocks (a string is one text block).
fn blocks_of(m: &Value, at: &str) -> Result<Vec<Value>, Rejection> {
    match &m["content"] {
        Value::String(s) if s.is_empty() => Err(invalid(format!(
            "{at}: all messages must have non-empty content"
        ))),
        Value::String(s) => Ok(vec![json!({"type": "text", "text": s})]),
        Value::Array(b) if !b.is_empty() => Ok(b.clone()),
        _ => Err(invalid(format!(
            "{at}: all messages must have non-empty content"
        ))),
    }
}

/// Check a request body; what the script sees of it.
pub(crate) fn check(body: &Value) -> Result<Exchange, Rejection> {
    let obj = body
        .as_object()
        .ok_or_else(|| invalid("expected an object"))?;
    if let Some(k) = obj.keys().find(|k| !KNOWN_FIELDS.contains(&k.as_str())) {
        return Err(invalid(format!("{k}: Extra inputs are not permitted")));
    }
    let model = body["model"].as_str().filter(|m| !m.is_empty());
    let model = model.ok_or_else(|| invalid("model: Field required"))?;
    if body["max_tokens"].as_u64().is_none_or(|n| n < 1) {
        return Err(invalid(
            "max_tokens: Field required (an integer of at least 1)",
        ));
    }
    if body.get("stream").is_some_and(|s| s != &json!(false)) {
        return Err(invalid("stream: this server only answers stream: false"));
    }
    if let Some(t) = body.get("temperature") {
        if !t.as_f64().is_some_and(|t| (0.0..=1.0).contains(&t)) {
            return Err(invalid(
                "temperature: Input should be less than or equal to 1",
            ));
        }
    }
    match body.get("system") {
        None | Some(Value::String(_)) => {}
        Some(Value::Array(parts)) => {
            for (i, p) in parts.iter().enumerate() {
                if p["type"] != "text" {
                    return Err(invalid(format!("system.{i}.type: expected 'text'")));
                }
                check_block(p, &format!("system.{i}"))?;
            }
        }
        Some(_) => return Err(invalid("system: Input should be a valid string or list")),
    }
    let tools = check_tools(body, &TOOL)?;
    let messages = body["messages"]
        .as_array()
        .filter(|m| !m.is_empty())
        .ok_or_else(|| invalid("messages: at least one message is required"))?;

    // Consecutive messages of one role form one turn, as the API combines them.
    let mut turns: Vec<(String, Vec<Value>)> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let at = format!("messages.{i}");
        let role = m["role"].as_str().unwrap_or("");
        if role != "user" && role != "assistant" {
            return Err(invalid(format!(
                "{at}.role: Input should be 'user' or 'assistant'"
            )));
        }
        let blocks = blocks_of(m, &at)?;
        match turns.last_mut() {
            Some((r, b)) if r == role => b.extend(blocks),
            _ => turns.push((role.to_owned(), blocks)),
        }
    }
    if turns[0].0 != "user" {
        return Err(invalid(
            "messages: the first message must use the \"user\" role",
        ));
    }

    let mut x = Exchange::new(Api::Anthropic, model, tools);
    // The tool_use ids of the previous assistant turn.
    let mut asked: Vec<String> = Vec::new();
    for (t, (role, blocks)) in turns.iter().enumerate() {
        let at = format!("messages.{t}");
        if role == "assistant" {
            x.assistant_turns += 1;
            asked.clear();
            for (j, b) in blocks.iter().enumerate() {
                if b["type"] == "tool_use" {
                    let id = b["id"].as_str().filter(|id| !id.is_empty());
                    let ok = id.is_some()
                        && b["name"].as_str().is_some_and(|n| valid_name(n, MAX_NAME))
                        && b["input"].is_object();
                    if !ok {
                        return Err(invalid(format!(
                            "{at}.content.{j}: tool_use needs id, name and an object input"
                        )));
                    }
                    asked.extend(id.map(str::to_owned));
                } else {
                    check_block(b, &format!("{at}.content.{j}"))?;
                }
            }
            continue;
        }
        // A user turn: the results of the previous turn's calls first, then anything else.
        let mut results = Vec::new();
        let mut text = String::new();
        let mut answered: Vec<String> = Vec::new();
        for (j, b) in blocks.iter().enumerate() {
            let bat = format!("{at}.content.{j}");
            if b["type"] == "tool_result" {
                if j != results.len() {
                    return Err(invalid(format!(
                        "{bat}: tool_result blocks must come first in the user message"
                    )));
                }
                let id = b["tool_use_id"].as_str().unwrap_or("");
                if !asked.iter().any(|a| a == id) || answered.iter().any(|a| a == id) {
                    return Err(invalid(format!(
                        "{bat}: unexpected tool_use_id found in tool_result blocks: {id}. Each \
                         tool_result block must have a corresponding tool_use block in the \
                         previous message."
                    )));
                }
                answered.push(id.to_owned());
                let mut r = ToolResult {
                    text: String::new(),
                    images: 0,
                    is_error: b["is_error"] == json!(true),
                };
                match &b["content"] {
                    Value::Null => {}
                    Value::String(s) => r.text.push_str(s),
                    Value::Array(inner) => {
                        for (k, ib) in inner.iter().enumerate() {
                            match check_block(ib, &format!("{bat}.content.{k}"))? {
                                Some(t) => r.text.push_str(&t),
                                None => r.images += 1,
                            }
                        }
                    }
                    _ => return Err(invalid(format!("{bat}.content: expected a string or list"))),
                }
                if !(b["is_error"].is_null() || b["is_error"].is_boolean()) {
                    return Err(invalid(format!(
                        "{bat}.is_error: Input should be a valid boolean"
                    )));
                }
                results.push(r);
            } else {
                match check_block(b, &bat)? {
                    Some(t) => text.push_str(&t),
                    None => x.user_images += 1,
                }
            }
        }
        let missing: Vec<&String> = asked.iter().filter(|a| !answered.contains(a)).collect();
        if !missing.is_empty() {
            return Err(invalid(format!(
                "{at}: tool_use ids were found without tool_result blocks immediately after: {}",
                missing
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        asked.clear();
        if t == 0 {
            x.first_user_text = text.clone();
        }
        x.tool_results = results;
        x.last_user_text = text;
    }
    if !asked.is_empty() {
        return Err(invalid(
            "the last assistant message called tools; their results must follow",
        ));
    }
    Ok(x)
}

/// The answer for `reply`, as the Messages API sends it.
pub(crate) fn answer(x: &Exchange, reply: &Reply, index: usize) -> Result<Value, String> {
    let (content, stop) = match reply {
        Reply::Text(t) => (vec![json!({"type": "text", "text": t})], "end_turn"),
        Reply::Tools(calls) => {
            let mut blocks = Vec::new();
            for (i, (name, args)) in calls.iter().enumerate() {
                let input: Value = serde_json::from_str(args)
                    .ok()
                    .filter(Value::is_object)
                    .ok_or_else(|| format!("the arguments of {name} are not a JSON object"))?;
                blocks.push(json!({
                    "type": "tool_use", "id": format!("toolu_{index}_{i}"), "name": name,
                    "input": input,
                }));
            }
            (blocks, "tool_use")
        }
        Reply::Error { .. } => return Err("an error is not an answer".into()),
    };
    let output_tokens = tokens(Value::Array(content.clone()).to_string().len());
    Ok(json!({
        "id": format!("msg_{index}"),
        "type": "message",
        "role": "assistant",
        "model": x.model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": null,
        "usage": {
            "input_tokens": tokens(x.request_bytes),
            "output_tokens": output_tokens,
        },
    }))
}
