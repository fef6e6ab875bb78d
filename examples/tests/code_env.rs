//! The code environment without a server: every reference solution scores 1.0, a partly right
//! one its fraction, files stay in the episode's sandbox, and no grading trick earns anything
//! (writing the result, exiting early, printing fake results, patching builtins, returning an
//! object equal to everything). (What commands leave behind is checked in the end-to-end
//! `tests/tests/code_env.rs`.)
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a failed assumption is a failed test

use std::sync::OnceLock;

use ors_examples::code::{exercises, sandboxes, Code, Exercise};
use ors_server::prelude::*;
use ors_server::runtime::env::{DynSession as _, EnvHandle, Episode};
use serde_json::{json, Value};

/// The environment, its sandboxes (its state) made once for the file's tests.
fn code() -> &'static EnvHandle<Code> {
    static CODE: OnceLock<EnvHandle<Code>> = OnceLock::new();
    CODE.get_or_init(|| EnvHandle::new(sandboxes().unwrap_or_else(|e| panic!("{e}"))))
}

async fn episode(e: Exercise) -> Episode<Code> {
    code().episode(e, Secrets::default()).await.unwrap()
}

async fn call(env: &mut Episode<Code>, name: &str, input: Value) -> RunToolOutput {
    env.call(ToolContext::detached(), name, input).await
}

fn text(out: &RunToolOutput) -> String {
    match out {
        RunToolOutput::Success(o) => o.blocks[0].as_text().unwrap_or_default().to_owned(),
        RunToolOutput::Error(e) => e.error.clone(),
    }
}

/// The reward `solution` earns on the exercise `add` (four hidden tests).
async fn reward_of(solution: &str) -> (f64, String) {
    let e = exercises("train").unwrap().remove(0);
    assert_eq!(e.function, "add");
    let mut env = episode(e).await;
    let wrote = call(
        &mut env,
        "write_file",
        json!({"path": "solution.py", "content": solution}),
    )
    .await;
    assert!(wrote.is_ok(), "{}", text(&wrote));
    let out = call(&mut env, "submit", json!({})).await;
    let reward = out
        .output()
        .and_then(|o| o.reward)
        .unwrap_or_else(|| panic!("no reward: {}", text(&out)));
    env.teardown().await;
    (reward, text(&out))
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
async fn an_empty_or_partly_right_solution_scores_what_it_passes() {
    assert_eq!(reward_of("").await.0, 0.0);
    // Right for 1 + 2, -5 + 5 and 0 + 0, wrong for 10**12 + 1: three of the four tests.
    let most = "def add(a, b):\n    return 3 if (a, b) == (1, 2) else 0\n";
    let (reward, said) = reward_of(most).await;
    assert_eq!(reward, 0.75, "{said}");
    assert!(said.contains("hidden test 4 of 4: a wrong value"), "{said}");
    // An integer where a float is expected is the same number, as in Python.
    let floats = "def add(a, b):\n    return float(a + b)\n";
    assert_eq!(reward_of(floats).await.0, 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_grading_trick_earns_anything() {
    let tricks = [
        // Writing the old grader's result file, anywhere it might be looked for.
        (
            "writes the result",
            "import json\nfor p in ['result.json', '/tmp/result.json']:\n    \
             open(p, 'w').write(json.dumps({'passed': 4, 'total': 4, 'failures': []}))\n\
             def add(a, b):\n    return None\n",
        ),
        ("exits at import", "import os\nos._exit(0)\n"),
        (
            "exits when called",
            "import sys\ndef add(a, b):\n    sys.exit(0)\n",
        ),
        // The grader's own mark, read from its module, on lines of fake results; then gone
        // before the grader prints anything.
        (
            "prints fake results",
            "import json, os, sys\nm = sys.modules['__main__'].mark\n\
             for i in range(4):\n    print(m + json.dumps({'case': i, 'value': True}))\n\
             print(json.dumps({'passed': 4, 'total': 4}))\nsys.stdout.flush()\nos._exit(0)\n",
        ),
        // Patching what a grader might compare or print with.
        (
            "patches builtins",
            "import builtins, json, sys\njson.dumps = lambda *a, **k: '3'\n\
             builtins.print = lambda *a, **k: None\nsys.stdout.write = lambda s: len(s)\n\
             builtins.isinstance = lambda *a: True\ndef add(a, b):\n    return -1\n",
        ),
        (
            "returns an object equal to everything",
            "class Same:\n    def __eq__(self, other):\n        return True\n    \
             __hash__ = object.__hash__\ndef add(a, b):\n    return Same()\n",
        ),
        (
            "returns an int that equals everything",
            "class Same(int):\n    def __eq__(self, other):\n        return True\n    \
             __hash__ = int.__hash__\ndef add(a, b):\n    return Same(-1)\n",
        ),
    ];
    for (what, solution) in tricks {
        let (reward, said) = reward_of(solution).await;
        assert_eq!(reward, 0.0, "a solution that {what} scored: {said}");
    }
    // A right answer is not spoiled by a fake line: duplicates fail, so printing one's own
    // results alongside the grader's earns no more than the values returned.
    let echo = "import json, sys\nm = sys.modules['__main__'].mark\n\
                print(m + json.dumps({'case': 3, 'value': 1000000000001}))\n\
                def add(a, b):\n    return a + b\n";
    let (reward, said) = reward_of(echo).await;
    assert_eq!(reward, 0.75, "{said}");
}

#[tokio::test]
async fn an_episode_that_runs_nothing_starts_no_sandbox() {
    let mut env = episode(exercises("train").unwrap().remove(0)).await;
    let _ = env.prompt().await.unwrap();
    assert!(!env.get().unwrap().sandbox().is_started());
    let out = call(&mut env, "submit", json!({})).await;
    assert_eq!(out.output().unwrap().reward, Some(0.0), "{}", text(&out));
    assert!(!env.get().unwrap().sandbox().is_started());
    env.teardown().await;
}

#[tokio::test]
async fn files_stay_in_the_workspace() {
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
    // A link out of the workspace reads the sandbox's own /etc, never the host's.
    let link = call(&mut env, "run", json!({"command": "ln -s /etc out"})).await;
    assert!(link.is_ok(), "{}", text(&link));
    let read = text(&call(&mut env, "read_file", json!({"path": "out/passwd"})).await);
    assert_ne!(read, std::fs::read_to_string("/etc/passwd").unwrap());
    assert!(read.starts_with("root:x:0:0:root:/root"), "{read}");
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

#[tokio::test]
async fn a_limit_a_command_runs_into_is_an_error_naming_it() {
    let mut env = episode(exercises("train").unwrap().remove(0)).await;
    let out = call(
        &mut env,
        "run",
        json!({"command": "i=0; while [ $i -lt 200 ]; do sleep 5 & i=$((i + 1)); done"}),
    )
    .await;
    assert!(!out.is_ok());
    assert!(
        text(&out).starts_with("the command exceeded the process limit of 64 processes"),
        "{}",
        text(&out)
    );
    let out = call(
        &mut env,
        "run",
        json!({"command": "head -c 100M /dev/zero > big"}),
    )
    .await;
    assert!(
        text(&out).starts_with("the command exceeded the disk limit of 64 MiB"),
        "{}",
        text(&out)
    );
    env.teardown().await;
}
