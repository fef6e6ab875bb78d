//! `ors eval` end to end: the binary against the in-process fixture and the strict scripted
//! model server (both in this process), as a user runs it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use ors_examples::scripted_model::{sum_question, Reply, RunningModel, ScriptedModel};
use ors_server::{Server, ServerConfig};
use serde_json::{json, Value};

use super::support::{client, ok, ors, server, server_with, stderr, stdout};

/// A fresh path for an --out file.
fn out_file(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ors-cli-eval-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}.jsonl"));
    let _ = std::fs::remove_file(&path);
    path
}

/// The trajectories of an --out file.
fn trajectories(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("each line is one JSON trajectory"))
        .collect()
}

/// `eval conformance --split train` against `url` with the scripted model at `model`.
fn eval_args(url: &str, model: &RunningModel, more: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = [
        "--url",
        url,
        "eval",
        "conformance",
        "--split",
        "train",
        "--model",
        "scripted",
        "--base-url",
        &model.openai_base(),
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    args.extend(more.iter().map(|s| (*s).to_owned()));
    args
}

async fn run_ors(args: Vec<String>) -> Output {
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    ors(&refs, "").await
}

/// The summary in what `--json` printed.
fn summary(printed: &str) -> Value {
    let v: Value = serde_json::from_str(printed).expect("--json prints JSON");
    v["summary"].clone()
}

/// `model` on a free port.
async fn bound(model: ScriptedModel) -> RunningModel {
    model
        .bind("127.0.0.1:0")
        .await
        .expect("the scripted model binds")
}

/// `ors eval ... MORE --json --out FILE` over the fixture's train split, which must succeed:
/// the summary and the trajectories written.
async fn eval_out(
    url: &str,
    model: &RunningModel,
    name: &str,
    more: &[&str],
) -> (Value, Vec<Value>) {
    let out = out_file(name);
    let mut args = more.to_vec();
    args.extend(["--json", "--out", out.to_str().unwrap()]);
    let o = run_ors(eval_args(url, model, &args)).await;
    (summary(&ok(&o)), trajectories(&out))
}

fn right_answer(text: &str) -> String {
    let (a, b) = sum_question(text).expect("a sum question");
    (a + b).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eval_over_the_fixture_scores_full_marks_and_writes_valid_trajectories() {
    let srv = server().await;
    let model = bound(ScriptedModel::arithmetic()).await;
    let out = out_file("full");
    let o = run_ors(eval_args(
        &srv.url(),
        &model,
        &[
            "--out",
            out.to_str().unwrap(),
            "--concurrency",
            "4",
            "--temperature",
            "0.2",
            "--json",
        ],
    ))
    .await;
    let s = summary(&ok(&o));
    assert_eq!(s["episodes"], 25);
    assert_eq!(s["mean_reward"], 1.0);
    assert_eq!(s["success_rate"], 1.0);
    assert_eq!(s["mean_steps"], 1.0);
    assert!(s["input_tokens"].as_u64().unwrap() > 0);
    assert_eq!(model.rejections(), Vec::<String>::new());

    let lines = trajectories(&out);
    assert_eq!(lines.len(), 25);
    let mut indices: Vec<i64> = lines.iter().map(|t| t["index"].as_i64().unwrap()).collect();
    indices.sort_unstable();
    assert_eq!(indices, (0..25).collect::<Vec<_>>());
    let schema: Value =
        serde_json::from_str(&ok(
            &run_ors(vec!["eval".into(), "--print-schema".into()]).await
        ))
        .unwrap();
    let validator = jsonschema::validator_for(&schema).expect("a valid JSON Schema");
    for t in &lines {
        assert!(
            validator.is_valid(t),
            "{:?}",
            validator.iter_errors(t).next()
        );
        assert_eq!(t["agent"]["sampling"]["temperature"], 0.2);
        assert_eq!(t["ors_rs_version"], env!("CARGO_PKG_VERSION"));
    }
    // The human summary, on the Anthropic API, over a slice.
    let o = run_ors(vec![
        "--url".into(),
        srv.url(),
        "eval".into(),
        "conformance".into(),
        "--split".into(),
        "test".into(),
        "--model".into(),
        "scripted".into(),
        "--api".into(),
        "anthropic".into(),
        "--base-url".into(),
        model.anthropic_base(),
        "--indices".into(),
        "1:".into(),
        "--limit".into(),
        "2".into(),
    ])
    .await;
    let text = ok(&o);
    assert!(text.contains("episodes      2\n"), "{text}");
    assert!(text.contains("mean reward   1.0000"), "{text}");
    assert!(text.contains("success rate  100.0%"), "{text}");
    assert_eq!(model.rejections(), Vec::<String>::new());
    srv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eval_runs_over_gsm8k_and_writes_trajectories() {
    let srv = server().await;
    // It answers 0 to word problems: episodes end at the submit, unrewarded.
    let model = bound(ScriptedModel::arithmetic()).await;
    let out = out_file("gsm8k");
    let o = ors(
        &[
            "--url",
            &srv.url(),
            "eval",
            "gsm8k",
            "--split",
            "test",
            "--model",
            "scripted",
            "--base-url",
            &model.openai_base(),
            "--limit",
            "3",
            "--out",
            out.to_str().unwrap(),
        ],
        "",
    )
    .await;
    let text = ok(&o);
    assert!(text.contains("episodes      3"), "{text}");
    let lines = trajectories(&out);
    assert_eq!(lines.len(), 3);
    for t in &lines {
        assert_eq!(
            (t["env"].as_str(), t["stop_reason"].as_str()),
            (Some("gsm8k"), Some("finished"))
        );
        assert_eq!(t["tool_calls"][0]["name"], "submit");
        assert!(t["task"]["question"].is_string());
    }
    srv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_without_tools_broken_arguments_and_rate_limits() {
    let srv = server().await;
    let url = srv.url();

    // Answers in words: the episode ends without reward, unless nudged.
    let talker = bound(ScriptedModel::new(|x| {
        if x.last_user_text.contains("calling one of the tools") {
            Reply::call(
                "submit",
                json!({ "answer": right_answer(&x.first_user_text) }),
            )
        } else {
            Reply::Text("It is the sum.".into())
        }
    }))
    .await;
    let (s, _) = eval_out(&url, &talker, "talker", &["--limit", "3"]).await;
    assert_eq!(
        (
            s["mean_reward"].as_f64(),
            s["stop_reasons"]["no_tool_call"].as_u64()
        ),
        (Some(0.0), Some(3))
    );
    // Its answer in words was its turn: one step, one model call.
    assert_eq!(s["mean_steps"], 1.0);
    let (s, _) = eval_out(&url, &talker, "nudged", &["--limit", "3", "--nudge"]).await;
    assert_eq!(s["mean_reward"], 1.0);

    // Broken JSON arguments first: the model is told and fixes them.
    let broken = bound(ScriptedModel::new(|x| match x.tool_results.first() {
        None => Reply::Tools(vec![("submit".into(), r#"{"answer": "#.into())]),
        Some(r) if r.text.contains("not a JSON object") => Reply::call(
            "submit",
            json!({ "answer": right_answer(&x.first_user_text) }),
        ),
        Some(r) => Reply::Text(format!("unexpected {r:?}")),
    }))
    .await;
    let (s, lines) = eval_out(&url, &broken, "broken", &["--limit", "4"]).await;
    assert_eq!(
        (s["mean_reward"].as_f64(), s["mean_steps"].as_f64()),
        (Some(1.0), Some(2.0))
    );
    let t = &lines[0];
    assert_eq!(
        t["tool_calls"].as_array().unwrap().len(),
        1,
        "the broken call is not made"
    );
    assert_eq!(t["agent"]["messages"][2]["is_error"], true);
    assert_eq!(broken.rejections(), Vec::<String>::new());

    // 429 twice, then answers.
    let limited = bound(ScriptedModel::new(|x| {
        if x.request_index < 2 {
            Reply::Error {
                status: 429,
                message: "Rate limit reached".into(),
                retry_after: Some(Duration::from_millis(10)),
            }
        } else {
            Reply::call(
                "submit",
                json!({ "answer": right_answer(&x.first_user_text) }),
            )
        }
    }))
    .await;
    let (s, lines) = eval_out(&url, &limited, "limited", &["--limit", "1"]).await;
    assert_eq!(s["mean_reward"], 1.0);
    assert_eq!(lines[0]["agent"]["model_calls"][0]["attempts"], 3);
    srv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn samples_give_pass_at_k_intervals_and_resume_by_sample() {
    let srv = server().await;
    // Task 0 is answered right only the first time, task 2 never, the others always.
    let first = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let model = bound(ScriptedModel::new(move |x| {
        let (a, b) = sum_question(&x.first_user_text).expect("a sum question");
        let right = match a {
            0 => first.swap(false, std::sync::atomic::Ordering::SeqCst),
            2 => false,
            _ => true,
        };
        let answer = if right { a + b } else { a + b + 1 };
        Reply::call("submit", json!({ "answer": answer.to_string() }))
    }))
    .await;
    let out = out_file("samples");
    let out_arg = out.to_str().unwrap();
    let first_run = ["--limit", "4", "--samples", "3", "--out", out_arg];
    let mut with_json = first_run.to_vec();
    with_json.push("--json");
    let doc: Value = serde_json::from_str(&ok(
        &run_ors(eval_args(&srv.url(), &model, &with_json)).await
    ))
    .unwrap();
    let mut numbered: Vec<(i64, u64)> = trajectories(&out)
        .iter()
        .map(|t| (t["index"].as_i64().unwrap(), t["sample"].as_u64().unwrap()))
        .collect();
    numbered.sort_unstable();
    let all: Vec<(i64, u64)> = (0..4).flat_map(|i| (0..3).map(move |k| (i, k))).collect();
    assert_eq!(numbered, all, "each task three times, numbered 0..3");

    // Successes 1, 3, 0, 3 of 3: success (1/3 + 1 + 0 + 1) / 4 = 7/12 = pass@1; pass@3 counts
    // task 0 (a success among any 3 of its 3), so 3/4.
    let st = &doc["stats"];
    assert_eq!(
        (st["episodes"].as_u64(), st["samples"].as_u64()),
        (Some(12), Some(3))
    );
    let close = |v: &Value, x: f64| (v.as_f64().unwrap() - x).abs() < 1e-9;
    assert!(close(&st["success_rate"]["value"], 7.0 / 12.0), "{st}");
    assert!(close(&st["mean_reward"]["value"], 7.0 / 12.0), "{st}");
    assert_eq!(st["pass_at"][0]["k"], 1);
    assert!(close(&st["pass_at"][0]["value"], 7.0 / 12.0), "{st}");
    assert_eq!(st["pass_at"][1]["k"], 3);
    assert!(close(&st["pass_at"][1]["value"], 0.75), "{st}");
    let tasks = st["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 4);
    assert_eq!(
        (tasks[0]["index"].as_i64(), tasks[0]["successes"].as_u64()),
        (Some(0), Some(1))
    );
    assert!(close(&tasks[0]["std"], (1.0f64 / 3.0).sqrt()), "{st}");
    assert!(close(&tasks[1]["std"], 0.0), "{st}");
    let ci = &st["mean_reward"]["interval"];
    assert!(ci["lo"].as_f64() < Some(7.0 / 12.0) && ci["hi"].as_f64() > Some(7.0 / 12.0));

    // A fourth sample of each task: --resume runs only those.
    let o = run_ors(eval_args(
        &srv.url(),
        &model,
        &[
            "--limit",
            "4",
            "--samples",
            "4",
            "--out",
            out_arg,
            "--resume",
        ],
    ))
    .await;
    let text = ok(&o);
    assert!(
        stderr(&o).contains("12 of 16 episodes already have a trajectory; running 4"),
        "{}",
        stderr(&o)
    );
    let line = |key: &str| {
        text.lines()
            .find(|l| l.starts_with(key))
            .unwrap_or_else(|| panic!("no {key} line: {text}"))
            .to_owned()
    };
    assert_eq!(
        line("episodes"),
        "episodes      16 (4 tasks × 4 samples) (12 from an earlier run)"
    );
    // Successes 1, 4, 0, 4 of 4: 9/16 = 0.5625.
    assert!(
        line("mean reward").starts_with("mean reward   0.5625 (95% CI "),
        "{text}"
    );
    assert!(line("mean reward").ends_with(", mean@4"), "{text}");
    assert!(line("success rate").contains("% (95% CI "), "{text}");
    assert_eq!(line("pass@1"), "pass@1        56.2%");
    assert_eq!(line("pass@4"), "pass@4        75.0%");
    assert!(
        line("reward std").starts_with("reward std    0.1250 "),
        "{text}"
    );
    let after = trajectories(&out);
    assert_eq!(after.len(), 16);
    assert!(after[12..].iter().all(|t| t["sample"] == 3));
    srv.shutdown().await;
}

/// Start `ors ARGS` without waiting for it.
fn spawn_ors(args: &[String]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_ors"))
        .args(args)
        .env_remove("ORS_URL")
        .env_remove("ORS_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the ors binary runs")
}

/// Wait (at most a minute: only to turn a hang into a failure) until `path` holds `n` lines.
async fn wait_for_lines(path: &Path, n: usize) {
    for _ in 0..1200 {
        if trajectories(path).len() >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{} never reached {n} trajectories", path.display());
}

async fn wait_output(child: Child) -> Output {
    tokio::task::spawn_blocking(move || child.wait_with_output().expect("ors finishes"))
        .await
        .expect("the blocking task")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_mid_run_is_completed_by_resume_without_repeats() {
    let srv = server().await;
    let port = srv.local_addr().port();
    let model = bound(ScriptedModel::arithmetic().delay(Duration::from_millis(100))).await;
    let out = out_file("killed");
    let args = eval_args(
        &srv.url(),
        &model,
        &["--out", out.to_str().unwrap(), "--concurrency", "2"],
    );
    let child = spawn_ors(&args);
    wait_for_lines(&out, 4).await;
    srv.shutdown().await;
    let first = wait_output(child).await;
    assert!(
        !first.status.success(),
        "episodes failed: {}",
        stdout(&first)
    );
    let before = trajectories(&out);
    let finished: Vec<i64> = before
        .iter()
        .filter(|t| t["error"].is_null())
        .map(|t| t["index"].as_i64().unwrap())
        .collect();
    assert!(finished.len() >= 4 && finished.len() < 25, "{finished:?}");
    assert!(
        stderr(&first).contains("--resume"),
        "says how to complete: {}",
        stderr(&first)
    );

    // The server is back on the same port; --resume runs only what is missing.
    let cfg = ServerConfig {
        host: "127.0.0.1".into(),
        port,
        ..ServerConfig::default()
    };
    let srv = Server::with_config(cfg)
        .environment::<ors_examples::conformance::Conformance>()
        .bind()
        .await
        .expect("the server restarts on its port");
    let mut resume = args.clone();
    resume.extend(["--resume".into(), "--json".into()]);
    let o = run_ors(resume).await;
    let s = summary(&ok(&o));
    assert_eq!(
        (s["episodes"].as_u64(), s["mean_reward"].as_f64()),
        (Some(25), Some(1.0))
    );
    let doc: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(doc["resumed"].as_u64(), Some(finished.len() as u64));
    let after = trajectories(&out);
    for i in 0..25 {
        let good = after
            .iter()
            .filter(|t| t["index"] == i && t["error"].is_null())
            .count();
        assert_eq!(good, 1, "task {i} has one finished trajectory, never two");
    }
    srv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_stops_launching_finishes_running_deletes_sessions_and_summarizes() {
    // Two sessions at most: had an episode kept its session, the check below could not open two.
    let srv = server_with(|c| c.max_sessions = 2).await;
    let model = bound(ScriptedModel::arithmetic().delay(Duration::from_millis(300))).await;
    let out = out_file("interrupted");
    let args = eval_args(
        &srv.url(),
        &model,
        &[
            "--out",
            out.to_str().unwrap(),
            "--concurrency",
            "2",
            "--json",
        ],
    );
    let child = spawn_ors(&args);
    wait_for_lines(&out, 2).await;
    let interrupted = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(interrupted.success());
    let o = wait_output(child).await;
    let doc: Value = serde_json::from_str(&stdout(&o)).expect("the summary so far");
    let ran = doc["ran"].as_u64().unwrap();
    assert!((2..25).contains(&ran), "{doc}");
    assert_eq!(doc["not_run"].as_u64().unwrap() + ran, 25);
    assert_eq!(
        doc["summary"]["mean_reward"], 1.0,
        "the running ones finished"
    );
    assert_eq!(trajectories(&out).len() as u64, ran);
    assert!(stderr(&o).contains("stopping"), "{}", stderr(&o));
    let env = client(&srv.url()).environment("conformance");
    let a = env.session_at("train", 0).await.expect("a free slot");
    let b = env.session_at("train", 1).await.expect("another free slot");
    a.close().await.unwrap();
    b.close().await.unwrap();
    srv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_options_reach_the_client() {
    let o = ors(&["--ca-cert", "/nonexistent/ca.pem", "envs"], "").await;
    assert!(!o.status.success());
    assert!(stderr(&o).contains("/nonexistent/ca.pem"), "{}", stderr(&o));
    let o = ors(&["--tls-roots", "both", "envs"], "").await;
    assert!(!o.status.success());
    assert!(stderr(&o).contains("mozilla or system"), "{}", stderr(&o));
}

/// `ors eval ENV --split SPLIT --policy random MORE --json --out FILE`, which must succeed:
/// what it printed and the trajectories written.
async fn random_run(
    url: &str,
    env: &str,
    split: &str,
    name: &str,
    more: &[&str],
) -> (Value, Vec<Value>) {
    let out = out_file(name);
    let mut args: Vec<String> = [
        "--url", url, "eval", env, "--split", split, "--policy", "random",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    args.extend(more.iter().map(|s| (*s).to_owned()));
    args.extend([
        "--json".into(),
        "--out".into(),
        out.to_str().unwrap().into(),
    ]);
    let o = run_ors(args).await;
    let printed: Value = serde_json::from_str(&ok(&o)).expect("--json prints JSON");
    (printed, trajectories(&out))
}

/// Each episode's calls (name and input), by task and sample, in call order.
fn plays(lines: &[Value]) -> std::collections::BTreeMap<(i64, u64), Vec<(String, Value)>> {
    lines
        .iter()
        .map(|t| {
            let calls = t["tool_calls"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| (c["name"].as_str().unwrap().to_owned(), c["input"].clone()))
                .collect();
            (
                (t["index"].as_i64().unwrap(), t["sample"].as_u64().unwrap()),
                calls,
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_random_policy_plays_valid_calls_and_a_seed_replays_them() {
    let srv = server().await;
    let url = srv.url();
    let run = [
        "--limit",
        "4",
        "--samples",
        "2",
        "--max-steps",
        "6",
        "--concurrency",
        "3",
    ];
    let with_seed = |seed: &'static str| {
        let mut args = run.to_vec();
        args.extend(["--seed", seed]);
        args
    };
    let (printed, first) =
        random_run(&url, "conformance", "train", "random-a", &with_seed("7")).await;
    assert_eq!(
        (printed["policy"].as_str(), printed["seed"].as_u64()),
        (Some("random"), Some(7))
    );
    assert_eq!(printed["summary"]["episodes"], 8);
    assert_eq!(first.len(), 8);

    // Every input is valid under the input schema of the tool called, as the episode's session
    // lists it (the fixture adds tools per task).
    let env = client(&url).environment("conformance");
    let mut calls = 0;
    for t in &first {
        assert!(t["agent"].is_null(), "no model played");
        let index = t["index"].as_i64().unwrap();
        let session = env
            .session(ors_client::TaskRef::at("train", index))
            .open()
            .await
            .unwrap();
        let listing = session.listing().await.unwrap();
        session.close().await.unwrap();
        let steps = t["steps"].as_u64().unwrap();
        assert!((1..=6).contains(&steps), "{t}");
        for c in t["tool_calls"].as_array().unwrap() {
            calls += 1;
            let name = c["name"].as_str().unwrap();
            let spec = listing
                .tools
                .iter()
                .find(|s| s.name == name)
                .unwrap_or_else(|| panic!("{name} is one of the session's tools"));
            match &spec.input_schema {
                Some(schema) => {
                    let v = jsonschema::validator_for(&Value::Object(schema.clone())).unwrap();
                    assert!(
                        v.is_valid(&c["input"]),
                        "{name}({}) under {schema:?}",
                        c["input"]
                    );
                }
                None => assert_eq!(c["input"], json!({}), "{name} takes no input"),
            }
        }
        let reason = t["stop_reason"].as_str().unwrap();
        assert!(
            reason == "max_steps" && steps == 6 || reason == "finished" && t["finished"] == true,
            "{t}"
        );
    }
    assert!(calls >= 8, "{calls} calls");

    // The same seed plays the same calls in every episode (whatever ran beside it); another
    // seed plays others.
    let (_, again) = random_run(&url, "conformance", "train", "random-b", &with_seed("7")).await;
    assert_eq!(plays(&again), plays(&first));
    let (_, other) = random_run(&url, "conformance", "train", "random-c", &with_seed("8")).await;
    assert_ne!(plays(&other), plays(&first));
    // A task's samples are episodes of their own, not copies.
    let by = plays(&first);
    assert!((0..4).any(|i| by[&(i, 0)] != by[&(i, 1)]), "{by:?}");

    // gsm8k: the terminal tool is among the choices; the human summary names the policy.
    let o = ors(
        &[
            "--url", &url, "eval", "gsm8k", "--split", "test", "--policy", "random", "--limit", "3",
        ],
        "",
    )
    .await;
    let text = ok(&o);
    assert!(text.contains("episodes      3\n"), "{text}");
    assert!(text.contains("policy        random, seed 0\n"), "{text}");
    // A model's flags are not needed, and a seed without the random policy is refused.
    let o = ors(
        &[
            "--url", &url, "eval", "gsm8k", "--split", "test", "--seed", "3",
        ],
        "",
    )
    .await;
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("--seed is for --policy random"),
        "{}",
        stderr(&o)
    );
    srv.shutdown().await;
}
