//! The [`Environment`] trait an author implements, and what `#[environment]` adds to it
//! ([`EnvironmentMeta`]).

use std::fmt;
use std::future::Future;

use futures_util::stream::{self, StreamExt, TryStreamExt};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use ors_core::types::{
    Blocks, GroupCandidate, GroupScore, Message, RunToolOutput, Secrets, Split, ToolSpec,
};

use super::{ToolContext, ToolTable};
use crate::tasks::DataError;

/// An error from an environment's own code (task loading, setup, prompt).
#[derive(Debug, thiserror::Error)]
pub enum EnvError {
    /// The task given to the environment is not one it can run.
    #[error("invalid task: {0}")]
    InvalidTask(String),
    /// The environment does not support this operation.
    #[error("not supported: {0}")]
    Unsupported(String),
    /// Anything else, with a message for the caller.
    #[error("{0}")]
    Message(String),
    /// An I/O error (reading data files, ...).
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// A JSON error.
    #[error("JSON error: {0}")]
    Json(#[from] serde_json::Error),
    /// A task file could not be read (see [`crate::tasks`]).
    #[error(transparent)]
    Data(#[from] DataError),
}

impl EnvError {
    /// An error with a message.
    pub fn msg(message: impl fmt::Display) -> Self {
        EnvError::Message(message.to_string())
    }
}

/// What `#[environment]` adds to an environment: its name, the type of its start-up state, its
/// tool table, and the start-up functions as a server calls them, with the state. Not written
/// by hand; an `impl Environment` without `#[environment]` is reported as missing it.
///
/// Each `*_with` function is the [`Environment`] function of the same name given the state:
/// one the impl wrote with the state as its first parameter (the macro moves it here), else
/// the trait's own, which does not need the state.
#[diagnostic::on_unimplemented(
    message = "`impl Environment for {Self}` is missing `#[environment]`",
    label = "add `#[environment]` above this impl",
    note = "`#[environment]` gives the environment its name and builds its table of `#[tool]` methods"
)]
pub trait EnvironmentMeta: Sized + 'static {
    /// The environment name in URLs: the type name lower-cased, `#[environment(name = "...")]`,
    /// or a `const NAME` written in the impl. A server may serve it under another name too
    /// (`Server::environment_named`).
    const NAME: &'static str;

    /// What the environment is given at start-up and every episode shares (a data set, a
    /// client, the tools of an MCP server, a sandbox's settings): written `type State = ...;`
    /// in the `impl Environment`, `()` when it is not.
    type State: Send + Sync + 'static;

    /// Whether the impl writes [`Environment::score_group`]: `#[environment]` sets it when it
    /// sees the method, and only then do the listings send `supports_score_group: true`
    /// (PROTOCOL_NOTES row `score-group`).
    const SUPPORTS_SCORE_GROUP: bool = false;

    /// The tool table of one served environment: the `#[tool]` methods, the toolsets'
    /// tools, the `dynamic_tools` made from `state`, and the toolsets a session may select
    /// (PROTOCOL_NOTES row `toolset-name`). Built once, when the environment is served.
    fn tool_table(state: &Self::State) -> ToolTable<Self>;

    /// [`Environment::splits`], given the state.
    fn splits_with(_state: &Self::State) -> Vec<Split>
    where
        Self: Environment,
    {
        <Self as Environment>::splits()
    }

    /// [`Environment::tasks`], given the state.
    fn tasks_with(
        _state: &Self::State,
        split: &str,
    ) -> impl Future<Output = Result<Vec<<Self as Environment>::Task>, EnvError>> + Send
    where
        Self: Environment,
    {
        <Self as Environment>::tasks(split)
    }

    /// [`Environment::num_tasks`], given the state.
    fn num_tasks_with(
        _state: &Self::State,
        split: &str,
    ) -> impl Future<Output = Result<Option<usize>, EnvError>> + Send
    where
        Self: Environment,
    {
        <Self as Environment>::num_tasks(split)
    }

    /// [`Environment::task`], given the state.
    fn task_with(
        _state: &Self::State,
        split: &str,
        index: usize,
    ) -> impl Future<Output = Result<<Self as Environment>::Task, EnvError>> + Send
    where
        Self: Environment,
    {
        <Self as Environment>::task(split, index)
    }

    /// [`Environment::task_range`], given the state. Unless the impl writes `task_range`, the
    /// tasks are read one by one with [`EnvironmentMeta::task_with`].
    fn task_range_with(
        state: &Self::State,
        split: &str,
        start: usize,
        stop: usize,
    ) -> impl Future<Output = Result<Vec<<Self as Environment>::Task>, EnvError>> + Send
    where
        Self: Environment,
    {
        // One after the other, in order.
        stream::iter(start..stop)
            .then(move |index| Self::task_with(state, split, index))
            .try_collect()
    }

    /// [`Environment::new`], given the state.
    fn new_with(
        _state: &Self::State,
        task: <Self as Environment>::Task,
        secrets: Secrets,
    ) -> impl Future<Output = Result<Self, EnvError>> + Send
    where
        Self: Environment,
    {
        <Self as Environment>::new(task, secrets)
    }
}

/// A type an environment can use as its [`Environment::Task`]: tasks are JSON on the wire, sent
/// by `/tasks` and received by `create`. Every `Serialize + Deserialize` type is one.
///
/// The serde bounds are on the impl, not on the trait, so a task type without them is reported
/// with this trait's message ("put `#[wire]` on it"), not as serde's bounds.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be the `Task` of an environment",
    label = "tasks are sent and received as JSON, so `{Self}` must implement `Serialize` and `Deserialize`",
    note = "put `#[wire]` on `{Self}` (it derives both through ors_server), or use `JsonObject` for untyped tasks"
)]
pub trait WireTask: Sized {
    /// The task as JSON.
    fn to_wire(&self) -> Result<Value, serde_json::Error>;
    /// A task from JSON.
    fn from_wire(value: Value) -> Result<Self, serde_json::Error>;
}

// `do_not_recommend`: a task type without serde is reported as "put #[wire] on it", not as
// rustc's suggestion to derive `serde::Deserialize` (a crate the author need not depend on).
#[diagnostic::do_not_recommend]
impl<T: Serialize + DeserializeOwned> WireTask for T {
    fn to_wire(&self) -> Result<Value, serde_json::Error> {
        serde_json::to_value(self)
    }
    fn from_wire(value: Value) -> Result<Self, serde_json::Error> {
        serde_json::from_value(value)
    }
}

/// An ORS environment: the type is an episode (built from a task by [`Environment::new`],
/// with its prompt and its `#[tool]` methods); the associated functions serve the splits and
/// tasks.
///
/// # Start-up state
///
/// A server holds one value per served environment, its [`EnvironmentMeta::State`], built at
/// start-up (`Server::environment_with::<E>(state)`): what the environment was configured
/// with, a data set, a client, the tools of an MCP server. Under `#[environment]`, each
/// start-up function (`splits`, `tasks`, `num_tasks`, `task`, `task_range`, `new`) may take it
/// as a first parameter, `state: &Self::State`, before those shown here; one that does not need
/// it leaves it out, so an environment without state (no `type State`: `()`) is written as if
/// there were none. An episode keeps what it needs of the state from `new` (an `Arc` inside
/// it, a client, a connection). One type served twice with two states under two names is two
/// environments of one server.
///
/// `ors_server::Server::environment_with` shows one served twice; `docs/environments.md`
/// ("Start-up state") one with a data file given on the command line.
///
/// Write the impl with `#[environment]` on it; the macro implements [`EnvironmentMeta`] (the
/// name, the state type, the tool table, and the start-up functions given the state) beside it.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an ORS environment",
    note = "implement it with `#[environment] impl Environment for {Self} {{ ... }}`"
)]
pub trait Environment: EnvironmentMeta + Send + Sync {
    /// The task type (a JSON object on the wire): a type with `#[wire]`, or `JsonObject` for
    /// untyped tasks.
    type Task: WireTask + Send + Sync + 'static;

    /// The splits; custom names given with [`Split::named`] (or `"hard".into()`) are
    /// validation splits. Called once, when the environment is served. Required:
    /// `#[environment]` refuses an impl without it.
    fn splits() -> Vec<Split> {
        Vec::new()
    }

    /// The tasks of a split, all at once: the simple way, for splits that fit in memory.
    /// Called once per split and cached for the life of the server, so serving `num_tasks`,
    /// `task(i)` and `task_range` never reloads or clones the split.
    ///
    /// A split too big to load (millions of rows in a file) is served by index instead:
    /// implement [`Environment::num_tasks`] and [`Environment::task`] (see [`crate::tasks`]
    /// for ready-made JSONL and Parquet sources). `#[environment]` requires one of the two.
    fn tasks(split: &str) -> impl Future<Output = Result<Vec<Self::Task>, EnvError>> + Send {
        async move {
            Err(EnvError::Unsupported(format!(
                "split '{split}' lists no tasks: the environment implements neither `tasks` nor \
                 `num_tasks`"
            )))
        }
    }

    /// How many tasks a split has, for a split served by index without being loaded. `None`
    /// (the default) serves the split from [`Environment::tasks`]. Called once per split; the
    /// count is kept for the life of the server.
    fn num_tasks(split: &str) -> impl Future<Output = Result<Option<usize>, EnvError>> + Send {
        let _ = split;
        async { Ok(None) }
    }

    /// Task `index` of a split that [`Environment::num_tasks`] counts (`index` is below the
    /// count: the caller checks). Read it on demand, for `task`, `create` and `task_range`.
    fn task(
        split: &str,
        index: usize,
    ) -> impl Future<Output = Result<Self::Task, EnvError>> + Send {
        async move {
            Err(EnvError::Unsupported(format!(
                "task {index} of split '{split}': `num_tasks` counts this split, so the \
                 environment must implement `task` too"
            )))
        }
    }

    /// Tasks `start..stop` of a split that [`Environment::num_tasks`] counts (`start <= stop
    /// <= count`). By default they are read one by one with [`Environment::task`]; a source
    /// that reads a range faster (a file read sequentially) overrides it.
    fn task_range(
        split: &str,
        start: usize,
        stop: usize,
    ) -> impl Future<Output = Result<Vec<Self::Task>, EnvError>> + Send {
        // One after the other, in order.
        stream::iter(start..stop)
            .then(move |index| Self::task(split, index))
            .try_collect()
    }

    /// Set up an episode for a task: this is the `create` of the protocol. Required:
    /// `#[environment]` refuses an impl without it.
    fn new(
        task: Self::Task,
        secrets: Secrets,
    ) -> impl Future<Output = Result<Self, EnvError>> + Send {
        let _ = (task, secrets);
        async {
            Err(EnvError::Unsupported(
                "the environment does not implement `new`".to_owned(),
            ))
        }
    }

    /// The episode's initial prompt.
    fn prompt(&self) -> impl Future<Output = Result<Blocks, EnvError>> + Send;

    /// The prompt as a conversation, served by `GET /{env}/messages` (PROTOCOL_NOTES row
    /// `messages-route`): an environment whose task is a dialogue gives its turns (reasoning,
    /// tool call and tool result blocks included). The default is one user message holding
    /// [`Environment::prompt`]'s blocks.
    fn messages(&self) -> impl Future<Output = Result<Vec<Message>, EnvError>> + Send {
        async move { Ok(vec![Message::user(self.prompt().await?)]) }
    }

    /// Score a group of candidate answers to this episode's task, one score per candidate in
    /// their order (GRPO-style comparative rewards, PROTOCOL_NOTES row `score-group`): served
    /// by `POST /{env}/score_group` on the session. Optional: an environment that does not
    /// write it is not advertised as scoring groups and the route answers 404. Return an
    /// error when judging fails rather than made-up scores; a wrong number of scores is an
    /// error the caller sees.
    fn score_group(
        &self,
        candidates: Vec<GroupCandidate>,
    ) -> impl Future<Output = Result<Vec<GroupScore>, EnvError>> + Send {
        let _ = candidates;
        async move {
            Err(EnvError::Unsupported(format!(
                "environment '{}' does not implement score_group",
                Self::NAME
            )))
        }
    }

    /// Release the episode's resources; called on `delete`, reaping and shutdown.
    fn teardown(&mut self) -> impl Future<Output = ()> + Send {
        async {}
    }

    /// Tools computed from this episode's task, listed by `task_tools` after the table's.
    fn task_tools(&self) -> Vec<ToolSpec> {
        Vec::new()
    }

    /// Run a tool listed by [`Environment::task_tools`]; `None` means no such tool.
    fn call_task_tool(
        &mut self,
        ctx: ToolContext,
        name: &str,
        input: Value,
    ) -> impl Future<Output = Option<RunToolOutput>> + Send {
        let _ = (ctx, name, input);
        async { None }
    }
}

/// The methods of [`Environment`]. They stay in the trait impl, so `#[environment]` refuses a
/// `#[tool]` of one of these names (its generated code checks against this list at compile
/// time); a test keeps the list equal to the trait's methods.
#[doc(hidden)]
pub const ENVIRONMENT_METHODS: &[&str] = &[
    "splits",
    "tasks",
    "num_tasks",
    "task",
    "task_range",
    "new",
    "prompt",
    "messages",
    "score_group",
    "teardown",
    "task_tools",
    "call_task_tool",
];

#[cfg(test)]
mod tests {
    use super::ENVIRONMENT_METHODS;

    /// The list the macro checks `#[tool]` names against is the trait's own methods, read from
    /// this file: adding a method to the trait without the list fails here.
    #[test]
    fn environment_methods_are_the_traits_methods() {
        let file = syn::parse_file(include_str!("environment.rs")).expect("this file parses");
        let methods: Vec<String> = file
            .items
            .iter()
            .find_map(|item| match item {
                syn::Item::Trait(t) if t.ident == "Environment" => Some(&t.items),
                _ => None,
            })
            .expect("the Environment trait is in this file")
            .iter()
            .filter_map(|item| match item {
                syn::TraitItem::Fn(f) => Some(f.sig.ident.to_string()),
                _ => None,
            })
            .collect();
        assert_eq!(methods, ENVIRONMENT_METHODS);
    }
}
