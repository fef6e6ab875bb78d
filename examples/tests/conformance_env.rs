//! The conformance fixture's contract, checked without a server through episodes of the
//! served environment: what the conformance runner and interop tests rely on.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a failed assumption is a failed test

use base64::Engine as _;
use ors_examples::conformance::{Conformance, ConformanceTask, MAX_BIG_BYTES, PNG_BASE64};
use ors_server::prelude::*;
use ors_server::runtime::env::{DynEnvironment, EnvHandle, Episode};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

async fn episode_with(id: u64, secrets: Secrets) -> Episode<Conformance> {
    EnvHandle::<Conformance>::default()
        .episode(ConformanceTask::with_id(id), secrets)
        .await
        .unwrap()
}

async fn episode(id: u64) -> Episode<Conformance> {
    episode_with(id, Secrets::default()).await
}

async fn call(env: &mut Episode<Conformance>, name: &str, input: Value) -> RunToolOutput {
    env.call(ToolContext::detached(), name, input).await
}

/// The result as wire JSON, so the checks read like the protocol.
async fn call_json(env: &mut Episode<Conformance>, name: &str, input: Value) -> Value {
    serde_json::to_value(call(env, name, input).await).unwrap()
}

fn text_result(text: &str, reward: Value, finished: bool) -> Value {
    json!({"ok": true, "output": {
        "blocks": [{"type": "text", "text": text, "detail": null}],
        "metadata": null, "reward": reward, "finished": finished}})
}

#[test]
fn name_and_splits() {
    assert_eq!(Conformance::NAME, "conformance");
    let splits = serde_json::to_value(Conformance::splits()).unwrap();
    assert_eq!(
        splits,
        json!([
            {"name": "train", "type": "train"},
            {"name": "test", "type": "test"},
            {"name": "hard", "type": "validation"},
        ])
    );
}

#[tokio::test]
async fn tasks_of_each_split() {
    for (split, ids) in [
        ("train", (0..25).collect::<Vec<u64>>()),
        ("test", (100..105).collect()),
        ("hard", (200..203).collect()),
    ] {
        let tasks = serde_json::to_value(Conformance::tasks(split).await.unwrap()).unwrap();
        let want: Vec<Value> = ids
            .iter()
            .map(|i| json!({"id": i, "question": format!("What is {i}+{i}?"), "answer": (2 * i).to_string()}))
            .collect();
        assert_eq!(tasks, Value::Array(want), "split {split}");
    }
    assert!(Conformance::tasks("nope").await.is_err());
}

#[tokio::test]
async fn hosted_handle_serves_tasks_and_episodes() {
    let handle = EnvHandle::<Conformance>::default();
    assert_eq!(handle.name(), "conformance");
    assert!(
        handle.table_errors().is_empty(),
        "{:?}",
        handle.table_errors()
    );
    assert_eq!(handle.num_tasks("train").await.unwrap(), 25);
    assert_eq!(handle.num_tasks("test").await.unwrap(), 5);
    assert_eq!(handle.num_tasks("hard").await.unwrap(), 3);
    assert_eq!(
        handle.task("test", 4).await.unwrap(),
        json!({"id": 104, "question": "What is 104+104?", "answer": "208"})
    );
    let task = handle.task("hard", 1).await.unwrap();
    let mut session = handle.create(task, Secrets::default(), None).await.unwrap();
    let prompt = serde_json::to_value(session.prompt().await.unwrap()).unwrap();
    assert_eq!(
        prompt,
        json!([{"type": "text", "text": "What is 201+201?", "detail": null}])
    );
    let out = session
        .call(ToolContext::detached(), "hint", json!({}).into())
        .await;
    assert_eq!(
        out.output().unwrap().blocks[0].as_text(),
        Some("The answer is 402")
    );
}

#[test]
fn shared_tools_are_listed_with_schemas_and_descriptions() {
    let tools = EnvHandle::<Conformance>::default().tools().to_vec();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        ["echo", "submit", "counter", "big", "image", "fail", "panic", "sleep", "secret"]
    );
    for tool in &tools {
        assert!(
            !tool.description.is_empty(),
            "{} has no description",
            tool.name
        );
        match tool.name.as_str() {
            "counter" | "image" | "panic" => assert_eq!(tool.input_schema, None, "{}", tool.name),
            _ => {
                let schema = tool.input_schema.as_ref().unwrap();
                assert_eq!(schema["type"], "object", "{}", tool.name);
            }
        }
    }
    let field = |tool: &str, field: &str| {
        let spec = tools.iter().find(|t| t.name == tool).unwrap();
        let schema = spec.input_schema.as_ref().unwrap();
        assert_eq!(schema["required"], json!([field]), "{tool}");
        schema["properties"][field]["type"].clone()
    };
    assert_eq!(field("echo", "text"), "string");
    assert_eq!(field("submit", "answer"), "string");
    assert_eq!(field("big", "bytes"), "integer");
    assert_eq!(field("fail", "message"), "string");
    assert_eq!(field("sleep", "ms"), "integer");
    assert_eq!(field("secret", "name"), "string");
}

#[tokio::test]
async fn hint_is_listed_only_as_a_task_tool() {
    let env = episode(3).await;
    let all: Vec<String> = env.tools().into_iter().map(|t| t.name).collect();
    assert!(all.contains(&"hint".to_owned()), "{all:?}");
    assert!(!EnvHandle::<Conformance>::default()
        .tools()
        .iter()
        .any(|t| t.name == "hint"));
    let hint = env.tools().into_iter().find(|t| t.name == "hint").unwrap();
    assert_eq!(hint.input_schema, None);
}

#[tokio::test]
async fn prompt_is_the_question() {
    let env = episode(7).await;
    let prompt = serde_json::to_value(env.get().unwrap().prompt().await.unwrap()).unwrap();
    assert_eq!(
        prompt,
        json!([{"type": "text", "text": "What is 7+7?", "detail": null}])
    );
}

#[tokio::test]
async fn echo_returns_the_text_with_its_length() {
    let mut env = episode(0).await;
    let out = call_json(&mut env, "echo", json!({"text": "héllo ✓"})).await;
    assert_eq!(
        out,
        json!({"ok": true, "output": {
            "blocks": [{"type": "text", "text": "héllo ✓", "detail": null}],
            "metadata": {"length": 7}, "reward": 0.0, "finished": false}})
    );
    let out = call_json(&mut env, "echo", json!({})).await;
    assert_eq!(out["ok"], false);
    let error = out["error"].as_str().unwrap();
    assert!(error.contains("echo") && error.contains("text"), "{error}");
}

#[tokio::test]
async fn submit_rewards_the_right_answer_and_finishes() {
    let mut env = episode(12).await;
    assert_eq!(
        call_json(&mut env, "submit", json!({"answer": "24"})).await,
        text_result("Correct!", json!(1.0), true)
    );
    // Finished: a second submission is refused, in this episode.
    let again = call_json(&mut env, "submit", json!({"answer": "24"})).await;
    assert_eq!(again["ok"], false);
    assert_eq!(again["reason"], "episode_finished");
    let mut env = episode(12).await;
    assert_eq!(
        call_json(&mut env, "submit", json!({"answer": "25"})).await,
        text_result("Incorrect", json!(0.0), true)
    );
}

#[tokio::test]
async fn counter_counts_per_session() {
    let mut a = episode(0).await;
    let mut b = episode(0).await;
    for want in ["1", "2", "3"] {
        assert_eq!(
            call_json(&mut a, "counter", json!({})).await,
            text_result(want, Value::Null, false)
        );
    }
    // Other tools do not count, and another session has its own count.
    call(&mut a, "echo", json!({"text": "x"})).await;
    assert_eq!(
        call_json(&mut b, "counter", Value::Null).await,
        text_result("1", Value::Null, false)
    );
    assert_eq!(
        call_json(&mut a, "counter", json!({})).await,
        text_result("4", Value::Null, false)
    );
}

#[tokio::test]
async fn big_returns_exactly_that_many_bytes() {
    let mut env = episode(0).await;
    for bytes in [0usize, 1, 4096, 4097, 100_000] {
        let out = call(&mut env, "big", json!({"bytes": bytes})).await;
        let blocks = &out.output().unwrap().blocks;
        assert_eq!(blocks.len(), 1);
        let text = blocks[0].as_text().unwrap();
        assert_eq!(text.len(), bytes);
        assert!(text.bytes().all(|b| b == b'x'));
    }
    let out = call(&mut env, "big", json!({"bytes": MAX_BIG_BYTES + 1})).await;
    assert!(!out.is_ok());
    let out = call(&mut env, "big", json!({"bytes": -1})).await;
    assert!(!out.is_ok());
}

/// CRC-32 (IEEE), to check the PNG's chunks without an image library.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

#[tokio::test]
async fn image_returns_text_and_a_valid_png() {
    let mut env = episode(0).await;
    let out = call_json(&mut env, "image", json!({})).await;
    assert_eq!(
        out["output"]["blocks"],
        json!([
            {"type": "text", "text": "image", "detail": null},
            {"type": "image", "data": PNG_BASE64, "mimeType": "image/png", "detail": null},
        ])
    );
    let png = base64::engine::general_purpose::STANDARD
        .decode(PNG_BASE64)
        .unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    // Walk the chunks: every CRC must match, IHDR first, IEND last.
    let mut at = 8;
    let mut kinds = Vec::new();
    while at < png.len() {
        let len = u32::from_be_bytes(png[at..at + 4].try_into().unwrap()) as usize;
        let body = &png[at + 4..at + 8 + len];
        let crc = u32::from_be_bytes(png[at + 8 + len..at + 12 + len].try_into().unwrap());
        assert_eq!(crc32(body), crc);
        kinds.push(String::from_utf8(body[..4].to_vec()).unwrap());
        at += 12 + len;
    }
    assert_eq!(kinds, ["IHDR", "IDAT", "IEND"]);
}

#[tokio::test]
async fn fail_is_an_error_result_with_the_message() {
    let mut env = episode(0).await;
    assert_eq!(
        call_json(&mut env, "fail", json!({"message": "boom"})).await,
        json!({"ok": false, "error": "boom"})
    );
}

#[tokio::test]
async fn panic_panics() {
    let mut env = episode(0).await;
    let joined = tokio::spawn(async move { call(&mut env, "panic", json!({})).await }).await;
    assert!(joined.unwrap_err().is_panic());
}

#[tokio::test]
async fn sleep_answers_slept_and_stops_when_cancelled() {
    let mut env = episode(0).await;
    assert_eq!(
        call_json(&mut env, "sleep", json!({"ms": 5})).await,
        text_result("slept", Value::Null, false)
    );
    let token = CancellationToken::new();
    token.cancel();
    let ctx = ToolContext::new("s", "c", token, None);
    // An hour-long sleep returns at once because its call is already cancelled.
    let out = env.call(ctx, "sleep", json!({"ms": 3_600_000})).await;
    assert_eq!(out, RunToolOutput::error("sleep was cancelled"));
}

#[tokio::test]
async fn secret_reads_the_session_secrets() {
    let secrets: Secrets = [("API_TOKEN", "s3cret")].into_iter().collect();
    let mut env = episode_with(1, secrets).await;
    assert_eq!(
        call_json(&mut env, "secret", json!({"name": "API_TOKEN"})).await,
        text_result("s3cret", Value::Null, false)
    );
    assert_eq!(
        call_json(&mut env, "secret", json!({"name": "OTHER"})).await,
        json!({"ok": false, "error": "no secret 'OTHER'"})
    );
}

#[tokio::test]
async fn hint_gives_the_answer() {
    let mut env = episode(21).await;
    assert_eq!(
        call_json(&mut env, "hint", json!({})).await,
        text_result("The answer is 42", Value::Null, false)
    );
}

#[tokio::test]
async fn unknown_tool_is_an_error_result() {
    let mut env = episode(0).await;
    let out = call(&mut env, "nope", json!({})).await;
    match out {
        RunToolOutput::Error(e) => assert!(e.error.contains("nope"), "{e}"),
        other => panic!("expected an error, got {other:?}"),
    }
}
