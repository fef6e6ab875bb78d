//! The environment runtime: the [`Environment`] trait an author implements (through
//! `#[environment]`), the tool table the macro builds once per type, the [`ToolContext`] a tool
//! may ask for, and the object-safe [`DynEnvironment`] / [`DynSession`] layer that lets one
//! server host many environment types without being generic over them.
//!
//! Nothing here does I/O; the server drives these futures.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};

use futures_util::future::BoxFuture;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use ors_core::types::{Blocks, RunToolOutput, Secrets, Split, ToolSpec};

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
}

impl EnvError {
    /// An error with a message.
    pub fn msg(message: impl fmt::Display) -> Self {
        EnvError::Message(message.to_string())
    }
}

/// Progress sink handed to a [`ToolContext`] by the server.
pub type ProgressSink = Arc<dyn Fn(Value) + Send + Sync>;

/// What a running tool may know about its call: ids, cancellation, and a progress channel.
#[derive(Clone)]
pub struct ToolContext {
    session_id: Arc<str>,
    call_id: Arc<str>,
    cancel: CancellationToken,
    progress: Option<ProgressSink>,
}

impl fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolContext")
            .field("session_id", &self.session_id)
            .field("call_id", &self.call_id)
            .field("cancelled", &self.cancel.is_cancelled())
            .finish()
    }
}

impl ToolContext {
    /// A context for the given session and call; the server builds these.
    pub fn new(
        session_id: impl Into<Arc<str>>,
        call_id: impl Into<Arc<str>>,
        cancel: CancellationToken,
        progress: Option<ProgressSink>,
    ) -> Self {
        Self {
            session_id: session_id.into(),
            call_id: call_id.into(),
            cancel,
            progress,
        }
    }

    /// A context outside any server (tests, direct dispatch): never cancelled, progress dropped.
    pub fn detached() -> Self {
        Self::new("detached", "detached", CancellationToken::new(), None)
    }

    /// The session (episode) id.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// The id of this call (the SSE `task_id`).
    pub fn call_id(&self) -> &str {
        &self.call_id
    }

    /// The token that fires when the session is deleted or reaped, or the call times out.
    pub fn cancellation(&self) -> &CancellationToken {
        &self.cancel
    }

    /// Whether the call has been cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Resolves when the call is cancelled; `select!` on it in long-running tools.
    pub async fn cancelled(&self) {
        self.cancel.cancelled().await
    }

    /// Send a `progress` SSE event with this JSON value to the caller.
    pub fn progress(&self, value: impl Serialize) {
        if let Some(sink) = &self.progress {
            match serde_json::to_value(value) {
                Ok(v) => sink(v),
                Err(e) => sink(Value::String(format!("unserializable progress: {e}"))),
            }
        }
    }
}

/// A boxed tool future borrowing the environment.
pub type ToolFuture<'a> = Pin<Box<dyn Future<Output = RunToolOutput> + Send + 'a>>;

/// The adapter of one tool: parses the input, calls the method, wraps the result. Shared
/// (`Arc`) so a toolset's entries can be re-used, projected, by every environment including it.
pub type ToolFn<E> =
    Arc<dyn for<'a> Fn(&'a mut E, ToolContext, Value) -> ToolFuture<'a> + Send + Sync>;

/// One tool of a table.
pub struct ToolEntry<E> {
    /// The spec shown to agents.
    pub spec: ToolSpec,
    /// Listed by `/tools` (true) or only by `/task_tools` (false).
    pub shared: bool,
    /// The adapter.
    pub call: ToolFn<E>,
}

impl<E> Clone for ToolEntry<E> {
    fn clone(&self) -> Self {
        Self {
            spec: self.spec.clone(),
            shared: self.shared,
            call: Arc::clone(&self.call),
        }
    }
}

impl<E: 'static> ToolEntry<E> {
    /// An entry calling `call` (a generated adapter `fn`, or any closure of that shape).
    pub fn new<F>(spec: ToolSpec, shared: bool, call: F) -> Self
    where
        F: for<'a> Fn(&'a mut E, ToolContext, Value) -> ToolFuture<'a> + Send + Sync + 'static,
    {
        Self {
            spec,
            shared,
            call: Arc::new(call),
        }
    }

    /// This entry as a tool of `O`, reaching the `E` stored inside an `O` through `project`
    /// (how an environment includes a toolset kept in one of its fields).
    pub fn project<O: 'static>(&self, project: fn(&mut O) -> &mut E) -> ToolEntry<O> {
        let inner = Arc::clone(&self.call);
        ToolEntry::new(
            self.spec.clone(),
            self.shared,
            move |outer: &mut O, ctx, input| inner(project(outer), ctx, input),
        )
    }
}

/// Why a tool table could not be built (reported at server start, not at call time).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolTableError {
    /// Two tools share a name (for example an environment tool and a toolset tool).
    #[error("tool name collision: '{0}' is defined twice")]
    Duplicate(String),
    /// A tool's input schema is unusable.
    #[error("tool '{tool}': {reason}")]
    Schema {
        /// The tool.
        tool: String,
        /// What is wrong.
        reason: String,
    },
}

/// The tools of one environment (or toolset) type, built once and shared by every session:
/// specs in declaration order and O(1) dispatch by name.
pub struct ToolTable<E> {
    entries: Vec<ToolEntry<E>>,
    by_name: HashMap<String, usize>,
    shared_specs: Vec<ToolSpec>,
    errors: Vec<ToolTableError>,
}

impl<E: 'static> ToolTable<E> {
    /// Build a table from entries; duplicate names are recorded as errors, first one wins.
    pub fn new(entries: Vec<ToolEntry<E>>) -> Self {
        let mut table = Self {
            entries: Vec::with_capacity(entries.len()),
            by_name: HashMap::with_capacity(entries.len()),
            shared_specs: Vec::new(),
            errors: Vec::new(),
        };
        for e in entries {
            table.push(e);
        }
        table
    }

    fn push(&mut self, entry: ToolEntry<E>) {
        if self.by_name.contains_key(&entry.spec.name) {
            self.errors
                .push(ToolTableError::Duplicate(entry.spec.name.clone()));
            return;
        }
        self.by_name
            .insert(entry.spec.name.clone(), self.entries.len());
        if entry.shared {
            self.shared_specs.push(entry.spec.clone());
        }
        self.entries.push(entry);
    }

    /// Record a schema error found while building (the table stays usable without that tool).
    pub fn with_error(mut self, err: ToolTableError) -> Self {
        self.errors.push(err);
        self
    }

    /// Add the tools of a toolset stored in a field of `E`, reached through `project`; a name
    /// already in the table is recorded as [`ToolTableError::Duplicate`].
    pub fn include<T: 'static>(
        mut self,
        toolset: &ToolTable<T>,
        project: fn(&mut E) -> &mut T,
    ) -> Self {
        self.errors.extend(toolset.errors.iter().cloned());
        for e in &toolset.entries {
            self.push(e.project(project));
        }
        self
    }

    /// Problems found while building; a server refuses to start an environment with any.
    pub fn errors(&self) -> &[ToolTableError] {
        &self.errors
    }

    /// Specs of the shared tools (what `/tools` lists).
    pub fn shared_specs(&self) -> &[ToolSpec] {
        &self.shared_specs
    }

    /// Specs of every tool, shared and task-specific (what `/task_tools` lists, before any
    /// tools the environment computes from its task).
    pub fn all_specs(&self) -> impl Iterator<Item = &ToolSpec> {
        self.entries.iter().map(|e| &e.spec)
    }

    /// The entries in declaration order.
    pub fn entries(&self) -> &[ToolEntry<E>] {
        &self.entries
    }

    /// The entry of a tool by name.
    pub fn get(&self, name: &str) -> Option<&ToolEntry<E>> {
        self.by_name.get(name).map(|&i| &self.entries[i])
    }

    /// Call a tool by name; an unknown name is an `ok: false` result naming it.
    pub fn dispatch<'a>(
        &self,
        env: &'a mut E,
        name: &str,
        ctx: ToolContext,
        input: Value,
    ) -> ToolFuture<'a> {
        match self.get(name) {
            Some(entry) => (entry.call)(env, ctx, input),
            None => {
                let known: Vec<&str> = self.entries.iter().map(|e| e.spec.name.as_str()).collect();
                let msg = format!(
                    "unknown tool '{name}'; available tools: {}",
                    known.join(", ")
                );
                Box::pin(async move { RunToolOutput::Error(msg) })
            }
        }
    }
}

/// A reusable set of tools, made with `#[toolset]` on an inherent impl and included by an
/// environment with `#[environment(toolsets(field))]`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a toolset",
    note = "put `#[toolset]` on an `impl {Self} {{ ... }}` block whose methods carry `#[tool]`"
)]
pub trait Toolset: Send + Sync + 'static {
    /// The tool names, for compile-time collision checks.
    const TOOL_NAMES: &'static [&'static str];
    /// The tool table, built once.
    fn tool_table() -> &'static ToolTable<Self>
    where
        Self: Sized;
}

/// An ORS environment: splits and tasks (associated functions), an episode constructed from a
/// task (`new`), its prompt, and tools (methods marked `#[tool]`).
///
/// Write the impl with `#[environment]` on it; the macro adds the tool table and the name.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an ORS environment",
    note = "implement it with `#[environment] impl Environment for {Self} {{ ... }}`"
)]
pub trait Environment: Sized + Send + Sync + 'static {
    /// The task type (a JSON object on the wire); use `serde_json::Value` for untyped tasks.
    type Task: Serialize + DeserializeOwned + Send + Sync + 'static;

    /// The environment name in URLs (set by `#[environment]`: the type name lower-cased, or
    /// `name = "..."`).
    const NAME: &'static str;

    /// The splits; custom names given with [`Split::named`] (or `"hard".into()`) are
    /// validation splits.
    fn splits() -> Vec<Split>;

    /// The tasks of a split. Called once per split and cached for the life of the server, so
    /// serving `num_tasks`, `task(i)` and `task_range` never reloads or clones the split.
    fn tasks(split: &str) -> impl Future<Output = Result<Vec<Self::Task>, EnvError>> + Send;

    /// Set up an episode for a task: this is the `create` of the protocol.
    fn new(
        task: Self::Task,
        secrets: Secrets,
    ) -> impl Future<Output = Result<Self, EnvError>> + Send;

    /// The episode's initial prompt.
    fn prompt(&self) -> impl Future<Output = Result<Blocks, EnvError>> + Send;

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

    /// The tool table (generated by `#[environment]`).
    #[doc(hidden)]
    fn __ors_tool_table() -> &'static ToolTable<Self>;
}

/// Call a tool on an environment directly, without a server: the table's entries first, then
/// the environment's computed task tools; an unknown name is `ok: false`.
pub async fn call_tool<E: Environment>(
    env: &mut E,
    ctx: ToolContext,
    name: &str,
    input: Value,
) -> RunToolOutput {
    let table = E::__ors_tool_table();
    if table.get(name).is_some() {
        return table.dispatch(env, name, ctx, input).await;
    }
    if let Some(out) = env.call_task_tool(ctx.clone(), name, input.clone()).await {
        return out;
    }
    table.dispatch(env, name, ctx, input).await
}

/// The shared tools of an environment type (what `GET /{env}/tools` lists).
pub fn shared_tools<E: Environment>() -> Vec<ToolSpec> {
    E::__ors_tool_table().shared_specs().to_vec()
}

/// Every tool of an episode: shared, task-specific, then those computed from its task.
pub fn episode_tools<E: Environment>(env: &E) -> Vec<ToolSpec> {
    let mut specs: Vec<ToolSpec> = E::__ors_tool_table().all_specs().cloned().collect();
    specs.extend(env.task_tools());
    specs
}

/// Why a task could not be served.
#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    /// The split does not exist.
    #[error("Invalid split: unknown split '{0}'")]
    UnknownSplit(String),
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
    /// A task could not be turned into JSON or back.
    #[error("task JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// The environment's own code failed.
    #[error(transparent)]
    Env(#[from] EnvError),
}

/// A type-erased environment type, as a server hosts it.
pub trait DynEnvironment: Send + Sync {
    /// The environment name.
    fn name(&self) -> &str;
    /// The splits, normalised.
    fn splits(&self) -> &[Split];
    /// The shared tool specs.
    fn tools(&self) -> &[ToolSpec];
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
    /// Construct an episode from a task given as JSON.
    fn create(
        &self,
        task: Value,
        secrets: Secrets,
    ) -> BoxFuture<'static, Result<Box<dyn DynSession>, TaskError>>;
    /// Construct an episode from the task at `index` of `split`.
    fn create_from_split(
        &self,
        split: &str,
        index: i64,
        secrets: Secrets,
    ) -> BoxFuture<'_, Result<Box<dyn DynSession>, TaskError>>;
}

/// A type-erased episode.
pub trait DynSession: Send + Sync {
    /// The initial prompt.
    fn prompt(&self) -> BoxFuture<'_, Result<Blocks, EnvError>>;
    /// Every tool of this episode.
    fn tools(&self) -> Vec<ToolSpec>;
    /// Run a tool.
    fn call<'a>(&'a mut self, ctx: ToolContext, name: &'a str, input: Value) -> ToolFuture<'a>;
    /// Tear the episode down.
    fn teardown(&mut self) -> BoxFuture<'_, ()>;
}

/// Each split's tasks, loaded at most once (the cell) and shared without cloning (the `Arc`).
type SplitCache<T> = Mutex<HashMap<String, Arc<OnceLock<Arc<[T]>>>>>;

/// Hosts an environment type `E` behind [`DynEnvironment`], caching each split's tasks.
pub struct EnvHandle<E: Environment> {
    splits: Vec<Split>,
    cache: SplitCache<E::Task>,
    load_lock: tokio::sync::Mutex<()>,
}

impl<E: Environment> Default for EnvHandle<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E: Environment> EnvHandle<E> {
    /// A handle for `E`.
    pub fn new() -> Self {
        Self {
            splits: E::splits(),
            cache: Mutex::new(HashMap::new()),
            load_lock: tokio::sync::Mutex::new(()),
        }
    }

    fn check_split(&self, split: &str) -> Result<(), TaskError> {
        if self.splits.iter().any(|s| s.name == split) {
            Ok(())
        } else {
            Err(TaskError::UnknownSplit(split.to_owned()))
        }
    }

    /// The tasks of a split, loaded once.
    pub async fn split_tasks(&self, split: &str) -> Result<Arc<[E::Task]>, TaskError> {
        self.check_split(split)?;
        let cell = {
            let mut map = self.cache.lock().unwrap_or_else(|p| p.into_inner());
            map.entry(split.to_owned()).or_default().clone()
        };
        if let Some(tasks) = cell.get() {
            return Ok(tasks.clone());
        }
        // One loader at a time, so a cold split is not loaded by every concurrent request.
        let _guard = self.load_lock.lock().await;
        if let Some(tasks) = cell.get() {
            return Ok(tasks.clone());
        }
        let tasks: Arc<[E::Task]> = E::tasks(split).await?.into();
        Ok(cell.get_or_init(|| tasks).clone())
    }

    async fn task_at(&self, split: &str, index: i64) -> Result<Arc<[E::Task]>, TaskError> {
        let tasks = self.split_tasks(split).await?;
        if index < 0 || index as u64 >= tasks.len() as u64 {
            return Err(TaskError::InvalidIndex {
                split: split.to_owned(),
                index,
                len: tasks.len(),
            });
        }
        Ok(tasks)
    }
}

struct Episode<E: Environment>(E);

impl<E: Environment> DynSession for Episode<E> {
    fn prompt(&self) -> BoxFuture<'_, Result<Blocks, EnvError>> {
        Box::pin(self.0.prompt())
    }
    fn tools(&self) -> Vec<ToolSpec> {
        episode_tools(&self.0)
    }
    fn call<'a>(&'a mut self, ctx: ToolContext, name: &'a str, input: Value) -> ToolFuture<'a> {
        Box::pin(call_tool(&mut self.0, ctx, name, input))
    }
    fn teardown(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(self.0.teardown())
    }
}

async fn construct<E: Environment>(
    task: E::Task,
    secrets: Secrets,
) -> Result<Box<dyn DynSession>, TaskError> {
    let env = E::new(task, secrets).await?;
    Ok(Box::new(Episode(env)))
}

impl<E: Environment> DynEnvironment for EnvHandle<E> {
    fn name(&self) -> &str {
        E::NAME
    }
    fn splits(&self) -> &[Split] {
        &self.splits
    }
    fn tools(&self) -> &[ToolSpec] {
        E::__ors_tool_table().shared_specs()
    }
    fn table_errors(&self) -> &[ToolTableError] {
        E::__ors_tool_table().errors()
    }
    fn tasks(&self, split: &str) -> BoxFuture<'_, Result<Vec<Value>, TaskError>> {
        let split = split.to_owned();
        Box::pin(async move {
            let tasks = self.split_tasks(&split).await?;
            tasks
                .iter()
                .map(|t| serde_json::to_value(t).map_err(TaskError::from))
                .collect()
        })
    }
    fn num_tasks(&self, split: &str) -> BoxFuture<'_, Result<usize, TaskError>> {
        let split = split.to_owned();
        Box::pin(async move { Ok(self.split_tasks(&split).await?.len()) })
    }
    fn task(&self, split: &str, index: i64) -> BoxFuture<'_, Result<Value, TaskError>> {
        let split = split.to_owned();
        Box::pin(async move {
            let tasks = self.task_at(&split, index).await?;
            Ok(serde_json::to_value(&tasks[index as usize])?)
        })
    }
    fn task_range(
        &self,
        split: &str,
        start: Option<i64>,
        stop: Option<i64>,
    ) -> BoxFuture<'_, Result<Vec<Value>, TaskError>> {
        let split = split.to_owned();
        Box::pin(async move {
            let tasks = self.split_tasks(&split).await?;
            let range = ors_core::types::slice_bounds(start, stop, tasks.len());
            tasks[range]
                .iter()
                .map(|t| serde_json::to_value(t).map_err(TaskError::from))
                .collect()
        })
    }
    fn create(
        &self,
        task: Value,
        secrets: Secrets,
    ) -> BoxFuture<'static, Result<Box<dyn DynSession>, TaskError>> {
        Box::pin(async move {
            let task: E::Task = serde_json::from_value(task).map_err(|e| {
                TaskError::Env(EnvError::InvalidTask(format!(
                    "task_spec does not match environment '{}': {e}",
                    E::NAME
                )))
            })?;
            construct::<E>(task, secrets).await
        })
    }
    fn create_from_split(
        &self,
        split: &str,
        index: i64,
        secrets: Secrets,
    ) -> BoxFuture<'_, Result<Box<dyn DynSession>, TaskError>> {
        let split = split.to_owned();
        Box::pin(async move {
            let tasks = self.task_at(&split, index).await?;
            // The one clone of a task that creating an episode needs: the episode owns it.
            let task: E::Task =
                serde_json::from_value(serde_json::to_value(&tasks[index as usize])?)?;
            construct::<E>(task, secrets).await
        })
    }
}
