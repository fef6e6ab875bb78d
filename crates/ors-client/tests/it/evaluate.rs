//! Rollouts: `evaluate` runs episodes concurrently and summarizes them.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use ors_client::{
    evaluate, evaluate_samples, Action, EvalOptions, Observation, Outcome, Policy, PolicyError,
    StopReason, TaskSample,
};
use serde_json::json;

use crate::support::{client, eventually, server, server_with};

/// Answers from the task's worked solution (the number after `####`).
struct Oracle;

impl Policy for Oracle {
    type State = ();

    fn start(&self, _: Observation<'_>) {}

    async fn act(&self, _: &mut (), obs: Observation<'_>) -> Result<Action, PolicyError> {
        if !obs.history.is_empty() {
            return Ok(Action::stop());
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
        assert_eq!(ep.stop_reason, StopReason::Finished);
        assert_eq!(ep.tool_calls.len(), 1);
        assert!(matches!(&ep.tool_calls[0].outcome, Outcome::Output(o) if o.reward == Some(1.0)));
        assert_eq!((ep.env.as_str(), ep.split.as_str()), ("gsm8k", "test"));
        assert!(ep.task.as_ref().is_some_and(|t| t["answer"].is_string()));
        assert!(ep.agent.is_none());
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
    type State = ();

    fn start(&self, _: Observation<'_>) {}

    async fn act(&self, _: &mut (), obs: Observation<'_>) -> Result<Action, PolicyError> {
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
    type State = ();

    fn start(&self, _: Observation<'_>) {}

    async fn act(&self, _: &mut (), obs: Observation<'_>) -> Result<Action, PolicyError> {
        match obs.history {
            [] => Ok(Action::call("fail", json!({"message": "oops"}))),
            [first] => {
                assert_eq!(first.outcome, Outcome::ToolError("oops".into()));
                Err("giving up".into())
            }
            _ => Ok(Action::stop()),
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
        assert_eq!(ep.stop_reason, StopReason::MaxSteps);
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
            let error = ep.error.as_ref().expect("no task 99");
            assert_eq!((error.kind.as_str(), error.status), ("http", Some(400)));
            assert_eq!(ep.steps, 0);
        } else {
            let error = ep.error.as_ref().expect("the policy gave up");
            assert_eq!(error.kind, "policy");
            assert_eq!(error.message, "policy error: giving up");
            assert_eq!(ep.stop_reason, StopReason::Error);
            assert_eq!(ep.steps, 1);
        }
    }
    assert_eq!(report.errors(), 5);
    assert_eq!(report.success_rate(), 0.0);
    srv2.shutdown().await;
    srv.shutdown().await;
}

/// Counts once, then stops: a session shared by two episodes would count to 2.
struct CountOnce;

impl Policy for CountOnce {
    type State = ();

    fn start(&self, _: Observation<'_>) {}

    async fn act(&self, _: &mut (), obs: Observation<'_>) -> Result<Action, PolicyError> {
        Ok(if obs.history.is_empty() {
            Action::call("counter", json!({}))
        } else {
            Action::stop()
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_sample_is_its_own_session_and_records_its_number() {
    let srv = server().await;
    let env = client(&srv.url().to_string()).environment("conformance");
    let samples = TaskSample::each([3, 5], 3);
    assert_eq!(
        samples
            .iter()
            .map(|s| (s.index, s.sample))
            .collect::<Vec<_>>(),
        [(3, 0), (5, 0), (3, 1), (5, 1), (3, 2), (5, 2)],
        "sample by sample, so a stopped run covers the tasks evenly"
    );
    let report = evaluate_samples(
        &env,
        "train",
        samples.clone(),
        Arc::new(CountOnce),
        EvalOptions::default().concurrency(4),
    )
    .await;
    let ran: Vec<TaskSample> = report.episodes.iter().map(|e| e.task_sample()).collect();
    assert_eq!(ran, samples, "reported in input order");
    for ep in &report.episodes {
        assert!(ep.error.is_none(), "{:?}", ep.error);
        assert_eq!(ep.task.as_ref().unwrap()["id"], ep.index);
        let Outcome::Output(out) = &ep.tool_calls[0].outcome else {
            panic!("counter answered {:?}", ep.tool_calls[0].outcome);
        };
        assert_eq!(
            out.blocks,
            vec![ors_client::Block::text("1")],
            "a fresh session"
        );
    }
    let line = serde_json::to_value(&report.episodes[2]).unwrap();
    assert_eq!(
        (line["index"].as_i64(), line["sample"].as_u64()),
        (Some(3), Some(1))
    );
    // Trajectories from before samples existed read as sample 0.
    let mut old = line.clone();
    old.as_object_mut().unwrap().remove("sample");
    let old: ors_client::Episode = serde_json::from_value(old).unwrap();
    assert_eq!(old.sample, 0);
    srv.shutdown().await;
}

/// Sleeps once for the given time, then stops.
struct Sleeper(u64);

impl Policy for Sleeper {
    type State = ();

    fn start(&self, _: Observation<'_>) {}

    async fn act(&self, _: &mut (), obs: Observation<'_>) -> Result<Action, PolicyError> {
        Ok(if obs.history.is_empty() {
            Action::call("sleep", json!({ "ms": self.0 }))
        } else {
            Action::stop()
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_starts_no_more_episodes_and_lets_running_ones_finish() {
    let srv = server_with(|c| c.max_sessions = 2).await;
    let c = client(&srv.url());
    let env = c.environment("conformance");
    let options = EvalOptions::default().concurrency(2);
    let stop = options.stop_handle();
    let options = options.on_progress(move |p| {
        if p.done == 1 {
            stop.stop();
        }
    });
    let report = evaluate(&env, "train", 0..6, Arc::new(Sleeper(200)), options).await;
    // The first to end stopped the run; the other one running then finished.
    assert!(
        (2..=3).contains(&report.episodes.len()),
        "{} episodes ran",
        report.episodes.len()
    );
    for ep in &report.episodes {
        assert_eq!(ep.stop_reason, StopReason::Stopped, "ran to its end");
        assert!(ep.error.is_none());
    }
    assert_eq!(report.episodes.len() + report.not_run.len(), 6);
    // Every session was deleted: both slots are free.
    let a = env.session_at("train", 0).await.unwrap();
    let b = env.session_at("train", 1).await.unwrap();
    a.close().await.unwrap();
    b.close().await.unwrap();
    srv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abort_ends_running_episodes_and_deletes_their_sessions() {
    let srv = server_with(|c| c.max_sessions = 2).await;
    let c = client(&srv.url());
    let env = c.environment("conformance");
    let options = EvalOptions::default().concurrency(2);
    let stop = options.stop_handle();
    // Abort once both minute-long calls run on the server, so it is running episodes that
    // the abort ends.
    let abort_when_running = async {
        let running = eventually(|| async { srv.stats().running_calls == 2 }).await;
        assert!(running, "the two calls never ran");
        stop.abort();
    };
    let run = evaluate(&env, "train", 0..4, Arc::new(Sleeper(60_000)), options);
    let (report, ()) = tokio::time::timeout(std::time::Duration::from_secs(20), async {
        tokio::join!(run, abort_when_running)
    })
    .await
    .expect("the abort ended the minute-long calls");
    assert_eq!(report.episodes.len(), 2);
    assert_eq!(
        report.not_run,
        vec![TaskSample::first(2), TaskSample::first(3)]
    );
    for ep in &report.episodes {
        assert_eq!(ep.stop_reason, StopReason::Cancelled);
        assert!(ep.error.is_none(), "{:?}", ep.error);
        assert!(ep.tool_calls.is_empty(), "the cut call is not recorded");
    }
    let a = env.session_at("train", 0).await.unwrap();
    let b = env.session_at("train", 1).await.unwrap();
    a.close().await.unwrap();
    b.close().await.unwrap();
    srv.shutdown().await;
}
