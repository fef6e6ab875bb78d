//! The attributes of issue 14 compile: blocking, schema (inline and file), validate,
//! detail_url, Json results, reasoning and dynamic tools.
use ors_server::prelude::*;
use ors_server::{DynamicTool, ToolContext};

#[wire]
struct Task {
    q: String,
}

#[wire]
struct Pick {
    /// From 1 to 10.
    #[schemars(range(min = 1, max = 10))]
    n: u32,
}

#[wire]
struct Report {
    passed: u32,
}

fn extra_tools(_: &()) -> Vec<DynamicTool> {
    vec![DynamicTool::new(
        "ping",
        "Answer pong.",
        serde_json::json!({"type": "object", "properties": {}}),
        |_ctx: ToolContext, _input| async { "pong" },
    )
    .expect("a valid tool")]
}

struct Env;

#[environment(reasoning, dynamic_tools = extra_tools)]
impl Environment for Env {
    type Task = Task;
    fn splits() -> Vec<Split> {
        vec![Split::train("train")]
    }
    async fn num_tasks(_split: &str) -> Result<Option<usize>, EnvError> {
        Ok(Some(3))
    }
    async fn task(_split: &str, index: usize) -> Result<Task, EnvError> {
        Ok(Task {
            q: index.to_string(),
        })
    }
    async fn new(_task: Task, _secrets: Secrets) -> Result<Self, EnvError> {
        Ok(Env)
    }
    async fn prompt(&self) -> Result<Blocks, EnvError> {
        Ok(vec![])
    }

    /// Count to a number on a blocking thread.
    #[tool(blocking, validate, detail_url = "https://example.com/count")]
    fn count(&mut self, ctx: &ToolContext, input: Pick) -> Json<Report> {
        let _ = ctx.reasoning();
        Json(Report { passed: input.n })
    }

    /// Add a contact.
    #[tool(schema = "schemas/contact.json")]
    async fn add_contact(&self, input: JsonObject) -> Result<String, String> {
        Ok(format!("{input:?}"))
    }

    /// Raw value input.
    #[tool(schema = r#"{"type": "object", "properties": {"x": {"type": "integer"}}}"#)]
    fn raw(&self, ctx: ToolContext, input: serde_json::Value) -> String {
        let _ = ctx;
        input.to_string()
    }
}

pub fn main() {
    let names: Vec<String> = Env::tool_table(&())
        .shared_specs()
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert_eq!(names, ["count", "add_contact", "raw", "ping"]);
}
