//! Rollouts: `evaluate` runs episodes concurrently and summarizes them.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use ors_client::{evaluate, Action, EvalOptions, Observation, Outcome, Policy, PolicyError};
use serde_json::json;

use crate::support::{client, server, server_with};

/// Answers from the task's worked solution (the number after `####`).
struct Oracle;

impl Policy for Oracle {
    async fn next_action(&self, obs: Observation<'_>) -> Result<Action, PolicyError> {
        if !obs.history.is_empty() {
            return Ok(Action::Stop);
        }
        assert!(obs.tools.iter().any(|t| t.name == "submit"));
        assert!(!obs.prompt.is_empty());
        let solution = obs.task["answer"].as_str().ok_or("task without answer")?;
        let answer = solution.rsplit("####").next().unwrap_or("").trim();
        Ok(Action::call("submit", json!({ "answer": answer })))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oracle_scores_full_marks_on_the_gsm8k_test_split() {
    // At most 8 live sessions: had an episode not deleted its session, later ones could not
    // be created.
    let srv = server_with(|c| c.max_sessions = 8).await;
    let env = client(&srv.url().to_string()).environment("gsm8k");
    let n = env.num_tasks("test").await.unwrap();
    assert!(n > 0);
    let reported = Arc::new(AtomicUsize::new(0));
    let r = Arc::clone(&reported);
    let report = evaluate(
        &env,
        "test",
        0..n as i64,
        Arc::new(Oracle),
        EvalOptions::default().concurrency(8).on_progress(move |p| {
            r.fetch_add(1, Ordering::SeqCst);
            assert!(p.done <= p.total);
        }),
    )
    .await;
    assert_eq!(report.episodes.len(), n as usize);
    for ep in &report.episodes {
        assert!(ep.error.is_none(), "episode {}: {:?}", ep.index, ep.error);
        assert_eq!(ep.steps, 1);
        assert!(ep.finished);
        assert_eq!(ep.turns.len(), 1);
        assert!(matches!(&ep.turns[0].outcome, Outcome::Output(o) if o.reward == Some(1.0)));
    }
    assert_eq!(report.mean_reward(), 1.0);
    assert_eq!(report.success_rate(), 1.0);
    assert_eq!(report.errors(), 0);
    assert_eq!(reported.load(Ordering::SeqCst), n as usize);
    let indices: Vec<i64> = report.episodes.iter().map(|e| e.index).collect();
    assert_eq!(
        indices,
        (0..n as i64).collect::<Vec<_>>(),
        "reported in input order"
    );
    srv.shutdown().await;
}

/// Echoes until cut off, remembering what it saw.
struct Chatty;

impl Policy for Chatty {
    async fn next_action(&self, obs: Observation<'_>) -> Result<Action, PolicyError> {
        if let Some(last) = obs.history.last() {
            assert!(matches!(&last.outcome, Outcome::Output(o) if !o.finished));
        }
        Ok(Action::call(
            "echo",
            json!({"text": obs.history.len().to_string()}),
        ))
    }
}

/// Tries a bad call, then stops.
struct Clumsy;

impl Policy for Clumsy {
    async fn next_action(&self, obs: Observation<'_>) -> Result<Action, PolicyError> {
        match obs.history {
            [] => Ok(Action::call("fail", json!({"message": "oops"}))),
            [first] => {
                assert_eq!(first.outcome, Outcome::ToolError("oops".into()));
                Err("giving up".into())
            }
            _ => Ok(Action::Stop),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn step_limits_policy_errors_and_bad_tasks_are_per_episode() {
    let srv = server().await;
    let env = client(&srv.url().to_string()).environment("conformance");

    let report = evaluate(
        &env,
        "train",
        [0, 1],
        Arc::new(Chatty),
        EvalOptions::default().max_steps(3),
    )
    .await;
    for ep in &report.episodes {
        assert_eq!(ep.steps, 3);
        assert!(!ep.finished);
        assert!(ep.error.is_none());
        assert!(!ep.success());
    }
    assert_eq!(report.mean_reward(), 0.0);

    // Two live sessions at most: episodes that fail must still delete theirs.
    let srv2 = server_with(|c| c.max_sessions = 2).await;
    let env2 = client(&srv2.url().to_string()).environment("conformance");
    let report = evaluate(
        &env2,
        "train",
        [0, 99, 1, 2, 3],
        Arc::new(Clumsy),
        EvalOptions::default().concurrency(2),
    )
    .await;
    assert_eq!(report.episodes.len(), 5);
    for ep in &report.episodes {
        if ep.index == 99 {
            assert_eq!(
                ep.error.as_ref().and_then(|e| e.status()),
                Some(400),
                "no task 99"
            );
            assert_eq!(ep.steps, 0);
        } else {
            assert!(
                matches!(&ep.error, Some(ors_client::Error::Policy(m)) if m == "giving up"),
                "episode {}: {:?}",
                ep.index,
                ep.error
            );
            assert_eq!(ep.steps, 1);
        }
    }
    assert_eq!(report.errors(), 5);
    assert_eq!(report.success_rate(), 0.0);
    srv2.shutdown().await;
    srv.shutdown().await;
}
