//! Golden JSON: every example of the Data Types page parses into our types and re-emits as the
//! reference wire form (the example plus the always-present `detail`, `metadata`, `reward`,
//! `finished` keys, PROTOCOL_NOTES row `tool-output-wire-form`), compared as JSON values.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a failed assumption is a failed test

use ors_core::sse::{self, CallEvent, CallStreamDecoder};
use ors_core::{
    Block, Blocks, CreateSession, GetTask, GetTaskRange, ListTasks, ListToolsOutput, NumTasks,
    RunToolOutput, Split, SplitType, TaskResponse, TaskSource, TasksResponse, ToolCall, ToolOutput,
    ToolSpec,
};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};

/// Parse `example` as `T`, re-emit it, and compare with `expected`; return the parsed value.
#[track_caller]
fn golden<T: DeserializeOwned + Serialize>(example: &str, expected: Value) -> T {
    let parsed: T = serde_json::from_str(example).expect("the example parses");
    let emitted = serde_json::to_value(&parsed).expect("serializes");
    assert_eq!(emitted, expected, "re-emitted form differs for {example}");
    // The emitted form parses back to the same value.
    let again: T = serde_json::from_value(emitted.clone()).expect("re-parses");
    assert_eq!(serde_json::to_value(&again).expect("serializes"), emitted);
    parsed
}

#[test]
fn text_block() {
    let example = r#"{
      "type": "text",
      "text": "What is 2+2?",
      "detail": {"language": "en"}
    }"#;
    let block: Block = golden(
        example,
        json!({"type": "text", "text": "What is 2+2?", "detail": {"language": "en"}}),
    );
    assert_eq!(block.as_text(), Some("What is 2+2?"));
}

#[test]
fn image_block() {
    let example = r#"{
      "type": "image",
      "data": "iVBORw0KGgoAAAANSUhEUgA...",
      "mimeType": "image/png",
      "detail": {"width": 800, "height": 600}
    }"#;
    let block: Block = golden(
        example,
        json!({
            "type": "image",
            "data": "iVBORw0KGgoAAAANSUhEUgA...",
            "mimeType": "image/png",
            "detail": {"width": 800, "height": 600}
        }),
    );
    match block {
        Block::Image(img) => assert_eq!(img.mime_type, "image/png"),
        other => panic!("expected an image block, got {other:?}"),
    }
}

#[test]
fn blocks_multimodal_prompt() {
    let example = r#"[
      {"type": "text", "text": "What object is shown in this image?"},
      {"type": "image", "data": "iVBORw0KGgo...", "mimeType": "image/jpeg"}
    ]"#;
    let blocks: Blocks = golden(
        example,
        json!([
            {"type": "text", "text": "What object is shown in this image?", "detail": null},
            {"type": "image", "data": "iVBORw0KGgo...", "mimeType": "image/jpeg", "detail": null}
        ]),
    );
    assert_eq!(blocks.len(), 2);
}

fn bash_spec_json() -> Value {
    json!({
        "name": "bash",
        "description": "Execute a bash command in the environment",
        "input_schema": {
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The bash command to execute"}
            },
            "required": ["command"]
        }
    })
}

#[test]
fn tool_spec() {
    let example = r#"{
      "name": "bash",
      "description": "Execute a bash command in the environment",
      "input_schema": {
        "type": "object",
        "properties": {
          "command": {
            "type": "string",
            "description": "The bash command to execute"
          }
        },
        "required": ["command"]
      }
    }"#;
    let spec: ToolSpec = golden(example, bash_spec_json());
    assert_eq!(spec.name, "bash");
}

#[test]
fn tool_output_successful_completion() {
    let example = r#"{
      "blocks": [
        {"text": "Correct! The answer is 4.", "detail": null, "type": "text"}
      ],
      "metadata": null,
      "reward": 1.0,
      "finished": true
    }"#;
    let expected: Value = serde_json::from_str(example).unwrap();
    let out: ToolOutput = golden(example, expected);
    assert_eq!(
        out,
        ToolOutput::text("Correct! The answer is 4.")
            .with_reward(1.0)
            .finish()
    );
}

#[test]
fn tool_output_intermediate_step() {
    let example = r#"{
      "blocks": [
        {"text": "File contents: Hello World", "detail": null, "type": "text"}
      ],
      "metadata": {"file_size": 11},
      "reward": 0.0,
      "finished": false
    }"#;
    let expected: Value = serde_json::from_str(example).unwrap();
    let out: ToolOutput = golden(example, expected);
    assert_eq!(out.metadata.as_ref().unwrap()["file_size"], 11);
    assert!(!out.finished);
}

#[test]
fn tool_call() {
    let example = r#"{
      "name": "submit",
      "input": {"answer": "42"},
      "task_id": "trace-123"
    }"#;
    let expected: Value = serde_json::from_str(example).unwrap();
    let call: ToolCall = golden(example, expected);
    assert_eq!(call.task_id.as_deref(), Some("trace-123"));
}

#[test]
fn list_tools_output() {
    // The page elides the schemas as `{...}`; real schemas stand in for them.
    let example = r#"{
      "tools": [
        {
          "name": "submit",
          "description": "Submit an answer",
          "input_schema": {
            "type": "object",
            "properties": {"answer": {"type": "string", "description": "The final answer"}},
            "required": ["answer"]
          }
        },
        {
          "name": "bash",
          "description": "Execute bash command",
          "input_schema": {
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"]
          }
        }
      ]
    }"#;
    let expected: Value = serde_json::from_str(example).unwrap();
    let list: ListToolsOutput = golden(example, expected);
    assert_eq!(list.tools.len(), 2);
    assert_eq!(list.tools[1].name, "bash");
}

#[test]
fn run_tool_success() {
    let example = r#"{
      "ok": true,
      "output": {
        "blocks": [{"text": "Success", "detail": null, "type": "text"}],
        "metadata": null,
        "reward": 1.0,
        "finished": true
      }
    }"#;
    let expected: Value = serde_json::from_str(example).unwrap();
    let result: RunToolOutput = golden(example, expected);
    assert_eq!(
        result,
        RunToolOutput::Success(ToolOutput::text("Success").with_reward(1.0).finish())
    );
}

#[test]
fn run_tool_error() {
    let example = r#"{
      "ok": false,
      "error": "Tool 'submit' failed: Answer must be a number"
    }"#;
    let expected: Value = serde_json::from_str(example).unwrap();
    let result: RunToolOutput = golden(example, expected);
    assert_eq!(
        result,
        RunToolOutput::error("Tool 'submit' failed: Answer must be a number")
    );
}

#[test]
fn split_example_and_common_splits() {
    let split: Split = golden(
        r#"{"name": "train", "type": "train"}"#,
        json!({"name": "train", "type": "train"}),
    );
    assert_eq!(split, Split::train("train"));
    for (example, ty) in [
        (r#"{"name": "train", "type": "train"}"#, SplitType::Train),
        (
            r#"{"name": "validation", "type": "validation"}"#,
            SplitType::Validation,
        ),
        (r#"{"name": "test", "type": "test"}"#, SplitType::Test),
    ] {
        let expected: Value = serde_json::from_str(example).unwrap();
        let split: Split = golden(example, expected);
        assert_eq!(split.split_type, ty);
    }
}

#[test]
fn list_tasks() {
    let body: ListTasks = golden(r#"{"split": "train"}"#, json!({"split": "train"}));
    assert_eq!(body.split, "train");
}

#[test]
fn request_bodies_without_page_examples() {
    // NumTasks, GetTask and GetTaskRange have no example on the page; their field lists do.
    let _: NumTasks = golden(r#"{"split": "test"}"#, json!({"split": "test"}));
    let t: GetTask = golden(
        r#"{"split": "test", "index": 3}"#,
        json!({"split": "test", "index": 3}),
    );
    assert_eq!(t.index, 3);
    let r: GetTaskRange = golden(
        r#"{"split": "test", "start": 1, "stop": 5}"#,
        json!({"split": "test", "start": 1, "stop": 5}),
    );
    assert_eq!(r.resolve(10), 1..5);
}

#[test]
fn create_session_with_inline_task_spec() {
    let example = r#"{
      "env_name": "math",
      "task_spec": {
        "question": "If x + 5 = 12, what is x?",
        "answer": "7"
      },
      "secrets": {
        "openai_api_key": "sk-..."
      }
    }"#;
    let expected: Value = serde_json::from_str(example).unwrap();
    let body: CreateSession = golden(example, expected);
    assert_eq!(
        body.task_source(),
        Ok(TaskSource::Spec(
            json!({"question": "If x + 5 = 12, what is x?", "answer": "7"})
        ))
    );
    assert_eq!(
        body.secrets.as_ref().and_then(|s| s.get("openai_api_key")),
        Some("sk-...")
    );
}

#[test]
fn create_session_with_split_and_index() {
    let example = r#"{
      "env_name": "math",
      "split": "train",
      "index": 42,
      "secrets": {}
    }"#;
    let expected: Value = serde_json::from_str(example).unwrap();
    let body: CreateSession = golden(example, expected);
    assert_eq!(
        body.task_source(),
        Ok(TaskSource::Split {
            split: "train".to_owned(),
            index: 42
        })
    );
}

fn task_examples() -> Vec<&'static str> {
    vec![
        r#"{
          "question": "What is 2+2?",
          "answer": "4",
          "difficulty": "easy"
        }"#,
        r#"{
          "description": "Write a function to reverse a string",
          "test_cases": [
            {"input": "hello", "output": "olleh"},
            {"input": "world", "output": "dlrow"}
          ],
          "time_limit": 5
        }"#,
        r#"{
          "goal": "Find the price of product XYZ",
          "start_url": "https://example.com",
          "max_steps": 20
        }"#,
    ]
}

#[test]
fn task_examples_travel_unchanged_in_every_body_that_carries_tasks() {
    let tasks: Vec<Value> = task_examples()
        .into_iter()
        .map(|t| serde_json::from_str(t).unwrap())
        .collect();
    for task in &tasks {
        // As a create body's inline task.
        let body = CreateSession::from_task(task.clone()).env("math");
        let wire = serde_json::to_string(&body).unwrap();
        let back: CreateSession = serde_json::from_str(&wire).unwrap();
        assert_eq!(back.task_source(), Ok(TaskSource::Spec(task.clone())));
        // As the reply of `task`.
        let reply: TaskResponse = golden(&json!({"task": task}).to_string(), json!({"task": task}));
        assert_eq!(&reply.task, task);
    }
    // As the reply of `tasks`.
    let reply = json!({"tasks": tasks, "env_name": "math"});
    let parsed: TasksResponse = golden(&reply.to_string(), reply.clone());
    assert_eq!(parsed.tasks, tasks);
}

/// The wire example at the end of PROTOCOL_NOTES.md, byte for byte.
const NOTES_WIRE_EXAMPLE: &str = "event: task_id\n\
data: 877bb56c594e4a0f921ad55c439a3762\n\
\n\
event: end\n\
data: {\"ok\":true,\"output\":{\"blocks\":[{\"text\":\"Correct!\",\"detail\":null,\"type\":\"text\"}],\"metadata\":null,\"reward\":1.0,\"finished\":true}}\n\
\n";

#[test]
fn protocol_notes_wire_example_decodes() {
    let mut decoder = CallStreamDecoder::new();
    let events: Vec<CallEvent> = decoder
        .push(NOTES_WIRE_EXAMPLE.as_bytes())
        .into_iter()
        .map(|e| e.expect("valid event"))
        .collect();
    assert_eq!(
        events,
        vec![
            CallEvent::TaskId("877bb56c594e4a0f921ad55c439a3762".to_owned()),
            CallEvent::Result(RunToolOutput::Success(
                ToolOutput::text("Correct!").with_reward(1.0).finish()
            )),
        ]
    );
}

#[test]
fn protocol_notes_wire_example_is_what_we_encode() {
    let result = RunToolOutput::from(ToolOutput::text("Correct!").with_reward(1.0).finish());
    let mut bytes = sse::encode_task_id("877bb56c594e4a0f921ad55c439a3762");
    bytes.extend(sse::encode_result(&result));
    let text = String::from_utf8(bytes).unwrap();
    // Same framing and event names; the `end` data is the same JSON value (key order aside).
    let ours: Vec<&str> = text.split('\n').collect();
    let theirs: Vec<&str> = NOTES_WIRE_EXAMPLE.split('\n').collect();
    assert_eq!(ours.len(), theirs.len());
    for (a, b) in ours.iter().zip(&theirs) {
        match (a.strip_prefix("data: {"), b.strip_prefix("data: {")) {
            (Some(a), Some(b)) => {
                let a: Value = serde_json::from_str(&format!("{{{a}")).unwrap();
                let b: Value = serde_json::from_str(&format!("{{{b}")).unwrap();
                assert_eq!(a, b);
            }
            _ => assert_eq!(a, b),
        }
    }
}
