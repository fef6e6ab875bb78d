//! The environment author's toolkit, without a server: blocking tools on their own thread,
//! hand-written and validated schemas, `detail_url`, `reasoning`, `Json<T>` results, dynamic
//! tools, and splits served by index.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a failed assumption is a failed test

use std::sync::{Condvar, Mutex};
use std::time::Duration;

use ors_server::prelude::*;
use ors_server::runtime::env::{DynEnvironment, EnvHandle, Episode, MAX_TASKS_PER_REQUEST};
use ors_server::runtime::TaskError;
use ors_server::DynamicTool;
use serde_json::{json, Value};

#[wire]
#[derive(Clone, Debug, PartialEq)]
struct Row {
    i: usize,
}

#[wire]
struct Pick {
    /// From 1 to 10.
    #[schemars(range(min = 1, max = 10))]
    n: u32,
}

#[wire]
struct Report {
    n: u32,
    reasoning: Option<String>,
}

/// Splits served by index: `big` has more rows than one reply carries.
const BIG: usize = MAX_TASKS_PER_REQUEST * 100;

/// Tools known at start-up: made from the state (none here) when the environment is served.
fn extra_tools(_: &()) -> Vec<DynamicTool> {
    vec![DynamicTool::new(
        "weather",
        "Get the weather.",
        json!({"type": "object", "properties": {"city": {"type": "string", "minLength": 2}},
               "required": ["city"], "additionalProperties": false}),
        |ctx: ToolContext, input| async move {
            format!("{} ({})", input["city"], ctx.reasoning().unwrap_or("-"))
        },
    )
    .expect("a valid tool")
    .with_detail_url("https://example.com/weather")]
}

struct Kit {
    steps: u32,
}

#[environment(reasoning, dynamic_tools = extra_tools)]
impl Environment for Kit {
    type Task = Row;
    fn splits() -> Vec<Split> {
        vec![Split::train("small"), Split::test("big")]
    }
    async fn num_tasks(split: &str) -> Result<Option<usize>, EnvError> {
        Ok(Some(if split == "big" { BIG } else { 3 }))
    }
    async fn task(_split: &str, index: usize) -> Result<Row, EnvError> {
        Ok(Row { i: index })
    }
    async fn new(_task: Row, _secrets: Secrets) -> Result<Self, EnvError> {
        Ok(Kit { steps: 0 })
    }
    async fn prompt(&self) -> Result<Blocks, EnvError> {
        Ok(vec![Block::text(format!("steps {}", self.steps))])
    }

    /// Pick a number, checked against its schema's range before this runs.
    #[tool(validate, detail_url = "https://example.com/pick")]
    fn pick(&self, ctx: &ToolContext, input: Pick) -> Json<Report> {
        Json(Report {
            n: input.n,
            reasoning: ctx.reasoning().map(str::to_owned),
        })
    }

    /// Add a contact (a hand-written schema).
    #[tool(schema = r#"{"type": "object",
        "properties": {"name": {"type": "string"},
                       "phone": {"type": "string", "pattern": "^\\+[0-9]+$"},
                       "label": {"enum": ["home", "work"]}},
        "required": ["name"]}"#)]
    fn add_contact(&self, input: JsonObject) -> String {
        format!("added {}", input["name"])
    }

    /// Count a step on a blocking-pool thread; with `"hold": true`, first wait until the test
    /// releases it (at most 60 s).
    #[tool(blocking)]
    fn spin(&mut self, input: JsonObject) -> String {
        if input.get("hold").and_then(Value::as_bool) == Some(true) {
            let released = RELEASED.lock().unwrap();
            let _ = OPENED
                .wait_timeout_while(released, Duration::from_secs(60), |r| !*r)
                .unwrap();
        }
        self.steps += 1;
        format!(
            "steps {} on {:?}",
            self.steps,
            std::thread::current().name()
        )
    }
}

/// Whether a held `spin` may go on, and the signal that it may.
static RELEASED: Mutex<bool> = Mutex::new(false);
static OPENED: Condvar = Condvar::new();

fn release_spins() {
    *RELEASED.lock().unwrap() = true;
    OPENED.notify_all();
}

async fn kit() -> Episode<Kit> {
    EnvHandle::<Kit>::default()
        .episode(Row { i: 0 }, Secrets::default())
        .await
        .unwrap()
}

async fn call(env: &mut Episode<Kit>, name: &str, input: Value) -> RunToolOutput {
    env.call(ToolContext::detached(), name, input).await
}

fn error_of(out: RunToolOutput) -> String {
    match out {
        RunToolOutput::Error(e) => e.error,
        other => panic!("expected an error, got {other:?}"),
    }
}

#[tokio::test]
async fn specs_carry_reasoning_detail_url_output_schema_and_the_raw_schema() {
    let specs = EnvHandle::<Kit>::default().tools().to_vec();
    let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["pick", "add_contact", "spin", "weather"]);
    for spec in &specs {
        let props = &spec.input_schema.as_ref().expect("every tool has one")["properties"];
        assert_eq!(props["reasoning"]["type"], "string", "{}", spec.name);
    }
    assert_eq!(
        specs[0].detail_url.as_deref(),
        Some("https://example.com/pick")
    );
    assert_eq!(
        specs[3].detail_url.as_deref(),
        Some("https://example.com/weather")
    );
    let output = specs[0]
        .output_schema
        .as_ref()
        .expect("Json<Report> has one");
    assert_eq!(output["properties"]["n"]["type"], "integer");
    assert!(specs[1].output_schema.is_none());
    // The hand-written schema is served as written (plus reasoning).
    let raw = specs[1].input_schema.as_ref().unwrap();
    assert_eq!(raw["properties"]["phone"]["pattern"], "^\\+[0-9]+$");
    assert_eq!(raw["required"], json!(["name"]));
    // The wire form has the additions only where set.
    let wire = serde_json::to_value(&specs[1]).unwrap();
    assert!(wire.get("detail_url").is_none() && wire.get("output_schema").is_none());
}

#[tokio::test]
async fn inputs_are_validated_before_the_tool_runs_naming_the_field() {
    let mut env = kit().await;
    let err = error_of(call(&mut env, "pick", json!({"n": 11})).await);
    assert_eq!(
        err,
        "invalid input for tool 'pick': field 'n': 11 is greater than the maximum of 10"
    );
    let err = error_of(call(&mut env, "add_contact", json!({"phone": "+1"})).await);
    assert_eq!(
        err,
        "invalid input for tool 'add_contact': \"name\" is a required property"
    );
    let err = error_of(call(&mut env, "add_contact", json!({"name": "A", "phone": "12"})).await);
    assert!(
        err.contains("field 'phone': \"12\" does not match"),
        "{err}"
    );
    let err = error_of(call(&mut env, "add_contact", json!({"name": "A", "label": "x"})).await);
    assert!(err.contains("field 'label'"), "{err}");
    let ok = call(
        &mut env,
        "add_contact",
        json!({"name": "Ann", "label": "work"}),
    )
    .await;
    assert_eq!(
        ok.output().unwrap().blocks[0].as_text(),
        Some("added \"Ann\"")
    );
    let err = error_of(call(&mut env, "weather", json!({"city": "P"})).await);
    assert!(
        err.starts_with("invalid input for tool 'weather': field 'city'"),
        "{err}"
    );
}

#[tokio::test]
async fn reasoning_goes_to_the_context_not_the_input() {
    let mut env = kit().await;
    let out = call(
        &mut env,
        "pick",
        json!({"n": 3, "reasoning": "three is enough"}),
    )
    .await;
    let output = out.output().expect("ok");
    let structured = &output.metadata.as_ref().unwrap()["structured"];
    assert_eq!(structured, &json!({"n": 3, "reasoning": "three is enough"}));
    // The text block is the same value as JSON.
    let text: Value = serde_json::from_str(output.blocks[0].as_text().unwrap()).unwrap();
    assert_eq!(&text, structured);
    // A hand-written schema with additionalProperties: false still accepts it.
    let out = call(
        &mut env,
        "weather",
        json!({"city": "Oslo", "reasoning": "why not"}),
    )
    .await;
    assert_eq!(
        out.output().unwrap().blocks[0].as_text(),
        Some("\"Oslo\" (why not)")
    );
    let err = error_of(call(&mut env, "pick", json!({"n": 3, "reasoning": 7})).await);
    assert_eq!(
        err,
        "invalid input for tool 'pick': field 'reasoning': expected a string, got a number"
    );
    assert!(env.tools().iter().all(|t| t.input_schema.is_some()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocking_tool_runs_on_the_blocking_pool_and_keeps_the_episode() {
    let handle = EnvHandle::<Kit>::default();
    let mut session = handle
        .create(json!({"i": 0}), Secrets::default(), None)
        .await
        .unwrap();
    let out = session
        .call(ToolContext::detached(), "spin", json!({}).into())
        .await;
    let text = out.output().unwrap().blocks[0]
        .as_text()
        .unwrap()
        .to_owned();
    assert!(text.starts_with("steps 1 on "), "{text}");
    assert!(
        !text.contains("tokio-runtime-worker"),
        "ran on a worker: {text}"
    );
    // Dropped mid-call (what the server's timeout does): the call is answered at once, the
    // thread finishes in the background and hands the episode back to the next call.
    // The spin is held until after the timeout, so it outlasts it however loaded the machine.
    let fut = session.call(
        ToolContext::detached(),
        "spin",
        json!({"hold": true}).into(),
    );
    let timed_out = tokio::time::timeout(Duration::from_millis(50), fut).await;
    assert!(timed_out.is_err(), "the held spin answered");
    // The next call waits for the episode, which the held thread gives back once released.
    let next = tokio::time::timeout(
        Duration::from_secs(30),
        session.call(ToolContext::detached(), "spin", json!({}).into()),
    );
    let (out, ()) = tokio::join!(next, async { release_spins() });
    let out = out.expect("the episode comes back");
    let text = out.output().unwrap().blocks[0]
        .as_text()
        .unwrap()
        .to_owned();
    assert!(
        text.starts_with("steps 3 on "),
        "both spins counted: {text}"
    );
    let prompt = session.prompt().await.unwrap();
    assert_eq!(prompt[0].as_text(), Some("steps 3"));
}

#[tokio::test]
async fn splits_served_by_index() {
    let handle = EnvHandle::<Kit>::default();
    assert_eq!(handle.num_tasks("big").await.unwrap(), BIG);
    assert_eq!(
        handle.task("big", (BIG - 1) as i64).await.unwrap(),
        json!({"i": BIG - 1})
    );
    assert!(matches!(
        handle.task("big", BIG as i64).await,
        Err(TaskError::InvalidIndex { .. })
    ));
    assert!(matches!(
        handle.task("big", -1).await,
        Err(TaskError::InvalidIndex { .. })
    ));
    assert_eq!(handle.tasks("small").await.unwrap().len(), 3);
    let err = handle.tasks("big").await.unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(err, TaskError::TooMany { requested: BIG, .. }),
        "{msg}"
    );
    assert!(msg.contains("/task_range"), "{msg}");
    let page = handle
        .task_range("big", Some(5), Some(5 + MAX_TASKS_PER_REQUEST as i64))
        .await
        .unwrap();
    assert_eq!(page.len(), MAX_TASKS_PER_REQUEST);
    assert_eq!(page[0], json!({"i": 5}));
    assert!(handle.task_range("big", None, None).await.is_err());
    assert_eq!(
        handle
            .task_range("big", Some(-2), None)
            .await
            .unwrap()
            .len(),
        2
    );
}
