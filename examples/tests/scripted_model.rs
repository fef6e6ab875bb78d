//! The scripted model server refuses what the real APIs refuse, in their error shapes, and
//! answers well-formed requests from its script. (Its strictness is what makes the agent
//! tests' "no rejections" mean something.)
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a failed assumption is a failed test

use ors_conformance::http::{Request, Target};
use ors_examples::scripted_model::{RunningModel, ScriptedModel};
use serde_json::{json, Value};

async fn post(
    model: &RunningModel,
    path: &str,
    headers: &[(&str, &str)],
    body: Value,
) -> (u16, Value) {
    let target = Target::from_addr(model.addr());
    let mut req = Request::new("POST", path).json(&body);
    for (k, v) in headers {
        req = req.header(k, v);
    }
    let resp = tokio::task::spawn_blocking(move || req.send(&target))
        .await
        .unwrap()
        .unwrap();
    (resp.status(), resp.json().unwrap_or(Value::Null))
}

fn openai(messages: Value) -> Value {
    json!({"model": "m", "messages": messages})
}

fn tool_call(id: &str) -> Value {
    json!({"id": id, "type": "function", "function": {"name": "submit", "arguments": "{}"}})
}

#[tokio::test]
async fn openai_requests_are_checked_like_openai_does() {
    let model = ScriptedModel::arithmetic()
        .bind("127.0.0.1:0")
        .await
        .unwrap();
    let path = "/v1/chat/completions";
    let user = json!({"role": "user", "content": "What is 2+2?"});
    let asked = json!({"role": "assistant", "content": null, "tool_calls": [tool_call("c1")]});
    let bad: Vec<(&str, Value)> = vec![
        ("no model", json!({"messages": [user]})),
        (
            "unknown field",
            json!({"model": "m", "messages": [user], "foo": 1}),
        ),
        (
            "unknown role",
            openai(json!([{"role": "bot", "content": "x"}])),
        ),
        (
            "tool without a call",
            openai(json!([user, {"role": "tool", "tool_call_id": "c1", "content": "x"}])),
        ),
        (
            "call without a result",
            openai(json!([user, asked, {"role": "user", "content": "x"}])),
        ),
        (
            "wrong id",
            openai(json!([user, asked, {"role": "tool", "tool_call_id": "c2", "content": "x"}])),
        ),
        (
            "image in a tool message",
            openai(
                json!([user, asked, {"role": "tool", "tool_call_id": "c1", "content": [
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}]),
            ),
        ),
        (
            "bad part",
            openai(json!([{"role": "user", "content": [{"type": "image", "data": "AAAA"}]}])),
        ),
        (
            "tool schema not an object",
            json!({"model": "m", "messages": [user], "tools": [
            {"type": "function", "function": {"name": "t", "parameters": {"type": "string"}}}]}),
        ),
        (
            "bad tool name",
            json!({"model": "m", "messages": [user], "tools": [
            {"type": "function", "function": {"name": "a b", "parameters": {"type": "object"}}}]}),
        ),
        (
            "temperature",
            json!({"model": "m", "messages": [user], "temperature": 3}),
        ),
    ];
    let json_ct = [("content-type", "application/json")];
    for (what, body) in bad {
        let (status, err) = post(&model, path, &json_ct, body).await;
        assert_eq!(status, 400, "{what}: {err}");
        assert_eq!(err["error"]["type"], "invalid_request_error", "{what}");
        assert!(err["error"]["message"].is_string(), "{what}");
    }
    let good =
        openai(json!([user, asked, {"role": "tool", "tool_call_id": "c1", "content": "Correct!"}]));
    let (status, answer) = post(&model, path, &json_ct, good).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["choices"][0]["message"]["content"], "Done.");
    let (status, answer) = post(&model, path, &json_ct, openai(json!([user]))).await;
    assert_eq!(status, 200);
    let call = &answer["choices"][0]["message"]["tool_calls"][0]["function"];
    assert_eq!(call["arguments"], r#"{"answer":"4"}"#);
    assert_eq!(model.rejections().len(), 11);
}

#[tokio::test]
async fn anthropic_requests_are_checked_like_anthropic_does() {
    let model = ScriptedModel::arithmetic()
        .bind("127.0.0.1:0")
        .await
        .unwrap();
    let path = "/v1/messages";
    let headers = [
        ("content-type", "application/json"),
        ("anthropic-version", "2023-06-01"),
    ];
    let body = |messages: Value| json!({"model": "m", "max_tokens": 100, "messages": messages});
    let user = json!({"role": "user", "content": "What is 2+2?"});
    let asked = json!({"role": "assistant", "content": [
        {"type": "tool_use", "id": "t1", "name": "submit", "input": {"answer": "4"}}]});
    let result =
        |id: &str| json!({"type": "tool_result", "tool_use_id": id, "content": "Correct!"});
    let bad: Vec<(&str, Value)> = vec![
        ("no max_tokens", json!({"model": "m", "messages": [user]})),
        ("first is the assistant", body(json!([asked]))),
        (
            "unknown role",
            body(json!([{"role": "system", "content": "x"}])),
        ),
        (
            "empty text",
            body(json!([{"role": "user", "content": [{"type": "text", "text": ""}]}])),
        ),
        (
            "unknown result id",
            body(json!([user, asked, {"role": "user", "content": [result("t2")]}])),
        ),
        (
            "call without a result",
            body(json!([user, asked, {"role": "user", "content": "go on"}])),
        ),
        (
            "result after text",
            body(json!([user, asked, {"role": "user", "content": [
            {"type": "text", "text": "x"}, result("t1")]}])),
        ),
        (
            "bad image",
            body(json!([{"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/bmp", "data": "AA"}}]}])),
        ),
        (
            "schema missing",
            json!({"model": "m", "max_tokens": 1, "messages": [user],
            "tools": [{"name": "t", "description": "d"}]}),
        ),
        (
            "unknown field",
            json!({"model": "m", "max_tokens": 1, "messages": [user], "seed": 1}),
        ),
    ];
    for (what, body) in bad {
        let (status, err) = post(&model, path, &headers, body).await;
        assert_eq!(status, 400, "{what}: {err}");
        assert_eq!(err["type"], "error", "{what}");
        assert_eq!(err["error"]["type"], "invalid_request_error", "{what}");
    }
    let (status, _) = post(&model, path, &headers[..1], body(json!([user]))).await;
    assert_eq!(status, 400, "anthropic-version is required");

    let good = body(json!([user, asked, {"role": "user", "content": [result("t1")]}]));
    let (status, answer) = post(&model, path, &headers, good).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["content"][0]["text"], "Done.");
    assert_eq!(answer["stop_reason"], "end_turn");
    let (_, answer) = post(&model, path, &headers, body(json!([user]))).await;
    assert_eq!(answer["content"][0]["input"], json!({"answer": "4"}));
    assert_eq!(answer["stop_reason"], "tool_use");
}
