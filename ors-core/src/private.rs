//! Items the macros' generated code names by absolute path. Not a public API.

pub use crate::env::{
    Environment, IntoToolResult, ToolContext, ToolEntry, ToolFuture, ToolTable, ToolTableError,
    Toolset,
};
pub use crate::schema::input_schema;
pub use crate::types::{JsonObject, RunToolOutput, ToolSpec};
pub use serde;
pub use serde_json;
pub use serde_json::Value;
pub use std::boxed::Box;
pub use std::option::Option;
pub use std::string::String;
pub use std::sync::OnceLock;
pub use std::vec::Vec;

/// A type a `#[tool]` method can take as its input.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be the input of a #[tool] method",
    label = "this input type must implement `Deserialize` and `JsonSchema`",
    note = "add `#[derive(Deserialize, JsonSchema)]` to `{Self}` (both are in `ors_server::prelude`)"
)]
pub trait ToolInput: serde::de::DeserializeOwned + schemars::JsonSchema {}
impl<T: serde::de::DeserializeOwned + schemars::JsonSchema> ToolInput for T {}

/// Compile-time check that `T` is a valid tool input; the span of the call points at the type.
pub const fn assert_tool_input<T: ToolInput>() {}

/// Compile-time check of a tool's return type.
pub fn assert_tool_return<T: IntoToolResult>(_: &T) {}

/// Parse a tool's input, or an `ok: false` result naming the tool and the field.
pub fn parse_input<T: ToolInput>(tool: &str, input: Value) -> Result<T, RunToolOutput> {
    let input = if input.is_null() {
        Value::Object(JsonObject::new())
    } else {
        input
    };
    serde_json::from_value(input).map_err(|e| {
        RunToolOutput::Error(format!(
            "invalid input for tool '{tool}': {}",
            e.to_string().replace('`', "'")
        ))
    })
}

/// Check the input of a tool that takes none: `{}` or `null` (other keys are ignored, as
/// models sometimes send them).
pub fn no_input(tool: &str, input: &Value) -> Result<(), RunToolOutput> {
    match input {
        Value::Null | Value::Object(_) => Ok(()),
        other => Err(RunToolOutput::Error(format!(
            "invalid input for tool '{tool}': expected an object, got {}",
            json_kind(other)
        ))),
    }
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The spec of a tool with a typed input; a schema problem is recorded, not panicked.
pub fn spec_with_input<T: ToolInput>(
    name: &str,
    description: &str,
) -> Result<ToolSpec, ToolTableError> {
    let schema = input_schema::<T>().map_err(|e| ToolTableError::Schema {
        tool: name.to_owned(),
        reason: e.to_string(),
    })?;
    Ok(ToolSpec {
        name: name.to_owned(),
        description: description.to_owned(),
        input_schema: Some(schema),
    })
}

/// The spec of a tool without input (`input_schema: null`).
pub fn spec_without_input(name: &str, description: &str) -> ToolSpec {
    ToolSpec {
        name: name.to_owned(),
        description: description.to_owned(),
        input_schema: None,
    }
}

/// Whether two name lists share a name; usable in `const` to reject toolset collisions at
/// compile time.
pub const fn first_collision(a: &[&str], b: &[&str]) -> Option<usize> {
    let mut i = 0;
    while i < a.len() {
        let mut j = 0;
        while j < b.len() {
            if str_eq(a[i], b[j]) {
                return Some(i);
            }
            j += 1;
        }
        i += 1;
    }
    None
}

const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}
pub use schemars;
