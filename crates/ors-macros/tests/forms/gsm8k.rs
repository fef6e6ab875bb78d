// The example of the issue and the README: an environment with a toolset, a typed input,
// a task-only tool, and tasks from a split.
use ors_server::prelude::*;

#[wire]
struct Submit {
    /// Your final answer, digits only.
    answer: String,
}

#[wire]
struct MathTask {
    question: String,
    answer: String,
}

struct Gsm8k {
    task: MathTask,
    calc: Calculator,
}

#[environment(toolsets(calc))]
impl Environment for Gsm8k {
    type Task = MathTask;
    fn splits() -> Vec<Split> {
        vec![Split::train("train"), Split::test("test"), "hard".into()]
    }
    async fn tasks(_split: &str) -> Result<Vec<MathTask>, EnvError> {
        Ok(vec![])
    }
    async fn new(task: MathTask, _secrets: Secrets) -> Result<Self, EnvError> {
        Ok(Self {
            task,
            calc: Calculator,
        })
    }
    async fn prompt(&self) -> Result<Blocks, EnvError> {
        Ok(vec![Block::text(&self.task.question)])
    }

    /// Submit your final answer to the math problem.
    #[tool]
    async fn submit(&mut self, input: Submit) -> ToolOutput {
        let reward = if input.answer == self.task.answer {
            1.0
        } else {
            0.0
        };
        ToolOutput::text("Submitted.").with_reward(reward).finish()
    }

    /// A hint for this task only.
    #[tool(shared = false)]
    fn hint(&self) -> ToolOutput {
        ToolOutput::text("Read the question twice.")
    }
}

struct Calculator;

#[wire]
struct AddInput {
    a: String,
    b: String,
}

#[toolset]
impl Calculator {
    /// Add two numbers.
    #[tool]
    fn add(&self, input: AddInput) -> Result<String, std::num::ParseIntError> {
        Ok((input.a.parse::<i64>()? + input.b.parse::<i64>()?).to_string())
    }
}

pub fn main() {
    assert_eq!(Gsm8k::NAME, "gsm8k");
    let table = Gsm8k::tool_table(&());
    assert!(table.errors().is_empty());
    let shared: Vec<_> = table
        .shared_specs()
        .iter()
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(shared, ["submit", "add"]);
    let all: Vec<_> = table.all_specs().map(|s| s.name.as_str()).collect();
    assert_eq!(all, ["submit", "hint", "add"]);
}
