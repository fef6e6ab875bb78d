//! The `ors` binary, run as a user would, against an in-process server hosting the
//! conformance fixture and the gsm8k example.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a failed assumption is a failed test

#[path = "cli/eval.rs"]
mod eval;
#[path = "cli/progress.rs"]
mod progress;
#[path = "cli/support.rs"]
mod support;

use support::{client, ok, ors, ors_env, server, server_with, stderr, stdout};

use std::process::{Command, Stdio};

use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_commands_print_tables_and_json() {
    let srv = server().await;
    let url = srv.url().to_string();

    let out = ok(&ors(&["envs", "--url", &url], "").await);
    assert_eq!(out, "conformance\ngsm8k\n");
    let out = ok(&ors(&["envs", "--json", "--url", &url], "").await);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v[1], "gsm8k");

    let out = ok(&ors(&["tools", "conformance", "--url", &url], "").await);
    assert!(out.starts_with("NAME"), "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("submit") && l.contains("answer: string")),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.starts_with("counter") && l.contains("(none)")),
        "{out}"
    );

    let out = ok(&ors(
        &[
            "tools",
            "conformance",
            "--format",
            "anthropic",
            "--url",
            &url,
        ],
        "",
    )
    .await);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert!(v
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["name"] == "submit" && t["input_schema"].is_object()));
    let bad = ors(
        &["tools", "conformance", "--format", "cohere", "--url", &url],
        "",
    )
    .await;
    assert!(!bad.status.success());

    let out = ok(&ors(&["splits", "conformance", "--url", &url], "").await);
    assert!(
        out.lines()
            .any(|l| l.split_whitespace().eq(["hard", "validation"])),
        "{out}"
    );

    let out = ok(&ors(
        &[
            "tasks",
            "conformance",
            "--split",
            "test",
            "--range",
            "1:3",
            "--url",
            &url,
        ],
        "",
    )
    .await);
    // One column per task field, in the same order on every row.
    let rows: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows,
        [
            vec!["INDEX", "ID", "QUESTION", "ANSWER"],
            vec!["1", "101", "What", "is", "101+101?", "202"],
            vec!["2", "102", "What", "is", "102+102?", "204"],
        ],
        "{out}"
    );

    let out = ok(&ors(
        &[
            "tasks",
            "conformance",
            "--split",
            "test",
            "--range",
            "-1:",
            "--url",
            &url,
        ],
        "",
    )
    .await);
    assert!(out.lines().nth(1).unwrap().starts_with("4 "), "{out}");

    let out = ok(&ors(
        &[
            "tasks",
            "conformance",
            "--split",
            "hard",
            "--json",
            "--url",
            &url,
        ],
        "",
    )
    .await);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 3);
    srv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_runs_one_episode() {
    let srv = server().await;
    let url = srv.url().to_string();
    let task = client(&url)
        .environment("gsm8k")
        .task("test", 0)
        .await
        .unwrap();
    let solution = task["answer"].as_str().unwrap();
    let answer = solution.rsplit("####").next().unwrap().trim();
    let input = serde_json::json!({ "answer": answer }).to_string();

    let out = ok(&ors(
        &[
            "call", "gsm8k", "--split", "test", "--index", "0", "submit", &input, "--url", &url,
        ],
        "",
    )
    .await);
    assert!(out.contains(task["question"].as_str().unwrap()), "{out}");
    assert!(out.contains("reward 1  finished true"), "{out}");
    assert!(out.trim_end().ends_with("total reward 1"), "{out}");

    let out = ok(&ors(
        &[
            "call",
            "conformance",
            "--json",
            "--url",
            &url,
            "--task",
            r#"{"id": 1, "question": "q?", "answer": "2"}"#,
            "echo",
            r#"{"text": "hi"}"#,
            "submit",
            r#"{"answer": "2"}"#,
        ],
        "",
    )
    .await);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["prompt"][0]["text"], "q?");
    assert_eq!(v["calls"][0]["result"]["output"]["blocks"][0]["text"], "hi");
    assert_eq!(v["calls"][1]["result"]["output"]["reward"], 1.0);
    assert_eq!(v["total_reward"], 1.0);
    srv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_exit_non_zero_with_one_line() {
    let srv = server().await;
    let url = srv.url().to_string();

    let o = ors(
        &[
            "call",
            "conformance",
            "--split",
            "train",
            "--index",
            "0",
            "fail",
            r#"{"message": "boom"}"#,
            "--url",
            &url,
        ],
        "",
    )
    .await;
    assert!(!o.status.success());
    assert!(stdout(&o).contains("tool error: boom"), "{}", stdout(&o));
    assert_eq!(stderr(&o), "ors: error: 1 of 1 tool calls failed\n");

    let o = ors(&["tools", "nosuch", "--url", &url], "").await;
    assert!(!o.status.success());
    let e = stderr(&o);
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(
        e.starts_with("ors: error: HTTP 404") && e.contains("unknown environment"),
        "{e}"
    );

    let o = ors(
        &[
            "call",
            "conformance",
            "--split",
            "train",
            "--index",
            "0",
            "echo",
            "{not json",
            "--url",
            &url,
        ],
        "",
    )
    .await;
    assert!(!o.status.success());
    assert!(stderr(&o).contains("not JSON"), "{}", stderr(&o));
    srv.shutdown().await;

    let o = ors(&["envs", "--url", &url], "").await;
    assert!(!o.status.success());
    let e = stderr(&o);
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(
        e.starts_with(&format!("ors: error: cannot connect to {url}: ")),
        "{e}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn play_reads_calls_from_a_pipe() {
    let srv = server().await;
    let url = srv.url().to_string();
    let script = "help\necho {\"text\": \"hello there\"}\nsubmit {\"answer\": \"oops\nhint\nsubmit 4\nsubmit {\"answer\": \"4\"}\necho {\"text\": \"never\"}\n";
    let out = ok(&ors(
        &[
            "play",
            "conformance",
            "--split",
            "train",
            "--index",
            "2",
            "--url",
            &url,
        ],
        script,
    )
    .await);
    assert!(out.starts_with("What is 2+2?\n"), "{out}");
    assert!(
        out.contains("hint") && out.contains("PARAMETERS"),
        "the tools are listed: {out}"
    );
    assert!(out.contains("Type a tool call"), "help: {out}");
    // Its example is a call of the episode's own tools, not gsm8k's.
    assert!(out.contains(r#"as `echo {"text":"..."}` here"#), "{out}");
    assert!(
        out.contains("hello there\nreward 0  finished false\ntotal reward 0"),
        "{out}"
    );
    assert!(out.contains("the input is not JSON"), "{out}");
    assert!(
        out.contains(
            r#"the input must be a JSON object of the tool's parameters, as `submit {"answer":"..."}`, not a number"#
        ),
        "{out}"
    );
    assert!(out.contains("The answer is 4"), "{out}");
    // The total is said once at the end, not again before it.
    assert!(
        out.trim_end()
            .ends_with("Correct!\nreward 1  finished true\nepisode finished; total reward 1"),
        "{out}"
    );
    assert_eq!(out.matches("total reward 1").count(), 1, "{out}");
    assert!(
        !out.contains("never"),
        "play stops when the episode finishes"
    );

    let out = ok(&ors(
        &[
            "play",
            "conformance",
            "--split",
            "train",
            "--index",
            "2",
            "--url",
            &url,
        ],
        "fail {\"message\": \"m\"}\n",
    )
    .await);
    assert!(out.contains("tool error: m"), "{out}");
    assert!(
        out.trim_end().ends_with("end of input; total reward 0"),
        "{out}"
    );
    srv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn url_and_key_come_from_flags_or_the_environment() {
    let srv = server_with(|c| c.api_key = Some("k3y".into())).await;
    let url = srv.url().to_string();

    let o = ors(&["envs", "--url", &url], "").await;
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("HTTP 401") && stderr(&o).contains("--api-key"),
        "{}",
        stderr(&o)
    );

    let out = ok(&ors(&["envs", "--url", &url, "--api-key", "k3y"], "").await);
    assert!(out.contains("gsm8k"), "{out}");
    let out = ok(&ors_env(&["envs"], "", &[("ORS_URL", &url), ("ORS_API_KEY", "k3y")]).await);
    assert!(out.contains("gsm8k"), "{out}");
    srv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_checks_a_server_and_writes_a_report() {
    let srv = server().await;
    let url = srv.url().to_string();
    let dir = std::env::temp_dir().join(format!("ors-cli-conformance-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let report = dir.join("report.json");
    let report_arg = report.to_str().unwrap();
    let out = ok(&ors(
        &[
            "conformance",
            "--url",
            &url,
            "--only",
            "discovery.",
            "--json",
            report_arg,
        ],
        "",
    )
    .await);
    assert!(out.contains("PASS discovery.health"), "{out}");
    let last = out.lines().last().unwrap_or_default();
    assert!(last.ends_with(" passed, 0 failed"), "{out}");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert!(!doc.as_object().unwrap().is_empty(), "{doc}");
    std::fs::remove_dir_all(&dir).ok();

    // A clause that fails (the fixture is not hosted under this name) fails the command.
    let out = ors(
        &[
            "conformance",
            "--url",
            &url,
            "--env",
            "gsm8k",
            "--only",
            "discovery.tools",
        ],
        "",
    )
    .await;
    assert!(!out.status.success(), "{}", stdout(&out));
    assert!(
        stdout(&out).contains("FAIL discovery.tools"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn conformance_list_survives_a_closed_pipe() {
    // `ors conformance --list | head -0`: the reader is gone before the first line is written
    // (the whole list fits in a pipe's buffer, so a reader that stayed for one line would let
    // every write succeed).
    let mut child = Command::new(env!("CARGO_BIN_EXE_ors"))
        .args(["conformance", "--list"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the ors binary runs");
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("ors finishes");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_without_input_sends_an_empty_object() {
    let srv = server().await;
    let url = srv.url().to_string();
    let out = ok(&ors(
        &[
            "call",
            "conformance",
            "--split",
            "train",
            "--index",
            "0",
            "counter",
            "counter",
            "echo",
            r#"{"text": "hi"}"#,
            "counter",
            "--url",
            &url,
        ],
        "",
    )
    .await);
    assert!(
        out.contains("> counter {}\n1\n")
            && out.contains("> counter {}\n2\n")
            && out.contains("> echo {\"text\":\"hi\"}\nhi\n")
            && out.contains("> counter {}\n3\n"),
        "{out}"
    );
    srv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_prints_a_line_per_check_and_exits_by_what_it_found() {
    let srv = server().await;
    let url = srv.url().to_string();

    let out = ors(&["check", "gsm8k", "--url", &url, "--seed", "3"], "").await;
    let text = ok(&out);
    let lines: Vec<&str> = text.lines().collect();
    let (last, checks) = lines.split_last().unwrap();
    assert_eq!(
        *last,
        format!("{} passed, 0 failed", checks.len()),
        "{text}"
    );
    assert!(checks.iter().all(|l| l.starts_with("ok ")), "{text}");
    assert!(
        checks
            .iter()
            .any(|l| l.starts_with("ok episode.test.49 (ready in ")),
        "{text}"
    );

    let dir = std::env::temp_dir().join(format!("ors-cli-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let report = dir.join("report.json");
    let out = ors(
        &[
            "check",
            "conformance",
            "--url",
            &url,
            "--timeout",
            "5",
            "--fuzz",
            "12",
            "--tasks",
            "1",
            "--seed",
            "3",
            "--json",
            report.to_str().unwrap(),
        ],
        "",
    )
    .await;
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = stdout(&out);
    let problems: Vec<&str> = text.lines().filter(|l| l.starts_with("problem ")).collect();
    assert!(
        problems
            .iter()
            .any(|l| l.starts_with("problem tool.panic.no-crash: 'panic' crashed")),
        "{text}"
    );
    assert!(
        problems.iter().all(|l| l.contains("--seed 3 --fuzz 12")),
        "every problem says how to reproduce it: {text}"
    );
    assert!(
        text.lines()
            .last()
            .unwrap()
            .ends_with(&format!(" passed, {} failed", problems.len())),
        "{text}"
    );
    // --tasks 1: one episode per split.
    assert_eq!(
        text.lines()
            .filter(|l| l.starts_with("ok episode."))
            .count(),
        3,
        "{text}"
    );
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(doc["seed"], 3);
    assert_eq!(doc["failed"], problems.len());
    let panic = doc["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "tool.panic.no-crash")
        .unwrap();
    assert_eq!(panic["input"], serde_json::json!({}));
    std::fs::remove_dir_all(&dir).ok();
    srv.shutdown().await;

    // The server is gone: exit 2 and one line naming the URL.
    let out = ors(&["check", "gsm8k", "--url", &url], "").await;
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(stdout(&out), "");
    let e = stderr(&out);
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(e.starts_with("ors: error: ") && e.contains(&url), "{e}");
}
