//! A tiny environment whose tool reports progress, to check that progress events reach the
//! client's callback.

use ors_server::prelude::*;

/// Input of `work`.
#[wire]
pub struct WorkInput {
    /// How many progress reports to send before answering.
    pub steps: u32,
}

/// The environment ("progressive"): one task, one tool.
pub struct Progressive;

#[environment]
impl Environment for Progressive {
    type Task = serde_json::Value;

    fn splits() -> Vec<Split> {
        vec![Split::test("test")]
    }

    async fn tasks(_split: &str) -> Result<Vec<serde_json::Value>, EnvError> {
        Ok(vec![serde_json::json!({"id": 0})])
    }

    async fn new(_task: serde_json::Value, _secrets: Secrets) -> Result<Self, EnvError> {
        Ok(Progressive)
    }

    async fn prompt(&self) -> Result<Blocks, EnvError> {
        Ok(vec![Block::text("work")])
    }

    /// Report progress `steps` times, then answer "done".
    #[tool]
    async fn work(&self, ctx: &ToolContext, input: WorkInput) -> String {
        for i in 1..=input.steps {
            ctx.progress(serde_json::json!({ "step": i, "of": input.steps }));
        }
        "done".to_owned()
    }
}
