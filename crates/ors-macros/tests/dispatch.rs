//! A test environment with every tool form: the specs it lists and how calls dispatch,
//! through the generated table and an [`Episode`] of a served environment, without a server.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a failed assumption is a failed test

use std::sync::{Arc, Mutex};

use ors_server::prelude::*;
use ors_server::runtime::{DynEnvironment, EnvHandle, Episode};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

#[wire]
struct Echo {
    /// The text to echo back.
    text: String,
}

#[wire]
struct Add {
    /// The first addend.
    a: i64,
    /// The second addend.
    b: i64,
}

#[wire]
#[derive(Clone)]
struct LabTask {
    target: i64,
}

struct Lab {
    task: LabTask,
    count: i64,
    notes: Vec<String>,
    calc: Calculator,
}

#[environment(name = "lab", toolsets(calc))]
impl Environment for Lab {
    type Task = LabTask;

    fn splits() -> Vec<Split> {
        vec![Split::train("train"), "hard".into()]
    }

    async fn tasks(_split: &str) -> Result<Vec<LabTask>, EnvError> {
        Ok(vec![LabTask { target: 2 }])
    }

    async fn new(task: LabTask, _secrets: Secrets) -> Result<Self, EnvError> {
        Ok(Self {
            task,
            count: 0,
            notes: Vec::new(),
            calc: Calculator { calls: 0 },
        })
    }

    async fn prompt(&self) -> Result<Blocks, EnvError> {
        Ok(vec![Block::text(format!("reach {}", self.task.target))])
    }

    /// Echo the text back.
    #[tool]
    fn echo(&self, input: Echo) -> String {
        input.text
    }

    /// Add one to the counter.
    ///
    /// Returns the new value.
    #[tool]
    async fn increment(&mut self) -> ToolOutput {
        self.count += 1;
        ToolOutput::text(self.count.to_string())
    }

    /// Check the counter against the target.
    #[tool]
    fn check(&self) -> Result<ToolOutput, String> {
        if self.count == self.task.target {
            Ok(ToolOutput::text("target reached").with_reward(1.0).finish())
        } else {
            Err(format!("count {} is not {}", self.count, self.task.target))
        }
    }

    /// Who is calling.
    #[tool]
    async fn whoami(&self, ctx: &ToolContext) -> String {
        ctx.progress(json!({"step": "looking up"}));
        format!("{}/{}", ctx.session_id(), ctx.call_id())
    }

    /// Keep a note for this episode.
    #[tool(shared = false)]
    async fn note(&mut self, ctx: &ToolContext, input: Echo) -> Result<String, std::fmt::Error> {
        self.notes
            .push(format!("{}: {}", ctx.session_id(), input.text));
        Ok(self.notes.len().to_string())
    }

    /// This doc comment is replaced by the description below.
    #[tool(name = "get-count", description = "The counter value.")]
    fn count_value(&self) -> Blocks {
        vec![Block::text(self.count.to_string())]
    }
}

struct Calculator {
    calls: u32,
}

#[toolset]
impl Calculator {
    /// Add two integers.
    #[tool]
    fn add(&mut self, input: Add) -> Result<String, String> {
        self.calls += 1;
        input
            .a
            .checked_add(input.b)
            .map(|sum| sum.to_string())
            .ok_or_else(|| "overflow".to_owned())
    }

    /// How many additions so far.
    #[tool]
    async fn calls(&self) -> String {
        self.calls.to_string()
    }

    /// Not a tool: stays an ordinary method of the toolset.
    fn reset(&mut self) {
        self.calls = 0;
    }
}

fn spec(name: &str, description: &str, schema: Value) -> Value {
    json!({"name": name, "description": description, "input_schema": schema})
}

fn echo_schema() -> Value {
    json!({
        "type": "object",
        "title": "Echo",
        "properties": {"text": {"type": "string", "description": "The text to echo back."}},
        "required": ["text"],
    })
}

fn expected_shared() -> Vec<Value> {
    vec![
        spec("echo", "Echo the text back.", echo_schema()),
        spec(
            "increment",
            "Add one to the counter.\n\nReturns the new value.",
            Value::Null,
        ),
        spec(
            "check",
            "Check the counter against the target.",
            Value::Null,
        ),
        spec("whoami", "Who is calling.", Value::Null),
        spec("get-count", "The counter value.", Value::Null),
        spec(
            "add",
            "Add two integers.",
            json!({
                "type": "object",
                "title": "Add",
                "properties": {
                    "a": {"type": "integer", "format": "int64", "description": "The first addend."},
                    "b": {"type": "integer", "format": "int64", "description": "The second addend."},
                },
                "required": ["a", "b"],
            }),
        ),
        spec("calls", "How many additions so far.", Value::Null),
    ]
}

fn as_json(specs: &[ToolSpec]) -> Vec<Value> {
    specs
        .iter()
        .map(|s| serde_json::to_value(s).expect("a ToolSpec serializes"))
        .collect()
}

async fn lab() -> Episode<Lab> {
    EnvHandle::<Lab>::default()
        .episode(LabTask { target: 2 }, Secrets::default())
        .await
        .expect("the test environment builds")
}

async fn call(env: &mut Episode<Lab>, name: &str, input: Value) -> RunToolOutput {
    env.call(ToolContext::detached(), name, input).await
}

fn text(out: &RunToolOutput) -> String {
    match out {
        RunToolOutput::Success(o) => match o.blocks.as_slice() {
            [Block::Text(t)] => t.text.clone(),
            other => panic!("expected one text block, got {other:?}"),
        },
        RunToolOutput::Error(e) => panic!("expected success, got error {e:?}"),
    }
}

#[test]
fn name_and_table_are_generated() {
    assert_eq!(Lab::NAME, "lab");
    assert!(Lab::tool_table(&()).errors().is_empty());
    assert_eq!(<Calculator as Toolset>::TOOL_NAMES, ["add", "calls"]);
    assert_eq!(EnvHandle::<Lab>::default().name(), "lab");
}

#[test]
fn shared_specs_are_exactly_the_shared_tools_in_order() {
    assert_eq!(
        as_json(EnvHandle::<Lab>::default().tools()),
        expected_shared()
    );
}

#[tokio::test]
async fn task_specs_add_the_task_only_tools_in_declaration_order() {
    let env = lab().await;
    let mut expected = expected_shared();
    expected.insert(
        4,
        spec("note", "Keep a note for this episode.", echo_schema()),
    );
    assert_eq!(as_json(&env.tools()), expected);
}

#[tokio::test]
async fn typed_input_sync_tool_returns_its_string_as_one_text_block() {
    let mut env = lab().await;
    let out = call(&mut env, "echo", json!({"text": "hello"})).await;
    assert_eq!(out, RunToolOutput::Success(ToolOutput::text("hello")));
}

#[tokio::test]
async fn bad_input_is_an_error_result_naming_tool_and_field() {
    let mut env = lab().await;
    let out = call(&mut env, "echo", json!({})).await;
    assert_eq!(
        out,
        RunToolOutput::refused(
            ToolErrorReason::InputValidation,
            "invalid input for tool 'echo': missing field 'text'"
        )
    );
    let out = call(&mut env, "add", json!({"a": 1, "b": "two"})).await;
    assert_eq!(
        out,
        RunToolOutput::refused(
            ToolErrorReason::InputValidation,
            "invalid input for tool 'add': field 'b': invalid type: string \"two\", expected i64"
        )
    );
}

#[tokio::test]
async fn zero_arg_tools_accept_empty_object_or_null_and_reject_other_json() {
    let mut env = lab().await;
    assert_eq!(text(&call(&mut env, "increment", json!({})).await), "1");
    assert_eq!(text(&call(&mut env, "increment", Value::Null).await), "2");
    assert_eq!(
        call(&mut env, "increment", json!("x")).await,
        RunToolOutput::refused(
            ToolErrorReason::InputValidation,
            "invalid input for tool 'increment': expected an object, got a string"
        )
    );
    assert_eq!(
        env.get().unwrap().count,
        2,
        "a rejected call does not run the tool"
    );
}

#[tokio::test]
async fn mut_self_state_persists_across_calls_and_result_maps_ok_and_err() {
    let mut env = lab().await;
    assert_eq!(
        call(&mut env, "check", json!({})).await,
        RunToolOutput::error("count 0 is not 2")
    );
    call(&mut env, "increment", json!({})).await;
    call(&mut env, "increment", json!({})).await;
    assert_eq!(text(&call(&mut env, "get-count", json!({})).await), "2");
    assert_eq!(
        call(&mut env, "check", json!({})).await,
        RunToolOutput::Success(ToolOutput::text("target reached").with_reward(1.0).finish())
    );
}

#[tokio::test]
async fn tool_context_carries_ids_and_progress_reaches_the_sink() {
    let mut env = lab().await;
    let seen: Arc<Mutex<Vec<Value>>> = Arc::default();
    let sink = {
        let seen = Arc::clone(&seen);
        Arc::new(move |v: Value| seen.lock().expect("sink lock").push(v))
    };
    let ctx = ToolContext::new("session-1", "call-7", CancellationToken::new(), Some(sink));
    let out = env.call(ctx, "whoami", json!({})).await;
    assert_eq!(text(&out), "session-1/call-7");
    assert_eq!(
        *seen.lock().expect("sink lock"),
        vec![json!({"step": "looking up"})]
    );
}

#[tokio::test]
async fn task_only_tools_are_callable_with_context_and_input() {
    let mut env = lab().await;
    let ctx = ToolContext::new("s-9", "c-1", CancellationToken::new(), None);
    let out = env.call(ctx, "note", json!({"text": "remember"})).await;
    assert_eq!(text(&out), "1");
    assert_eq!(env.get().unwrap().notes, ["s-9: remember"]);
}

#[tokio::test]
async fn toolset_tools_dispatch_to_the_field() {
    let mut env = lab().await;
    assert_eq!(
        text(&call(&mut env, "add", json!({"a": 2, "b": 3})).await),
        "5"
    );
    assert_eq!(
        call(&mut env, "add", json!({"a": i64::MAX, "b": 1})).await,
        RunToolOutput::error("overflow")
    );
    assert_eq!(text(&call(&mut env, "calls", json!({})).await), "2");
    assert_eq!(env.get().unwrap().calc.calls, 2);
    env.get_mut().unwrap().calc.reset();
    assert_eq!(text(&call(&mut env, "calls", json!({})).await), "0");
}

#[tokio::test]
async fn unknown_tool_is_an_error_result_listing_the_tools() {
    let mut env = lab().await;
    assert_eq!(
        call(&mut env, "nope", json!({})).await,
        RunToolOutput::refused(
            ToolErrorReason::NotFound,
            "unknown tool 'nope'; available tools: echo, increment, check, whoami, note, \
             get-count, add, calls"
        )
    );
}

/// The SDK reached under another name, as a crate that renames the dependency would.
mod renamed {
    use ::ors_server as sdk;
    use sdk::prelude::{Blocks, EnvError, Environment, Secrets, Split};

    #[sdk::wire(crate = sdk)]
    pub struct Ping {
        pub n: u32,
    }

    pub struct Pinger;

    #[sdk::toolset(crate = sdk)]
    impl Pinger {
        /// Ping back.
        #[sdk::tool]
        fn ping(&self, input: Ping) -> String {
            format!("pong {}", input.n)
        }
    }

    pub struct Renamed {
        pinger: Pinger,
    }

    #[sdk::environment(crate = sdk, toolsets(pinger))]
    impl Environment for Renamed {
        type Task = sdk::__private::Value;
        fn splits() -> Vec<Split> {
            vec![Split::test("test")]
        }
        async fn tasks(_split: &str) -> Result<Vec<Self::Task>, EnvError> {
            Ok(Vec::new())
        }
        async fn new(_task: Self::Task, _secrets: Secrets) -> Result<Self, EnvError> {
            Ok(Self { pinger: Pinger })
        }
        async fn prompt(&self) -> Result<Blocks, EnvError> {
            Ok(Vec::new())
        }
    }
}

#[tokio::test]
async fn generated_code_follows_a_renamed_crate_path() {
    assert_eq!(renamed::Renamed::NAME, "renamed");
    let mut env = EnvHandle::<renamed::Renamed>::default()
        .episode(Value::Null, Secrets::default())
        .await
        .expect("builds");
    let out = env
        .call(ToolContext::detached(), "ping", json!({"n": 4}))
        .await;
    assert_eq!(text(&out), "pong 4");
}

/// A tool input whose schema is not an object: a problem for the server to refuse at start,
/// not a panic.
#[wire]
enum Choice {
    Left,
    Right,
}

struct Picker;

#[toolset]
impl Picker {
    /// Pick a side.
    #[tool]
    fn pick(&self, input: Choice) -> String {
        match input {
            Choice::Left => "left".into(),
            Choice::Right => "right".into(),
        }
    }

    /// Fine on its own.
    #[tool]
    fn fine(&self) -> String {
        "fine".into()
    }
}

struct Strict {
    picker: Picker,
}

#[environment(toolsets(picker))]
impl Environment for Strict {
    type Task = Value;
    fn splits() -> Vec<Split> {
        vec![Split::test("test")]
    }
    async fn tasks(_split: &str) -> Result<Vec<Value>, EnvError> {
        Ok(Vec::new())
    }
    async fn new(_task: Value, _secrets: Secrets) -> Result<Self, EnvError> {
        Ok(Self { picker: Picker })
    }
    async fn prompt(&self) -> Result<Blocks, EnvError> {
        Ok(Vec::new())
    }
}

#[test]
fn schema_problems_are_recorded_in_the_table_not_panicked() {
    use ors_server::runtime::ToolTableError;

    let expected = vec![ToolTableError::Schema {
        tool: "pick".into(),
        reason: "the input type 'Choice' must serialize as a JSON object (a struct with named \
                 fields), but its schema root is of type \"string\""
            .into(),
    }];
    assert_eq!(Picker::tool_table().errors(), expected.as_slice());
    // Carried into the environment that includes the toolset, where a server sees it.
    let handle = EnvHandle::<Strict>::default();
    assert_eq!(handle.table_errors(), expected.as_slice());
    let names: Vec<_> = handle.tools().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["fine"]);
}
