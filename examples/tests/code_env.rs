//! The code environment without a server: every reference solution scores 1.0, an empty file
//! 0.0, and paths stay in the episode's directory. (What commands leave behind is checked in
//! the end-to-end `tests/tests/code_env.rs`.)
#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a failed assumption is a failed test

use ors_examples::code::{exercises, Code, Exercise};
use ors_server::prelude::*;
use ors_server::runtime::env::call_tool;
use serde_json::{json, Value};

async fn episode(e: Exercise) -> Code {
    Code::new(e, Secrets::default()).await.unwrap()
}

async fn call(env: &mut Code, name: &str, input: Value) -> RunToolOutput {
    call_tool(env, ToolContext::detached(), name, input).await
}

fn text(out: &RunToolOutput) -> String {
    match out {
        RunToolOutput::Success(o) => o.blocks[0].as_text().unwrap_or_default().to_owned(),
        RunToolOutput::Error(e) => e.error.clone(),
    }
}

#[test]
fn at_least_forty_exercises_in_two_splits() {
    let train = exercises("train").unwrap();
    let test = exercises("test").unwrap();
    assert!(train.len() + test.len() >= 40);
    assert!(!test.is_empty());
    for e in train.iter().chain(&test) {
        assert!(
            e.signature.starts_with(&format!("def {}(", e.function)),
            "{}",
            e.id
        );
        assert!(
            e.solution.contains(&format!("def {}(", e.function)),
            "{}",
            e.id
        );
        assert!(e.tests.len() >= 4, "{}", e.id);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_reference_solution_scores_one() {
    for split in ["train", "test"] {
        for e in exercises(split).unwrap() {
            let id = e.id.clone();
            let solution = e.solution.clone();
            let mut env = episode(e).await;
            let wrote = call(
                &mut env,
                "write_file",
                json!({"path": "solution.py", "content": solution}),
            )
            .await;
            assert!(wrote.is_ok(), "{id}: {}", text(&wrote));
            let out = call(&mut env, "submit", json!({})).await;
            let output = out
                .output()
                .unwrap_or_else(|| panic!("{id}: {}", text(&out)));
            assert_eq!(output.reward, Some(1.0), "{id}: {}", text(&out));
            assert!(output.finished);
            env.teardown().await;
        }
    }
}

#[tokio::test]
async fn an_empty_or_wrong_solution_scores_what_it_passes() {
    let e = exercises("train").unwrap().remove(0);
    assert_eq!(e.function, "add");
    let mut env = episode(e).await;
    call(
        &mut env,
        "write_file",
        json!({"path": "solution.py", "content": ""}),
    )
    .await;
    let out = call(&mut env, "submit", json!({})).await;
    assert_eq!(out.output().unwrap().reward, Some(0.0), "{}", text(&out));
    // Right for 1 + 2, -5 + 5 and 0 + 0, wrong for 10**12 + 1: three of the four tests.
    let most = "def add(a, b):\n    return 3 if (a, b) == (1, 2) else 0\n";
    call(
        &mut env,
        "write_file",
        json!({"path": "solution.py", "content": most}),
    )
    .await;
    let out = call(&mut env, "submit", json!({})).await;
    assert_eq!(out.output().unwrap().reward, Some(0.75), "{}", text(&out));
    env.teardown().await;
}

#[tokio::test]
async fn files_stay_in_the_working_directory() {
    let mut env = episode(exercises("train").unwrap().remove(0)).await;
    let ok = call(
        &mut env,
        "write_file",
        json!({"path": "pkg/a.txt", "content": "hi"}),
    )
    .await;
    assert!(ok.is_ok(), "{}", text(&ok));
    assert_eq!(
        text(&call(&mut env, "read_file", json!({"path": "pkg/a.txt"})).await),
        "hi"
    );
    for bad in ["../x", "/etc/passwd", "pkg/../../x"] {
        let out = call(&mut env, "write_file", json!({"path": bad, "content": "x"})).await;
        assert!(!out.is_ok(), "{bad} was accepted");
    }
    let link = call(&mut env, "run", json!({"command": "ln -s /etc out"})).await;
    assert!(link.is_ok(), "{}", text(&link));
    let out = call(&mut env, "read_file", json!({"path": "out/passwd"})).await;
    assert!(
        text(&out).contains("outside the working directory"),
        "{}",
        text(&out)
    );
    // The timeout is checked against its range before anything runs.
    let out = call(
        &mut env,
        "run",
        json!({"command": "true", "timeout_secs": 61}),
    )
    .await;
    assert!(
        text(&out).contains("field 'timeout_secs'"),
        "{}",
        text(&out)
    );
    env.teardown().await;
}
