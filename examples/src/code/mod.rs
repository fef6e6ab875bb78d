//! The `code` environment: small Python programming exercises, solved in a sandbox of the
//! episode's own with `write_file`, `read_file` and `run`, and graded by `submit`.
//!
//! It embeds 45 exercises of our own (35 `train`, 10 `test`), generated and checked by
//! `examples/data/code/generate.py`: each has a function name, signature, description,
//! hidden tests (arguments and the value the function must return, [`Case`]) and a reference
//! `solution` (the text of a correct `solution.py`). The reward is the fraction of hidden
//! tests passed.
//!
//! Every command of the agent runs in the episode's sandbox ([`ors_server::sandbox`]),
//! started by its first command: its own workspace (where `solution.py` goes), the host's
//! system directories read-only, no network (so not this server, which serves every task's
//! hidden tests), its own processes (nothing a command starts outlives it) and limits (a
//! timeout of 10 s by default, at most 60; CPU, memory, processes and disk), each named when
//! hit. Grading ([`grading`]) runs in a fresh sandbox on a copy of the agent's files, with the
//! tests' arguments only; the verdict is computed outside, from the values returned, so no
//! solution can fool it.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use ors_examples::code::{sandboxes, Code};
//! use ors_server::{Server, ServerConfig};
//!
//! // The environment's state: made once, or an error naming the cause and the fix.
//! let sandboxes = sandboxes()?;
//! Server::with_config(ServerConfig::from_env()?)
//!     .environment_with::<Code>(sandboxes)
//!     .serve()
//!     .await?;
//! # Ok(())
//! # }
//! ```

pub mod grading;

use std::time::Duration;

use ors_server::prelude::*;
use ors_server::process::{Limits, Program};
use ors_server::sandbox::{Sandbox, SandboxError, SandboxSettings, Sandboxes};

pub use grading::Case;

const TRAIN: &str = include_str!("../../data/code/train.jsonl");
const TEST: &str = include_str!("../../data/code/test.jsonl");
const GRADER: &str = include_str!("grader.py");

/// The file the agent writes its solution in; the grader imports from it.
pub const SOLUTION_FILE: &str = "solution.py";
/// `run`'s timeout when none is given, in seconds.
pub const DEFAULT_TIMEOUT_SECS: u64 = 10;
/// `run`'s longest timeout, in seconds.
pub const MAX_TIMEOUT_SECS: u64 = 60;
/// How long grading may run.
const SUBMIT_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest file `write_file` writes and `read_file` returns.
const MAX_FILE_BYTES: usize = 1024 * 1024;
/// The grader's output: one line per hidden test.
const GRADER_OUTPUT: usize = 1024 * 1024;

/// One exercise, as a task on the wire.
#[wire]
#[derive(Debug, Clone, PartialEq)]
pub struct Exercise {
    /// `train-0`, `test-3`, ...
    #[serde(default)]
    pub id: String,
    /// The function to write.
    pub function: String,
    /// Its signature, `def add(a: int, b: int) -> int`.
    pub signature: String,
    /// What it must do.
    pub description: String,
    /// The hidden tests: arguments, and the value the function must return for them.
    pub tests: Vec<Case>,
    /// A correct `solution.py`.
    pub solution: String,
}

/// The exercises of a split.
pub fn exercises(split: &str) -> Result<Vec<Exercise>, EnvError> {
    let text = match split {
        "train" => TRAIN,
        "test" => TEST,
        other => return Err(EnvError::msg(format!("unknown split '{other}'"))),
    };
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).map_err(EnvError::from))
        .collect()
}

/// The sandboxes of the episodes (no network; per command 2 GiB of memory per process, 64
/// processes; 64 MiB of disk): the environment's start-up state, made and checked once, so a
/// machine that cannot make them refuses to serve, naming the cause and the fix.
pub fn sandboxes() -> Result<Sandboxes, SandboxError> {
    let settings = SandboxSettings::new().disk_bytes(64 << 20).limits(Limits {
        cpu_secs: None,
        memory_bytes: Some(2 << 30),
        processes: Some(64),
    });
    Sandboxes::new(settings)
}

/// Input of `write_file`.
#[wire]
pub struct WriteFile {
    /// A path relative to the workspace, for example `solution.py`.
    pub path: String,
    /// The whole new content of the file.
    pub content: String,
}

/// Input of `read_file`.
#[wire]
pub struct ReadFile {
    /// A path relative to the workspace.
    pub path: String,
}

/// Input of `run`.
#[wire]
pub struct Run {
    /// A shell command line, run with `/bin/sh -c` in the workspace.
    pub command: String,
    /// Seconds before the command and everything it started are stopped (default 10).
    #[serde(default)]
    #[schemars(range(min = 1, max = 60))]
    pub timeout_secs: Option<u64>,
}

/// An episode: one exercise, its sandbox, and the sandboxes grading takes a fresh one from.
#[derive(Debug)]
pub struct Code {
    exercise: Exercise,
    sandbox: Sandbox,
    sandboxes: Sandboxes,
}

impl Code {
    /// The episode's sandbox.
    pub fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }

    /// Limits of a command stopped at `timeout`: its CPU time a little above it, so the
    /// timeout is what stops a busy loop, with the time limit named.
    fn limits(timeout: Duration) -> Limits {
        Limits {
            cpu_secs: Some(timeout.as_secs() + 5),
            ..Limits::default()
        }
    }

    /// Run the hidden tests against a copy of the agent's files in a fresh sandbox.
    async fn grade(&self, ctx: &ToolContext) -> Result<grading::Grade, String> {
        let grader = self.sandboxes.sandbox();
        let result = async {
            self.sandbox
                .copy_workspace_to(&grader)
                .await
                .map_err(|e| format!("copying your files for grading: {e}"))?;
            let mark = mark();
            let request = grading::request(&self.exercise.function, &mark, &self.exercise.tests);
            // The grader's lines hold the returned values: not progress for the client.
            let quiet = ToolContext::new(
                ctx.session_id(),
                ctx.call_id(),
                ctx.cancellation().clone(),
                None,
            );
            let done = Program::new("python3")
                .args(["-I", "-c", GRADER])
                .stdin(request)
                .timeout(SUBMIT_TIMEOUT)
                .limits(Self::limits(SUBMIT_TIMEOUT))
                .max_output_bytes(GRADER_OUTPUT)
                .run_in(&grader, &quiet)
                .await
                .map_err(|e| e.to_string())?;
            let mut grade = grading::verdict(&done.stdout, &mark, &self.exercise.tests);
            if let Some(limit) = done.limit {
                grade
                    .failures
                    .insert(0, format!("grading ran into {limit}"));
            }
            Ok(grade)
        }
        .await;
        if let Err(e) = grader.shutdown().await {
            eprintln!("code: stopping a grading sandbox: {e}");
        }
        result
    }
}

/// A mark for the grader's lines that no file of the agent's holds.
fn mark() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    format!("ORS-GRADE-{:016x} ", h.finish())
}

#[environment]
impl Environment for Code {
    type Task = Exercise;
    type State = Sandboxes;

    fn splits() -> Vec<Split> {
        vec![Split::train("train"), Split::test("test")]
    }

    async fn tasks(split: &str) -> Result<Vec<Exercise>, EnvError> {
        exercises(split)
    }

    async fn new(
        sandboxes: &Sandboxes,
        exercise: Exercise,
        _secrets: Secrets,
    ) -> Result<Self, EnvError> {
        if exercise.tests.is_empty() {
            return Err(EnvError::InvalidTask(
                "an exercise needs hidden tests".into(),
            ));
        }
        Ok(Self {
            exercise,
            sandbox: sandboxes.sandbox(),
            sandboxes: sandboxes.clone(),
        })
    }

    async fn prompt(&self) -> Result<Blocks, EnvError> {
        let e = &self.exercise;
        Ok(vec![Block::text(format!(
            "Write a Python function `{}` in the file `{SOLUTION_FILE}` of your workspace.\n\n\
             Signature: `{}`\n\n{}\n\nHidden tests import `{}` from `{SOLUTION_FILE}`, call \
             it with arguments and compare what it returns with the expected value (as JSON: \
             a tuple reads as a list). Use `write_file` to write it, `run` to try it (for \
             example `python3 -c \"from solution import {}; print(...)\"`), and `submit` \
             when you are done: your reward is the fraction of hidden tests that pass.",
            e.function, e.signature, e.description, e.function, e.function
        ))])
    }

    async fn teardown(&mut self) {
        if let Err(e) = self.sandbox.shutdown().await {
            eprintln!("code: stopping an episode's sandbox: {e}");
        }
    }

    /// Write a file in your workspace (creating folders as needed), replacing it.
    #[tool]
    async fn write_file(&self, input: WriteFile) -> Result<String, String> {
        if input.content.len() > MAX_FILE_BYTES {
            return Err(format!(
                "the content is {} bytes; files are at most {MAX_FILE_BYTES}",
                input.content.len()
            ));
        }
        self.sandbox
            .write_file(&input.path, input.content.as_bytes())
            .await
            .map_err(|e| e.to_string())?;
        Ok(format!(
            "wrote {} bytes to {}",
            input.content.len(),
            input.path
        ))
    }

    /// Read a file of your workspace.
    #[tool]
    async fn read_file(&self, input: ReadFile) -> Result<String, String> {
        let file = self
            .sandbox
            .read_file(&input.path, MAX_FILE_BYTES)
            .await
            .map_err(|e| e.to_string())?;
        let mut text = String::from_utf8_lossy(&file.bytes).into_owned();
        if file.size > file.bytes.len() as u64 {
            text.push_str(&format!(
                "\n[... truncated: {} more bytes]",
                file.size - file.bytes.len() as u64
            ));
        }
        Ok(text)
    }

    /// Run a shell command in your workspace. Output lines stream as progress; the command
    /// and every process it starts are stopped at the timeout (default 10 s, at most 60).
    #[tool(validate, runs_commands)]
    async fn run(&self, ctx: &ToolContext, input: Run) -> Result<String, String> {
        let secs = input
            .timeout_secs
            .unwrap_or(DEFAULT_TIMEOUT_SECS)
            .clamp(1, MAX_TIMEOUT_SECS);
        let timeout = Duration::from_secs(secs);
        let done = Program::shell(&input.command)
            .timeout(timeout)
            .limits(Self::limits(timeout))
            .run_in(&self.sandbox, ctx)
            .await
            .map_err(|e| e.to_string())?;
        // A limit the command ran into is an error the model sees, naming it, with its output.
        match done.limit_error() {
            Some(error) => Err(error),
            None => Ok(done.report()),
        }
    }

    /// Run the hidden tests against solution.py and end the episode; the reward is the
    /// fraction that pass.
    #[tool]
    async fn submit(&self, ctx: &ToolContext) -> Result<ToolOutput, String> {
        let grade = self.grade(ctx).await?;
        let reward = if grade.total == 0 {
            0.0
        } else {
            grade.passed as f64 / grade.total as f64
        };
        let mut text = format!("{} of {} hidden tests passed.", grade.passed, grade.total);
        for f in grade.failures {
            text.push('\n');
            text.push_str(&f);
        }
        Ok(ToolOutput::text(text).with_reward(reward).finish())
    }
}
