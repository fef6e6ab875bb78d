//! The rules both APIs check alike (tool names and shapes), how a request is refused, and the
//! token counts of an answer.

use hyper::StatusCode;
use serde_json::Value;

/// A request refused: the status and the API's error type and message.
pub(crate) struct Rejection {
    pub status: StatusCode,
    pub kind: &'static str,
    pub message: String,
}

/// A 400 `invalid_request_error` with `message`.
pub(crate) fn invalid(message: impl Into<String>) -> Rejection {
    Rejection {
        status: StatusCode::BAD_REQUEST,
        kind: "invalid_request_error",
        message: message.into(),
    }
}

/// A tool name as the APIs allow it: 1 to `max` ASCII letters, digits, `_` or `-`.
pub(crate) fn valid_name(name: &str, max: usize) -> bool {
    (1..=max).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// How an API lays out a tool.
pub(crate) struct ToolShape {
    /// The longest name allowed.
    pub max_name: usize,
    /// The key of the input schema.
    pub schema_key: &'static str,
    /// Whether a tool may leave the schema out.
    pub schema_optional: bool,
    /// The definition inside one entry of `tools` (after checking the entry's `type`); the
    /// entry's index names it in messages.
    pub definition: fn(usize, &Value) -> Result<&Value, Rejection>,
}

/// Check a request's `tools` the way both APIs do (name pattern, description a string, an
/// object schema of `type: "object"`); the tools' names.
pub(crate) fn check_tools(body: &Value, shape: &ToolShape) -> Result<Vec<String>, Rejection> {
    let Some(tools) = body.get("tools") else {
        return Ok(Vec::new());
    };
    let tools = tools
        .as_array()
        .ok_or_else(|| invalid("tools: expected an array"))?;
    let mut names = Vec::new();
    for (i, t) in tools.iter().enumerate() {
        let def = (shape.definition)(i, t)?;
        let name = def["name"].as_str().unwrap_or("");
        if !valid_name(name, shape.max_name) {
            return Err(invalid(format!(
                "tools[{i}]: the name {name:?} does not match ^[a-zA-Z0-9_-]{{1,{}}}$",
                shape.max_name
            )));
        }
        if !(def["description"].is_null() || def["description"].is_string()) {
            return Err(invalid(format!(
                "tools[{i}].description: expected a string"
            )));
        }
        let schema = &def[shape.schema_key];
        let missing_ok = schema.is_null() && shape.schema_optional;
        if !missing_ok && (!schema.is_object() || schema["type"] != "object") {
            return Err(invalid(format!(
                "Invalid schema for tool '{name}': {} must be a JSON Schema of type 'object', \
                 got {schema}",
                shape.schema_key
            )));
        }
        names.push(name.to_owned());
    }
    Ok(names)
}

/// Rough token counts for the `usage` of an answer: a token per 4 bytes of JSON.
pub(crate) fn tokens(bytes: usize) -> u64 {
    (bytes as u64).div_ceil(4).max(1)
}
