//! Splits, task requests and replies, secrets and the session body (`CreateSession`) with its
//! validated task source.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

wire_enum! {
    serde
    /// The category of a split.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum SplitType {
        /// Training tasks.
        Train = "train",
        /// Validation tasks (also every custom split given by bare name).
        Validation = "validation",
        /// Test tasks.
        Test = "test",
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
    /// other name is a validation split (PROTOCOL_NOTES row `bare-split-names`).
    pub fn named(name: impl Into<String>) -> Self {
        let name = name.into();
        let split_type = SplitType::ALL.into_iter().find(|t| t.as_str() == name);
        Self::new(name, split_type.unwrap_or(SplitType::Validation))
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
        d.deserialize_any(SplitVisitor)
    }
}

/// Accepts `{"name": ..., "type": ...}` and a bare name (PROTOCOL_NOTES row `bare-split-names`). A full form
/// without `type` is typed from its name like a bare one.
struct SplitVisitor;

impl<'de> serde::de::Visitor<'de> for SplitVisitor {
    type Value = Split;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a split name or an object {\"name\": ..., \"type\": \"train\" | \"validation\" | \"test\"}")
    }

    fn visit_str<E: serde::de::Error>(self, name: &str) -> Result<Split, E> {
        Ok(Split::named(name))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Split, A::Error> {
        /// The full form; its derived reading rejects a repeated or missing `name`.
        #[derive(Deserialize)]
        struct Full {
            name: String,
            #[serde(rename = "type")]
            split_type: Option<SplitType>,
        }
        let Full { name, split_type } =
            Full::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
        Ok(match split_type {
            Some(split_type) => Split { name, split_type },
            None => Split::named(name),
        })
    }
}

/// Body of `POST /{env}/tasks`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ListTasks {
    /// Split name.
    pub split: String,
}

/// Body of `POST /{env}/num_tasks`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NumTasks {
    /// Split name.
    pub split: String,
}

/// Body of `POST /{env}/task` (alias `get_task`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GetTask {
    /// Split name.
    pub split: String,
    /// Zero-based index; negative is rejected (PROTOCOL_NOTES row `negative-index`).
    pub index: i64,
}

/// Body of `POST /{env}/task_range` (alias `get_task_range`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    // Into 0..=n, so the cast cannot truncate.
    let fix = |v: i64| (if v < 0 { (n + v).max(0) } else { v.min(n) }) as usize;
    let s = fix(start.unwrap_or(0));
    s..fix(stop.unwrap_or(n)).max(s)
}

/// Secrets passed to an environment (API keys, credentials), each with the domains it may be
/// sent to when the client named them. `Debug` never shows values.
///
/// On the wire (the `/create` body's `secrets` and the `X-Secrets` header), an entry is a bare
/// string or `{"value": "...", "allowed_domains": [...]}` (the `openreward` form, PROTOCOL_NOTES
/// row `secrets-forms`); an empty value is still a secret that exists. Entries with domains are
/// written in the object form, the others as bare strings.
///
/// ```
/// let s: ors_core::Secrets = serde_json::from_str(
///     r#"{"A": "1", "api_key": {"value": "", "allowed_domains": ["example.com"]}}"#,
/// ).unwrap();
/// assert_eq!(s.get("api_key"), Some(""));
/// assert_eq!(s.allowed_domains("api_key"), Some(&["example.com".to_owned()][..]));
/// assert_eq!(s.allowed_domains("A"), None);
/// ```
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secrets {
    values: BTreeMap<String, String>,
    domains: BTreeMap<String, Vec<String>>,
}

impl Secrets {
    /// The value of a secret.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.values.get(key).map(String::as_str)
    }
    /// The domains a secret may be sent to, when the client named them.
    pub fn allowed_domains(&self, key: &str) -> Option<&[String]> {
        self.domains.get(key).map(Vec::as_slice)
    }
    /// Whether there are no secrets.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
    /// How many secrets there are.
    pub fn len(&self) -> usize {
        self.values.len()
    }
    /// The secret names (never the values).
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.values.keys().map(String::as_str)
    }
    /// The secrets, name and value.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.values.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }
    /// Add a secret (replacing one of that name, and its domains).
    pub fn insert(&mut self, key: impl Into<String>, value: impl Into<String>) {
        let key = key.into();
        self.domains.remove(&key);
        self.values.insert(key, value.into());
    }
    /// Add a secret that may only be sent to `domains`.
    pub fn insert_with_domains(
        &mut self,
        key: impl Into<String>,
        value: impl Into<String>,
        domains: Vec<String>,
    ) {
        let key = key.into();
        self.values.insert(key.clone(), value.into());
        self.domains.insert(key, domains);
    }
    /// Merge another set in; keys already present are kept.
    pub fn merge_missing(&mut self, mut other: Secrets) {
        for (k, v) in other.values {
            if let std::collections::btree_map::Entry::Vacant(slot) = self.values.entry(k) {
                if let Some(d) = other.domains.remove(slot.key()) {
                    self.domains.insert(slot.key().clone(), d);
                }
                slot.insert(v);
            }
        }
    }
}

impl fmt::Debug for Secrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.values.keys().map(|k| (k, "<redacted>")))
            .finish()
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for Secrets {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut s = Secrets::default();
        for (k, v) in iter {
            s.insert(k, v);
        }
        s
    }
}

/// One secret in its object form.
#[derive(Serialize, Deserialize)]
struct SecretEntry {
    value: String,
    #[serde(default)]
    allowed_domains: Option<Vec<String>>,
}

/// One secret as sent: a bare string or the object form.
#[derive(Deserialize)]
#[serde(
    untagged,
    expecting = "a string or {\"value\": \"...\", \"allowed_domains\": [...]}"
)]
enum SecretWire {
    Bare(String),
    Entry(SecretEntry),
}

impl Serialize for Secrets {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(self.values.len()))?;
        for (k, v) in &self.values {
            match self.domains.get(k) {
                Some(d) => map.serialize_entry(
                    k,
                    &SecretEntry {
                        value: v.clone(),
                        allowed_domains: Some(d.clone()),
                    },
                )?,
                None => map.serialize_entry(k, v)?,
            }
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Secrets {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = BTreeMap::<String, SecretWire>::deserialize(d)?;
        let mut s = Secrets::default();
        for (k, v) in raw {
            match v {
                SecretWire::Bare(value) => s.insert(k, value),
                SecretWire::Entry(SecretEntry {
                    value,
                    allowed_domains: Some(domains),
                }) => s.insert_with_domains(k, value, domains),
                SecretWire::Entry(SecretEntry { value, .. }) => s.insert(k, value),
            }
        }
        Ok(s)
    }
}

/// The raw body of `POST /create`, before its task source is validated.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
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
    /// One of the environment's named toolsets for this session (PROTOCOL_NOTES row
    /// `toolset-name`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toolset_name: Option<String>,
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
    /// Both forms were given: `task_spec`, `split` and `index`.
    #[error("provide either task_spec or split and index, not both")]
    Both,
    /// `task_spec` together with `split` (and no `index`).
    #[error(
        "task_spec was given together with split; provide either task_spec or both split and index"
    )]
    SpecWithSplit,
    /// `task_spec` together with `index` (and no `split`).
    #[error(
        "task_spec was given together with index; provide either task_spec or both split and index"
    )]
    SpecWithIndex,
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
            (Some(_), Some(_), Some(_)) => Err(TaskSourceError::Both),
            (Some(_), Some(_), None) => Err(TaskSourceError::SpecWithSplit),
            (Some(_), None, Some(_)) => Err(TaskSourceError::SpecWithIndex),
            (Some(v), None, None) if v.is_object() => Ok(TaskSource::Spec(v.clone())),
            (Some(_), None, None) => Err(TaskSourceError::SpecNotObject),
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

/// Reply of `POST /{env}/task`. `env_name` is sent (the `openreward` client reads it) but not
/// required (PROTOCOL_NOTES row `task-reply-env-name`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskResponse {
    /// The task.
    pub task: Value,
    /// The environment's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env_name: Option<String>,
}

/// Reply of `POST /{env}/task_range`; `env_name` as in [`TaskResponse`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskRangeResponse {
    /// The tasks in the range.
    pub tasks: Vec<Value>,
    /// The environment's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env_name: Option<String>,
}

/// Reply of `GET /version` (PROTOCOL_NOTES row `version-route`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionInfo {
    /// The server's version.
    pub version: String,
    /// The commit it was built from, when known.
    #[serde(default)]
    pub build_sha: Option<String>,
    /// The revision of PROTOCOL_NOTES the server follows (ors-rs servers only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol_notes: Option<String>,
}

/// The body of every non-SSE error reply: `{"detail": "...", "code": "..."}` (PROTOCOL_NOTES
/// row `error-codes`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// What went wrong, for people.
    pub detail: String,
    /// What went wrong, for programs: one of the [`ErrorCode`](crate::ErrorCode) strings.
    /// Servers without codes (the Python reference) leave it out; a code unknown to this
    /// version is kept as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
}

impl ErrorBody {
    /// A body with a detail and a code.
    pub fn new(code: crate::ErrorCode, detail: impl Into<String>) -> Self {
        Self {
            detail: detail.into(),
            code: Some(code.as_str().to_owned()),
        }
    }

    /// The code, when it is one this version knows.
    pub fn error_code(&self) -> Option<crate::ErrorCode> {
        self.code.as_deref().and_then(|c| c.parse().ok())
    }
}
