//! [`EnvHandle`]: one served environment (an environment type with its start-up state, the name
//! it is served under, and its tool table, built once) behind [`DynEnvironment`], each split
//! either loaded once and cached (`tasks`) or served by index (`num_tasks` + `task`); and
//! [`Episode`], one episode in a slot that a blocking tool can take to its thread and hand
//! back, with the one way a call reaches its tool.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde_json::Value;
use tokio::sync::{oneshot, OnceCell};

use ors_core::types::{
    Blocks, GroupCandidate, GroupScore, Message, RunToolOutput, Secrets, Split, TerminalToolSpec,
    ToolErrorReason, ToolSpec,
};

use super::table::{add_reasoning, as_value, BlockingFn, Prepared, ToolRun};
use super::{
    CallInput, DynEnvironment, DynSession, EnvError, Environment, TaskError, ToolContext,
    ToolFuture, ToolTable, ToolTableError, WireTask,
};

/// The most tasks one `/tasks` or `/task_range` reply carries from a split served by index
/// (`num_tasks` + `task`); asking for more is a 400 that says to page with `/task_range`.
/// Splits loaded whole by `tasks` are in memory anyway and are listed whatever their size.
pub const MAX_TASKS_PER_REQUEST: usize = 10_000;

/// How a split is served, decided the first time it is asked for.
enum SplitTasks<T> {
    /// Loaded by `tasks`, kept in its cell and lent to each request (never cloned).
    Loaded(Vec<T>),
    /// Counted by `num_tasks`; tasks are read by index on demand.
    Indexed(usize),
}

impl<T> SplitTasks<T> {
    fn len(&self) -> usize {
        match self {
            SplitTasks::Loaded(t) => t.len(),
            SplitTasks::Indexed(n) => *n,
        }
    }
}

/// One served environment: `E` with its start-up state, under a name, with its tool table;
/// what a server hosts behind [`DynEnvironment`], and what a test drives without a server
/// ([`EnvHandle::episode`]).
pub struct EnvHandle<E: Environment> {
    name: String,
    state: Arc<E::State>,
    /// Built once here; every episode holds it.
    table: Arc<ToolTable<E>>,
    splits: Vec<Split>,
    /// Each split's tasks, set up at most once, by one loader at a time.
    cache: HashMap<String, OnceCell<SplitTasks<E::Task>>>,
}

impl<E: Environment> Default for EnvHandle<E>
where
    E::State: Default,
{
    fn default() -> Self {
        Self::new(E::State::default())
    }
}

impl<E: Environment> EnvHandle<E> {
    /// `E` served with `state` under its own name ([`EnvironmentMeta::NAME`]); its tool table
    /// and splits are made here, once.
    ///
    /// [`EnvironmentMeta::NAME`]: super::EnvironmentMeta::NAME
    pub fn new(state: E::State) -> Self {
        let splits = E::splits_with(&state);
        Self {
            name: E::NAME.to_owned(),
            table: Arc::new(E::tool_table(&state)),
            cache: splits
                .iter()
                .map(|s| (s.name.clone(), OnceCell::new()))
                .collect(),
            splits,
            state: Arc::new(state),
        }
    }

    /// This environment served under `name` instead of its own (one type served twice needs
    /// two names).
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The start-up state.
    pub fn state(&self) -> &E::State {
        &self.state
    }

    /// The tool table.
    pub fn table(&self) -> &ToolTable<E> {
        &self.table
    }

    /// A new episode of `task`, without a server (tests, embedding): `new` runs here, and its
    /// calls take the path a server's do.
    pub async fn episode(&self, task: E::Task, secrets: Secrets) -> Result<Episode<E>, EnvError> {
        let env = E::new_with(&self.state, task, secrets).await?;
        Ok(Episode::new(env, Arc::clone(&self.table), None))
    }

    /// How a split is served: counted by `num_tasks`, else loaded by `tasks`; once per split.
    async fn split(&self, split: &str) -> Result<&SplitTasks<E::Task>, TaskError> {
        let Some(cell) = self.cache.get(split) else {
            return Err(TaskError::unknown_split(split, &self.splits));
        };
        // One loader a split at a time, so a cold split is not loaded by every concurrent
        // request.
        let tasks = cell.get_or_try_init(|| async {
            Ok::<_, TaskError>(match E::num_tasks_with(&self.state, split).await? {
                Some(n) => SplitTasks::Indexed(n),
                None => SplitTasks::Loaded(E::tasks_with(&self.state, split).await?),
            })
        });
        tasks.await
    }

    /// Tasks `start..stop` (already within bounds) as JSON.
    async fn range_json(
        &self,
        split: &str,
        tasks: &SplitTasks<E::Task>,
        start: usize,
        stop: usize,
    ) -> Result<Vec<Value>, TaskError> {
        let read;
        let tasks = match tasks {
            SplitTasks::Loaded(all) => &all[start..stop],
            SplitTasks::Indexed(_) => {
                if stop - start > MAX_TASKS_PER_REQUEST {
                    return Err(TaskError::TooMany {
                        split: split.to_owned(),
                        requested: stop - start,
                        limit: MAX_TASKS_PER_REQUEST,
                    });
                }
                read = E::task_range_with(&self.state, split, start, stop).await?;
                if read.len() != stop - start {
                    return Err(TaskError::Env(EnvError::msg(format!(
                        "task_range of split '{split}' returned {} tasks for {start}..{stop}",
                        read.len()
                    ))));
                }
                &read[..]
            }
        };
        tasks.iter().map(|t| Ok(t.to_wire()?)).collect()
    }
}

/// Where an episode is: here, or on a blocking tool's thread, which sends it back when the
/// tool returns (also after the call timed out and was answered).
enum Slot<E> {
    Here(Box<E>),
    Away(oneshot::Receiver<Box<E>>),
    /// The thread ended without sending the episode back (the runtime shut down under it).
    Lost,
}

const AWAY: &str = "a blocking tool of this session that timed out is still running; the \
                    session is usable again when it returns";
const LOST: &str = "this session's episode was lost when a blocking tool's thread ended \
                    without returning it; delete the session";

impl<E: Environment> Slot<E> {
    /// The episode, waiting for a blocking tool's thread to hand it back first.
    async fn env(&mut self) -> Option<&mut E> {
        if let Slot::Away(rx) = self {
            *self = rx.await.map_or(Slot::Lost, Slot::Here);
        }
        self.here_mut()
    }

    fn here(&self) -> Option<&E> {
        match self {
            Slot::Here(env) => Some(env),
            _ => None,
        }
    }

    fn here_mut(&mut self) -> Option<&mut E> {
        match self {
            Slot::Here(env) => Some(env),
            _ => None,
        }
    }

    /// Run a tool with the episode to itself: in place, or, for a blocking tool, on a thread
    /// of tokio's blocking pool that the episode moves to for the call. If this future is
    /// dropped (the call timed out, the session was deleted), the thread still finishes and
    /// sends the episode back, and the next use of the slot waits for it.
    async fn run(&mut self, run: &ToolRun<E>, ctx: ToolContext, input: CallInput) -> RunToolOutput {
        let Some(env) = self.env().await else {
            return RunToolOutput::error(LOST);
        };
        match run {
            ToolRun::Async(f) => f(env, ctx, input).await,
            ToolRun::Concurrent(f) => f(env, ctx, input).await,
            ToolRun::Blocking(f) => self.run_blocking(Arc::clone(f), ctx, input).await,
        }
    }

    async fn run_blocking(
        &mut self,
        f: BlockingFn<E>,
        ctx: ToolContext,
        input: CallInput,
    ) -> RunToolOutput {
        let (tx, rx) = oneshot::channel();
        let Slot::Here(mut env) = std::mem::replace(self, Slot::Away(rx)) else {
            return RunToolOutput::error(LOST);
        };
        let thread = tokio::task::spawn_blocking(move || {
            // Caught only to send the episode back; the panic goes on in the caller.
            let out = std::panic::catch_unwind(AssertUnwindSafe(|| f(&mut env, ctx, input)));
            let _ = tx.send(env);
            out
        });
        let out = thread.await;
        // Back from the thread, which sent the episode before it returned.
        let _ = self.env().await;
        match out {
            Ok(Ok(out)) => out,
            Ok(Err(panic)) => std::panic::resume_unwind(panic),
            Err(e) => RunToolOutput::error(format!("the blocking tool's thread failed: {e}")),
        }
    }
}

/// One episode: the environment value, and the tools it has.
pub struct Episode<E: Environment> {
    slot: Slot<E>,
    tools: Tools<E>,
}

/// The tools of an episode (the served environment's table, and the toolset it selected at
/// `/create`), and whether a call has finished it.
struct Tools<E> {
    /// A call returned `finished: true` (PROTOCOL_NOTES row `finished-latch`). Atomic because
    /// concurrent calls share the episode.
    finished: AtomicBool,
    table: Arc<ToolTable<E>>,
    /// The number of the toolset this session selected (PROTOCOL_NOTES row `toolset-name`).
    toolset: Option<usize>,
}

/// How a call holds its episode.
enum At<'a, E> {
    /// To itself: it may wait for a blocking tool's thread, or move the episode to one.
    Exclusive(&'a mut Slot<E>),
    /// Shared with the session's other concurrent calls.
    Shared(&'a Slot<E>),
}

impl<E: Environment> Episode<E> {
    fn new(env: E, table: Arc<ToolTable<E>>, toolset: Option<usize>) -> Self {
        Self {
            slot: Slot::Here(Box::new(env)),
            tools: Tools {
                finished: AtomicBool::new(false),
                table,
                toolset,
            },
        }
    }

    /// The environment value, unless a blocking tool that timed out still has it.
    pub fn get(&self) -> Option<&E> {
        self.slot.here()
    }

    /// The environment value to change, unless a blocking tool that timed out still has it.
    pub fn get_mut(&mut self) -> Option<&mut E> {
        self.slot.here_mut()
    }

    /// Every tool of the episode: the table's (shared and task-specific), those it computes
    /// from its task, then its selected toolset's.
    pub fn tools(&self) -> Vec<ToolSpec> {
        let table = &self.tools.table;
        let mut specs: Vec<ToolSpec> = table.all_specs().cloned().collect();
        // Away on a blocking tool's thread: without the computed ones.
        if let Some(env) = self.slot.here() {
            specs.extend(env.task_tools().into_iter().map(|mut spec| {
                if table.takes_reasoning() {
                    // A computed tool with its own `reasoning` field keeps its schema as it is.
                    let _ = add_reasoning(&mut spec);
                }
                spec
            }));
        }
        if let Some(ts) = self.tools.selected() {
            specs.extend(ts.all_specs().cloned());
        }
        specs
    }

    /// Run a call with the episode to itself (what every tool but a concurrent one gets).
    pub async fn call(
        &mut self,
        ctx: ToolContext,
        name: &str,
        input: impl Into<CallInput>,
    ) -> RunToolOutput {
        let at = At::Exclusive(&mut self.slot);
        self.tools.dispatch(at, ctx, name, input.into()).await
    }

    /// Run a call of a concurrent tool with the episode shared with the session's other
    /// concurrent calls.
    pub async fn call_concurrent(
        &self,
        ctx: ToolContext,
        name: &str,
        input: impl Into<CallInput>,
    ) -> RunToolOutput {
        let at = At::Shared(&self.slot);
        self.tools.dispatch(at, ctx, name, input.into()).await
    }
}

impl<E: Environment> Tools<E> {
    fn selected(&self) -> Option<&ToolTable<E>> {
        self.toolset.and_then(|i| self.table.selected(i))
    }

    /// The one way from a call to its tool: refused once the episode has finished (unless
    /// the environment lets calls go on), prepared by the table that has the tool (the
    /// selected toolset's first: `#[environment]` refuses a name it shares with the
    /// environment's own tools, so nothing is shadowed), run as the tool runs, and remembered
    /// when it finishes the episode. A name no table has is a tool the episode computes from
    /// its task, or unknown.
    async fn dispatch(
        &self,
        at: At<'_, E>,
        ctx: ToolContext,
        name: &str,
        input: CallInput,
    ) -> RunToolOutput {
        let tools = &*self.table;
        if !tools.calls_after_finished() && self.finished.load(Ordering::Acquire) {
            return RunToolOutput::refused(
                ToolErrorReason::EpisodeFinished,
                format!(
                    "'{name}' was not run: the episode has finished (a tool returned finished: \
                     true), so no further tool calls are accepted"
                ),
            );
        }
        let table = self.selected().filter(|t| t.get(name).is_some());
        let out = match (table.unwrap_or(tools).prepare(name, ctx, input), at) {
            (Prepared::Refused(out), _) => return out,
            (Prepared::Entry(e, ctx, input), At::Exclusive(slot)) => {
                slot.run(&e.run, ctx, input).await
            }
            (Prepared::Entry(e, ctx, input), At::Shared(slot)) => match (&e.run, slot.here()) {
                (ToolRun::Concurrent(f), Some(env)) => f(env, ctx, input).await,
                // A timed-out blocking tool still holds the episode; only an exclusive call
                // may wait for it.
                (ToolRun::Concurrent(_), None) => RunToolOutput::error(AWAY),
                // A server asks `is_concurrent` first, so only a confused caller gets here.
                _ => RunToolOutput::error(format!("tool '{name}' is not concurrent")),
            },
            (Prepared::NotInTable(ctx, input), At::Exclusive(slot)) => match slot.env().await {
                // Computed tools take their input as a value, built here only for them.
                Some(env) => match as_value(name, input) {
                    Ok(input) => match env.call_task_tool(ctx, name, input).await {
                        Some(out) => out,
                        None => tools.unknown(name),
                    },
                    Err(out) => out,
                },
                None => RunToolOutput::error(LOST),
            },
            (Prepared::NotInTable(..), At::Shared(_)) => tools.unknown(name),
        };
        if out.output().is_some_and(|o| o.finished) {
            self.finished.store(true, Ordering::Release);
        }
        out
    }
}

impl<E: Environment> DynSession for Episode<E> {
    fn prompt(&self) -> BoxFuture<'_, Result<Blocks, EnvError>> {
        let env = self.slot.here().ok_or_else(|| EnvError::msg(AWAY));
        Box::pin(async move { env?.prompt().await })
    }
    fn messages(&self) -> BoxFuture<'_, Result<Vec<Message>, EnvError>> {
        let env = self.slot.here().ok_or_else(|| EnvError::msg(AWAY));
        Box::pin(async move { env?.messages().await })
    }
    fn tools(&self) -> Vec<ToolSpec> {
        Episode::tools(self)
    }
    fn call<'a>(&'a mut self, ctx: ToolContext, name: &'a str, input: CallInput) -> ToolFuture<'a> {
        Box::pin(Episode::call(self, ctx, name, input))
    }
    fn call_concurrent<'a>(
        &'a self,
        ctx: ToolContext,
        name: &'a str,
        input: CallInput,
    ) -> ToolFuture<'a> {
        Box::pin(Episode::call_concurrent(self, ctx, name, input))
    }
    fn score_group(
        &mut self,
        candidates: Vec<GroupCandidate>,
    ) -> BoxFuture<'_, Result<Vec<GroupScore>, EnvError>> {
        Box::pin(async move {
            let asked = candidates.len();
            let env = self.slot.env().await.ok_or_else(|| EnvError::msg(LOST))?;
            let scores = env.score_group(candidates).await?;
            if scores.len() != asked {
                return Err(EnvError::msg(format!(
                    "score_group returned {} scores for {asked} candidates (one score per \
                     candidate is required)",
                    scores.len()
                )));
            }
            if let Some(i) = scores.iter().position(|s| !s.reward.is_finite()) {
                return Err(EnvError::msg(format!(
                    "score_group gave candidate {i} the reward {} (JSON carries only finite \
                     numbers)",
                    scores[i].reward
                )));
            }
            Ok(scores)
        })
    }
    fn teardown(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            if let Some(env) = self.slot.env().await {
                env.teardown().await;
            }
        })
    }
}

impl<E: Environment> DynEnvironment for EnvHandle<E> {
    fn name(&self) -> &str {
        &self.name
    }
    fn splits(&self) -> &[Split] {
        &self.splits
    }
    fn tools(&self) -> &[ToolSpec] {
        self.table.shared_specs()
    }
    fn terminal_tool(&self) -> Option<&TerminalToolSpec> {
        self.table.terminal_tool()
    }
    fn supports_score_group(&self) -> bool {
        E::SUPPORTS_SCORE_GROUP
    }
    fn table_errors(&self) -> &[ToolTableError] {
        self.table.errors()
    }
    fn is_concurrent(&self, tool: &str) -> bool {
        self.table.is_concurrent(tool)
    }
    fn toolset_names(&self) -> Vec<&str> {
        self.table.selectable_names().collect()
    }
    fn tasks(&self, split: &str) -> BoxFuture<'_, Result<Vec<Value>, TaskError>> {
        // The whole split, as a slice with no bounds (`0..len`).
        self.task_range(split, None, None)
    }
    fn num_tasks(&self, split: &str) -> BoxFuture<'_, Result<usize, TaskError>> {
        let split = split.to_owned();
        Box::pin(async move { Ok(self.split(&split).await?.len()) })
    }
    fn task(&self, split: &str, index: i64) -> BoxFuture<'_, Result<Value, TaskError>> {
        let split = split.to_owned();
        Box::pin(async move {
            let tasks = self.split(&split).await?;
            let len = tasks.len();
            let valid = usize::try_from(index).ok().filter(|&i| i < len);
            let i = valid.ok_or_else(|| TaskError::InvalidIndex {
                split: split.clone(),
                index,
                len,
            })?;
            match tasks {
                SplitTasks::Loaded(all) => Ok(all[i].to_wire()?),
                SplitTasks::Indexed(_) => {
                    Ok(E::task_with(&self.state, &split, i).await?.to_wire()?)
                }
            }
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
            let tasks = self.split(&split).await?;
            let range = ors_core::types::slice_bounds(start, stop, tasks.len());
            self.range_json(&split, tasks, range.start, range.end).await
        })
    }
    fn create(
        &self,
        task: Value,
        secrets: Secrets,
        toolset: Option<&str>,
    ) -> BoxFuture<'static, Result<Box<dyn DynSession>, TaskError>> {
        let toolset = toolset.map(|name| {
            self.table.selectable_index(name).ok_or_else(|| {
                TaskError::Env(EnvError::Unsupported(format!(
                    "environment '{}' has no toolset '{name}' to select",
                    self.name
                )))
            })
        });
        let task = E::Task::from_wire(task).map_err(|e| {
            TaskError::Env(EnvError::InvalidTask(format!(
                "task_spec does not match environment '{}': {e}",
                self.name
            )))
        });
        let (state, table) = (Arc::clone(&self.state), Arc::clone(&self.table));
        Box::pin(async move {
            let (toolset, task) = (toolset.transpose()?, task?);
            let env = E::new_with(&state, task, secrets).await?;
            Ok(Box::new(Episode::new(env, table, toolset)) as Box<dyn DynSession>)
        })
    }
}
