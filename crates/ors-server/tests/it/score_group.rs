//! Group scoring (PROTOCOL_NOTES row `score-group`): `POST /{env}/score_group` streamed like a
//! call, `supports_score_group` in the listings only for an environment that implements it,
//! 404 before any stream for one that does not, the count of scores checked, the roles of
//! the candidates' blocks checked as `/messages` checks them, and scoring after `finished`.

use ors_server::prelude::*;
use ors_server::{RunningServer, Server, ServerConfig};
use serde_json::{json, Value};

use crate::support::*;

/// What lets `hold` go: one permit per call to release.
static HOLD: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(0);

/// Scores each candidate by the length of its last message's text; a candidate whose metadata
/// says `"drop": true` gets no score (a miscounting judge), one with `"tag"` is recorded.
pub struct Grader;

#[environment(name = "grader")]
impl Environment for Grader {
    type Task = Value;

    fn splits() -> Vec<Split> {
        vec![Split::train("train")]
    }

    async fn tasks(_split: &str) -> Result<Vec<Value>, EnvError> {
        Ok(vec![json!({"q": "say something"})])
    }

    async fn new(_task: Value, _secrets: Secrets) -> Result<Self, EnvError> {
        Ok(Grader)
    }

    async fn prompt(&self) -> Result<Blocks, EnvError> {
        Ok(vec![Block::text("Say something.")])
    }

    async fn score_group(
        &self,
        candidates: Vec<GroupCandidate>,
    ) -> Result<Vec<GroupScore>, EnvError> {
        let mut scores = Vec::new();
        for c in &candidates {
            let meta = c.metadata.clone().unwrap_or_default();
            if let Some(tag) = meta.get("tag").and_then(Value::as_str) {
                record(tag);
            }
            if meta.get("drop") == Some(&Value::Bool(true)) {
                continue;
            }
            let len: usize = c
                .messages
                .last()
                .map(|m| {
                    m.blocks
                        .iter()
                        .map(|b| match b {
                            MessageBlock::Text(t) => t.text.len(),
                            _ => 0,
                        })
                        .sum()
                })
                .unwrap_or(0);
            scores.push(GroupScore {
                reward: len as f64,
                metadata: Some(meta),
            });
        }
        Ok(scores)
    }

    /// A tool, so the environment has one.
    #[tool]
    fn noop(&self) -> String {
        "ok".into()
    }

    /// Holds the episode (exclusively, as a `&mut self` tool) until the test lets it go.
    #[tool]
    async fn hold(&mut self) -> String {
        if let Ok(permit) = HOLD.acquire().await {
            permit.forget();
        }
        "released".into()
    }

    /// Ends the episode.
    #[tool]
    fn submit(&self) -> ToolOutput {
        ToolOutput::text("done").with_reward(1.0).finish()
    }
}

async fn start_grader() -> RunningServer {
    let config = ServerConfig {
        port: 0,
        ..ServerConfig::default()
    };
    Server::with_config(config)
        .environment::<Lab>()
        .environment::<Grader>()
        .bind()
        .await
        .expect("the test server binds")
}

async fn grader_episode(addr: std::net::SocketAddr) -> String {
    let sid = new_sid(addr).await;
    let body = json!({"env_name": "grader", "split": "train", "index": 0});
    assert_eq!(create_with(addr, &sid, &[], &body).await.status, 200);
    sid
}

/// A candidate whose answer is `text`, with metadata.
fn candidate(text: &str, metadata: Value) -> Value {
    json!({
        "messages": [
            {"role": "user", "blocks": [{"type": "text", "text": "Say something."}]},
            {"role": "assistant", "blocks": [{"type": "text", "text": text}]},
        ],
        "metadata": metadata,
    })
}

async fn score(addr: std::net::SocketAddr, sid: &str, env: &str, body: &Value) -> Reply {
    send(
        addr,
        "POST",
        &format!("/{env}/score_group"),
        &[("X-Session-ID", sid), ("Accept", "text/event-stream")],
        Some(&body.to_string()),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_an_environment_that_scores_groups_advertises_it() {
    let server = start_grader().await;
    let addr = server.local_addr();
    assert_eq!(
        get(addr, "/grader/tools").await.json()["supports_score_group"],
        true
    );
    let lab = get(addr, "/lab/tools").await.json();
    assert!(lab.get("supports_score_group").is_none(), "{lab}");
    let sid = grader_episode(addr).await;
    let listed = get_s(addr, &sid, "/grader/task_tools").await.json();
    assert_eq!(listed["supports_score_group"], true, "{listed}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_is_scored_over_sse_in_candidate_order() {
    let server = start_grader().await;
    let addr = server.local_addr();
    let sid = grader_episode(addr).await;
    let body =
        json!({"candidates": [candidate("abc", json!({"i": 0})), candidate("a", json!(null))]});
    let reply = score(addr, &sid, "grader", &body).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(reply.header("content-type"), Some("text/event-stream"));
    let events = reply.events();
    assert_eq!(events[0].0, "task_id");
    let out = result_of(&reply);
    assert_eq!(
        out,
        json!({"scores": [
            {"reward": 3.0, "metadata": {"i": 0}},
            {"reward": 1.0, "metadata": {}},
        ]})
    );
    // The session goes on: a tool call after the scoring works.
    let call = send(
        addr,
        "POST",
        "/grader/call",
        &[("X-Session-ID", &sid), ("Accept", "text/event-stream")],
        Some(r#"{"name": "noop", "input": {}}"#),
    )
    .await;
    assert_eq!(text_of(&call), "ok");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_number_of_scores_is_an_error_event_naming_both_numbers() {
    let server = start_grader().await;
    let addr = server.local_addr();
    let sid = grader_episode(addr).await;
    let body = json!({"candidates": [
        candidate("a", json!({})),
        candidate("b", json!({"drop": true})),
        candidate("c", json!({})),
    ]});
    let reply = score(addr, &sid, "grader", &body).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let events = reply.events();
    let (name, data) = events.last().expect("events");
    assert_eq!(name, "error", "{events:?}");
    assert!(
        data.contains("returned 2 scores for 3 candidates"),
        "{data}"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_environment_without_score_group_is_a_404_before_any_stream() {
    let server = start_grader().await;
    let addr = server.local_addr();
    let sid = ready_episode(addr, task(1)).await;
    let body = json!({"candidates": [candidate("a", json!({}))]});
    let reply = score(addr, &sid, "lab", &body).await;
    reply.assert_error(404, "no_route");
    assert!(
        reply
            .detail()
            .contains("environment 'lab' does not implement score_group"),
        "{}",
        reply.detail()
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scoring_runs_once_and_a_resend_with_its_task_id_gets_the_same_scores() {
    let server = start_grader().await;
    let addr = server.local_addr();
    let sid = grader_episode(addr).await;
    let tag = "score-group-once";
    let body = json!({"candidates": [candidate("xy", json!({"tag": tag}))], "task_id": "sg-1"});
    let first = score(addr, &sid, "grader", &body).await;
    let again = score(addr, &sid, "grader", &body).await;
    assert_eq!(result_of(&first), result_of(&again));
    assert_eq!(result_of(&first)["scores"][0]["reward"], 2.0);
    assert_eq!(again.events()[0], ("task_id".to_owned(), "sg-1".to_owned()));
    assert_eq!(count(tag), 1, "the judge ran once");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_group_is_a_400_naming_the_field() {
    let server = start_grader().await;
    let addr = server.local_addr();
    let sid = grader_episode(addr).await;
    let reply = score(addr, &sid, "grader", &json!({"candidates": "abc"})).await;
    reply.assert_error(400, "invalid_request");
    assert!(reply.detail().contains("candidates"), "{}", reply.detail());
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_block_in_the_wrong_role_is_a_400_naming_where_it_is() {
    let server = start_grader().await;
    let addr = server.local_addr();
    let sid = grader_episode(addr).await;
    let tag = "score-group-roles";
    let mut bad = candidate("a", json!({"tag": tag}));
    bad["messages"][1] = json!({"role": "user", "blocks": [
        {"type": "text", "text": "fine"},
        {"type": "tool_call", "id": "c1", "name": "noop", "input": {}},
    ]});
    let body = json!({"candidates": [candidate("b", json!({"tag": tag})), bad]});
    let reply = score(addr, &sid, "grader", &body).await;
    reply.assert_error(400, "invalid_request");
    let detail = reply.detail();
    assert!(
        detail.contains("candidates[1].messages[1]")
            && detail.contains("'tool_call' block in a 'user' turn"),
        "{detail}"
    );
    assert_eq!(count(tag), 0, "the judge never saw the group");
    server.shutdown().await;
}

/// PROTOCOL_NOTES row `finished-latch`: the latch refuses tool calls after `finished`, not
/// group scoring, which judges the transcripts the trainer sends rather than playing on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_is_scored_after_the_episode_finished() {
    let server = start_grader().await;
    let addr = server.local_addr();
    let sid = grader_episode(addr).await;
    let call = |name: &'static str| {
        let sid = sid.clone();
        async move {
            send(
                addr,
                "POST",
                "/grader/call",
                &[("X-Session-ID", &sid), ("Accept", "text/event-stream")],
                Some(&json!({"name": name, "input": {}}).to_string()),
            )
            .await
        }
    };
    assert_eq!(result_of(&call("submit").await)["output"]["finished"], true);
    let refused = result_of(&call("noop").await);
    assert_eq!(refused["reason"], "episode_finished", "{refused}");
    let body = json!({"candidates": [candidate("abcd", json!({}))]});
    let scored = result_of(&score(addr, &sid, "grader", &body).await);
    assert_eq!(scored["scores"][0]["reward"], 4.0, "{scored}");
    server.shutdown().await;
}

/// A group of one candidate whose assistant turn is `blocks` text blocks of `len` letters.
fn group_of_blocks(blocks: usize, len: usize) -> String {
    let block = json!({"type": "text", "text": "a".repeat(len)});
    json!({"candidates": [{"messages": [
        {"role": "assistant", "blocks": vec![block; blocks]},
    ]}]})
    .to_string()
}

/// The issue's reproduction, scaled down: group scorings queued behind a long call on one
/// session keep their bodies and parsed candidates counted in the in-flight budget, so the
/// budget refuses more of them (503 `overloaded`) instead of the queue holding several times
/// the budget; once the call ends they run, and the budget is given back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_groups_stay_counted_in_the_body_budget_until_they_run() {
    let config = ServerConfig {
        port: 0,
        max_body_bytes: 1 << 20,
        max_body_bytes_in_flight: 8 << 20,
        ..ServerConfig::default()
    };
    let server = Server::with_config(config)
        .environment::<Grader>()
        .bind()
        .await
        .expect("the test server binds");
    let addr = server.local_addr();
    let sid = grader_episode(addr).await;
    let hold = json!({"name": "hold", "input": {}}).to_string();
    let (held, _, raw) = open_stream(addr, &sid, "/grader/call", &hold)
        .await
        .expect("the hold call starts");
    let body = group_of_blocks(7_000, 100);
    assert!(body.len() < 1 << 20, "{}", body.len());
    let mut queued = Vec::new();
    let refused = loop {
        match open_stream(addr, &sid, "/grader/score_group", &body).await {
            Ok(open) => queued.push(open),
            Err(reply) => break reply,
        }
        assert!(
            queued.len() < 20,
            "20 groups of 0.9 MB queued within an 8 MiB budget"
        );
    };
    refused.assert_error(503, "overloaded");
    assert!(!queued.is_empty(), "one group fits the budget");
    assert!(server.stats().body_bytes > queued.len() * body.len());
    HOLD.add_permits(1);
    assert_eq!(text_of(&finish(held, raw).await), "released");
    for (open, _, raw) in queued {
        let scores = result_of(&finish(open, raw).await);
        assert_eq!(scores["scores"][0]["reward"], 700_000.0, "{scores}");
    }
    assert_eq!(server.stats().body_bytes, 0, "the budget is given back");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_whose_parsed_form_is_far_over_the_body_limit_is_a_413() {
    let config = ServerConfig {
        port: 0,
        max_body_bytes: 1 << 20,
        ..ServerConfig::default()
    };
    let server = Server::with_config(config)
        .environment::<Grader>()
        .bind()
        .await
        .expect("the test server binds");
    let addr = server.local_addr();
    let sid = grader_episode(addr).await;
    // 35,000 one-letter blocks: under 1 MiB of JSON, several MiB once parsed.
    let body = group_of_blocks(35_000, 1);
    assert!(body.len() < 1 << 20, "{}", body.len());
    let reply = score(addr, &sid, "grader", &serde_json::from_str(&body).unwrap()).await;
    reply.assert_error(413, "payload_too_large");
    assert!(reply.detail().contains("once parsed"), "{}", reply.detail());
    // The same text in few blocks is scored.
    let body = group_of_blocks(40, 1_000);
    let scored =
        result_of(&score(addr, &sid, "grader", &serde_json::from_str(&body).unwrap()).await);
    assert_eq!(scored["scores"][0]["reward"], 40_000.0, "{scored}");
    server.shutdown().await;
}
