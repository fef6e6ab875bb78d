//! What the openreward SDK's client reads from a server (PROTOCOL_NOTES rows `openreward-sdk`
//! onwards): `env_name` in task replies, `reason` on refused calls, the finished latch and its
//! opt-out, the terminal tool, `/version`, `/messages`, 503 while setup runs, `allowed_domains`
//! of `X-Secrets` entries, and `toolset_name`.

use std::time::Duration;

use base64::Engine as _;
use ors_server::prelude::*;
use ors_server::{RunningServer, Server, ServerConfig};
use serde_json::{json, Value};

use crate::support::*;

/// Input of `Quiz`'s tools.
#[wire]
pub struct Answer {
    answer: String,
}

/// Input of `Quiz::domains`.
#[wire]
pub struct Name {
    name: String,
}

/// An environment where finishing is advisory, with a terminal tool and its own messages.
pub struct Quiz {
    secrets: Secrets,
}

#[environment(name = "quiz", calls_after_finished)]
impl Environment for Quiz {
    type Task = Value;

    fn splits() -> Vec<Split> {
        vec![Split::train("train")]
    }

    async fn tasks(_split: &str) -> Result<Vec<Value>, EnvError> {
        Ok(vec![json!({"q": "2+2"})])
    }

    async fn new(_task: Value, secrets: Secrets) -> Result<Self, EnvError> {
        Ok(Quiz { secrets })
    }

    async fn prompt(&self) -> Result<Blocks, EnvError> {
        Ok(vec![Block::text("What is 2+2?")])
    }

    async fn messages(&self) -> Result<Vec<Message>, EnvError> {
        let turns = json!([
            {"role": "system", "blocks": [{"type": "text", "text": "Be brief."}]},
            {"role": "user", "blocks": [{"type": "text", "text": "What is 2+2?"}]},
            {"role": "assistant", "blocks": [{"type": "reasoning", "text": "2+2 is 4"},
                {"type": "tool_call", "id": "c1", "name": "submit", "input": {"answer": "4"}}]},
        ]);
        Ok(serde_json::from_value(turns)?)
    }

    /// Submit an answer; finishing is advisory here.
    #[tool]
    fn submit(&self, input: Answer) -> ToolOutput {
        let reward = if input.answer.trim() == "4" { 1.0 } else { 0.0 };
        ToolOutput::text("graded").with_reward(reward).finish()
    }

    /// The model's plain final answer.
    #[tool(terminal)]
    fn final_answer(&self, input: Answer) -> ToolOutput {
        self.submit(input)
    }

    /// The domains a secret may be sent to.
    #[tool]
    fn domains(&self, input: Name) -> String {
        self.secrets
            .allowed_domains(&input.name)
            .map(|d| d.join(","))
            .unwrap_or_else(|| "-".into())
    }
}

async fn start_quiz(f: impl FnOnce(&mut ServerConfig)) -> RunningServer {
    let mut config = ServerConfig {
        port: 0,
        ..ServerConfig::default()
    };
    f(&mut config);
    Server::with_config(config)
        .environment::<Lab>()
        .environment::<Quiz>()
        .bind()
        .await
        .expect("the test server binds")
}

/// A ready `quiz` episode.
async fn quiz_episode(addr: std::net::SocketAddr, headers: &[(&str, &str)]) -> String {
    let sid = new_sid(addr).await;
    let body = json!({"env_name": "quiz", "split": "train", "index": 0});
    assert_eq!(create_with(addr, &sid, headers, &body).await.status, 200);
    sid
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_replies_carry_env_name() {
    let server = start().await;
    let addr = server.local_addr();
    let one = post(addr, "/lab/task", r#"{"split": "train", "index": 1}"#).await;
    assert_eq!(one.json()["env_name"], "lab");
    let many = post(addr, "/other/task_range", r#"{"split": "train"}"#).await;
    assert_eq!(many.json()["env_name"], "other");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_calls_carry_a_reason_and_tool_errors_none() {
    let server = start().await;
    let addr = server.local_addr();
    let sid = ready_episode(addr, task(1)).await;
    let unknown = result_of(&call(addr, &sid, "nope", json!({})).await);
    assert_eq!(unknown["reason"], "not_found", "{unknown}");
    let bad = result_of(&call(addr, &sid, "echo", json!({"text": 5})).await);
    assert_eq!(bad["reason"], "input_validation", "{bad}");
    let own = result_of(&call(addr, &sid, "fail", json!({"text": "mine"})).await);
    assert_eq!(own, json!({"ok": false, "error": "mine"}));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_after_finished_are_refused_but_the_session_lives() {
    // PROTOCOL_NOTES row `finished-latch`: a harness that keeps calling cannot turn a wrong
    // answer into reward 1.0.
    let server = start().await;
    let addr = server.local_addr();
    let sid = ready_episode(addr, task(2)).await;
    assert_eq!(
        text_of(&call(addr, &sid, "submit", json!({"text": "5"})).await),
        "Incorrect"
    );
    for (tool, input) in [("submit", json!({"text": "4"})), ("counter", json!({}))] {
        let out = result_of(&call(addr, &sid, tool, input).await);
        assert_eq!(out["ok"], false, "{out}");
        assert_eq!(out["reason"], "episode_finished", "{out}");
    }
    assert_eq!(get_s(addr, &sid, "/lab/prompt").await.status, 200);
    assert_eq!(post_s(addr, &sid, "/ping", "").await.status, 200);
    assert_eq!(get_s(addr, &sid, "/lab/task_tools").await.status, 200);
    assert_eq!(post_s(addr, &sid, "/delete", "").await.status, 200);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_environment_can_let_calls_go_on_after_finished() {
    let server = start_quiz(|_| {}).await;
    let addr = server.local_addr();
    let sid = quiz_episode(addr, &[]).await;
    let wrong = result_of(&call(addr, &sid, "submit", json!({"answer": "5"})).await);
    assert_eq!(wrong["output"]["finished"], true);
    let right = result_of(&call(addr, &sid, "submit", json!({"answer": "4"})).await);
    assert_eq!(right["output"]["reward"], 1.0, "{right}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_terminal_tool_is_named_not_listed_and_callable() {
    let server = start_quiz(|_| {}).await;
    let addr = server.local_addr();
    let want = json!({"name": "final_answer", "arg": "answer", "description": "The model's plain final answer."});
    let tools = get(addr, "/quiz/tools").await.json();
    assert_eq!(tools["terminal_tool"], want);
    let names: Vec<&str> = tools["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(names, ["submit", "domains"]);
    // An environment without one says nothing about it.
    assert!(get(addr, "/lab/tools")
        .await
        .json()
        .get("terminal_tool")
        .is_none());
    let sid = quiz_episode(addr, &[]).await;
    let listing = get_s(addr, &sid, "/quiz/task_tools").await.json();
    assert_eq!(listing["terminal_tool"], want);
    assert!(!listing
        .to_string()
        .contains(r#""name":"final_answer","description""#));
    let out = result_of(&call(addr, &sid, "final_answer", json!({"answer": " 4 "})).await);
    assert_eq!(out["output"]["reward"], 1.0, "{out}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn version_is_open_like_health() {
    let server = start_with(|c| c.api_key = Some("k-123".into())).await;
    let addr = server.local_addr();
    let v = get(addr, "/version").await;
    assert_eq!(v.status, 200, "{}", v.text());
    assert_eq!(v.json()["version"], env!("CARGO_PKG_VERSION"));
    assert!(v.json()["build_sha"].is_null() || v.json()["build_sha"].is_string());
    // The revision is the notes' last row, whatever row that is today.
    let notes =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/PROTOCOL_NOTES.md")).unwrap();
    let last = notes
        .lines()
        .rev()
        .find_map(|l| {
            l.strip_prefix("| ")?
                .split_once(" `")?
                .0
                .parse::<u32>()
                .ok()
        })
        .unwrap();
    assert_eq!(v.json()["protocol_notes"], last.to_string());
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_default_to_the_prompt_and_environments_may_give_their_own() {
    let server = start_quiz(|_| {}).await;
    let addr = server.local_addr();
    let sid = ready_episode(addr, task(3)).await;
    assert_eq!(
        get_s(addr, &sid, "/lab/messages").await.json(),
        json!([{"role": "user", "blocks": [{"type": "text", "text": "What is 3+3?", "detail": null}], "detail": null}])
    );
    let sid = quiz_episode(addr, &[]).await;
    let turns = get_s(addr, &sid, "/quiz/messages").await.json();
    let roles: Vec<&str> = turns
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["role"].as_str())
        .collect();
    assert_eq!(roles, ["system", "user", "assistant"]);
    assert_eq!(turns[2]["blocks"][1]["type"], "tool_call");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_setup_answers_503_starting_then_serves() {
    // PROTOCOL_NOTES row `slow-setup`: the openreward client retries these for up to 600 s.
    let server = start_with(|c| c.setup_wait = Duration::from_millis(100)).await;
    let addr = server.local_addr();
    let sid = new_sid(addr).await;
    let slow = json!({"task_spec": {"id": 1, "answer": "2", "setup_ms": 1500}});
    assert_eq!(create_with(addr, &sid, &[], &slow).await.status, 200);
    let r = get_s(addr, &sid, "/lab/prompt").await;
    r.assert_error(503, "session_starting");
    assert_eq!(r.header("x-backend-state"), Some("starting"));
    assert_eq!(r.header("retry-after"), Some("2"));
    let r = call(addr, &sid, "counter", json!({})).await;
    r.assert_error(503, "session_starting");
    // Generous: only turns a hang into a failure.
    let mut prompt = get_s(addr, &sid, "/lab/prompt").await;
    for _ in 0..300 {
        if prompt.status != 503 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        prompt = get_s(addr, &sid, "/lab/prompt").await;
    }
    assert_eq!(prompt.status, 200, "{}", prompt.text());
    assert_eq!(text_of(&call(addr, &sid, "counter", json!({})).await), "1");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_keep_allowed_domains_and_empty_values() {
    let server = start_quiz(|_| {}).await;
    let addr = server.local_addr();
    let header = base64::engine::general_purpose::STANDARD.encode(
        json!({
            "api_key": {"value": "", "allowed_domains": ["a.example", "b.example"]},
            "PLAIN": {"value": "v"},
        })
        .to_string(),
    );
    let sid = quiz_episode(addr, &[("X-Secrets", &header)]).await;
    let api_key = call(addr, &sid, "domains", json!({"name": "api_key"})).await;
    assert_eq!(text_of(&api_key), "a.example,b.example");
    let plain = call(addr, &sid, "domains", json!({"name": "PLAIN"})).await;
    assert_eq!(text_of(&plain), "-");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_toolset_name_is_a_400_naming_it() {
    let server = start().await;
    let addr = server.local_addr();
    let sid = new_sid(addr).await;
    let body = json!({"task_spec": task(1), "toolset_name": "claude-code"});
    let r = create_with(addr, &sid, &[], &body).await;
    r.assert_error(400, "invalid_request");
    assert!(r.detail().contains("claude-code"), "{}", r.detail());
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_toolset_name_is_echoed_as_a_short_prefix() {
    let server = start().await;
    let addr = server.local_addr();
    let sid = new_sid(addr).await;
    let name = "t".repeat(9 << 20);
    let body = json!({"task_spec": task(1), "toolset_name": name});
    let r = create_with(addr, &sid, &[], &body).await;
    r.assert_error(400, "invalid_request");
    let detail = r.detail();
    assert!(detail.len() < 1000, "{} bytes of detail", detail.len());
    assert!(detail.contains(&format!("{} bytes", 9 << 20)), "{detail}");
    assert!(detail.contains("defines the toolsets:"), "{detail}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_x_secrets_header_is_a_400() {
    let server = start().await;
    let addr = server.local_addr();
    let sid = new_sid(addr).await;
    let secrets = |v: &str| {
        base64::engine::general_purpose::STANDARD.encode(json!({"K": {"value": v}}).to_string())
    };
    let (a, b) = (secrets("first"), secrets("second"));
    let body = json!({"task_spec": task(1)});
    let r = create_with(addr, &sid, &[("X-Secrets", &a), ("X-Secrets", &b)], &body).await;
    r.assert_error(400, "invalid_request");
    assert!(r.detail().contains("x-secrets"), "{}", r.detail());
    assert_eq!(
        server.stats().sessions,
        0,
        "no session for the refused create"
    );
    server.shutdown().await;
}
