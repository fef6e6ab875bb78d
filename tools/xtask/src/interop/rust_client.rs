//! Our client library and the `ors` CLI against a Python server (ors-sdk's or openreward's)
//! hosting the conformance fixture: [`super::library`] checks the library call by call (in process), then every `ors` subcommand runs as a user would run it and its output and exit
//! code are checked.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};

use super::servers::peer_server;
use crate::procs::run_captured;
use crate::python::Peer;

/// Limit on one run of the example or the CLI, so a hang fails the step instead of CI.
const RUN_TIMEOUT: Duration = Duration::from_secs(180);

/// Fewer checks than this in the library checks' summary means some were skipped.
const MIN_EXAMPLE_CHECKS: usize = 30;

/// The fixture's shared tools, sorted (the reference lists no task-specific tool).
const SHARED_TOOLS: [&str; 9] = [
    "big", "counter", "echo", "fail", "image", "panic", "secret", "sleep", "submit",
];

/// The step: build the CLI, start the peer's server, run the library and the CLI against it.
pub fn rust_client_against(peer: Peer) -> Result<(), String> {
    let ors = crate::procs::ors_binary()?;
    let debug = ors.parent().ok_or("`ors` has no directory")?;
    let server = peer_server(peer)?;
    let expect = match peer {
        Peer::OrsSdk => super::library::Expect::Reference,
        Peer::OpenReward => super::library::Expect::OpenReward,
    };
    let example = library_checks(&server.url, expect);
    let cli = cli_checks(&debug.join("ors"), &server.url);
    drop(server);
    match (example, cli) {
        (Ok(()), Ok(())) => Ok(()),
        (Err(e), Ok(())) | (Ok(()), Err(e)) => Err(e),
        (Err(a), Err(b)) => Err(format!("{a}; {b}")),
    }
}

/// Run the library checks; every one must pass, and none may have been skipped.
fn library_checks(url: &str, expect: super::library::Expect) -> Result<(), String> {
    let (passed, failed) = super::library::run(url, expect)?;
    if failed == 0 && passed >= MIN_EXAMPLE_CHECKS {
        println!("library against {url}: {passed} passed, 0 failed");
        Ok(())
    } else {
        Err(format!(
            "the client library checks failed: {passed} passed, {failed} failed (want 0 \
             failed and at least {MIN_EXAMPLE_CHECKS} passed)"
        ))
    }
}

/// What one `ors` run printed.
pub(super) struct Run {
    pub(super) code: Option<i32>,
    pub(super) stdout: String,
    pub(super) stderr: String,
}

impl Run {
    /// Exit 0 and nothing on stderr.
    fn ok(&self) -> Result<(), String> {
        if self.code == Some(0) && self.stderr.trim().is_empty() {
            Ok(())
        } else {
            Err(format!(
                "exit {:?}, stderr {:?}, stdout {:?}",
                self.code, self.stderr, self.stdout
            ))
        }
    }

    /// Exit 0, stdout parsed as JSON.
    fn json(&self) -> Result<Value, String> {
        self.ok()?;
        serde_json::from_str(&self.stdout)
            .map_err(|e| format!("stdout is not JSON ({e}): {:?}", self.stdout))
    }

    /// Exit 0 and every one of `parts` in stdout, in this order.
    fn says(&self, parts: &[&str]) -> Result<(), String> {
        self.ok()?;
        let mut rest = self.stdout.as_str();
        for part in parts {
            match rest.find(part) {
                Some(i) => rest = &rest[i + part.len()..],
                None => {
                    return Err(format!(
                        "{part:?} missing (in order) from {:?}",
                        self.stdout
                    ))
                }
            }
        }
        Ok(())
    }

    /// Exit 1 with exactly one line on stderr, `ors: error: ...` containing `needle`.
    fn fails_with(&self, needle: &str) -> Result<(), String> {
        let lines: Vec<&str> = self.stderr.lines().collect();
        match lines.as_slice() {
            [line] if self.code == Some(1) && line.starts_with("ors: error: ") => {
                if line.contains(needle) {
                    Ok(())
                } else {
                    Err(format!("error line {line:?} does not mention {needle:?}"))
                }
            }
            _ => Err(format!(
                "want exit 1 and one error line, got exit {:?}, stderr {:?}",
                self.code, self.stderr
            )),
        }
    }
}

fn eq<T: PartialEq + std::fmt::Debug>(what: &str, got: T, want: T) -> Result<(), String> {
    if got == want {
        Ok(())
    } else {
        Err(format!("{what}: got {got:?}, want {want:?}"))
    }
}

/// The texts of a JSON block list.
fn block_texts(blocks: &Value) -> Vec<&str> {
    blocks
        .as_array()
        .map(|bs| bs.iter().filter_map(|b| b["text"].as_str()).collect())
        .unwrap_or_default()
}

fn task_json(id: i64) -> Value {
    json!({"id": id, "question": format!("What is {id}+{id}?"), "answer": (2 * id).to_string()})
}

/// The `ors` binary pointed at one server.
pub(super) struct Ors<'a> {
    pub(super) exe: &'a Path,
    pub(super) url: &'a str,
}

impl Ors<'_> {
    /// `ors --url URL ARGS...` with `stdin`, with no API key or URL from the environment.
    pub(super) fn run(&self, args: &[&str], stdin: Option<&str>) -> Result<Run, String> {
        self.run_at(self.url, args, stdin)
    }

    fn run_at(&self, url: &str, args: &[&str], stdin: Option<&str>) -> Result<Run, String> {
        let mut cmd = Command::new(self.exe);
        cmd.args(["--url", url])
            .args(args)
            .env_remove("ORS_API_KEY")
            .env_remove("ORS_URL");
        let out = run_captured(cmd, stdin, RUN_TIMEOUT)?;
        Ok(Run {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        })
    }
}

/// One CLI check.
type CliCheck = fn(&Ors<'_>) -> Result<(), String>;

/// The CLI checks, by name.
const CLI_CHECKS: &[(&str, CliCheck)] = &[
    ("envs", envs),
    ("tools --format openai --json", tools_openai_json),
    ("tools (table)", tools_table),
    ("splits", splits),
    ("tasks --range 0:3 --json", tasks_range_json),
    ("tasks --range -2: (table)", tasks_range_negative),
    ("call (table)", call_table),
    ("call --json", call_json),
    ("play (piped stdin)", play_piped),
    ("error: unknown split", error_unknown_split),
    ("error: a tool call failed", error_tool_failed),
    ("error: unreachable server", error_unreachable),
];

/// Every `ors` subcommand against the reference; all checks run, then any failure is an error.
fn cli_checks(exe: &Path, url: &str) -> Result<(), String> {
    let ors = Ors { exe, url };
    let mut failed = Vec::new();
    for (name, check) in CLI_CHECKS {
        match check(&ors) {
            Ok(()) => println!("PASS cli.{name}"),
            Err(e) => {
                println!("FAIL cli.{name}: {}", e.replace('\n', "\\n"));
                failed.push(*name);
            }
        }
    }
    println!(
        "ors CLI: {} passed, {} failed",
        CLI_CHECKS.len() - failed.len(),
        failed.len()
    );
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!("ors CLI checks failed: {failed:?}"))
    }
}

/// The `call` arguments every call check uses: echo, then the right answer to task 3.
const CALL_ARGS: [&str; 10] = [
    "call",
    "conformance",
    "--split",
    "train",
    "--index",
    "3",
    "echo",
    r#"{"text":"hi"}"#,
    "submit",
    r#"{"answer":"6"}"#,
];

fn envs(ors: &Ors<'_>) -> Result<(), String> {
    let r = ors.run(&["envs"], None)?;
    r.ok()?;
    eq(
        "lines",
        r.stdout.lines().collect(),
        vec!["conformance", "aux"],
    )?;
    let json = ors.run(&["envs", "--json"], None)?.json()?;
    eq("--json", json, json!(["conformance", "aux"]))
}

fn tools_openai_json(ors: &Ors<'_>) -> Result<(), String> {
    let args = ["tools", "conformance", "--format", "openai", "--json"];
    let tools = ors.run(&args, None)?.json()?;
    let tools = tools.as_array().ok_or("not an array")?;
    let mut names: Vec<&str> = tools
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    names.sort_unstable();
    eq("names", names, SHARED_TOOLS.to_vec())?;
    for t in tools {
        eq("type", &t["type"], &json!("function"))?;
    }
    let by_name = |n: &str| tools.iter().find(|t| t["function"]["name"] == n);
    let echo = by_name("echo").ok_or("no echo")?;
    eq(
        "echo parameters",
        &echo["function"]["parameters"],
        &json!({"type": "object", "properties": {"text": {"type": "string"}},
                "required": ["text"]}),
    )?;
    let counter = by_name("counter").ok_or("no counter")?;
    eq(
        "counter parameters",
        &counter["function"]["parameters"],
        &json!({"type": "object", "properties": {}}),
    )
}

fn tools_table(ors: &Ors<'_>) -> Result<(), String> {
    ors.run(&["tools", "conformance"], None)?.says(&[
        "NAME",
        "PARAMETERS",
        "DESCRIPTION",
        "echo",
        "text: string",
        "submit",
        "answer: string",
    ])
}

fn splits(ors: &Ors<'_>) -> Result<(), String> {
    let r = ors.run(&["splits", "conformance"], None)?;
    r.ok()?;
    let rows: Vec<Vec<&str>> = r
        .stdout
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    eq(
        "rows",
        rows,
        vec![
            vec!["NAME", "TYPE"],
            vec!["train", "train"],
            vec!["test", "test"],
            vec!["hard", "validation"],
        ],
    )
}

fn tasks_range_json(ors: &Ors<'_>) -> Result<(), String> {
    let args = [
        "tasks",
        "conformance",
        "--split",
        "train",
        "--range",
        "0:3",
        "--json",
    ];
    let tasks = ors.run(&args, None)?.json()?;
    eq(
        "tasks",
        tasks,
        json!([task_json(0), task_json(1), task_json(2)]),
    )
}

fn tasks_range_negative(ors: &Ors<'_>) -> Result<(), String> {
    // The table shows real indices, resolved from the negative start.
    let args = ["tasks", "conformance", "--split", "train", "--range", "-2:"];
    ors.run(&args, None)?.says(&[
        "INDEX",
        "ID",
        "QUESTION",
        "ANSWER",
        "23",
        "What is 23+23?",
        "46",
        "24",
        "What is 24+24?",
        "48",
    ])
}

fn call_table(ors: &Ors<'_>) -> Result<(), String> {
    ors.run(&CALL_ARGS, None)?.says(&[
        "session ",
        "What is 3+3?",
        "> echo",
        "hi",
        "> submit",
        "Correct!",
        "total reward 1",
    ])
}

fn call_json(ors: &Ors<'_>) -> Result<(), String> {
    let args: Vec<&str> = CALL_ARGS.into_iter().chain(["--json"]).collect();
    let doc = ors.run(&args, None)?.json()?;
    eq("prompt", block_texts(&doc["prompt"]), vec!["What is 3+3?"])?;
    let echo = &doc["calls"][0];
    eq("echo tool", &echo["tool"], &json!("echo"))?;
    eq("echo ok", &echo["result"]["ok"], &json!(true))?;
    let out = &echo["result"]["output"];
    eq("echo blocks", block_texts(&out["blocks"]), vec!["hi"])?;
    eq("echo metadata", &out["metadata"], &json!({"length": 2}))?;
    eq("echo reward", out["reward"].as_f64(), Some(0.0))?;
    eq("echo finished", &out["finished"], &json!(false))?;
    let out = &doc["calls"][1]["result"]["output"];
    eq(
        "submit blocks",
        block_texts(&out["blocks"]),
        vec!["Correct!"],
    )?;
    eq("submit reward", out["reward"].as_f64(), Some(1.0))?;
    eq("submit finished", &out["finished"], &json!(true))?;
    eq("total reward", doc["total_reward"].as_f64(), Some(1.0))?;
    let sid = doc["sid"].as_str().unwrap_or("");
    eq("sid present", !sid.is_empty(), true)
}

fn play_piped(ors: &Ors<'_>) -> Result<(), String> {
    let input = "counter\ncounter\nfail {\"message\": \"boom\"}\nhint\n\
                 submit {\"answer\": \"6\"}\necho {\"text\": \"never sent\"}\n";
    let args = ["play", "conformance", "--split", "train", "--index", "3"];
    let r = ors.run(&args, Some(input))?;
    r.says(&[
        "What is 3+3?",
        "submit",
        "\n1\n",
        "\n2\n",
        "tool error: boom",
        "The answer is 6",
        "Correct!",
        "episode finished; total reward 1",
    ])?;
    // The episode ended at `submit`, so the last line was never played.
    eq(
        "played after finish",
        r.stdout.contains("never sent"),
        false,
    )
}

fn error_unknown_split(ors: &Ors<'_>) -> Result<(), String> {
    let r = ors.run(&["tasks", "conformance", "--split", "nosuch"], None)?;
    r.fails_with("400")?;
    eq("stdout", r.stdout.as_str(), "")
}

fn error_tool_failed(ors: &Ors<'_>) -> Result<(), String> {
    let args = [
        "call",
        "conformance",
        "--split",
        "train",
        "--index",
        "3",
        "fail",
        r#"{"message":"boom"}"#,
    ];
    let r = ors.run(&args, None)?;
    r.fails_with("1 of 1 tool calls failed")?;
    eq("shown", r.stdout.contains("tool error: boom"), true)
}

fn error_unreachable(ors: &Ors<'_>) -> Result<(), String> {
    let url = format!("http://127.0.0.1:{}", closed_port()?);
    ors.run_at(&url, &["envs"], None)?
        .fails_with(&format!("cannot connect to {url}"))
}

/// A loopback port nothing listens on (bound, then released).
fn closed_port() -> Result<u16, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| format!("bind: {e}"))?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("local_addr: {e}"))
}
