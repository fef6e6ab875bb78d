//! The ORS wire types of the Data Types page, in the exact form the reference emits.
//!
//! Outputs always carry every optional key (`detail`, `metadata`, `reward`,
//! `finished`; PROTOCOL_NOTES row `tool-output-wire-form`) because some clients index them directly;
//! inputs may omit them.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

mod content;
mod messages;
mod tasks;

pub use content::*;
pub use messages::*;
pub use tasks::*;

impl BlockText for ToolOutput {
    fn text(&self) -> String {
        self.blocks.text()
    }
}

/// The result of executing a tool: content, reward, and whether the episode ended. Its
/// `Default` is an output with no blocks, no reward, not finished.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ToolOutput {
    /// Output content.
    pub blocks: Blocks,
    /// Optional extra data for the trainer.
    #[serde(default)]
    pub metadata: Option<JsonObject>,
    /// RL reward signal.
    #[serde(default)]
    pub reward: Option<f64>,
    /// Whether the episode is complete.
    #[serde(default)]
    pub finished: bool,
}

impl ToolOutput {
    /// An output of one text block, no reward, not finished.
    pub fn text(text: impl Into<String>) -> Self {
        Self::blocks(vec![Block::text(text)])
    }

    /// An output of the given blocks, no reward, not finished.
    pub fn blocks(blocks: Blocks) -> Self {
        Self {
            blocks,
            ..Self::default()
        }
    }

    /// Set the reward. (Builder methods are named `with_*` / `finish` so they never share a
    /// name with the fields they set.)
    pub fn with_reward(mut self, reward: f64) -> Self {
        self.reward = Some(reward);
        self
    }

    /// Mark the episode finished.
    pub fn finish(mut self) -> Self {
        self.finished = true;
        self
    }

    /// Set whether the episode is finished.
    pub fn with_finished(mut self, finished: bool) -> Self {
        self.finished = finished;
        self
    }

    /// Set the metadata object.
    pub fn with_metadata(mut self, metadata: JsonObject) -> Self {
        self.metadata = Some(metadata);
        self
    }

    /// Append a block.
    pub fn with_block(mut self, block: Block) -> Self {
        self.blocks.push(block);
        self
    }
}

impl From<String> for ToolOutput {
    fn from(text: String) -> Self {
        ToolOutput::text(text)
    }
}

impl From<&str> for ToolOutput {
    fn from(text: &str) -> Self {
        ToolOutput::text(text)
    }
}

impl From<Blocks> for ToolOutput {
    fn from(blocks: Blocks) -> Self {
        ToolOutput::blocks(blocks)
    }
}

impl From<Block> for ToolOutput {
    fn from(block: Block) -> Self {
        ToolOutput::blocks(vec![block])
    }
}

/// The longest tool name the LLM providers accept (OpenAI, Anthropic and Gemini function names).
pub const MAX_TOOL_NAME_LEN: usize = 64;

/// Whether `name` is a tool name every LLM provider accepts: 1 to [`MAX_TOOL_NAME_LEN`]
/// characters, each an ASCII letter, digit, `_` or `-`.
///
/// ```
/// assert!(ors_core::is_valid_tool_name("submit_answer"));
/// assert!(!ors_core::is_valid_tool_name("look up"));
/// ```
pub fn is_valid_tool_name(name: &str) -> bool {
    (1..=MAX_TOOL_NAME_LEN).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The specification of one tool: name, description, and JSON Schema of its input.
///
/// `output_schema`, `detail_url` and `runs_commands` are additions (PROTOCOL_NOTES rows
/// `additions` and `runs-commands`): sent only when set, so the spec of a tool without them is
/// exactly the documented form, and ignored by clients that do not know them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// Tool identifier, used when calling it.
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// JSON Schema of the input object, or `null` when the tool takes no input.
    #[serde(default)]
    pub input_schema: Option<JsonObject>,
    /// JSON Schema of the value a typed tool returns in `metadata.structured` (see [`Json`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<JsonObject>,
    /// A URL with more about the tool (Bedrock's `detail_url`), for clients that fetch it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail_url: Option<String>,
    /// The tool runs the agent's commands or code (`#[tool(runs_commands)]`); `ors check`
    /// tries to escape through such tools (PROTOCOL_NOTES row `runs-commands`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub runs_commands: bool,
}

impl ToolSpec {
    /// A spec with a name, a description and an input schema (`None`: no input), and none of
    /// the additions (output schema, detail URL, `runs_commands`).
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Option<JsonObject>,
    ) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            input_schema,
            output_schema: None,
            detail_url: None,
            runs_commands: false,
        }
    }
}

/// A typed tool result: returned from a `#[tool]` method (`T: Serialize + JsonSchema`), it is
/// sent as one text block holding the value's JSON and, for programs, as the value itself in
/// `metadata.structured`; the tool's spec gets the type's schema as `output_schema`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Json<T>(pub T);

/// The metadata key under which a [`Json`] result carries its value.
pub const STRUCTURED_KEY: &str = "structured";

impl<T: Serialize> Json<T> {
    /// The wire output: the value's JSON as a text block and in `metadata.structured`; a
    /// value that cannot be JSON (a map with non-string keys) is an `ok: false` result.
    pub fn into_output(self) -> RunToolOutput {
        match serde_json::to_value(&self.0) {
            Ok(value) => {
                let text = value.to_string();
                let metadata = JsonObject::from_iter([(STRUCTURED_KEY.to_owned(), value)]);
                RunToolOutput::Success(ToolOutput::text(text).with_metadata(metadata))
            }
            Err(e) => RunToolOutput::error(format!("the tool's result cannot be JSON: {e}")),
        }
    }
}

/// Response body of `GET /{env}/tools` and `GET /{env}/task_tools`.
///
/// `terminal_tool` and `supports_score_group` are the `openreward` SDK's fields (PROTOCOL_NOTES
/// rows `terminal-tool`, `score-group`): sent only when the environment has them, read as
/// absent from servers that do not send them.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ListToolsOutput {
    /// The tools.
    pub tools: Vec<ToolSpec>,
    /// The tool a harness calls with the model's plain answer (it is not in `tools`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminal_tool: Option<TerminalToolSpec>,
    /// Whether `POST /{env}/score_group` scores a group of candidate answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supports_score_group: Option<bool>,
}

impl ListToolsOutput {
    /// A listing of these tools and nothing else.
    pub fn new(tools: Vec<ToolSpec>) -> Self {
        Self {
            tools,
            ..Self::default()
        }
    }
}

/// The environment's terminal tool, as the tools listing names it (PROTOCOL_NOTES row
/// `terminal-tool`): called with the model's plain answer when it answers without a tool call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TerminalToolSpec {
    /// The tool's name, for `POST /{env}/call`.
    pub name: String,
    /// The one input field the answer goes in; `None`: the tool takes no input.
    #[serde(default)]
    pub arg: Option<String>,
    /// What the tool does.
    #[serde(default)]
    pub description: String,
}

impl TerminalToolSpec {
    /// The call input carrying `answer`: `{arg: answer}`, or `{}` for a tool without input.
    pub fn input(&self, answer: &str) -> Value {
        let input = self.arg.iter().map(|arg| (arg.clone(), answer.into()));
        Value::Object(input.collect())
    }
}

wire_enum! {
    serde
    /// Why a call was refused, for programs (PROTOCOL_NOTES row `error-reason`): the `reason` of
    /// an `ok: false` result, beside its message.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum ToolErrorReason {
        /// No tool of that name.
        NotFound = "not_found",
        /// Two tools of one name (the environment and one of its toolsets).
        NameCollision = "name_collision",
        /// The input does not fit the tool's input schema.
        InputValidation = "input_validation",
        /// A call after one that returned `finished: true` (PROTOCOL_NOTES row `finished-latch`).
        EpisodeFinished = "episode_finished",
    }
}

/// An `ok: false` result: the message for the agent and, when one applies, the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{error}")]
pub struct ToolError {
    /// What went wrong, for the agent to read and recover from.
    pub error: String,
    /// Why, for programs; `None` for a tool's own error (and from servers that send none, or a
    /// reason this version does not know).
    pub reason: Option<ToolErrorReason>,
}

impl ToolError {
    /// A tool's own error: a message without a reason.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            error: message.into(),
            reason: None,
        }
    }
}

/// The result of a tool call, delivered in the SSE `end` event; `ok` discriminates.
#[derive(Debug, Clone, PartialEq)]
pub enum RunToolOutput {
    /// `{"ok": true, "output": ...}`
    Success(ToolOutput),
    /// `{"ok": false, "error": "...", "reason": ...}`: an error the agent can read and recover
    /// from (`reason` only when one applies).
    Error(ToolError),
}

impl RunToolOutput {
    /// A tool error result with the given message (no reason: the tool's own error).
    pub fn error(message: impl Into<String>) -> Self {
        RunToolOutput::Error(ToolError::new(message))
    }

    /// A refused call: an error result with a reason.
    pub fn refused(reason: ToolErrorReason, message: impl Into<String>) -> Self {
        RunToolOutput::Error(ToolError {
            error: message.into(),
            reason: Some(reason),
        })
    }

    /// The error of a failed call.
    pub fn error_info(&self) -> Option<&ToolError> {
        match self {
            RunToolOutput::Success(_) => None,
            RunToolOutput::Error(e) => Some(e),
        }
    }

    /// Whether the call succeeded.
    pub fn is_ok(&self) -> bool {
        matches!(self, RunToolOutput::Success(_))
    }

    /// The output of a successful call.
    pub fn output(&self) -> Option<&ToolOutput> {
        match self {
            RunToolOutput::Success(o) => Some(o),
            RunToolOutput::Error(_) => None,
        }
    }

    /// The output, or the error message (what a handler returning a result it got from
    /// elsewhere hands back).
    pub fn into_result(self) -> Result<ToolOutput, String> {
        match self {
            RunToolOutput::Success(o) => Ok(o),
            RunToolOutput::Error(e) => Err(e.error),
        }
    }

    /// The JSON text of this result, as sent on the wire.
    pub fn to_json(&self) -> String {
        // Serializing these plain data types cannot fail (string keys, finite floats are
        // mapped by serde_json to `null` when not finite).
        serde_json::to_string(self).unwrap_or_else(|e| {
            format!(
                "{{\"ok\":false,\"error\":{}}}",
                Value::String(format!("result could not be encoded: {e}"))
            )
        })
    }
}

impl From<ToolOutput> for RunToolOutput {
    fn from(o: ToolOutput) -> Self {
        RunToolOutput::Success(o)
    }
}

/// What a `#[tool]` method may return: a [`ToolOutput`], anything `Into<ToolOutput>` (a
/// `String` is one text block), a typed [`Json`] value, or a `Result` of one of those whose
/// `Err` becomes `ok: false`.
///
/// It lives beside [`ToolOutput`] rather than in the runtime because the two blanket impls
/// below are coherent only in the crate that defines `ToolOutput`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be returned from a #[tool] method",
    note = "return `ToolOutput`, a `String`, `Blocks`, `Json<T>`, or `Result<T, E>` of one of those with `E: Display`"
)]
pub trait IntoToolResult {
    /// The wire result.
    fn into_tool_result(self) -> RunToolOutput;
}

// `do_not_recommend`: a bad return type is reported as "cannot be returned from a #[tool]
// method" rather than as the `From` bound inside these impls.
#[diagnostic::do_not_recommend]
impl<T: Into<ToolOutput>> IntoToolResult for T {
    fn into_tool_result(self) -> RunToolOutput {
        RunToolOutput::Success(self.into())
    }
}

#[diagnostic::do_not_recommend]
impl<T: Into<ToolOutput>, Er: std::fmt::Display> IntoToolResult for Result<T, Er> {
    fn into_tool_result(self) -> RunToolOutput {
        self.map_or_else(|e| RunToolOutput::error(e.to_string()), T::into_tool_result)
    }
}

#[diagnostic::do_not_recommend]
impl<T: Serialize> IntoToolResult for Json<T> {
    fn into_tool_result(self) -> RunToolOutput {
        self.into_output()
    }
}

#[diagnostic::do_not_recommend]
impl<T: Serialize, Er: std::fmt::Display> IntoToolResult for Result<Json<T>, Er> {
    fn into_tool_result(self) -> RunToolOutput {
        self.map_or_else(|e| RunToolOutput::error(e.to_string()), Json::into_output)
    }
}

#[derive(Deserialize)]
struct RunToolWire {
    ok: bool,
    #[serde(default)]
    output: Option<ToolOutput>,
    #[serde(default)]
    error: Option<String>,
    /// Kept as text: a reason this version does not know reads as none, not as a bad result.
    #[serde(default)]
    reason: Option<Value>,
}

impl Serialize for RunToolOutput {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        match self {
            RunToolOutput::Success(o) => {
                let mut st = s.serialize_struct("RunToolSuccess", 2)?;
                st.serialize_field("ok", &true)?;
                st.serialize_field("output", o)?;
                st.end()
            }
            RunToolOutput::Error(e) => {
                let fields = 2 + usize::from(e.reason.is_some());
                let mut st = s.serialize_struct("RunToolError", fields)?;
                st.serialize_field("ok", &false)?;
                st.serialize_field("error", &e.error)?;
                if let Some(reason) = e.reason {
                    st.serialize_field("reason", &reason)?;
                }
                st.end()
            }
        }
    }
}

/// Append JSON that cannot fail to serialize (strings, numbers, JSON values, `None` as
/// `null`) to `out`.
fn push_json<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) {
    // Writing to a `Vec` cannot fail, nor can serializing these.
    let _ = serde_json::to_writer(&mut *out, value);
}

/// Append `text` as a JSON string, byte for byte what serde_json writes (a test holds them
/// equal).
///
/// Tool results are often megabytes of text, and serde_json's scan for bytes to escape, one
/// byte at a time, was three quarters of the instructions of sending a 1 MiB result; this one
/// tests 32 bytes at a time.
///
/// ```
/// let mut out = b"{\"sid\":".to_vec();
/// ors_core::types::push_json_str(&mut out, "a\"b\n");
/// out.push(b'}');
/// assert_eq!(out, br#"{"sid":"a\"b\n"}"#);
/// ```
pub fn push_json_str(out: &mut Vec<u8>, text: &str) {
    let mut rest = text.as_bytes();
    out.reserve(rest.len() + 2);
    out.push(b'"');
    loop {
        let clean = clean_prefix(rest);
        out.extend_from_slice(&rest[..clean]);
        let Some((&byte, after)) = rest[clean..].split_first() else {
            break;
        };
        let (escape, len) = escape(byte);
        out.extend_from_slice(&escape[..len]);
        rest = after;
    }
    out.push(b'"');
}

/// Whether JSON strings escape `byte`: a control character, `"` or `\`.
fn escaped(byte: u8) -> bool {
    (byte < 0x20) | (byte == b'"') | (byte == b'\\')
}

/// How many bytes at the start of `bytes` JSON takes as they are. Whole 32-byte chunks are
/// tested with a fold that has no branch per byte, which the compiler turns into vector
/// compares; the first chunk with a byte to escape is then searched byte by byte.
fn clean_prefix(bytes: &[u8]) -> usize {
    let clean_chunks = bytes
        .chunks_exact(32)
        .take_while(|chunk| !chunk.iter().fold(false, |any, &b| any | escaped(b)))
        .count();
    let start = clean_chunks * 32;
    start
        + bytes[start..]
            .iter()
            .position(|&b| escaped(b))
            .unwrap_or(bytes.len() - start)
}

/// The escape serde_json writes for `byte` (its first `len` bytes), one of those [`escaped`]
/// says JSON escapes.
fn escape(byte: u8) -> ([u8; 6], usize) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let short = |c: u8| ([b'\\', c, 0, 0, 0, 0], 2);
    match byte {
        b'"' => short(b'"'),
        b'\\' => short(b'\\'),
        b'\n' => short(b'n'),
        b'\r' => short(b'r'),
        b'\t' => short(b't'),
        0x08 => short(b'b'),
        0x0c => short(b'f'),
        _ => {
            let (high, low) = (HEX[usize::from(byte >> 4)], HEX[usize::from(byte & 0xf)]);
            ([b'\\', b'u', b'0', b'0', high, low], 6)
        }
    }
}

impl RunToolOutput {
    /// Append this result's JSON text to `out`: the bytes `serde_json::to_writer` writes (a
    /// test holds them equal), with the keys and punctuation written as they are rather than
    /// through the serializer, which scanned each key for escapes and cost as much as the
    /// content of a small result.
    pub(crate) fn write_json(&self, out: &mut Vec<u8>) {
        match self {
            RunToolOutput::Success(o) => {
                out.extend_from_slice(b"{\"ok\":true,\"output\":{\"blocks\":[");
                for (i, block) in o.blocks.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    match block {
                        Block::Text(t) => {
                            out.extend_from_slice(b"{\"type\":\"text\",\"text\":");
                            push_json_str(out, &t.text);
                            out.extend_from_slice(b",\"detail\":");
                            push_json(out, &t.detail);
                        }
                        Block::Image(img) => {
                            out.extend_from_slice(b"{\"type\":\"image\",\"data\":");
                            push_json_str(out, &img.data);
                            out.extend_from_slice(b",\"mimeType\":");
                            push_json_str(out, &img.mime_type);
                            out.extend_from_slice(b",\"detail\":");
                            push_json(out, &img.detail);
                        }
                    }
                    out.push(b'}');
                }
                out.extend_from_slice(b"],\"metadata\":");
                push_json(out, &o.metadata);
                out.extend_from_slice(b",\"reward\":");
                push_json(out, &o.reward);
                out.extend_from_slice(if o.finished {
                    b",\"finished\":true}}"
                } else {
                    b",\"finished\":false}}"
                });
            }
            RunToolOutput::Error(e) => {
                out.extend_from_slice(b"{\"ok\":false,\"error\":");
                push_json_str(out, &e.error);
                if let Some(reason) = e.reason {
                    out.extend_from_slice(b",\"reason\":");
                    push_json(out, &reason);
                }
                out.push(b'}');
            }
        }
    }
}

impl<'de> Deserialize<'de> for RunToolOutput {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let wire = RunToolWire::deserialize(d)?;
        match (wire.ok, wire.output, wire.error) {
            (true, Some(o), _) => Ok(RunToolOutput::Success(o)),
            (true, None, _) => Err(D::Error::missing_field("output")),
            (false, _, Some(error)) => {
                let reason = wire.reason.and_then(|r| serde_json::from_value(r).ok());
                Ok(RunToolOutput::Error(ToolError { error, reason }))
            }
            (false, _, None) => Err(D::Error::missing_field("error")),
        }
    }
}

/// A request to execute a tool (`POST /{env}/call` body). Unknown fields are ignored
/// (PROTOCOL_NOTES row `unknown-fields-ignored`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The tool to call.
    pub name: String,
    /// The tool's input: always a JSON object (absent or `null` reads as `{}`; any other
    /// kind is an error naming the field).
    #[serde(default = "empty_object", deserialize_with = "object_or_null")]
    pub input: Value,
    /// On a reconnect, the id of the call whose result is wanted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
}

fn empty_object() -> Value {
    Value::Object(Map::new())
}

fn object_or_null<'de, D: Deserializer<'de>>(d: D) -> Result<Value, D::Error> {
    use serde::de::{Error, Unexpected};
    match Value::deserialize(d)? {
        Value::Null => Ok(empty_object()),
        v @ Value::Object(_) => Ok(v),
        other => Err(D::Error::invalid_type(
            Unexpected::Other(json_kind(&other)),
            &"a JSON object",
        )),
    }
}

/// A serde_json error's message without its " at line L column C", for errors that name the
/// field instead (the path says where; positions in a request body mean nothing to its sender),
/// and with the names serde quotes in backticks (`` missing field `x` ``) in single quotes, as
/// every other error text quotes names (`missing field 'x'`).
pub fn json_error_text(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    let message = text.strip_suffix(&suffix).unwrap_or(&text);
    single_quoted_names(message)
}

/// `text` with its backticks as single quotes, except inside the double-quoted values serde
/// echoes (`string "a`b"`), which stay as sent.
fn single_quoted_names(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let (mut in_value, mut escaped) = (false, false);
    for c in text.chars() {
        in_value ^= c == '"' && !escaped;
        out.push(if c == '`' && !in_value { '\'' } else { c });
        escaped = in_value && c == '\\' && !escaped;
    }
    out
}

/// How a JSON value is described in error messages ("a string", "an array", ...).
pub fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ours(text: &str) -> String {
        let mut out = Vec::new();
        push_json_str(&mut out, text);
        String::from_utf8(out).expect("UTF-8 in, UTF-8 out")
    }

    /// Every ASCII byte, at every offset of a string longer than two 32-byte chunks, so each
    /// is seen by the chunk test at each of its positions and by the tail's byte-wise scan.
    #[test]
    fn strings_are_written_as_serde_json_writes_them() {
        let base = "abcdefghijklmnopqrstuvwxyz0123456789".repeat(2);
        for byte in 0u8..0x80 {
            for at in 0..base.len() {
                let mut text = base.clone().into_bytes();
                text[at] = byte;
                let text = String::from_utf8(text).expect("ASCII");
                assert_eq!(
                    ours(&text),
                    serde_json::to_string(&text).expect("a string serializes"),
                    "byte {byte:#04x} at {at}"
                );
            }
        }
    }

    proptest! {
        #[test]
        fn any_string_is_written_as_serde_json_writes_it(
            text in prop_oneof![any::<String>(), "[a \"\\\\\n\r\t\u{0}-\u{1f}\u{7f}é😀]{0,40}"]
        ) {
            prop_assert_eq!(ours(&text), serde_json::to_string(&text).expect("a string serializes"));
        }
    }
}
