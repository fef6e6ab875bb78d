//! `Session::score_group` (PROTOCOL_NOTES row `score-group`): typed scores from an environment
//! that scores groups, [`Error::Unsupported`] from one that does not (our server's `no_route`
//! 404, and a server that answers a bare 404 as openreward's does), and a judge's failure as
//! a crash.

use ors_client::{Error, GroupCandidate, JsonObject, Message};
use serde_json::json;

use crate::fake::{Fake, FakeResponse};
use crate::support::*;

/// A candidate whose final answer is `answer`.
fn candidate(answer: &str) -> GroupCandidate {
    let messages: Vec<Message> = serde_json::from_value(json!([
        {"role": "user", "blocks": [{"type": "text", "text": "What is 0+0?"}]},
        {"role": "assistant", "blocks": [{"type": "text", "text": answer}]},
    ]))
    .expect("valid messages");
    GroupCandidate {
        messages,
        metadata: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_gets_one_typed_score_per_candidate_in_order() {
    let srv = server().await;
    let c = client(&srv.url().to_string());
    let s = fixture_session(&c).await;
    assert!(s.supports_score_group().await.unwrap());
    // Task 0 of `train`: the answer is "0".
    let scores = s
        .score_group(vec![candidate("7"), candidate(" 0 "), candidate("00")])
        .await
        .unwrap();
    let rewards: Vec<f64> = scores.iter().map(|s| s.reward).collect();
    assert_eq!(rewards, [0.0, 1.0, 0.0]);
    // The session is usable afterwards.
    s.call("echo", json!({"text": "hi"})).await.unwrap();
    s.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_environment_without_group_scoring_is_unsupported_and_the_session_lives() {
    let srv = server().await;
    let url = srv.url().to_string();
    let c = client(&url);
    let s = c.environment("gsm8k").session_at("train", 0).await.unwrap();
    assert!(!s.supports_score_group().await.unwrap());
    let err = s.score_group(vec![candidate("1")]).await.unwrap_err();
    assert!(
        matches!(&err, Error::Unsupported { env, capability } if env == "gsm8k" && capability == "score_group"),
        "{err:?}"
    );
    assert!(!s.is_terminated());
    assert_eq!(raw_post(&url, "/ping", s.sid()).await, ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_miscounting_judge_is_a_crash_naming_both_numbers() {
    let srv = server().await;
    let c = client(&srv.url().to_string());
    let s = fixture_session(&c).await;
    let mut omitted = candidate("0");
    let mut meta = JsonObject::new();
    meta.insert("score".into(), "omit".into());
    omitted.metadata = Some(meta);
    let err = s
        .score_group(vec![candidate("0"), omitted])
        .await
        .unwrap_err();
    match &err {
        Error::ToolCrashed { message } => {
            assert!(
                message.contains("returned 1 scores for 2 candidates"),
                "{message}"
            )
        }
        other => panic!("expected a crash, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bare_404_from_a_server_without_codes_is_unsupported() {
    // openreward's server answers 404 with a detail and no code; the session answers /ping.
    let fake = Fake::episode(
        |_| FakeResponse::json(200, "{}"),
        |_| FakeResponse::json(500, r#"{"detail": "no calls here"}"#),
    )
    .await;
    let c = client_without_ping(&fake.url);
    let s = c.environment("env").session_at("train", 0).await.unwrap();
    let err = s.score_group(vec![candidate("1")]).await.unwrap_err();
    assert!(matches!(err, Error::Unsupported { .. }), "{err:?}");
    assert!(!s.is_terminated());
    assert_eq!(fake.count("POST /env/score_group"), 1, "not retried");
}
