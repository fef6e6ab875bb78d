//! What an episode leaves behind: its trajectory (one JSON object, the line `ors eval` writes)
//! and the summary of many.

use std::collections::BTreeMap;

use ors_core::ToolOutput;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::trace::AgentTrace;
use crate::error::Error;

/// How one tool call turned out, as the policy sees it next.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The tool's output, with its reward and whether it finished the episode.
    Output(ToolOutput),
    /// The tool answered `ok: false` with this message (the agent may try again).
    ToolError(String),
    /// The tool crashed with this message (the agent may try again).
    Crashed(String),
}

impl Outcome {
    /// The reward of an output (0 for an error).
    pub fn reward(&self) -> f64 {
        match self {
            Outcome::Output(o) => o.reward.unwrap_or(0.0),
            _ => 0.0,
        }
    }

    /// Whether the call ended the episode.
    pub fn finished(&self) -> bool {
        matches!(self, Outcome::Output(o) if o.finished)
    }
}

/// One tool call of an episode: what was called and what it gave.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Turn {
    /// The step (policy decision) that made the call, from 1.
    pub step: usize,
    /// The id the policy gave the call (a model's tool-call id), if any.
    #[serde(default)]
    pub id: Option<String>,
    /// The tool called.
    pub name: String,
    /// Its input.
    pub input: Value,
    /// What it gave.
    pub outcome: Outcome,
    /// How long the call took, in milliseconds.
    #[serde(default)]
    pub latency_ms: f64,
}

ors_core::wire_enum! {
    serde
    /// Why an episode ended.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    pub enum StopReason {
        /// A tool call reported `finished`.
        Finished = "finished",
        /// The policy chose to stop.
        Stopped = "stopped",
        /// The model answered without calling a tool (an agent told to stop then).
        NoToolCall = "no_tool_call",
        /// The step limit was reached.
        MaxSteps = "max_steps",
        /// The agent's token budget was spent.
        TokenBudget = "token_budget",
        /// The evaluation was aborted while the episode ran.
        Cancelled = "cancelled",
        /// An error ended it (see `error`).
        Error = "error",
    }
}

/// The error that ended an episode, as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct EpisodeError {
    /// What failed, from [`Error::kind`]: `model`, `http`, `transport`, `timeout`, ...
    pub kind: String,
    /// The HTTP status, when a server answered with one.
    #[serde(default)]
    pub status: Option<u16>,
    /// The error, for people.
    pub message: String,
}

impl From<&Error> for EpisodeError {
    fn from(e: &Error) -> Self {
        EpisodeError {
            kind: e.kind().to_owned(),
            status: e.status(),
            message: e.to_string(),
        }
    }
}

/// Where an episode's time went.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Timings {
    /// When it started, in milliseconds since the Unix epoch.
    pub started_at_ms: u64,
    /// From start to end (session deleted), in milliseconds.
    pub wall_ms: f64,
    /// Spent waiting for the ORS server (task, session, prompt, tools, calls, delete).
    pub env_ms: f64,
    /// Spent in the policy (for an agent: its model calls).
    pub policy_ms: f64,
}

/// One episode, start to end: the trajectory. Serialized, it is one line of `ors eval --out`
/// (its JSON Schema is printed by `ors eval --print-schema`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Episode {
    /// The environment.
    pub env: String,
    /// The split of the task.
    pub split: String,
    /// The task's index in the split.
    pub index: i64,
    /// Which sample of the task this episode is, from 0: with several samples per task
    /// (`ors eval --samples K`) each is its own session (PROTOCOL_NOTES row `samples`).
    /// Trajectories written before samples existed read as sample 0.
    #[serde(default)]
    pub sample: u32,
    /// The task, as `POST /{env}/task` returned it (absent when that failed).
    #[serde(default)]
    pub task: Option<Value>,
    /// The sum of the rewards of the tool calls.
    pub total_reward: f64,
    /// Turns the policy took: each decision that made calls (or none, as a nudged model's),
    /// and an answer in prose that ended the episode; a stop decided without a turn (token
    /// budget, the policy's own stop, cancellation) is not one. For an agent: its model
    /// calls, so `steps == agent.model_calls.len()`.
    pub steps: usize,
    /// Whether a tool call reported `finished`.
    pub finished: bool,
    /// Why the episode ended.
    pub stop_reason: StopReason,
    /// The error that ended it early, if one did (the reward so far is kept).
    #[serde(default)]
    pub error: Option<EpisodeError>,
    /// Every tool call, in order.
    pub tool_calls: Vec<Turn>,
    /// The model's side, when the policy is an [`crate::Agent`]: model, sampling options,
    /// messages, and each model call's token usage (and logprobs, when returned).
    #[serde(default)]
    pub agent: Option<AgentTrace>,
    /// Where the time went.
    pub timings: Timings,
    /// The version of ors-rs that ran the episode.
    pub ors_rs_version: String,
}

impl Episode {
    /// An episode of `env` on sample `at` of a task of `split` that has not started.
    pub(crate) fn new(env: &str, split: &str, at: TaskSample) -> Self {
        Self {
            env: env.to_owned(),
            split: split.to_owned(),
            index: at.index,
            sample: at.sample,
            task: None,
            total_reward: 0.0,
            steps: 0,
            finished: false,
            stop_reason: StopReason::Stopped,
            error: None,
            tool_calls: Vec::new(),
            agent: None,
            timings: Timings::default(),
            ors_rs_version: env!("CARGO_PKG_VERSION").to_owned(),
        }
    }

    /// Finished without error and with a positive total reward.
    pub fn success(&self) -> bool {
        self.finished && self.error.is_none() && self.total_reward > 0.0
    }

    /// The task and sample this episode ran.
    pub fn task_sample(&self) -> TaskSample {
        TaskSample {
            index: self.index,
            sample: self.sample,
        }
    }

    /// Tokens read and written by the agent's model (0 without an agent).
    pub fn tokens(&self) -> (u64, u64) {
        self.agent
            .as_ref()
            .map_or((0, 0), |a| (a.usage.input_tokens, a.usage.output_tokens))
    }
}

/// One episode to run: a task of the split and which of its samples (PROTOCOL_NOTES row
/// `samples`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TaskSample {
    /// The task's index in the split.
    pub index: i64,
    /// The sample, from 0.
    pub sample: u32,
}

impl TaskSample {
    /// Sample 0 of task `index`.
    pub fn first(index: i64) -> Self {
        Self { index, sample: 0 }
    }

    /// Samples `0..k` of each of `indices`, sample by sample: every task's sample 0 first,
    /// then every task's sample 1, and so on, so an evaluation stopped early has covered the
    /// tasks evenly.
    pub fn each(indices: impl IntoIterator<Item = i64>, k: u32) -> Vec<TaskSample> {
        let indices: Vec<i64> = indices.into_iter().collect();
        (0..k)
            .flat_map(|sample| {
                indices
                    .iter()
                    .map(move |&index| TaskSample { index, sample })
            })
            .collect()
    }
}

/// The results of an evaluation, in the order of the episodes given.
#[derive(Debug)]
pub struct EvalReport {
    /// One entry per episode run (none with [`crate::EvalOptions::keep_episodes`] off).
    pub episodes: Vec<Episode>,
    /// The episodes that were never started because the evaluation was stopped.
    pub not_run: Vec<TaskSample>,
}

impl EvalReport {
    /// The per-episode total rewards.
    pub fn returns(&self) -> Vec<f64> {
        self.episodes.iter().map(|e| e.total_reward).collect()
    }

    /// The mean total reward over all episodes (0 for none); episodes that failed count with
    /// the reward they had collected.
    pub fn mean_reward(&self) -> f64 {
        self.summary().mean_reward
    }

    /// The fraction of episodes that [succeeded](Episode::success) (0 for none).
    pub fn success_rate(&self) -> f64 {
        self.summary().success_rate
    }

    /// How many episodes ended in an error.
    pub fn errors(&self) -> usize {
        self.episodes.iter().filter(|e| e.error.is_some()).count()
    }

    /// The summary of the episodes.
    pub fn summary(&self) -> Summary {
        Summary::of(&self.episodes)
    }
}

/// Aggregate figures over episodes: what `ors eval` prints at the end.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Episodes counted.
    pub episodes: usize,
    /// Mean total reward.
    pub mean_reward: f64,
    /// Fraction finished with a total reward above 0 and no error.
    pub success_rate: f64,
    /// Mean steps.
    pub mean_steps: f64,
    /// Episodes that ended in an error, by [`EpisodeError::kind`].
    pub errors: BTreeMap<String, usize>,
    /// Episodes by why they ended.
    pub stop_reasons: BTreeMap<String, usize>,
    /// Tokens the model read.
    pub input_tokens: u64,
    /// Tokens the model wrote.
    pub output_tokens: u64,
}

impl Summary {
    /// The summary of `episodes`.
    pub fn of<'a>(episodes: impl IntoIterator<Item = &'a Episode>) -> Self {
        let mut s = Summary::default();
        for e in episodes {
            s.add(e);
        }
        s
    }

    /// Count one more episode.
    pub fn add(&mut self, e: &Episode) {
        self.episodes += 1;
        // Running means: no sums to keep beside the public figures.
        let n = self.episodes as f64;
        self.mean_reward += (e.total_reward - self.mean_reward) / n;
        self.success_rate += (f64::from(u8::from(e.success())) - self.success_rate) / n;
        self.mean_steps += (e.steps as f64 - self.mean_steps) / n;
        if let Some(err) = &e.error {
            *self.errors.entry(err.kind.clone()).or_default() += 1;
        }
        *self
            .stop_reasons
            .entry(e.stop_reason.as_str().to_owned())
            .or_default() += 1;
        let (input, output) = e.tokens();
        self.input_tokens += input;
        self.output_tokens += output;
    }

    /// Episodes that ended in an error.
    pub fn error_count(&self) -> usize {
        self.errors.values().sum()
    }
}
