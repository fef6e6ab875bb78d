//! [`EnvHandle`]: hosts one environment type behind [`DynEnvironment`], caching each split's
//! tasks.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use futures_util::future::BoxFuture;
use serde_json::Value;

use ors_core::types::{Blocks, Secrets, Split, ToolSpec};

use super::{
    call_tool, episode_tools, DynEnvironment, DynSession, EnvError, Environment, TaskError,
    ToolContext, ToolFuture, ToolTableError, WireTask,
};

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
        E::tool_table().shared_specs()
    }
    fn table_errors(&self) -> &[ToolTableError] {
        E::tool_table().errors()
    }
    fn tasks(&self, split: &str) -> BoxFuture<'_, Result<Vec<Value>, TaskError>> {
        let split = split.to_owned();
        Box::pin(async move {
            let tasks = self.split_tasks(&split).await?;
            tasks
                .iter()
                .map(|t| t.to_wire().map_err(TaskError::from))
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
            Ok(tasks[index as usize].to_wire()?)
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
                .map(|t| t.to_wire().map_err(TaskError::from))
                .collect()
        })
    }
    fn create(
        &self,
        task: Value,
        secrets: Secrets,
    ) -> BoxFuture<'static, Result<Box<dyn DynSession>, TaskError>> {
        Box::pin(async move {
            let task = E::Task::from_wire(task).map_err(|e| {
                TaskError::Env(EnvError::InvalidTask(format!(
                    "task_spec does not match environment '{}': {e}",
                    E::NAME
                )))
            })?;
            construct::<E>(task, secrets).await
        })
    }
}
