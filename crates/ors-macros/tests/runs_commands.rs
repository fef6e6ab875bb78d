//! `#[tool(runs_commands)]` and `DynamicTool::with_runs_commands`: the spec says
//! `"runs_commands": true` (PROTOCOL_NOTES row `runs-commands`), and a tool without it sends no
//! such key, so its spec stays the documented form.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a failed assumption is a failed test

use ors_server::prelude::*;
use ors_server::runtime::{DynEnvironment as _, EnvHandle};
use ors_server::DynamicTool;
use serde_json::json;

#[wire]
#[derive(Clone, Debug)]
struct Row {}

#[wire]
struct Command {
    /// A shell command line.
    command: String,
}

fn extra(_: &()) -> Vec<DynamicTool> {
    vec![DynamicTool::new(
        "python",
        "Run Python code.",
        json!({"type": "object", "properties": {"code": {"type": "string"}}}),
        |_ctx: ToolContext, _input| async move { "ran" },
    )
    .expect("a valid tool")
    .with_runs_commands()]
}

struct Shell;

#[environment(dynamic_tools = extra)]
impl Environment for Shell {
    type Task = Row;
    fn splits() -> Vec<Split> {
        vec![Split::train("train")]
    }
    async fn tasks(_split: &str) -> Result<Vec<Row>, EnvError> {
        Ok(vec![Row {}])
    }
    async fn new(_task: Row, _secrets: Secrets) -> Result<Self, EnvError> {
        Ok(Shell)
    }
    async fn prompt(&self) -> Result<Blocks, EnvError> {
        Ok(vec![Block::text("run something")])
    }

    /// Run a shell command.
    #[tool(runs_commands)]
    fn run(&self, input: Command) -> String {
        input.command
    }

    /// Submit.
    #[tool]
    fn submit(&self) -> String {
        "done".to_owned()
    }
}

#[test]
fn the_marker_is_in_the_spec_of_marked_tools_only() {
    let specs = EnvHandle::<Shell>::default().tools().to_vec();
    let wire: Vec<serde_json::Value> = specs
        .iter()
        .map(|s| serde_json::to_value(s).unwrap())
        .collect();
    assert_eq!(wire[0]["name"], "run");
    assert_eq!(wire[0]["runs_commands"], true);
    assert_eq!(wire[1]["name"], "submit");
    assert!(wire[1].get("runs_commands").is_none(), "{}", wire[1]);
    assert_eq!(wire[2]["name"], "python");
    assert_eq!(wire[2]["runs_commands"], true);
    // A spec from a server that does not send it reads as false.
    let plain: ToolSpec =
        serde_json::from_value(json!({"name": "x", "description": "d", "input_schema": null}))
            .unwrap();
    assert!(!plain.runs_commands);
}
