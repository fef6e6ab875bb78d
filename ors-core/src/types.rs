//! The ORS wire types of the Data Types page, in the exact form the reference emits.
//!
//! Outputs always carry every optional key (`detail`, `metadata`, `reward`,
//! `finished`; PROTOCOL_NOTES row 13) because some clients index them directly;
//! inputs may omit them.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

/// A JSON object, the protocol's `JSONObject`.
pub type JsonObject = Map<String, Value>;

/// A task: an environment-specific JSON value (usually an object).
pub type TaskJson = Value;

/// Text content with optional metadata.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TextBlock {
    /// The text.
    pub text: String,
    /// Optional metadata about this block (`null` on the wire when absent).
    #[serde(default)]
    pub detail: Option<JsonObject>,
}

/// Base64-encoded image content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImageBlock {
    /// Base64-encoded image bytes.
    pub data: String,
    /// MIME type such as `image/png`.
    #[serde(rename = "mimeType")]
    pub mime_type: String,
    /// Optional metadata about this block.
    #[serde(default)]
    pub detail: Option<JsonObject>,
}

/// One unit of content: text or an image, tagged by `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Block {
    /// A text block (`"type": "text"`).
    Text(TextBlock),
    /// An image block (`"type": "image"`).
    Image(ImageBlock),
}

/// A list of blocks: prompts and tool outputs.
pub type Blocks = Vec<Block>;

impl Block {
    /// A text block without detail.
    pub fn text(text: impl Into<String>) -> Self {
        Block::Text(TextBlock {
            text: text.into(),
            detail: None,
        })
    }

    /// An image block from base64 data and a MIME type.
    pub fn image(data_base64: impl Into<String>, mime_type: impl Into<String>) -> Self {
        Block::Image(ImageBlock {
            data: data_base64.into(),
            mime_type: mime_type.into(),
            detail: None,
        })
    }

    /// Attach `detail` metadata to this block.
    pub fn with_detail(mut self, detail: JsonObject) -> Self {
        match &mut self {
            Block::Text(b) => b.detail = Some(detail),
            Block::Image(b) => b.detail = Some(detail),
        }
        self
    }

    /// The text of a text block, `None` for an image.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Block::Text(b) => Some(&b.text),
            Block::Image(_) => None,
        }
    }
}

/// The result of executing a tool: content, reward, and whether the episode ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
            metadata: None,
            reward: None,
            finished: false,
        }
    }

    /// Set the reward.
    pub fn reward(mut self, reward: f64) -> Self {
        self.reward = Some(reward);
        self
    }

    /// Mark the episode finished.
    pub fn finished(mut self) -> Self {
        self.finished = true;
        self
    }

    /// Set whether the episode is finished.
    pub fn with_finished(mut self, finished: bool) -> Self {
        self.finished = finished;
        self
    }

    /// Set the metadata object.
    pub fn metadata(mut self, metadata: JsonObject) -> Self {
        self.metadata = Some(metadata);
        self
    }

    /// Append a block.
    pub fn push(mut self, block: Block) -> Self {
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

/// The specification of one tool: name, description, and JSON Schema of its input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// Tool identifier, used when calling it.
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// JSON Schema of the input object, or `null` when the tool takes no input.
    #[serde(default)]
    pub input_schema: Option<JsonObject>,
}

/// Response body of `GET /{env}/tools` and `GET /{env}/task_tools`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ListToolsOutput {
    /// The tools.
    pub tools: Vec<ToolSpec>,
}

/// The result of a tool call, delivered in the SSE `end` event; `ok` discriminates.
#[derive(Debug, Clone, PartialEq)]
pub enum RunToolOutput {
    /// `{"ok": true, "output": ...}`
    Success(ToolOutput),
    /// `{"ok": false, "error": "..."}`: an error the agent can read and recover from.
    Error(String),
}

impl RunToolOutput {
    /// A tool error result with the given message.
    pub fn error(message: impl Into<String>) -> Self {
        RunToolOutput::Error(message.into())
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

#[derive(Serialize, Deserialize)]
struct RunToolWire {
    ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    output: Option<ToolOutput>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<String>,
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
                let mut st = s.serialize_struct("RunToolError", 2)?;
                st.serialize_field("ok", &false)?;
                st.serialize_field("error", e)?;
                st.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for RunToolOutput {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let w = RunToolWire::deserialize(d)?;
        match (w.ok, w.output, w.error) {
            (true, Some(o), _) => Ok(RunToolOutput::Success(o)),
            (true, None, _) => Err(D::Error::missing_field("output")),
            (false, _, Some(e)) => Ok(RunToolOutput::Error(e)),
            (false, _, None) => Err(D::Error::missing_field("error")),
        }
    }
}

/// A request to execute a tool (`POST /{env}/call` body).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    /// The tool to call.
    pub name: String,
    /// The tool's input object.
    #[serde(default = "empty_object")]
    pub input: Value,
    /// On a reconnect, the id of the call whose result is wanted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
}

fn empty_object() -> Value {
    Value::Object(Map::new())
}

/// The category of a split.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SplitType {
    /// Training tasks.
    Train,
    /// Validation tasks (also every custom split given by bare name).
    Validation,
    /// Test tasks.
    Test,
}

impl fmt::Display for SplitType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SplitType::Train => "train",
            SplitType::Validation => "validation",
            SplitType::Test => "test",
        })
    }
}

/// A named list of tasks and its category.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct Split {
    /// Split identifier.
    pub name: String,
    /// Split category.
    #[serde(rename = "type")]
    pub split_type: SplitType,
}

impl Split {
    /// A split of the given name and type.
    pub fn new(name: impl Into<String>, split_type: SplitType) -> Self {
        Self {
            name: name.into(),
            split_type,
        }
    }
    /// A training split.
    pub fn train(name: impl Into<String>) -> Self {
        Self::new(name, SplitType::Train)
    }
    /// A validation split.
    pub fn validation(name: impl Into<String>) -> Self {
        Self::new(name, SplitType::Validation)
    }
    /// A test split.
    pub fn test(name: impl Into<String>) -> Self {
        Self::new(name, SplitType::Test)
    }
    /// A split given by bare name: `train`, `validation` and `test` get their own type, any
    /// other name is a validation split (PROTOCOL_NOTES row 14).
    pub fn named(name: impl Into<String>) -> Self {
        let name = name.into();
        let split_type = match name.as_str() {
            "train" => SplitType::Train,
            "test" => SplitType::Test,
            _ => SplitType::Validation,
        };
        Self { name, split_type }
    }
}

impl From<&str> for Split {
    fn from(name: &str) -> Self {
        Split::named(name)
    }
}

impl From<String> for Split {
    fn from(name: String) -> Self {
        Split::named(name)
    }
}

impl<'de> Deserialize<'de> for Split {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Wire {
            Full {
                name: String,
                #[serde(rename = "type")]
                split_type: SplitType,
            },
            Bare(String),
        }
        Ok(match Wire::deserialize(d)? {
            Wire::Full { name, split_type } => Split { name, split_type },
            Wire::Bare(name) => Split::named(name),
        })
    }
}

/// Body of `POST /{env}/tasks`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListTasks {
    /// Split name.
    pub split: String,
}

/// Body of `POST /{env}/num_tasks`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NumTasks {
    /// Split name.
    pub split: String,
}

/// Body of `POST /{env}/task` (alias `get_task`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GetTask {
    /// Split name.
    pub split: String,
    /// Zero-based index; negative is rejected (PROTOCOL_NOTES row 16).
    pub index: i64,
}

/// Body of `POST /{env}/task_range` (alias `get_task_range`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GetTaskRange {
    /// Split name.
    pub split: String,
    /// Inclusive start, Python slice rules (negative counts from the end).
    #[serde(default)]
    pub start: Option<i64>,
    /// Exclusive stop, Python slice rules.
    #[serde(default)]
    pub stop: Option<i64>,
}

impl GetTaskRange {
    /// The concrete `start..stop` for a split of `len` tasks, clamped like a Python slice.
    pub fn resolve(&self, len: usize) -> std::ops::Range<usize> {
        slice_bounds(self.start, self.stop, len)
    }
}

/// Resolve optional Python-style slice bounds against a length; `start > stop` is empty.
pub fn slice_bounds(start: Option<i64>, stop: Option<i64>, len: usize) -> std::ops::Range<usize> {
    let n = i64::try_from(len).unwrap_or(i64::MAX);
    let fix = |v: i64| -> i64 {
        if v < 0 {
            (n + v).max(0)
        } else {
            v.min(n)
        }
    };
    let s = fix(start.unwrap_or(0));
    let e = fix(stop.unwrap_or(n));
    // Both are in 0..=n, so the casts cannot truncate.
    let (s, e) = (s as usize, e as usize);
    if s >= e {
        s..s
    } else {
        s..e
    }
}

/// Secrets passed to an environment (API keys, credentials). `Debug` never shows values.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secrets(pub BTreeMap<String, String>);

impl Secrets {
    /// The value of a secret.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }
    /// Whether there are no secrets.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    /// The secret names (never the values).
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }
    /// Add a secret.
    pub fn insert(&mut self, key: impl Into<String>, value: impl Into<String>) {
        self.0.insert(key.into(), value.into());
    }
    /// Merge another set in; keys already present are kept.
    pub fn merge_missing(&mut self, other: Secrets) {
        for (k, v) in other.0 {
            self.0.entry(k).or_insert(v);
        }
    }
}

impl fmt::Debug for Secrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.0.keys().map(|k| (k, "<redacted>")))
            .finish()
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for Secrets {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        Secrets(
            iter.into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        )
    }
}

/// The raw body of `POST /create`, before its task source is validated.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateSession {
    /// Environment to instantiate; the server's default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env_name: Option<String>,
    /// The task, given inline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_spec: Option<Value>,
    /// Split to resolve the task from (with `index`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split: Option<String>,
    /// Index within `split`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<i64>,
    /// Secrets for the environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secrets: Option<Secrets>,
}

/// Where the task of a new episode comes from: exactly one of the two forms.
#[derive(Debug, Clone, PartialEq)]
pub enum TaskSource {
    /// The task given inline (`task_spec`).
    Spec(Value),
    /// The task at `index` in `split`.
    Split {
        /// Split name.
        split: String,
        /// Index in the split.
        index: i64,
    },
}

/// Why a `CreateSession` body has no valid task source.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TaskSourceError {
    /// Neither form was given.
    #[error("provide either task_spec or both split and index (neither was given)")]
    Neither,
    /// Both forms were given.
    #[error("provide either task_spec or split and index, not both")]
    Both,
    /// `split` without `index`.
    #[error("split was given without index; they must be provided together")]
    SplitWithoutIndex,
    /// `index` without `split`.
    #[error("index was given without split; they must be provided together")]
    IndexWithoutSplit,
    /// `task_spec` was not a JSON object.
    #[error("task_spec must be a JSON object")]
    SpecNotObject,
}

impl CreateSession {
    /// A body for an inline task.
    pub fn from_task(task_spec: Value) -> Self {
        Self {
            task_spec: Some(task_spec),
            ..Self::default()
        }
    }

    /// A body for the task at `index` of `split`.
    pub fn from_split(split: impl Into<String>, index: i64) -> Self {
        Self {
            split: Some(split.into()),
            index: Some(index),
            ..Self::default()
        }
    }

    /// Set the environment name.
    pub fn env(mut self, env_name: impl Into<String>) -> Self {
        self.env_name = Some(env_name.into());
        self
    }

    /// Set the secrets.
    pub fn secrets(mut self, secrets: Secrets) -> Self {
        self.secrets = Some(secrets);
        self
    }

    /// Check that exactly one task source is given and return it.
    pub fn task_source(&self) -> Result<TaskSource, TaskSourceError> {
        let spec = self.task_spec.as_ref().filter(|v| !v.is_null());
        match (spec, &self.split, self.index) {
            (Some(_), Some(_), _) | (Some(_), _, Some(_)) => Err(TaskSourceError::Both),
            (Some(v), None, None) => {
                if v.is_object() {
                    Ok(TaskSource::Spec(v.clone()))
                } else {
                    Err(TaskSourceError::SpecNotObject)
                }
            }
            (None, Some(s), Some(i)) => Ok(TaskSource::Split {
                split: s.clone(),
                index: i,
            }),
            (None, Some(_), None) => Err(TaskSourceError::SplitWithoutIndex),
            (None, None, Some(_)) => Err(TaskSourceError::IndexWithoutSplit),
            (None, None, None) => Err(TaskSourceError::Neither),
        }
    }
}

/// `{"sid": ...}`: reply of `create_session`, `create`, `delete`, `delete_session`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionId {
    /// The session id.
    pub sid: String,
}

/// `{"status": "ok"}`: reply of `health` and `ping`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    /// Always `"ok"`.
    pub status: String,
}

impl Status {
    /// `{"status": "ok"}`.
    pub fn ok() -> Self {
        Self {
            status: "ok".to_owned(),
        }
    }
}

/// Reply of `POST /{env}/tasks`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TasksResponse {
    /// The tasks of the split.
    pub tasks: Vec<Value>,
    /// The environment name.
    pub env_name: String,
}

/// Reply of `POST /{env}/num_tasks`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NumTasksResponse {
    /// Number of tasks in the split.
    pub num_tasks: u64,
}

/// Reply of `POST /{env}/task`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskResponse {
    /// The task.
    pub task: Value,
}

/// Reply of `POST /{env}/task_range`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskRangeResponse {
    /// The tasks in the range.
    pub tasks: Vec<Value>,
}

/// The body of every non-SSE error reply: `{"detail": "..."}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// What went wrong.
    pub detail: String,
}
