//! Rollouts: run many episodes of a policy at once and summarize their rewards.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use ors_core::{Block, ToolOutput, ToolSpec};
use serde_json::Value;
use tokio::sync::Semaphore;

use crate::client::{Environment, TaskRef};
use crate::error::{Error, Result};
use crate::session::Session;

/// What a policy decides after seeing the episode so far.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Call this tool with this input (a JSON object).
    Call {
        /// The tool name.
        name: String,
        /// The tool input.
        input: Value,
    },
    /// End the episode without another call.
    Stop,
}

impl Action {
    /// A call of `name` with `input`.
    pub fn call(name: impl Into<String>, input: Value) -> Self {
        Action::Call {
            name: name.into(),
            input,
        }
    }
}

/// How one call of an episode turned out, as the policy sees it next.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The tool's output.
    Output(ToolOutput),
    /// The tool answered `ok: false` with this message (the agent may try again).
    ToolError(String),
    /// The tool crashed with this message (the agent may try again).
    Crashed(String),
}

/// One step of an episode: the call made and what it gave.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    /// The tool called.
    pub name: String,
    /// Its input.
    pub input: Value,
    /// What it gave.
    pub outcome: Outcome,
}

/// Everything a policy may look at when choosing the next call.
#[derive(Debug, Clone, Copy)]
pub struct Observation<'a> {
    /// The split the task comes from.
    pub split: &'a str,
    /// The task's index in its split.
    pub index: i64,
    /// The task itself (as `POST /{env}/task` returns it).
    pub task: &'a Value,
    /// The episode's prompt.
    pub prompt: &'a [Block],
    /// The tools available in this episode.
    pub tools: &'a [ToolSpec],
    /// The calls made so far, oldest first.
    pub history: &'a [Turn],
}

/// The error type a policy may return.
pub type PolicyError = Box<dyn std::error::Error + Send + Sync>;

/// An agent: given the episode so far, choose the next tool call (or stop). Implement it with
/// `async fn next_action(&self, obs: Observation<'_>) -> Result<Action, PolicyError>`; the
/// future must be `Send` because episodes run on tokio's worker threads.
pub trait Policy: Send + Sync + 'static {
    /// The next action for the episode described by `obs`.
    fn next_action(
        &self,
        obs: Observation<'_>,
    ) -> impl Future<Output = std::result::Result<Action, PolicyError>> + Send;
}

/// A progress callback of [`evaluate`]: called after each episode ends.
pub type EvalProgressFn = Arc<dyn Fn(&EvalProgress<'_>) + Send + Sync>;

/// How far an evaluation is.
#[derive(Debug, Clone, Copy)]
pub struct EvalProgress<'a> {
    /// Episodes finished so far (including this one).
    pub done: usize,
    /// Episodes in the evaluation.
    pub total: usize,
    /// The episode that just ended.
    pub episode: &'a Episode,
}

/// Settings of an evaluation.
#[derive(Clone)]
pub struct EvalOptions {
    /// Episodes run at once (at least 1).
    pub concurrency: usize,
    /// Calls per episode before it is cut off.
    pub max_steps: usize,
    /// Secrets for every session.
    pub secrets: ors_core::Secrets,
    /// Called after each episode.
    pub on_progress: Option<EvalProgressFn>,
}

impl Default for EvalOptions {
    fn default() -> Self {
        Self {
            concurrency: 8,
            max_steps: 32,
            secrets: ors_core::Secrets::default(),
            on_progress: None,
        }
    }
}

impl std::fmt::Debug for EvalOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EvalOptions")
            .field("concurrency", &self.concurrency)
            .field("max_steps", &self.max_steps)
            .field("secrets", &self.secrets)
            .field("on_progress", &self.on_progress.is_some())
            .finish()
    }
}

impl EvalOptions {
    /// Run `n` episodes at once.
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n.max(1);
        self
    }

    /// Cut episodes off after `n` calls.
    pub fn max_steps(mut self, n: usize) -> Self {
        self.max_steps = n;
        self
    }

    /// Pass these secrets to every session.
    pub fn secrets(mut self, secrets: ors_core::Secrets) -> Self {
        self.secrets = secrets;
        self
    }

    /// Report each finished episode to `f`.
    pub fn on_progress(mut self, f: impl Fn(&EvalProgress<'_>) + Send + Sync + 'static) -> Self {
        self.on_progress = Some(Arc::new(f));
        self
    }
}

/// The result of one episode.
#[derive(Debug)]
pub struct Episode {
    /// The task's index in the split.
    pub index: i64,
    /// The sum of the rewards of its calls.
    pub ret: f64,
    /// Calls made.
    pub steps: usize,
    /// Whether a call said `finished`.
    pub finished: bool,
    /// What ended the episode early, if anything did (the return so far is kept).
    pub error: Option<Error>,
    /// The calls made and what they gave, oldest first (the trajectory).
    pub turns: Vec<Turn>,
}

impl Episode {
    /// Finished without error and with a positive return.
    pub fn success(&self) -> bool {
        self.finished && self.error.is_none() && self.ret > 0.0
    }
}

/// The results of an evaluation, in the order of the indices given.
#[derive(Debug)]
pub struct EvalReport {
    /// One entry per index.
    pub episodes: Vec<Episode>,
}

impl EvalReport {
    /// The per-episode returns.
    pub fn returns(&self) -> Vec<f64> {
        self.episodes.iter().map(|e| e.ret).collect()
    }

    /// The mean return over all episodes (0 for none); episodes that failed count with the
    /// reward they had collected.
    pub fn mean_reward(&self) -> f64 {
        if self.episodes.is_empty() {
            return 0.0;
        }
        self.episodes.iter().map(|e| e.ret).sum::<f64>() / self.episodes.len() as f64
    }

    /// The fraction of episodes that [succeeded](Episode::success) (0 for none).
    pub fn success_rate(&self) -> f64 {
        if self.episodes.is_empty() {
            return 0.0;
        }
        self.episodes.iter().filter(|e| e.success()).count() as f64 / self.episodes.len() as f64
    }

    /// How many episodes ended in an error.
    pub fn errors(&self) -> usize {
        self.episodes.iter().filter(|e| e.error.is_some()).count()
    }
}

/// Run the tasks `indices` of `split` with `policy`, `options.concurrency` at a time. Each
/// episode fetches its task, creates a session, reads prompt and tools, then asks the policy
/// for calls until one says `finished`, the policy stops, or `max_steps` calls were made; the
/// session is deleted in every case. Failures are recorded per episode, never fatal to the
/// evaluation.
pub async fn evaluate<P: Policy>(
    env: &Environment,
    split: &str,
    indices: impl IntoIterator<Item = i64>,
    policy: Arc<P>,
    options: EvalOptions,
) -> EvalReport {
    let indices: Vec<i64> = indices.into_iter().collect();
    let total = indices.len();
    let permits = Arc::new(Semaphore::new(options.concurrency.max(1)));
    let split: Arc<str> = Arc::from(split);
    let done = Arc::new(AtomicUsize::new(0));
    let on_progress = options.on_progress.clone();
    let report = move |episode: &Episode| {
        let done = done.fetch_add(1, Ordering::Relaxed) + 1;
        if let Some(cb) = &on_progress {
            cb(&EvalProgress {
                done,
                total,
                episode,
            });
        }
    };
    let report = Arc::new(report);
    let mut handles = Vec::with_capacity(total);
    for &index in &indices {
        let (env, split, policy, permits, report) = (
            env.clone(),
            Arc::clone(&split),
            Arc::clone(&policy),
            Arc::clone(&permits),
            Arc::clone(&report),
        );
        let (max_steps, secrets) = (options.max_steps, options.secrets.clone());
        handles.push(tokio::spawn(async move {
            // The semaphore is never closed, so acquiring cannot fail.
            let _permit = permits.acquire_owned().await;
            let episode = run_episode(&env, &split, index, &*policy, max_steps, secrets).await;
            report(&episode);
            episode
        }));
    }
    let mut episodes = Vec::with_capacity(total);
    for (handle, &index) in handles.into_iter().zip(&indices) {
        let episode = handle.await.unwrap_or_else(|e| {
            let episode = Episode {
                index,
                ret: 0.0,
                steps: 0,
                finished: false,
                error: Some(Error::Policy(format!("the episode panicked: {e}"))),
                turns: Vec::new(),
            };
            report(&episode);
            episode
        });
        episodes.push(episode);
    }
    EvalReport { episodes }
}

async fn run_episode<P: Policy>(
    env: &Environment,
    split: &str,
    index: i64,
    policy: &P,
    max_steps: usize,
    secrets: ors_core::Secrets,
) -> Episode {
    let mut ep = Episode {
        index,
        ret: 0.0,
        steps: 0,
        finished: false,
        error: None,
        turns: Vec::new(),
    };
    let task = match env.task(split, index).await {
        Ok(t) => t,
        Err(e) => {
            ep.error = Some(e);
            return ep;
        }
    };
    // Opened by split and index, which works for any task shape; the task fetched above is
    // only for the policy to read.
    let session = match env
        .session(TaskRef::at(split, index))
        .secrets(secrets)
        .open()
        .await
    {
        Ok(s) => s,
        Err(e) => {
            ep.error = Some(e);
            return ep;
        }
    };
    let played = play(&session, split, index, &task, policy, max_steps, &mut ep).await;
    let closed = session.close().await;
    ep.error = played.err().or(closed.err());
    ep
}

async fn play<P: Policy>(
    session: &Session,
    split: &str,
    index: i64,
    task: &Value,
    policy: &P,
    max_steps: usize,
    ep: &mut Episode,
) -> Result<()> {
    let prompt = session.prompt().await?;
    let tools = session.tools().await?;
    while ep.steps < max_steps && !ep.finished {
        let obs = Observation {
            split,
            index,
            task,
            prompt: &prompt,
            tools: &tools,
            history: &ep.turns,
        };
        let (name, input) = match policy.next_action(obs).await {
            Ok(Action::Call { name, input }) => (name, input),
            Ok(Action::Stop) => break,
            Err(e) => return Err(Error::Policy(e.to_string())),
        };
        ep.steps += 1;
        let outcome = match session.call(&name, input.clone()).await {
            Ok(out) => {
                ep.ret += out.reward.unwrap_or(0.0);
                ep.finished = out.finished;
                Outcome::Output(out)
            }
            Err(Error::ToolError { message }) => Outcome::ToolError(message),
            Err(Error::ToolCrashed { message }) => Outcome::Crashed(message),
            Err(e) => return Err(e),
        };
        ep.turns.push(Turn {
            name,
            input,
            outcome,
        });
    }
    Ok(())
}
