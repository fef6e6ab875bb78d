//! Rollouts: run many episodes of a policy at once and keep their trajectories.

mod episode;
pub mod trace;

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ors_core::{Block, ListToolsOutput, TerminalToolSpec, ToolSpec};
use serde_json::Value;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::client::Environment;
use crate::error::{Error, Result};
use crate::session::{Session, TaskRef};

pub use episode::{
    Episode, EpisodeError, EvalReport, Outcome, StopReason, Summary, TaskSample, Timings, Turn,
};
pub use trace::AgentTrace;

/// One tool call a policy wants made.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// An id to find the call by in the trajectory (a model's tool-call id), if any.
    pub id: Option<String>,
    /// The tool name.
    pub name: String,
    /// The tool input (a JSON object; `null` means none).
    pub input: Value,
}

impl Call {
    /// A call of `name` with `input`, without an id.
    pub fn new(name: impl Into<String>, input: Value) -> Self {
        Self {
            id: None,
            name: name.into(),
            input,
        }
    }

    /// The same call with this id.
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }
}

/// What a policy decides after seeing the episode so far.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Make these calls, in order, stopping at one that finishes the episode or fails. The
    /// decision counts as one step even with no call in it (an agent nudging its model).
    Calls(Vec<Call>),
    /// Make this call and end the episode after it, whatever it returns: the terminal tool
    /// called with the model's plain answer (PROTOCOL_NOTES row `terminal-tool`). The episode
    /// counts as finished when the call says so; it ends with [`StopReason::Finished`] then,
    /// else with [`StopReason::NoToolCall`].
    Final(Call),
    /// End the episode, for this reason. Not a step, unless the reason is
    /// [`StopReason::NoToolCall`]: a model's answer in prose is its turn.
    Stop(StopReason),
}

impl Action {
    /// A single call of `name` with `input`.
    pub fn call(name: impl Into<String>, input: Value) -> Self {
        Action::Calls(vec![Call::new(name, input)])
    }

    /// End the episode because the policy chose to ([`StopReason::Stopped`]).
    pub fn stop() -> Self {
        Action::Stop(StopReason::Stopped)
    }
}

/// Everything a policy may look at when choosing what to do.
#[derive(Debug, Clone, Copy)]
pub struct Observation<'a> {
    /// The split the task comes from.
    pub split: &'a str,
    /// The task's index in its split.
    pub index: i64,
    /// Which sample of the task this episode is, from 0 ([`Episode::sample`]).
    pub sample: u32,
    /// The task itself (as `POST /{env}/task` returns it).
    pub task: &'a Value,
    /// The episode's prompt.
    pub prompt: &'a [Block],
    /// The tools available in this episode (`task_tools`, or the shared tools).
    pub tools: &'a [ToolSpec],
    /// The environment's terminal tool, when its tools listing names one: what a plain answer
    /// of the model goes to ([`Action::Final`]).
    pub terminal_tool: Option<&'a TerminalToolSpec>,
    /// The calls made so far, oldest first; those of the last decision are at the end, with
    /// its step number.
    pub history: &'a [Turn],
    /// Decisions made so far.
    pub steps: usize,
}

/// The error type a policy may return. Returning a boxed [`Error`] keeps its kind in the
/// trajectory (an [`crate::Agent`] returns [`Error::Model`] this way); anything else is
/// recorded as [`Error::Policy`].
pub type PolicyError = Box<dyn std::error::Error + Send + Sync>;

/// An agent: given the episode so far, choose the next tool calls (or stop).
///
/// A policy is shared by every episode of an evaluation; what it remembers during one
/// episode (an agent's conversation) is its [`Policy::State`], made by [`Policy::start`] and
/// handed to each [`Policy::act`]. A stateless policy uses `()`:
///
/// ```
/// use ors_client::{Action, Observation, Policy, PolicyError};
/// use serde_json::json;
///
/// struct AlwaysFour;
///
/// impl Policy for AlwaysFour {
///     type State = ();
///     fn start(&self, _: Observation<'_>) {}
///     async fn act(&self, _: &mut (), obs: Observation<'_>) -> Result<Action, PolicyError> {
///         Ok(if obs.history.is_empty() {
///             Action::call("submit", json!({ "answer": "4" }))
///         } else {
///             Action::stop()
///         })
///     }
/// }
/// ```
///
/// The futures must be `Send` because episodes run on tokio's worker threads.
pub trait Policy: Send + Sync + 'static {
    /// What the policy keeps during one episode.
    type State: Send;

    /// A new episode: its state, from the first observation (no history yet).
    fn start(&self, obs: Observation<'_>) -> Self::State;

    /// The next action of the episode described by `obs`.
    fn act(
        &self,
        state: &mut Self::State,
        obs: Observation<'_>,
    ) -> impl Future<Output = std::result::Result<Action, PolicyError>> + Send;

    /// The episode ended (`obs` holds every call made): what the policy adds to the
    /// trajectory. An [`crate::Agent`] gives its model's side; the default adds nothing.
    fn finish(&self, state: Self::State, obs: Observation<'_>) -> Option<AgentTrace> {
        let _ = (state, obs);
        None
    }
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

/// How far a [`StopHandle`] has gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Level {
    Running,
    /// Start no more episodes.
    Stopping,
    /// End the running ones too.
    Aborting,
}

/// Stops an evaluation from outside (a Ctrl-C handler): [`StopHandle::stop`] starts no more
/// episodes and lets the running ones finish; [`StopHandle::abort`] also ends the running
/// ones at their next model or tool call. Either way every session is deleted.
#[derive(Debug, Clone)]
pub struct StopHandle(Arc<watch::Sender<Level>>);

impl Default for StopHandle {
    fn default() -> Self {
        Self(Arc::new(watch::Sender::new(Level::Running)))
    }
}

impl StopHandle {
    /// Start no more episodes.
    pub fn stop(&self) {
        self.raise(Level::Stopping);
    }

    /// Start no more episodes and end the running ones now ([`StopReason::Cancelled`]).
    pub fn abort(&self) {
        self.raise(Level::Aborting);
    }

    /// Whether [`StopHandle::stop`] (or `abort`) was called.
    pub fn is_stopped(&self) -> bool {
        *self.0.borrow() >= Level::Stopping
    }

    fn raise(&self, to: Level) {
        self.0.send_if_modified(|level| {
            let raised = *level < to;
            *level = (*level).max(to);
            raised
        });
    }

    /// `fut`, or `None` if the evaluation is aborted first.
    async fn unless_aborted<T>(&self, fut: impl Future<Output = T>) -> Option<T> {
        let mut rx = self.0.subscribe();
        tokio::select! {
            biased;
            r = fut => Some(r),
            _ = rx.wait_for(|l| *l >= Level::Aborting) => None,
        }
    }
}

/// Settings of an evaluation.
#[derive(Clone)]
pub struct EvalOptions {
    /// Episodes run at once (at least 1).
    pub concurrency: usize,
    /// Decisions per episode before it is cut off.
    pub max_steps: usize,
    /// Secrets for every session.
    pub secrets: ors_core::Secrets,
    /// Called after each episode.
    pub on_progress: Option<EvalProgressFn>,
    /// Stops the evaluation from outside.
    pub stop: StopHandle,
    /// Whether [`EvalReport::episodes`] keeps every episode; without, each is only handed to
    /// `on_progress` (which can write it out), so memory stays flat over any number of tasks.
    pub keep_episodes: bool,
}

impl Default for EvalOptions {
    fn default() -> Self {
        Self {
            concurrency: 8,
            max_steps: 32,
            secrets: ors_core::Secrets::default(),
            on_progress: None,
            stop: StopHandle::default(),
            keep_episodes: true,
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
            .field("stopped", &self.stop.is_stopped())
            .field("keep_episodes", &self.keep_episodes)
            .finish()
    }
}

impl EvalOptions {
    /// Run `n` episodes at once.
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n.max(1);
        self
    }

    setters! { []
        /// Cut episodes off after this many decisions.
        max_steps: usize;
        /// Pass these secrets to every session.
        secrets: ors_core::Secrets;
        /// Keep the episodes in the report (the default), or only hand them to `on_progress`.
        keep_episodes: bool;
    }

    /// Report each finished episode to `f`.
    pub fn on_progress(mut self, f: impl Fn(&EvalProgress<'_>) + Send + Sync + 'static) -> Self {
        self.on_progress = Some(Arc::new(f));
        self
    }

    /// A handle that stops this evaluation (clone it before handing the options over).
    pub fn stop_handle(&self) -> StopHandle {
        self.stop.clone()
    }
}

/// Run the tasks `indices` of `split` with `policy`, `options.concurrency` at a time. Each
/// episode fetches its task, creates a session, reads prompt and tools, then asks the policy
/// for calls until one says `finished`, the policy stops, or `max_steps` decisions were made;
/// the session is deleted in every case. Failures are recorded per episode, never fatal to
/// the evaluation. After [`StopHandle::stop`], episodes not yet started are listed in
/// [`EvalReport::not_run`]. Each task runs once (sample 0); [`evaluate_samples`] runs several
/// samples of each.
pub async fn evaluate<P: Policy>(
    env: &Environment,
    split: &str,
    indices: impl IntoIterator<Item = i64>,
    policy: Arc<P>,
    options: EvalOptions,
) -> EvalReport {
    let episodes = indices.into_iter().map(TaskSample::first);
    evaluate_samples(env, split, episodes, policy, options).await
}

/// Run these samples of tasks of `split`, as [`evaluate`] runs tasks: each sample is an
/// episode of its own (its own session), recorded with its [`Episode::sample`], and all share
/// `options.concurrency`. [`TaskSample::each`] makes K samples of every task:
///
/// ```no_run
/// # use std::sync::Arc;
/// # use ors_client::{evaluate_samples, Client, EvalOptions, Policy, TaskSample};
/// # async fn run(policy: Arc<impl Policy>) -> Result<(), ors_client::Error> {
/// let env = Client::new("http://127.0.0.1:8080")?.environment("gsm8k");
/// let samples = TaskSample::each(0..50, 4);
/// let report = evaluate_samples(&env, "test", samples, policy, EvalOptions::default()).await;
/// assert_eq!(report.episodes.len() + report.not_run.len(), 200);
/// # Ok(())
/// # }
/// ```
pub async fn evaluate_samples<P: Policy>(
    env: &Environment,
    split: &str,
    episodes: impl IntoIterator<Item = TaskSample>,
    policy: Arc<P>,
    options: EvalOptions,
) -> EvalReport {
    let indices: Vec<TaskSample> = episodes.into_iter().collect();
    let total = indices.len();
    let split: Arc<str> = Arc::from(split);
    let concurrency = options.concurrency.max(1);
    // Episodes are started as others end, so a long list costs nothing until its turn.
    let mut next = 0;
    let mut running = JoinSet::new();
    let mut positions: HashMap<tokio::task::Id, (usize, TaskSample)> = HashMap::new();
    let mut ended: Vec<(usize, Episode)> = Vec::new();
    let mut done = 0;
    loop {
        while running.len() < concurrency && next < total && !options.stop.is_stopped() {
            let (pos, at) = (next, indices[next]);
            next += 1;
            let run = Run {
                env: env.clone(),
                split: Arc::clone(&split),
                at,
                max_steps: options.max_steps,
                stop: options.stop.clone(),
            };
            let (policy, secrets) = (Arc::clone(&policy), options.secrets.clone());
            let task = running.spawn(async move { run.episode(&*policy, secrets).await });
            positions.insert(task.id(), (pos, at));
        }
        let Some(joined) = running.join_next_with_id().await else {
            break;
        };
        let id = joined.as_ref().map_or_else(|e| e.id(), |(id, _)| *id);
        let Some((pos, at)) = positions.remove(&id) else {
            continue;
        };
        let episode = joined
            .map(|(_, episode)| episode)
            .unwrap_or_else(|e| Episode {
                stop_reason: StopReason::Error,
                error: Some(EpisodeError {
                    kind: "panic".to_owned(),
                    status: None,
                    message: format!("the episode panicked: {e}"),
                }),
                ..Episode::new(env.name(), &split, at)
            });
        done += 1;
        if let Some(cb) = &options.on_progress {
            cb(&EvalProgress {
                done,
                total,
                episode: &episode,
            });
        }
        if options.keep_episodes {
            ended.push((pos, episode));
        }
    }
    ended.sort_unstable_by_key(|(pos, _)| *pos);
    EvalReport {
        episodes: ended.into_iter().map(|(_, e)| e).collect(),
        not_run: indices[next..].to_vec(),
    }
}

/// One episode to run.
struct Run {
    env: Environment,
    split: Arc<str>,
    at: TaskSample,
    max_steps: usize,
    stop: StopHandle,
}

/// What an episode's observations share: the run, its task, prompt and tools listing.
struct Scene<'a> {
    run: &'a Run,
    task: Value,
    prompt: Vec<Block>,
    listing: ListToolsOutput,
}

impl Scene<'_> {
    fn observe<'s>(&'s self, ep: &'s Episode) -> Observation<'s> {
        Observation {
            split: &self.run.split,
            index: self.run.at.index,
            sample: self.run.at.sample,
            task: &self.task,
            prompt: &self.prompt,
            tools: &self.listing.tools,
            terminal_tool: self.listing.terminal_tool.as_ref(),
            history: &ep.tool_calls,
            steps: ep.steps,
        }
    }
}

impl Episode {
    /// `fut`, its time counted as spent waiting for the ORS server.
    async fn env_wait<T>(&mut self, fut: impl Future<Output = T>) -> T {
        let t = Instant::now();
        let r = fut.await;
        self.timings.env_ms += ms(t.elapsed());
        r
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

impl Run {
    async fn episode<P: Policy>(&self, policy: &P, secrets: ors_core::Secrets) -> Episode {
        let started = Instant::now();
        let mut ep = Episode::new(self.env.name(), &self.split, self.at);
        ep.timings.started_at_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        if let Err(e) = self.open_and_play(policy, secrets, &mut ep).await {
            ep.error = Some(EpisodeError::from(&e));
            ep.stop_reason = StopReason::Error;
        }
        ep.timings.wall_ms = ms(started.elapsed());
        ep
    }

    async fn open_and_play<P: Policy>(
        &self,
        policy: &P,
        secrets: ors_core::Secrets,
        ep: &mut Episode,
    ) -> Result<()> {
        let task = ep
            .env_wait(self.env.task(&self.split, self.at.index))
            .await?;
        ep.task = Some(task.clone());
        // Opened by split and index, which works for any task shape; the task fetched above
        // is for the policy to read.
        let opening = self
            .env
            .session(TaskRef::at(&*self.split, self.at.index))
            .secrets(secrets)
            .open();
        let session = ep.env_wait(opening).await?;
        let played = self.play(&session, task, policy, ep).await;
        let closed = ep.env_wait(session.close()).await;
        played.and(closed)
    }

    async fn play<P: Policy>(
        &self,
        session: &Session,
        task: Value,
        policy: &P,
        ep: &mut Episode,
    ) -> Result<()> {
        let scene = Scene {
            run: self,
            task,
            prompt: ep.env_wait(session.prompt()).await?,
            listing: ep.env_wait(session.listing()).await?,
        };
        let mut state = policy.start(scene.observe(ep));
        let stopped = self.steps(session, policy, &mut state, &scene, ep).await;
        ep.agent = policy.finish(state, scene.observe(ep));
        ep.stop_reason = stopped?;
        Ok(())
    }

    /// Ask the policy and make its calls until the episode ends: why it did.
    async fn steps<P: Policy>(
        &self,
        session: &Session,
        policy: &P,
        state: &mut P::State,
        scene: &Scene<'_>,
        ep: &mut Episode,
    ) -> Result<StopReason> {
        loop {
            if ep.steps >= self.max_steps {
                return Ok(StopReason::MaxSteps);
            }
            let t = Instant::now();
            let decided = self
                .stop
                .unless_aborted(policy.act(state, scene.observe(ep)))
                .await;
            ep.timings.policy_ms += ms(t.elapsed());
            let (calls, last) = match decided {
                None => return Ok(StopReason::Cancelled),
                Some(Ok(Action::Stop(reason))) => {
                    // A model that answered in prose took its turn; a stop decided before
                    // asking (a spent token budget, a policy's own stop) took none.
                    ep.steps += usize::from(reason == StopReason::NoToolCall);
                    return Ok(reason);
                }
                Some(Ok(Action::Calls(calls))) => (calls, false),
                Some(Ok(Action::Final(call))) => (vec![call], true),
                Some(Err(e)) => {
                    let policy = |other: PolicyError| Error::Policy(other.to_string());
                    return Err(e.downcast::<Error>().map_or_else(policy, |e| *e));
                }
            };
            ep.steps += 1;
            for call in calls {
                let Some(finished) = self.call(session, call, ep).await? else {
                    return Ok(StopReason::Cancelled);
                };
                if finished {
                    ep.finished = true;
                    return Ok(StopReason::Finished);
                }
            }
            if last {
                return Ok(StopReason::NoToolCall);
            }
        }
    }

    /// Make `call` and record it: whether it ended the episode, or `None` when the evaluation
    /// was aborted first.
    async fn call(&self, session: &Session, call: Call, ep: &mut Episode) -> Result<Option<bool>> {
        let t = Instant::now();
        let made = self
            .stop
            .unless_aborted(session.call(&call.name, call.input.clone()));
        let Some(result) = ep.env_wait(made).await else {
            return Ok(None);
        };
        // The server's finished latch (PROTOCOL_NOTES row `finished-latch`): no later call
        // would run, so the episode is over.
        let (outcome, latched) = match result {
            Ok(out) => (Outcome::Output(out), false),
            Err(Error::ToolError { message, reason }) => (
                Outcome::ToolError(message),
                reason == Some(ors_core::ToolErrorReason::EpisodeFinished),
            ),
            Err(Error::ToolCrashed { message }) => (Outcome::Crashed(message), false),
            Err(e) => return Err(e),
        };
        ep.total_reward += outcome.reward();
        let finished = outcome.finished() || latched;
        ep.tool_calls.push(Turn {
            step: ep.steps,
            id: call.id,
            name: call.name,
            input: call.input,
            outcome,
            latency_ms: ms(t.elapsed()),
        });
        Ok(Some(finished))
    }
}
