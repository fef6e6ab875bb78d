//! Episode checks: on sampled tasks of every split, an episode is created, prompted, its
//! tools listed, and deleted.

use std::time::{Duration, Instant};

use ors_client::{Block, Environment, Session, TaskRef, ToolSpec};

use super::discovery::SplitInfo;
use super::options::sample_indices;
use super::report::{count, id_part, Recorder};
use super::{CheckItem, CheckOptions, EpisodeTiming};

/// The task the tools are called in, and what its episode listed.
pub(super) struct FuzzTask {
    /// The task.
    pub task: TaskRef,
    /// Its split.
    pub split: String,
    /// Its index in the split.
    pub index: u64,
    /// The tools its episode listed (`task_tools`).
    pub task_tools: Vec<ToolSpec>,
}

impl FuzzTask {
    /// `split[index]`, for messages.
    pub fn label(&self) -> String {
        format!("{}[{}]", self.split, self.index)
    }
}

/// `episode.<split>.<index>` for the sampled tasks of every split. Returns the timings and the
/// first task whose episode worked, for the tool calls.
pub(super) async fn run(
    rec: &mut Recorder<'_>,
    env: &Environment,
    splits: &[SplitInfo],
    opts: &CheckOptions,
) -> (Vec<EpisodeTiming>, Option<FuzzTask>) {
    let mut timings = Vec::new();
    let mut first: Option<FuzzTask> = None;
    for split in splits {
        for index in sample_indices(split.count.unwrap_or(0), opts.tasks) {
            let id = format!("episode.{}.{index}", id_part(&split.name));
            match episode(env, &split.name, index, opts.timeout).await {
                Ok((ready, tools)) => {
                    let ms = ready.as_secs_f64() * 1000.0;
                    rec.push(CheckItem::ok_with(
                        id,
                        format!("ready in {ms:.1} ms, {}", count(tools.len(), "tool")),
                    ));
                    timings.push(EpisodeTiming {
                        split: split.name.clone(),
                        index,
                        ready_ms: ms,
                    });
                    first.get_or_insert_with(|| FuzzTask {
                        task: TaskRef::at(split.name.clone(), index as i64),
                        split: split.name.clone(),
                        index,
                        task_tools: tools,
                    });
                }
                Err(problem) => rec.push(CheckItem::problem(id, problem)),
            }
        }
    }
    (timings, first)
}

/// One episode: create, prompt, task tools, delete. The time until the prompt arrived, and
/// the tools; or what went wrong, naming the task.
async fn episode(
    env: &Environment,
    split: &str,
    index: u64,
    limit: Duration,
) -> Result<(Duration, Vec<ToolSpec>), String> {
    let task = format!("task {index} of split '{split}'");
    let started = Instant::now();
    let session = within(limit, env.session_at(split, index as i64))
        .await
        .map_err(|e| {
            format!(
                "creating an episode on {task} failed: {e}; the environment must set up every \
                 task it lists (fix its setup, or drop the task)"
            )
        })?;
    let result = use_episode(&session, &task, limit).await;
    let ready = started.elapsed();
    let closed = within(limit, session.close()).await;
    let tools = result?;
    closed.map_err(|e| format!("deleting the episode on {task} failed: {e}"))?;
    Ok((ready, tools))
}

/// The prompt (non-empty) and the tools of an open episode.
async fn use_episode(
    session: &Session,
    task: &str,
    limit: Duration,
) -> Result<Vec<ToolSpec>, String> {
    // Setup may run after `create` answered, so its failure shows here.
    let prompt = within(limit, session.prompt()).await.map_err(|e| {
        format!(
            "the prompt of {task} failed: {e}; the environment must set up and prompt every \
             task it lists (fix its setup or prompt, or drop the task)"
        )
    })?;
    let has_content = prompt.iter().any(|b| match b {
        Block::Text(t) => !t.text.trim().is_empty(),
        Block::Image(_) => true,
    });
    if !has_content {
        return Err(format!(
            "the prompt of {task} is empty ({}, no text): the model would start with \
             nothing to go on; return at least one text block stating the task",
            count(prompt.len(), "block")
        ));
    }
    within(limit, session.tools())
        .await
        .map_err(|e| format!("listing the tools of the episode on {task} failed: {e}"))
}

/// `fut`, or an error once `limit` has passed.
pub(super) async fn within<T>(
    limit: Duration,
    fut: impl std::future::Future<Output = Result<T, ors_client::Error>>,
) -> Result<T, String> {
    tokio::time::timeout(limit, fut)
        .await
        .map_err(|_| format!("no answer within {} s", limit.as_secs_f64()))?
        .map_err(|e| e.to_string())
}
