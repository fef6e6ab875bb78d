//! [`EnvHandle`]: hosts one environment type behind [`DynEnvironment`]: each split either
//! loaded once and cached (`tasks`) or served by index (`num_tasks` + `task`), and each episode
//! in a slot that a blocking tool can take to its thread and hand back.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use futures_util::future::BoxFuture;
use serde_json::Value;
use tokio::sync::oneshot;

use ors_core::types::{
    Blocks, GroupCandidate, GroupScore, Message, RunToolOutput, Secrets, Split, TerminalToolSpec,
    ToolErrorReason, ToolSpec,
};

use super::environment::call_task_tool;
use super::table::{Prepared, ToolRun};
use super::{
    episode_tools, CallInput, DynEnvironment, DynSession, EnvError, Environment, NamedToolset,
    TaskError, ToolContext, ToolFuture, ToolTableError, WireTask,
};

/// The most tasks one `/tasks` or `/task_range` reply carries from a split served by index
/// (`num_tasks` + `task`); asking for more is a 400 that says to page with `/task_range`.
/// Splits loaded whole by `tasks` are in memory anyway and are listed whatever their size.
pub const MAX_TASKS_PER_REQUEST: usize = 10_000;

/// How a split is served, decided the first time it is asked for.
enum SplitTasks<T> {
    /// Loaded by `tasks`, shared without cloning.
    Loaded(Arc<[T]>),
    /// Counted by `num_tasks`; tasks are read by index on demand.
    Indexed(usize),
}

impl<T> Clone for SplitTasks<T> {
    fn clone(&self) -> Self {
        match self {
            SplitTasks::Loaded(t) => SplitTasks::Loaded(Arc::clone(t)),
            SplitTasks::Indexed(n) => SplitTasks::Indexed(*n),
        }
    }
}

impl<T> SplitTasks<T> {
    fn len(&self) -> usize {
        match self {
            SplitTasks::Loaded(t) => t.len(),
            SplitTasks::Indexed(n) => *n,
        }
    }
}

/// Each split's tasks, set up at most once (the cell).
type SplitCache<T> = Mutex<HashMap<String, Arc<OnceLock<SplitTasks<T>>>>>;

/// Hosts an environment type `E` behind [`DynEnvironment`].
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

    /// How a split is served: counted by `num_tasks`, else loaded by `tasks`; once per split.
    async fn split(&self, split: &str) -> Result<SplitTasks<E::Task>, TaskError> {
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
        let tasks = match E::num_tasks(split).await? {
            Some(n) => SplitTasks::Indexed(n),
            None => SplitTasks::Loaded(E::tasks(split).await?.into()),
        };
        Ok(cell.get_or_init(|| tasks).clone())
    }

    /// Tasks `start..stop` (already within bounds) as JSON.
    async fn range_json(
        &self,
        split: &str,
        tasks: &SplitTasks<E::Task>,
        start: usize,
        stop: usize,
    ) -> Result<Vec<Value>, TaskError> {
        match tasks {
            SplitTasks::Loaded(all) => all[start..stop]
                .iter()
                .map(|t| t.to_wire().map_err(TaskError::from))
                .collect(),
            SplitTasks::Indexed(_) => {
                if stop - start > MAX_TASKS_PER_REQUEST {
                    return Err(TaskError::TooMany {
                        split: split.to_owned(),
                        requested: stop - start,
                        limit: MAX_TASKS_PER_REQUEST,
                    });
                }
                let read = E::task_range(split, start, stop).await?;
                if read.len() != stop - start {
                    return Err(TaskError::Env(EnvError::msg(format!(
                        "task_range of split '{split}' returned {} tasks for {start}..{stop}",
                        read.len()
                    ))));
                }
                read.iter()
                    .map(|t| t.to_wire().map_err(TaskError::from))
                    .collect()
            }
        }
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

struct Episode<E: Environment> {
    slot: Slot<E>,
    /// A call returned `finished: true` (PROTOCOL_NOTES row `finished-latch`). Atomic because
    /// concurrent calls share the episode.
    finished: AtomicBool,
    /// The toolset this session selected at `/create` (PROTOCOL_NOTES row `toolset-name`).
    toolset: Option<&'static NamedToolset<E>>,
}

const AWAY: &str = "a blocking tool of this session that timed out is still running; the \
                    session is usable again when it returns";
const LOST: &str = "this session's episode was lost when a blocking tool's thread ended \
                    without returning it; delete the session";

impl<E: Environment> Episode<E> {
    /// The episode, waiting for a blocking tool's thread to hand it back first.
    async fn env(&mut self) -> Option<&mut E> {
        if let Slot::Away(rx) = &mut self.slot {
            self.slot = match rx.await {
                Ok(env) => Slot::Here(env),
                Err(_) => Slot::Lost,
            };
        }
        match &mut self.slot {
            Slot::Here(env) => Some(env),
            _ => None,
        }
    }

    fn here(&self) -> Option<&E> {
        match &self.slot {
            Slot::Here(env) => Some(env),
            _ => None,
        }
    }

    /// Run a call, unless the episode has finished: then it is refused with reason
    /// `episode_finished` unless the environment lets calls go on.
    async fn call(&mut self, ctx: ToolContext, name: &str, input: CallInput) -> RunToolOutput {
        if let Some(refused) = self.latched(name) {
            return refused;
        }
        let out = self.run(ctx, name, input).await;
        self.latch(&out);
        out
    }

    /// A concurrent tool's call, with the episode shared with other concurrent calls; refused
    /// like any call once the episode has finished.
    async fn call_concurrent(
        &self,
        ctx: ToolContext,
        name: &str,
        input: CallInput,
    ) -> RunToolOutput {
        if let Some(refused) = self.latched(name) {
            return refused;
        }
        // A timed-out blocking tool still holds the episode; only an exclusive call may wait
        // for it (waiting needs the slot to itself).
        let Some(env) = self.here() else {
            return RunToolOutput::error(AWAY);
        };
        let out = match E::tool_table().prepare(name, ctx, input) {
            Prepared::Entry(entry, ctx, input) => match &entry.run {
                ToolRun::Concurrent(f) => f(env, ctx, input).await,
                // The server asks `concurrent_tools` first, so only a confused caller gets here.
                _ => RunToolOutput::error(format!("tool '{name}' is not concurrent")),
            },
            Prepared::NotInTable(..) => E::tool_table().unknown(name),
            Prepared::Refused(out) => return out,
        };
        self.latch(&out);
        out
    }

    /// The refusal of a call after the episode finished, unless the environment lets calls
    /// go on.
    fn latched(&self, name: &str) -> Option<RunToolOutput> {
        let latched = !E::tool_table().calls_after_finished();
        (latched && self.finished.load(Ordering::Acquire)).then(|| {
            RunToolOutput::refused(
                ToolErrorReason::EpisodeFinished,
                format!(
                    "'{name}' was not run: the episode has finished (a tool returned \
                     finished: true), so no further tool calls are accepted"
                ),
            )
        })
    }

    /// Remember that `out` finished the episode.
    fn latch(&self, out: &RunToolOutput) {
        if out.output().is_some_and(|o| o.finished) {
            self.finished.store(true, Ordering::Release);
        }
    }

    async fn run(&mut self, ctx: ToolContext, name: &str, input: CallInput) -> RunToolOutput {
        if self.env().await.is_none() {
            return RunToolOutput::error(LOST);
        }
        // The selected toolset's tools first: `#[environment]` refuses a name it shares with
        // the environment's own tools, so nothing is shadowed.
        let table = match self.toolset {
            Some(ts) if ts.table().get(name).is_some() => ts.table(),
            _ => E::tool_table(),
        };
        let (run, ctx, input) = match table.prepare(name, ctx, input) {
            Prepared::Entry(entry, ctx, input) => (entry.run.clone(), ctx, input),
            Prepared::NotInTable(ctx, input) => {
                return match self.env().await {
                    Some(env) => call_task_tool(env, ctx, name, input).await,
                    None => RunToolOutput::error(LOST),
                }
            }
            Prepared::Refused(out) => return out,
        };
        match run {
            ToolRun::Async(f) => match self.env().await {
                Some(env) => f(env, ctx, input).await,
                None => RunToolOutput::error(LOST),
            },
            ToolRun::Concurrent(f) => match self.env().await {
                Some(env) => f(env, ctx, input).await,
                None => RunToolOutput::error(LOST),
            },
            ToolRun::Blocking(f) => self.call_blocking(f, ctx, input).await,
        }
    }

    /// Move the episode to a blocking-pool thread for the call. If this future is dropped (the
    /// call timed out, the session was deleted), the thread still finishes and sends the
    /// episode back, and the next use of the slot waits for it.
    async fn call_blocking(
        &mut self,
        f: super::table::BlockingFn<E>,
        ctx: ToolContext,
        input: CallInput,
    ) -> RunToolOutput {
        let (tx, rx) = oneshot::channel();
        let Slot::Here(mut env) = std::mem::replace(&mut self.slot, Slot::Away(rx)) else {
            return RunToolOutput::error(LOST);
        };
        let thread = tokio::task::spawn_blocking(move || {
            let out = std::panic::catch_unwind(AssertUnwindSafe(|| f(&mut env, ctx, input)));
            let _ = tx.send(env);
            out
        });
        let out = thread.await;
        // Back from the thread, which sent the episode before it returned.
        let _ = self.env().await;
        match out {
            Ok(Ok(out)) => out,
            // The server catches this and answers with an SSE `error` event, as for any tool.
            Ok(Err(panic)) => std::panic::resume_unwind(panic),
            Err(e) => RunToolOutput::error(format!("the blocking tool's thread failed: {e}")),
        }
    }
}

impl<E: Environment> DynSession for Episode<E> {
    fn prompt(&self) -> BoxFuture<'_, Result<Blocks, EnvError>> {
        match self.here() {
            Some(env) => Box::pin(env.prompt()),
            None => Box::pin(async { Err(EnvError::msg(AWAY)) }),
        }
    }
    fn messages(&self) -> BoxFuture<'_, Result<Vec<Message>, EnvError>> {
        match self.here() {
            Some(env) => Box::pin(env.messages()),
            None => Box::pin(async { Err(EnvError::msg(AWAY)) }),
        }
    }
    fn tools(&self) -> Vec<ToolSpec> {
        let mut tools = match self.here() {
            Some(env) => episode_tools(env),
            // Away on a blocking tool's thread: the table's tools, without computed ones.
            None => E::tool_table().all_specs().cloned().collect(),
        };
        if let Some(ts) = self.toolset {
            tools.extend(ts.table().all_specs().cloned());
        }
        tools
    }
    fn call<'a>(&'a mut self, ctx: ToolContext, name: &'a str, input: CallInput) -> ToolFuture<'a> {
        Box::pin(Episode::call(self, ctx, name, input))
    }
    fn concurrent_tools(&self) -> fn(&str) -> bool {
        is_concurrent::<E>
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
            let env = self.env().await.ok_or_else(|| EnvError::msg(LOST))?;
            let scores = env.score_group(candidates).await?;
            if scores.len() != asked {
                return Err(EnvError::msg(format!(
                    "score_group of environment '{}' returned {} scores for {asked} candidates \
                     (one score per candidate is required)",
                    E::NAME,
                    scores.len()
                )));
            }
            if let Some(i) = scores.iter().position(|s| !s.reward.is_finite()) {
                return Err(EnvError::msg(format!(
                    "score_group of environment '{}' gave candidate {i} the reward {} (JSON \
                     carries only finite numbers)",
                    E::NAME,
                    scores[i].reward
                )));
            }
            Ok(scores)
        })
    }
    fn teardown(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            if let Some(env) = self.env().await {
                env.teardown().await;
            }
        })
    }
}

/// Whether `E`'s tool `name` is concurrent (what [`DynSession::concurrent_tools`] returns).
fn is_concurrent<E: Environment>(name: &str) -> bool {
    E::tool_table().is_concurrent(name)
}

async fn construct<E: Environment>(
    task: Value,
    secrets: Secrets,
    toolset: Option<&'static NamedToolset<E>>,
) -> Result<Box<dyn DynSession>, TaskError> {
    let task = E::Task::from_wire(task).map_err(|e| {
        TaskError::Env(EnvError::InvalidTask(format!(
            "task_spec does not match environment '{}': {e}",
            E::NAME
        )))
    })?;
    let env = E::new(task, secrets).await?;
    Ok(Box::new(Episode {
        slot: Slot::Here(Box::new(env)),
        finished: AtomicBool::new(false),
        toolset,
    }))
}

fn invalid_index(split: &str, index: i64, len: usize) -> TaskError {
    TaskError::InvalidIndex {
        split: split.to_owned(),
        index,
        len,
    }
}

impl<E: Environment> DynEnvironment for EnvHandle<E> {
    fn name(&self) -> &str {
        E::NAME
    }
    fn splits(&self) -> &[Split] {
        &self.splits
    }
    fn tools(&self) -> &[ToolSpec] {
        E::tool_table().shared_specs()
    }
    fn terminal_tool(&self) -> Option<&TerminalToolSpec> {
        E::tool_table().terminal_tool()
    }
    fn supports_score_group(&self) -> bool {
        E::SUPPORTS_SCORE_GROUP
    }
    fn table_errors(&self) -> &[ToolTableError] {
        E::tool_table().errors()
    }
    fn tasks(&self, split: &str) -> BoxFuture<'_, Result<Vec<Value>, TaskError>> {
        let split = split.to_owned();
        Box::pin(async move {
            let tasks = self.split(&split).await?;
            let len = tasks.len();
            self.range_json(&split, &tasks, 0, len).await
        })
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
            let i = usize::try_from(index)
                .ok()
                .filter(|&i| i < len)
                .ok_or_else(|| invalid_index(&split, index, len))?;
            match tasks {
                SplitTasks::Loaded(all) => Ok(all[i].to_wire()?),
                SplitTasks::Indexed(_) => Ok(E::task(&split, i).await?.to_wire()?),
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
            self.range_json(&split, &tasks, range.start, range.end)
                .await
        })
    }
    fn create(
        &self,
        task: Value,
        secrets: Secrets,
    ) -> BoxFuture<'static, Result<Box<dyn DynSession>, TaskError>> {
        Box::pin(construct::<E>(task, secrets, None))
    }
    fn toolset_names(&self) -> Vec<&str> {
        E::named_toolsets().iter().map(NamedToolset::name).collect()
    }
    fn create_with_toolset(
        &self,
        task: Value,
        secrets: Secrets,
        toolset: &str,
    ) -> BoxFuture<'static, Result<Box<dyn DynSession>, TaskError>> {
        match E::named_toolsets().iter().find(|t| t.name() == toolset) {
            Some(ts) => Box::pin(construct::<E>(task, secrets, Some(ts))),
            None => {
                let err = super::dynamic::no_toolset(E::NAME, toolset);
                Box::pin(async move { Err(err) })
            }
        }
    }
}
