//! The `code` environment: small Python programming exercises, solved in a working directory
//! of the episode's own with `write_file`, `read_file` and `run`, and graded by `submit`, which
//! runs hidden tests with `python3`.
//!
//! It embeds 45 exercises of our own (35 `train`, 10 `test`), generated and checked by
//! `examples/data/code/generate.py`: each has a function name, signature, description,
//! hidden tests (Python expressions that must be true) and a reference `solution` (the text of
//! a correct `solution.py`). The reward is the fraction of hidden tests passed.
//!
//! Every command runs through [`ors_server::process`]: in the episode's directory, with a clean
//! environment, a time limit (10 s by default, at most 60) and CPU and memory limits, and
//! nothing it starts outlives the call. This is not a sandbox: commands run as the server's
//! user, so serve it in a container or VM you can throw away.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use ors_examples::code::Code;
//! use ors_server::{Server, ServerConfig};
//!
//! Server::with_config(ServerConfig::from_env()?)
//!     .environment::<Code>()
//!     .serve()
//!     .await?;
//! # Ok(())
//! # }
//! ```

use std::time::Duration;

use ors_server::prelude::*;
use ors_server::process::{Exit, Limits, Program, WorkDir};

const TRAIN: &str = include_str!("../../data/code/train.jsonl");
const TEST: &str = include_str!("../../data/code/test.jsonl");
const RUNNER: &str = include_str!("runner.py");

/// The file the agent writes its solution in; the hidden tests import from it.
pub const SOLUTION_FILE: &str = "solution.py";
/// `run`'s timeout when none is given, in seconds.
pub const DEFAULT_TIMEOUT_SECS: u64 = 10;
/// `run`'s longest timeout, in seconds.
pub const MAX_TIMEOUT_SECS: u64 = 60;
/// How long the hidden tests may run.
const SUBMIT_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest file `write_file` writes and `read_file` returns.
const MAX_FILE_BYTES: usize = 1024 * 1024;
/// Address space of a command (`ulimit -v`): room for Python, not for runaway allocations.
const MEMORY_LIMIT: u64 = 2 * 1024 * 1024 * 1024;

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
    /// The hidden tests: Python expressions that must be true, evaluated with the solution's
    /// names in scope.
    pub tests: Vec<String>,
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

/// Input of `write_file`.
#[wire]
pub struct WriteFile {
    /// A path relative to the working directory, for example `solution.py`.
    pub path: String,
    /// The whole new content of the file.
    pub content: String,
}

/// Input of `read_file`.
#[wire]
pub struct ReadFile {
    /// A path relative to the working directory.
    pub path: String,
}

/// Input of `run`.
#[wire]
pub struct Run {
    /// A shell command line, run with `/bin/sh -c` in the working directory.
    pub command: String,
    /// Seconds before the command and everything it started are killed (default 10).
    #[serde(default)]
    #[schemars(range(min = 1, max = 60))]
    pub timeout_secs: Option<u64>,
}

/// An episode: one exercise and its working directory.
#[derive(Debug)]
pub struct Code {
    exercise: Exercise,
    dir: Option<WorkDir>,
}

impl Code {
    /// The episode's working directory.
    pub fn dir(&self) -> Result<&WorkDir, String> {
        self.dir
            .as_ref()
            .ok_or_else(|| "the episode's working directory is gone".to_owned())
    }

    fn limits(timeout: Duration) -> Limits {
        Limits {
            // The timeout stops it first; the CPU limit catches what escapes the group.
            cpu_secs: Some(timeout.as_secs() + 5),
            memory_bytes: Some(MEMORY_LIMIT),
            processes: None,
        }
    }

    /// Run the hidden tests against `solution.py`: (passed, total, failures).
    async fn grade(&self, ctx: &ToolContext) -> Result<(u64, u64, Vec<String>), String> {
        let dir = self.dir()?;
        // The tests and the runner live outside the agent's directory.
        let hidden = WorkDir::create("ors-code-hidden-").map_err(|e| e.to_string())?;
        let tests = hidden.path().join("tests.json");
        let runner = hidden.path().join("runner.py");
        let result = hidden.path().join("result.json");
        let tests_json = serde_json::to_vec(&self.exercise.tests).map_err(|e| e.to_string())?;
        std::fs::write(&tests, tests_json).map_err(|e| e.to_string())?;
        std::fs::write(&runner, RUNNER).map_err(|e| e.to_string())?;
        let done = Program::new("python3")
            .arg(&runner)
            .arg(&tests)
            .arg(&result)
            .current_dir(dir.path())
            .timeout(SUBMIT_TIMEOUT)
            .limits(Self::limits(SUBMIT_TIMEOUT))
            .run(ctx)
            .await
            .map_err(|e| e.to_string())?;
        let total = self.exercise.tests.len() as u64;
        if done.exit == Exit::TimedOut {
            return Ok((0, total, vec!["the hidden tests timed out".to_owned()]));
        }
        let text = std::fs::read_to_string(&result).map_err(|_| {
            format!(
                "the hidden tests did not finish ({:?}); stderr: {}",
                done.exit,
                done.stderr.trim()
            )
        })?;
        let graded: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
        let passed = graded["passed"].as_u64().unwrap_or(0);
        let failures = graded["failures"]
            .as_array()
            .map(|fs| {
                fs.iter()
                    .filter_map(|f| f.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        Ok((passed.min(total), total, failures))
    }
}

#[environment]
impl Environment for Code {
    type Task = Exercise;

    fn splits() -> Vec<Split> {
        vec![Split::train("train"), Split::test("test")]
    }

    async fn tasks(split: &str) -> Result<Vec<Exercise>, EnvError> {
        exercises(split)
    }

    async fn new(exercise: Exercise, _secrets: Secrets) -> Result<Self, EnvError> {
        if exercise.tests.is_empty() {
            return Err(EnvError::InvalidTask(
                "an exercise needs hidden tests".into(),
            ));
        }
        let dir = WorkDir::create("ors-code-")?;
        Ok(Self {
            exercise,
            dir: Some(dir),
        })
    }

    async fn prompt(&self) -> Result<Blocks, EnvError> {
        let e = &self.exercise;
        Ok(vec![Block::text(format!(
            "Write a Python function `{}` in the file `{SOLUTION_FILE}` of your working \
             directory.\n\nSignature: `{}`\n\n{}\n\nHidden tests import `{}` from \
             `{SOLUTION_FILE}`. Use `write_file` to write it, `run` to try it (for example \
             `python3 -c \"from solution import {}; print(...)\"`), and `submit` when you are \
             done: your reward is the fraction of hidden tests that pass.",
            e.function, e.signature, e.description, e.function, e.function
        ))])
    }

    async fn teardown(&mut self) {
        if let Some(dir) = self.dir.take() {
            let path = dir.path().to_owned();
            if let Err(e) = dir.remove().await {
                eprintln!("code: could not remove {}: {e}", path.display());
            }
        }
    }

    /// Write a file in your working directory (creating folders as needed), replacing it.
    // File I/O blocks: on the blocking pool, it never holds up other sessions.
    #[tool(blocking)]
    fn write_file(&mut self, input: WriteFile) -> Result<String, String> {
        if input.content.len() > MAX_FILE_BYTES {
            return Err(format!(
                "the content is {} bytes; files are at most {MAX_FILE_BYTES}",
                input.content.len()
            ));
        }
        let path = self
            .dir()?
            .resolve(&input.path)
            .map_err(|e| e.to_string())?;
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", input.path))?;
        }
        std::fs::write(&path, input.content.as_bytes())
            .map_err(|e| format!("{}: {e}", input.path))?;
        Ok(format!(
            "wrote {} bytes to {}",
            input.content.len(),
            input.path
        ))
    }

    /// Read a file of your working directory.
    #[tool(blocking)]
    fn read_file(&self, input: ReadFile) -> Result<String, String> {
        let path = self
            .dir()?
            .resolve(&input.path)
            .map_err(|e| e.to_string())?;
        let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", input.path))?;
        let mut text =
            String::from_utf8_lossy(&bytes[..bytes.len().min(MAX_FILE_BYTES)]).into_owned();
        if bytes.len() > MAX_FILE_BYTES {
            text.push_str(&format!(
                "\n[... truncated: {} more bytes]",
                bytes.len() - MAX_FILE_BYTES
            ));
        }
        Ok(text)
    }

    /// Run a shell command in your working directory. Output lines stream as progress; the
    /// command and every process it starts are killed at the timeout (default 10 s, at most
    /// 60).
    #[tool(validate)]
    async fn run(&self, ctx: &ToolContext, input: Run) -> Result<String, String> {
        let secs = input
            .timeout_secs
            .unwrap_or(DEFAULT_TIMEOUT_SECS)
            .clamp(1, MAX_TIMEOUT_SECS);
        let timeout = Duration::from_secs(secs);
        let done = Program::shell(&input.command)
            .current_dir(self.dir()?.path())
            .timeout(timeout)
            .limits(Self::limits(timeout))
            .run(ctx)
            .await
            .map_err(|e| e.to_string())?;
        match done.exit {
            // A command that ran past its time is an error the model sees, with what it printed.
            Exit::TimedOut => Err(format!(
                "the command timed out after {secs} s and was killed with every process it \
                 started\n{}",
                done.report()
            )),
            _ => Ok(done.report()),
        }
    }

    /// Run the hidden tests against solution.py and end the episode; the reward is the
    /// fraction that pass.
    #[tool]
    async fn submit(&self, ctx: &ToolContext) -> Result<ToolOutput, String> {
        let (passed, total, failures) = self.grade(ctx).await?;
        let reward = if total == 0 {
            0.0
        } else {
            passed as f64 / total as f64
        };
        let mut text = format!("{passed} of {total} hidden tests passed.");
        for f in failures {
            text.push('\n');
            text.push_str(&f);
        }
        Ok(ToolOutput::text(text).with_reward(reward).finish())
    }
}
