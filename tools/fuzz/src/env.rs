//! The environment the server targets host: a tool per kind of call (typed input, state,
//! time, size, error), and no tool that panics on purpose (libFuzzer's panic hook aborts on
//! any panic, caught or not, so a panicking tool would be reported as a crash).

use std::time::Duration;

use ors_server::prelude::*;

/// The largest `big` output: big enough to be chunked, small enough to stay fast.
const MAX_BIG: u64 = 64 * 1024;

/// One task.
#[wire]
#[derive(Debug, Clone)]
pub struct FuzzTask {
    /// Its number.
    pub id: u64,
}

/// Input of `echo`.
#[wire]
#[derive(Debug, Clone)]
pub struct EchoInput {
    /// Sent back.
    pub text: String,
    /// How many times (optional).
    pub times: Option<u8>,
    /// A nested choice, so typed input is more than one string.
    pub mode: Option<Mode>,
}

/// How `echo` answers.
#[wire]
#[derive(Debug, Clone, Copy)]
pub enum Mode {
    /// As sent.
    Plain,
    /// Upper case.
    Loud,
}

/// Input of `sleep`.
#[wire]
#[derive(Debug, Clone)]
pub struct SleepInput {
    /// Milliseconds.
    pub ms: u64,
}

/// Input of `big`.
#[wire]
#[derive(Debug, Clone)]
pub struct BigInput {
    /// Bytes of output.
    pub bytes: u64,
}

/// The fuzzed environment.
#[derive(Debug)]
pub struct Fuzzed {
    count: u64,
}

#[environment]
impl Environment for Fuzzed {
    type Task = FuzzTask;

    fn splits() -> Vec<Split> {
        vec![Split::train("train"), Split::test("test")]
    }

    async fn tasks(split: &str) -> Result<Vec<FuzzTask>, EnvError> {
        match split {
            "train" => Ok((0..5).map(|id| FuzzTask { id }).collect()),
            "test" => Ok(vec![FuzzTask { id: 100 }]),
            _ => Err(EnvError::msg(format!("unknown split '{split}'"))),
        }
    }

    async fn new(task: FuzzTask, _secrets: Secrets) -> Result<Self, EnvError> {
        if task.id == 4 {
            return Err(EnvError::msg("task 4 cannot be set up"));
        }
        Ok(Self { count: 0 })
    }

    async fn prompt(&self) -> Result<Blocks, EnvError> {
        Ok(vec![Block::text("fuzz")])
    }

    /// Echo the text.
    #[tool]
    fn echo(&self, input: EchoInput) -> ToolOutput {
        let text = match input.mode {
            Some(Mode::Loud) => input.text.to_uppercase(),
            _ => input.text,
        };
        ToolOutput::text(text.repeat(usize::from(input.times.unwrap_or(1).min(8))))
    }

    /// Count the calls of this session.
    #[tool]
    fn counter(&mut self) -> String {
        self.count += 1;
        self.count.to_string()
    }

    /// Sleep (cancellable).
    #[tool]
    async fn sleep(&self, ctx: &ToolContext, input: SleepInput) -> Result<String, String> {
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(input.ms)) => Ok("slept".to_owned()),
            () = ctx.cancelled() => Err("cancelled".to_owned()),
        }
    }

    /// `bytes` x's.
    #[tool]
    fn big(&self, input: BigInput) -> Result<String, String> {
        if input.bytes > MAX_BIG {
            return Err(format!("at most {MAX_BIG} bytes"));
        }
        Ok("x".repeat(input.bytes as usize))
    }

    /// Always fails.
    #[tool]
    fn fail(&self) -> Result<String, String> {
        Err("failed on purpose".to_owned())
    }

    /// Finish the episode.
    #[tool]
    fn submit(&self) -> ToolOutput {
        ToolOutput::text("done").with_reward(1.0).finish()
    }
}
