//! The object-safe layer that lets one server host many environments without being generic
//! over them: [`DynEnvironment`] (a served environment) and [`DynSession`] (an episode).

use futures_util::future::BoxFuture;
use serde_json::Value;

use ors_core::types::{
    Blocks, GroupCandidate, GroupScore, Message, Secrets, Split, TerminalToolSpec, ToolSpec,
};

use super::{CallInput, EnvError, ToolContext, ToolFuture, ToolTableError};

/// Why a task could not be served.
#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    /// The split does not exist ([`TaskError::unknown_split`] names the ones that do).
    #[error("Invalid split: unknown split '{split}'{}", available_splits(known))]
    UnknownSplit {
        /// The split asked for.
        split: String,
        /// The environment's splits (empty when unknown).
        known: Vec<String>,
    },
    /// The index is negative or past the end.
    #[error("Invalid index: {index} is out of range for split '{split}' of {len} tasks")]
    InvalidIndex {
        /// The split.
        split: String,
        /// The index asked for.
        index: i64,
        /// Tasks in the split.
        len: usize,
    },
    /// More tasks asked for at once than one reply carries, from a split served by index.
    #[error(
        "Too many tasks: {requested} tasks of split '{split}' asked for at once, more than \
             the limit of {limit} per request; page through the split with /task_range \
             (for example {{\"split\": \"{split}\", \"start\": 0, \"stop\": {limit}}}) \
             and /num_tasks"
    )]
    TooMany {
        /// The split.
        split: String,
        /// How many tasks the request covers.
        requested: usize,
        /// The most one reply carries ([`crate::env::MAX_TASKS_PER_REQUEST`]).
        limit: usize,
    },
    /// A task could not be turned into JSON or back.
    #[error("task JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// The environment's own code failed.
    #[error(transparent)]
    Env(#[from] EnvError),
}

impl TaskError {
    /// `split` is none of `splits`; the error names them.
    pub fn unknown_split(split: &str, splits: &[Split]) -> Self {
        TaskError::UnknownSplit {
            split: split.to_owned(),
            known: splits.iter().map(|s| s.name.clone()).collect(),
        }
    }
}

/// `; available splits: train, test`, or nothing when the splits are not known.
fn available_splits(known: &[String]) -> String {
    if known.is_empty() {
        String::new()
    } else {
        format!("; available splits: {}", known.join(", "))
    }
}

/// A type-erased served environment, as a server hosts it.
pub trait DynEnvironment: Send + Sync {
    /// The environment name.
    fn name(&self) -> &str;
    /// The splits, normalised.
    fn splits(&self) -> &[Split];
    /// The shared tool specs.
    fn tools(&self) -> &[ToolSpec];
    /// The terminal tool, which the listings name and do not list (PROTOCOL_NOTES row
    /// `terminal-tool`).
    fn terminal_tool(&self) -> Option<&TerminalToolSpec> {
        None
    }
    /// Whether its episodes score groups of candidate answers (`/score_group`, PROTOCOL_NOTES
    /// row `score-group`).
    fn supports_score_group(&self) -> bool {
        false
    }
    /// The names of the toolsets a session may select with `/create`'s `toolset_name`.
    fn toolset_names(&self) -> Vec<&str> {
        Vec::new()
    }
    /// Whether calls of tool `tool` may run beside other calls of their session
    /// (`#[tool(concurrent)]`; PROTOCOL_NOTES row `tool-concurrency`): for those a server calls
    /// [`DynSession::call_concurrent`] with the episode shared. Asked before the episode is
    /// locked. By default none.
    fn is_concurrent(&self, _tool: &str) -> bool {
        false
    }
    /// Problems in the tool table; a server refuses to host an environment with any.
    fn table_errors(&self) -> &[ToolTableError];
    /// All tasks of a split as JSON.
    fn tasks(&self, split: &str) -> BoxFuture<'_, Result<Vec<Value>, TaskError>>;
    /// The number of tasks of a split.
    fn num_tasks(&self, split: &str) -> BoxFuture<'_, Result<usize, TaskError>>;
    /// One task as JSON; negative indices are invalid.
    fn task(&self, split: &str, index: i64) -> BoxFuture<'_, Result<Value, TaskError>>;
    /// A Python-style slice of a split as JSON.
    fn task_range(
        &self,
        split: &str,
        start: Option<i64>,
        stop: Option<i64>,
    ) -> BoxFuture<'_, Result<Vec<Value>, TaskError>>;
    /// Construct an episode from a task given as JSON, with the tools of the toolset it
    /// selected (one of [`DynEnvironment::toolset_names`]) besides the environment's.
    fn create(
        &self,
        task: Value,
        secrets: Secrets,
        toolset: Option<&str>,
    ) -> BoxFuture<'static, Result<Box<dyn DynSession>, TaskError>>;
}

/// A type-erased episode.
pub trait DynSession: Send + Sync {
    /// The initial prompt.
    fn prompt(&self) -> BoxFuture<'_, Result<Blocks, EnvError>>;
    /// The prompt as a conversation (`/messages`): by default one user message holding the
    /// prompt's blocks.
    fn messages(&self) -> BoxFuture<'_, Result<Vec<Message>, EnvError>> {
        Box::pin(async move { Ok(vec![Message::user(self.prompt().await?)]) })
    }
    /// Every tool of this episode.
    fn tools(&self) -> Vec<ToolSpec>;
    /// Score a group of candidate answers: exactly one score per candidate, in their order (a
    /// wrong count is an error naming both numbers). `&mut` so it can wait for an episode a
    /// blocking tool still holds.
    fn score_group(
        &mut self,
        _candidates: Vec<GroupCandidate>,
    ) -> BoxFuture<'_, Result<Vec<GroupScore>, EnvError>> {
        Box::pin(async {
            Err(EnvError::Unsupported(
                "this episode does not score groups".into(),
            ))
        })
    }
    /// Run a tool.
    fn call<'a>(&'a mut self, ctx: ToolContext, name: &'a str, input: CallInput) -> ToolFuture<'a>;
    /// Run a tool that [`DynEnvironment::is_concurrent`] names, with the episode borrowed
    /// shared.
    fn call_concurrent<'a>(
        &'a self,
        _ctx: ToolContext,
        name: &'a str,
        _input: CallInput,
    ) -> ToolFuture<'a> {
        Box::pin(async move {
            ors_core::types::RunToolOutput::error(format!("tool '{name}' is not concurrent"))
        })
    }
    /// Tear the episode down.
    fn teardown(&mut self) -> BoxFuture<'_, ()>;
}
