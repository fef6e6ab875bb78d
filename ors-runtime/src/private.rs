//! Items the macros' generated code names by absolute path. Not a public API.

pub use crate::env::{
    Environment, ToolContext, ToolEntry, ToolFuture, ToolTable, ToolTableError, Toolset,
};
pub use crate::schema::input_schema;
pub use ors_core::types::{IntoToolResult, JsonObject, RunToolOutput, ToolSpec};
pub use serde;
pub use serde_json;
pub use serde_json::Value;
pub use std::boxed::Box;
pub use std::option::Option;
pub use std::result::Result;
pub use std::string::String;
pub use std::sync::OnceLock;
pub use std::vec::Vec;

/// A type a `#[tool]` method can take as its input.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be the input of a #[tool] method",
    label = "this input type must implement `Deserialize` and `JsonSchema`",
    note = "put `#[wire]` on `{Self}`: it derives `Deserialize` and `JsonSchema` through ors_server"
)]
pub trait ToolInput: serde::de::DeserializeOwned + schemars::JsonSchema {}
impl<T: serde::de::DeserializeOwned + schemars::JsonSchema> ToolInput for T {}

/// How a tool reads a typed input: parse it and describe it. Made once per tool in a
/// `const`, the one place the generated code requires `T: ToolInput`, so an input type that
/// is not one gives one error, on the type.
pub struct InputOps<T> {
    /// Parse the call's JSON ([`parse_input`]).
    pub parse: fn(&str, Value) -> Result<T, RunToolOutput>,
    /// The tool's spec ([`spec_with_input`]).
    pub spec: fn(&str, &str) -> Result<ToolSpec, ToolTableError>,
}

/// The [`InputOps`] of a valid tool input type.
pub const fn input_ops<T: ToolInput>() -> InputOps<T> {
    InputOps {
        parse: parse_input::<T>,
        spec: spec_with_input::<T>,
    }
}

/// Parse a tool's input, or an `ok: false` result naming the tool and the field.
pub fn parse_input<T: ToolInput>(tool: &str, input: Value) -> Result<T, RunToolOutput> {
    let input = if input.is_null() {
        Value::Object(JsonObject::new())
    } else {
        input
    };
    // serde_json names a missing field but not the field whose value has the wrong type;
    // the path tracker supplies it so the model knows what to fix.
    serde_path_to_error::deserialize(input).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string().replace('`', "'");
        let msg = if path == "." {
            format!("invalid input for tool '{tool}': {inner}")
        } else {
            format!("invalid input for tool '{tool}': field '{path}': {inner}")
        };
        RunToolOutput::Error(msg)
    })
}

/// Check the input of a tool that takes none: `{}` or `null` (other keys are ignored, as
/// models sometimes send them).
pub fn no_input(tool: &str, input: &Value) -> Result<(), RunToolOutput> {
    match input {
        Value::Null | Value::Object(_) => Ok(()),
        other => Err(RunToolOutput::Error(format!(
            "invalid input for tool '{tool}': expected an object, got {}",
            ors_core::types::json_kind(other)
        ))),
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

pub use schemars;

/// Collects a table's tools in declaration order, then the tools of its toolset fields.
pub struct TableBuilder<E> {
    entries: Vec<ToolEntry<E>>,
    errors: Vec<ToolTableError>,
}

impl<E: 'static> Default for TableBuilder<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E: 'static> TableBuilder<E> {
    /// An empty builder.
    pub fn new() -> Self {
        Self {
            entries: Vec::new(),
            errors: Vec::new(),
        }
    }

    /// Add a tool; a spec that could not be built is recorded as an error instead.
    pub fn tool<F>(mut self, spec: Result<ToolSpec, ToolTableError>, shared: bool, call: F) -> Self
    where
        F: for<'a> Fn(&'a mut E, ToolContext, Value) -> ToolFuture<'a> + Send + Sync + 'static,
    {
        match spec {
            Ok(spec) => self.entries.push(ToolEntry::new(spec, shared, call)),
            Err(e) => self.errors.push(e),
        }
        self
    }

    /// Add the tools of a toolset field.
    pub fn toolset<T: 'static>(mut self, field: ToolsetField<E, T>) -> Self {
        let table = (field.table)();
        self.errors.extend(table.errors().iter().cloned());
        self.entries
            .extend(table.entries().iter().map(|e| e.project(field.project)));
        self
    }

    /// The finished table (duplicate names become errors there).
    pub fn build(self) -> ToolTable<E> {
        self.errors
            .into_iter()
            .fold(ToolTable::new(self.entries), ToolTable::with_error)
    }
}

/// A tool description from the lines of its doc comment: common indentation removed,
/// lines joined with newlines, surrounding blank lines trimmed.
pub fn doc_description(lines: &[&str]) -> String {
    let lines: Vec<&str> = lines
        .iter()
        .flat_map(|l| l.split('\n'))
        .map(str::trim_end)
        .collect();
    let indent = lines
        .iter()
        .filter(|l| !l.is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    let dedented: Vec<&str> = lines
        .iter()
        .map(|l| l.get(indent..).unwrap_or(""))
        .collect();
    dedented.join("\n").trim().to_owned()
}

/// A toolset stored in a field of `E`: its names (for the compile-time collision check), its
/// table and how to reach it. Made by [`toolset_field`], the one place the generated code
/// requires `T: Toolset`; the macro emits the identical call for the check and for the table,
/// so a field that is not a toolset gives one error.
pub struct ToolsetField<E, T: 'static> {
    /// The toolset's tool names.
    pub names: &'static [&'static str],
    table: fn() -> &'static ToolTable<T>,
    project: fn(&mut E) -> &mut T,
}

/// The [`ToolsetField`] that `project` reaches; the closure lets the macro name the field
/// without knowing its type.
pub const fn toolset_field<E, T: Toolset>(project: fn(&mut E) -> &mut T) -> ToolsetField<E, T> {
    ToolsetField {
        names: T::TOOL_NAMES,
        table: T::tool_table,
        project,
    }
}

/// Index in `a` of the first name that `b` also has.
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

/// The message of a toolset collision, built at compile time (a `const` panic can only print
/// one `&str`).
pub struct CollisionMessage {
    buf: [u8; 512],
    len: usize,
}

impl CollisionMessage {
    const fn push(mut self, s: &str) -> Self {
        let bytes = s.as_bytes();
        let mut i = 0;
        while i < bytes.len() && self.len < self.buf.len() {
            self.buf[self.len] = bytes[i];
            self.len += 1;
            i += 1;
        }
        self
    }

    /// The message, or `None` when there is no collision.
    pub const fn as_str(&self) -> Option<&str> {
        if self.len == 0 {
            return None;
        }
        let bytes = self.buf.split_at(self.len).0;
        match std::str::from_utf8(bytes) {
            Ok(s) => Some(s),
            // Cut inside a character by the length limit: keep the whole characters.
            Err(e) => match std::str::from_utf8(bytes.split_at(e.valid_up_to()).0) {
                Ok(s) => Some(s),
                Err(_) => Some("tool name collision between an environment and its toolsets"),
            },
        }
    }
}

/// Check the toolset in field `field` (tools `names`) against the environment's own tools
/// and the toolsets included before it; the message says which name collides where.
pub const fn toolset_collision(
    env: &str,
    own: &[&str],
    earlier: &[(&str, &[&str])],
    field: &str,
    names: &[&str],
) -> CollisionMessage {
    let msg = CollisionMessage {
        buf: [0; 512],
        len: 0,
    };
    if let Some(i) = first_collision(names, own) {
        return msg
            .push("tool name collision: `")
            .push(names[i])
            .push("` is a tool of `")
            .push(env)
            .push("` and of its toolset field `")
            .push(field)
            .push("`; rename one of them with #[tool(name = \"...\")]");
    }
    let mut k = 0;
    while k < earlier.len() {
        if let Some(i) = first_collision(names, earlier[k].1) {
            return msg
                .push("tool name collision: `")
                .push(names[i])
                .push("` is a tool of both toolset fields `")
                .push(earlier[k].0)
                .push("` and `")
                .push(field)
                .push("` of `")
                .push(env)
                .push("`; rename one of them with #[tool(name = \"...\")]");
        }
        k += 1;
    }
    msg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doc_description_dedents_keeps_paragraphs_and_trims() {
        assert_eq!(
            doc_description(&[" Add two numbers.", "", " Returns the sum.", ""]),
            "Add two numbers.\n\nReturns the sum."
        );
        // A `/** ... */` block arrives as one string with newlines and its own indentation.
        assert_eq!(
            doc_description(&["\n    Block doc.\n      indented more\n"]),
            "Block doc.\n  indented more"
        );
        assert_eq!(doc_description(&[]), "");
    }

    #[test]
    fn collisions_name_the_tool_and_where_it_is_defined() {
        const OWN: &[&str] = &["submit", "add"];
        let msg = toolset_collision("Gsm8k", OWN, &[], "calc", &["mul", "add"]);
        assert_eq!(
            msg.as_str(),
            Some(
                "tool name collision: `add` is a tool of `Gsm8k` and of its toolset field \
                 `calc`; rename one of them with #[tool(name = \"...\")]"
            )
        );
        let msg = toolset_collision("E", &[], &[("a", &["x", "y"])], "b", &["y"]);
        assert_eq!(
            msg.as_str(),
            Some(
                "tool name collision: `y` is a tool of both toolset fields `a` and `b` of `E`; \
                 rename one of them with #[tool(name = \"...\")]"
            )
        );
        assert_eq!(
            toolset_collision("E", OWN, &[("a", &["x"])], "b", &["z"]).as_str(),
            None
        );
    }

    #[test]
    fn an_overlong_collision_message_is_cut_not_broken() {
        let long = "x".repeat(600);
        let msg = toolset_collision("E", &[long.as_str()], &[], "f", &[long.as_str()]);
        let text = msg.as_str().expect("a collision");
        assert_eq!(text.len(), 512);
        assert!(text.starts_with("tool name collision: `xxx"));
    }

    #[test]
    fn a_cut_inside_a_character_keeps_the_whole_characters() {
        let long = "é".repeat(300);
        let msg = toolset_collision(&long, &["t"], &[], "f", &["t"]);
        let text = msg.as_str().expect("a collision");
        assert_eq!(text.len(), 511);
        assert!(text.ends_with('é'));
    }
}
