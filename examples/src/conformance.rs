//! The `conformance` environment: the fixture that the conformance runner and the interop
//! tests drive. Its behaviour is a contract (issue "ors-server", section Examples); change it
//! only together with those tests.
//!
//! - Splits: `train` (type train, 25 tasks, ids 0..=24), `test` (type test, 5 tasks, ids
//!   100..=104) and `hard` (given as the bare name, so type validation; 3 tasks, ids 200..=202).
//!   Task `i` is `{"id": i, "question": "What is i+i?", "answer": "<2i>"}`.
//! - Prompt: one text block, the question.
//! - Shared tools: `echo`, `submit`, `counter`, `big`, `image`, `fail`, `panic`, `sleep`,
//!   `secret`; task-specific tool: `hint` (listed only by `task_tools`).
//! - A toolset a session may select with `toolset_name: "codex"` (the name of one of the
//!   openreward SDK's built-in toolsets, so its client can select it): tool `shout` (the text
//!   upper-cased), listed by `task_tools` and callable only in those sessions.
//! - Group scoring (`/score_group`): a candidate scores 1.0 when the text of its last assistant
//!   message, trimmed, is the task's answer, else 0.0; a candidate whose metadata has
//!   `"score": "omit"` gets no score, so the environment answers the wrong number of scores
//!   (what the count check is tested with).

use std::time::Duration;

use ors_server::prelude::*;

/// The largest `big` output, so a stray call cannot exhaust the server's memory.
pub const MAX_BIG_BYTES: u64 = 64 * 1024 * 1024;

/// A 2×2 RGB PNG, base64-encoded: the image block of the `image` tool.
pub const PNG_BASE64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAEklEQVR42mP4zwAE/0Ho////AB/uBfuXrhxRAAAAAElFTkSuQmCC";

/// One task: `{"id": i, "question": "What is i+i?", "answer": "<2i>"}`.
#[wire]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConformanceTask {
    /// The task id (0..=24 in `train`, 100..=104 in `test`, 200..=202 in `hard`).
    pub id: u64,
    /// `"What is i+i?"`.
    pub question: String,
    /// `2i` as a string.
    pub answer: String,
}

impl ConformanceTask {
    /// The task with this id.
    pub fn with_id(id: u64) -> Self {
        Self {
            id,
            question: format!("What is {id}+{id}?"),
            answer: (2 * u128::from(id)).to_string(),
        }
    }
}

/// The ids of a split's tasks, in order; `None` for an unknown split.
pub fn split_ids(split: &str) -> Option<std::ops::Range<u64>> {
    match split {
        "train" => Some(0..25),
        "test" => Some(100..105),
        "hard" => Some(200..203),
        _ => None,
    }
}

/// Input of `echo`.
#[wire]
#[derive(Debug, Clone)]
pub struct EchoInput {
    /// The text to send back.
    pub text: String,
}

/// Input of `submit`.
#[wire]
#[derive(Debug, Clone)]
pub struct SubmitInput {
    /// Your answer to the question, digits only.
    pub answer: String,
}

/// Input of `big`.
#[wire]
#[derive(Debug, Clone)]
pub struct BigInput {
    /// How many bytes of output to produce.
    pub bytes: u64,
}

/// Input of `fail`.
#[wire]
#[derive(Debug, Clone)]
pub struct FailInput {
    /// The error message to fail with.
    pub message: String,
}

/// Input of `sleep`.
#[wire]
#[derive(Debug, Clone)]
pub struct SleepInput {
    /// How long to sleep, in milliseconds.
    pub ms: u64,
}

/// Input of `secret`.
#[wire]
#[derive(Debug, Clone)]
pub struct SecretInput {
    /// The name of the secret to read.
    pub name: String,
}

/// The toolset a session selects with `toolset_name: "codex"`.
#[derive(Debug, Default)]
pub struct Loud;

#[toolset]
impl Loud {
    /// Send the text back upper-cased.
    #[tool]
    fn shout(&self, input: EchoInput) -> String {
        input.text.to_uppercase()
    }
}

/// An episode of the conformance fixture.
#[derive(Debug)]
pub struct Conformance {
    task: ConformanceTask,
    secrets: Secrets,
    /// Runs of `counter` in this session: per-session state the tests check for isolation.
    counter: u64,
    /// The tools of sessions that select `codex`.
    loud: Loud,
}

impl Conformance {
    /// The task of this episode.
    pub fn task(&self) -> &ConformanceTask {
        &self.task
    }
}

#[environment(select_toolsets(loud = "codex"))]
impl Environment for Conformance {
    type Task = ConformanceTask;

    fn splits() -> Vec<Split> {
        vec![Split::train("train"), Split::test("test"), "hard".into()]
    }

    async fn tasks(split: &str) -> Result<Vec<ConformanceTask>, EnvError> {
        let ids =
            split_ids(split).ok_or_else(|| EnvError::msg(format!("unknown split '{split}'")))?;
        Ok(ids.map(ConformanceTask::with_id).collect())
    }

    async fn new(task: ConformanceTask, secrets: Secrets) -> Result<Self, EnvError> {
        Ok(Self {
            task,
            secrets,
            counter: 0,
            loud: Loud,
        })
    }

    async fn prompt(&self) -> Result<Blocks, EnvError> {
        Ok(vec![Block::text(&self.task.question)])
    }

    async fn score_group(
        &self,
        candidates: Vec<GroupCandidate>,
    ) -> Result<Vec<GroupScore>, EnvError> {
        Ok(candidates
            .iter()
            .filter(|c| {
                let omit = c.metadata.as_ref().and_then(|m| m.get("score"));
                omit.and_then(|v| v.as_str()) != Some("omit")
            })
            .map(|c| {
                let right = final_answer(c).is_some_and(|a| a.trim() == self.task.answer);
                GroupScore::from(if right { 1.0 } else { 0.0 })
            })
            .collect())
    }

    /// Echo the text back (reward 0.0, episode not finished; metadata `length`: its characters).
    #[tool(concurrent)]
    fn echo(&self, input: EchoInput) -> ToolOutput {
        let mut metadata = JsonObject::new();
        metadata.insert(
            "length".to_owned(),
            serde_json::Value::from(input.text.chars().count()),
        );
        ToolOutput::text(input.text)
            .with_reward(0.0)
            .with_metadata(metadata)
    }

    /// Submit your answer; ends the episode with "Correct!" (reward 1.0) or "Incorrect" (0.0).
    #[tool]
    fn submit(&self, input: SubmitInput) -> ToolOutput {
        let (text, reward) = if input.answer.trim() == self.task.answer {
            ("Correct!", 1.0)
        } else {
            ("Incorrect", 0.0)
        };
        ToolOutput::text(text).with_reward(reward).finish()
    }

    /// Count the calls of this tool in this session, this one included ("1", "2", ...).
    #[tool]
    fn counter(&mut self) -> String {
        self.counter += 1;
        self.counter.to_string()
    }

    /// Produce one text block of exactly `bytes` ASCII `x` characters (at most 64 MiB).
    #[tool]
    fn big(&self, input: BigInput) -> Result<ToolOutput, String> {
        if input.bytes > MAX_BIG_BYTES {
            return Err(format!(
                "bytes must be at most {MAX_BIG_BYTES}, got {}",
                input.bytes
            ));
        }
        // Fits in usize: it is at most MAX_BIG_BYTES.
        let len = input.bytes as usize;
        Ok(ToolOutput::text("x".repeat(len)))
    }

    /// Return a text block "image" followed by a small PNG image block.
    #[tool]
    fn image(&self) -> ToolOutput {
        ToolOutput::blocks(vec![
            Block::text("image"),
            Block::image(PNG_BASE64, "image/png"),
        ])
    }

    /// Fail with the given message (an `ok: false` result).
    #[tool]
    fn fail(&self, input: FailInput) -> Result<ToolOutput, String> {
        Err(input.message)
    }

    /// Panic inside the tool, to check the server reports it and keeps the session usable.
    #[tool]
    fn panic(&self) -> ToolOutput {
        panic!("the panic tool panicked, as asked")
    }

    /// Sleep for `ms` milliseconds, then answer "slept". Stops early if the call is cancelled.
    #[tool]
    async fn sleep(&self, ctx: &ToolContext, input: SleepInput) -> Result<ToolOutput, String> {
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(input.ms)) => Ok(ToolOutput::text("slept")),
            () = ctx.cancelled() => Err("sleep was cancelled".to_owned()),
        }
    }

    /// Read a secret passed to this session (request body `secrets` or the `X-Secrets` header);
    /// the domains it may be sent to, when the client named them, are in
    /// `metadata.allowed_domains`.
    #[tool]
    fn secret(&self, input: SecretInput) -> Result<ToolOutput, String> {
        let value = self
            .secrets
            .get(&input.name)
            .ok_or_else(|| format!("no secret '{}'", input.name))?;
        let out = ToolOutput::text(value);
        Ok(match self.secrets.allowed_domains(&input.name) {
            Some(domains) => {
                let mut metadata = JsonObject::new();
                metadata.insert("allowed_domains".to_owned(), domains.into());
                out.with_metadata(metadata)
            }
            None => out,
        })
    }

    /// A hint for this task: its answer. Listed only by `task_tools`.
    #[tool(shared = false)]
    fn hint(&self) -> String {
        format!("The answer is {}", self.task.answer)
    }
}

/// The text of a candidate's last assistant message: its answer.
fn final_answer(candidate: &GroupCandidate) -> Option<String> {
    let last = candidate
        .messages
        .iter()
        .rev()
        .find(|m| m.role == Role::Assistant)?;
    let text: String = last
        .blocks
        .iter()
        .filter_map(|b| match b {
            MessageBlock::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect();
    Some(text)
}
