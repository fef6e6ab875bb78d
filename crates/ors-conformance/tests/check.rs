//! `ors check` (the library) against real servers: our examples pass (the conformance
//! fixture's deliberately bad tools are named), and an environment broken in every way a
//! Rust environment can be is caught, each problem naming its tool, split or task. (A
//! non-finite reward cannot be: ors-server sends it as `null`, so the Python environment of
//! `tools/interop/python/broken_env.py` shows that one.)
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a failed assumption is a failed test

use std::time::Duration;

use ors_client::Client;
use ors_conformance::check::{self, CheckItem, CheckOptions, CheckReport};
use ors_examples::conformance::Conformance;
use ors_examples::gsm8k::Gsm8k;
use ors_server::prelude::*;
use ors_server::{RunningServer, Server};

/// A loopback server hosting `E` on a free port.
async fn serve<E: Environment<State: Default>>() -> RunningServer {
    Server::new()
        .host("127.0.0.1")
        .port(0)
        .environment::<E>()
        .bind()
        .await
        .expect("the test server starts")
}

/// Run the check on `env` with a fixed seed; every line printed is also in the report.
async fn check(server: &RunningServer, env: &str, timeout: Duration) -> CheckReport {
    let mut opts = CheckOptions::new(env);
    opts.seed = 7;
    opts.timeout = timeout;
    let mut lines = Vec::new();
    let report = check::run(
        Client::builder(server.url()).no_api_key(),
        &opts,
        &mut |item: &CheckItem| lines.push(item.line()),
    )
    .await
    .expect("the server is reachable");
    let printed: Vec<String> = report.items.iter().map(CheckItem::line).collect();
    assert_eq!(lines, printed, "each item is handed over as it is found");
    report
}

fn problem<'a>(report: &'a CheckReport, id: &str) -> &'a str {
    report
        .items
        .iter()
        .find(|i| i.id == id)
        .and_then(|i| i.problem.as_deref())
        .unwrap_or_else(|| panic!("no problem {id} in:\n{}", lines(report)))
}

fn problem_ids(report: &CheckReport) -> Vec<&str> {
    report
        .items
        .iter()
        .filter(|i| !i.passed())
        .map(|i| i.id.as_str())
        .collect()
}

fn lines(report: &CheckReport) -> String {
    report
        .items
        .iter()
        .map(CheckItem::line)
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gsm8k_is_ready_for_training() {
    let server = serve::<Gsm8k>().await;
    let report = check(&server, "gsm8k", Duration::from_secs(60)).await;
    assert_eq!(report.failed(), 0, "{}", lines(&report));
    let ids: Vec<&str> = report.items.iter().map(|i| i.id.as_str()).collect();
    for id in [
        "discovery.listed",
        "tool.submit.input-schema",
        "split.test.num-tasks",
        "episode.test.0",
        "episode.test.24",
        "episode.test.49",
        "tool.submit.no-crash",
        "tool.submit.rejects-invalid",
        // The terminal tool is exercised as a harness calls it.
        "tool.final_answer.terminal",
        "tool.final_answer.no-crash",
        "tool.final_answer.rejects-invalid",
    ] {
        assert!(ids.contains(&id), "{id} missing:\n{}", lines(&report));
    }
    assert_eq!(report.episodes.len(), 6);
    assert_eq!(report.summary(), format!("{} passed, 0 failed", ids.len()));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fixture_passes_but_for_its_deliberately_bad_tools() {
    let server = serve::<Conformance>().await;
    // Short enough that the fixture's unbounded `sleep` costs little; every other tool
    // answers in milliseconds.
    let report = check(&server, "conformance", Duration::from_secs(5)).await;
    assert_eq!(
        problem_ids(&report),
        [
            "tool.fail.error-messages",
            "tool.panic.no-crash",
            "tool.sleep.in-time"
        ],
        "{}",
        lines(&report)
    );
    let crash = problem(&report, "tool.panic.no-crash");
    assert!(crash.contains("'panic' crashed"), "{crash}");
    assert!(
        crash.contains("ors call conformance --split train --index 0 panic '{}'"),
        "{crash}"
    );
    assert!(crash.contains("--seed 7"), "{crash}");
    let empty = problem(&report, "tool.fail.error-messages");
    assert!(empty.contains(r#"input {"message":""}"#), "{empty}");
    let slow = problem(&report, "tool.sleep.in-time");
    assert!(
        slow.contains("no result within 5 s") && slow.contains("18446744073709551615"),
        "{slow}"
    );
    // The task-specific tool was found through the first episode and called too.
    assert!(report.items.iter().any(|i| i.id == "tool.hint.no-crash"));
    server.shutdown().await;
}

/// One task of [`Sloppy`].
#[wire]
struct Note {
    id: u64,
    text: String,
}

#[wire]
struct Share {
    /// How many people share the 100 points.
    people: i64,
}

#[wire]
struct Guess {
    /// Your guess, from 1 to 10.
    #[schemars(range(min = 1, max = 10))]
    n: u32,
}

#[wire]
struct Search {
    /// What to look for.
    query: String,
}

#[wire]
struct Word {
    /// The word.
    word: String,
}

#[wire]
struct Verdict {
    /// The answer, in words.
    text: String,
}

#[wire]
struct Rate {
    /// Stars, from zero.
    #[schemars(extend("minimum" = "zero"))]
    stars: u32,
}

/// An environment with the mistakes real ones make, one per tool, split or task.
struct Sloppy {
    note: Note,
}

#[environment]
impl Environment for Sloppy {
    type Task = Note;

    fn splits() -> Vec<Split> {
        vec![Split::train("train"), Split::test("test")]
    }

    async fn tasks(split: &str) -> Result<Vec<Note>, EnvError> {
        // `test` was meant to be filled from a file that is not there.
        Ok(match split {
            "train" => (0..5)
                .map(|id| Note {
                    id,
                    text: format!("note {id}"),
                })
                .collect(),
            _ => Vec::new(),
        })
    }

    async fn new(note: Note, _secrets: Secrets) -> Result<Self, EnvError> {
        if note.id == 4 {
            return Err(EnvError::msg("the attachment of note 4 is missing"));
        }
        Ok(Self { note })
    }

    async fn prompt(&self) -> Result<Blocks, EnvError> {
        // Note 2 has no text, and nobody noticed.
        if self.note.id == 2 {
            return Ok(vec![Block::text("  ")]);
        }
        Ok(vec![Block::text(&self.note.text)])
    }

    /// Share 100 points between people.
    #[tool]
    fn share(&self, input: Share) -> String {
        // Divides by zero (and overflows on i64::MIN / -1): a panic.
        (100 / input.people).to_string()
    }

    /// Guess the number.
    #[tool]
    fn guess(&self, input: Guess) -> ToolOutput {
        // The schema says 1..=10, but nothing checks it.
        ToolOutput::text(format!("you guessed {}", input.n)).with_reward(0.0)
    }

    /// Search the notes.
    #[tool]
    async fn search(&self, ctx: &ToolContext, input: Search) -> String {
        if input.query.is_empty() {
            // Waits for a query that never comes.
            ctx.cancelled().await;
        }
        format!("no match for {}", input.query)
    }

    /// Draw the note.
    #[tool]
    fn picture(&self) -> ToolOutput {
        ToolOutput::blocks(vec![Block::image("not base64!", "image/png")])
    }

    /// Define a word.
    #[tool]
    fn define(&self, _input: Word) -> Result<String, String> {
        Err(String::new())
    }

    /// Take an answer given in prose.
    #[tool(terminal)]
    fn verdict(&self, input: Verdict) -> ToolOutput {
        // Written for numbers; a model answers in words.
        let n: u32 = input.text.trim().parse().expect("the answer is a number");
        ToolOutput::text("graded").with_reward(f64::from(n))
    }

    /// Rate the note.
    #[tool]
    fn rate(&self, input: Rate) -> String {
        format!("{} stars", input.stars)
    }

    // Tools computed from the task escape the compile-time checks of #[tool] (names, doc
    // comments), so their mistakes show only at run time.
    fn task_tools(&self) -> Vec<ToolSpec> {
        vec![
            ToolSpec::new("look up", "Look the note up.", None),
            ToolSpec::new("related", String::new(), None),
        ]
    }

    async fn call_task_tool(
        &mut self,
        _ctx: ToolContext,
        name: &str,
        _input: serde_json::Value,
    ) -> Option<RunToolOutput> {
        matches!(name, "look up" | "related").then(|| ToolOutput::text(&self.note.text).into())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_mistake_of_a_sloppy_environment_is_named() {
    let server = serve::<Sloppy>().await;
    let report = check(&server, "sloppy", Duration::from_secs(5)).await;
    if std::env::var_os("SHOW_CHECK").is_some() {
        println!("{}", lines(&report));
    }
    let found = problem_ids(&report);
    let expected = [
        "tool.related.description",
        "tool.rate.input-schema",
        "split.test.tasks",
        "episode.train.2",
        "episode.train.4",
        "tool.\"look up\".name",
        "tool.share.no-crash",
        "tool.guess.rejects-invalid",
        "tool.search.in-time",
        "tool.picture.wire-form",
        "tool.define.error-messages",
        "tool.verdict.no-crash",
    ];
    let mut want = expected.to_vec();
    want.sort_unstable();
    let mut got = found.clone();
    got.sort_unstable();
    assert_eq!(got, want, "{}", lines(&report));

    let p = problem(&report, "tool.related.description");
    assert!(
        p.contains("task-specific tool 'related' has an empty description"),
        "{p}"
    );
    let p = problem(&report, "tool.rate.input-schema");
    assert!(
        p.contains("not a valid JSON Schema") && p.contains("/properties/stars/minimum"),
        "{p}"
    );
    let p = problem(&report, "split.test.tasks");
    assert!(p.contains("split 'test' has no tasks"), "{p}");
    let p = problem(&report, "episode.train.2");
    assert!(p.contains("task 2 of split 'train' is empty"), "{p}");
    let p = problem(&report, "episode.train.4");
    assert!(
        p.contains("task 4 of split 'train'") && p.contains("attachment of note 4 is missing"),
        "{p}"
    );
    let p = problem(&report, "tool.\"look up\".name");
    assert!(p.contains("\"look_up\""), "a fixed name is suggested: {p}");
    let p = problem(&report, "tool.share.no-crash");
    assert!(
        p.contains("'share' crashed") && p.contains("\"people\":0"),
        "{p}"
    );
    let p = problem(&report, "tool.guess.rejects-invalid");
    assert!(
        p.contains("'guess' accepted an input its schema rejects") && p.contains("\"n\":11"),
        "{p}"
    );
    let p = problem(&report, "tool.search.in-time");
    assert!(p.contains(r#"input {"query":""}"#), "{p}");
    let p = problem(&report, "tool.picture.wire-form");
    assert!(p.contains("not base64"), "{p}");
    let p = problem(&report, "tool.verdict.no-crash");
    assert!(p.contains("'verdict' crashed"), "{p}");
    let p = problem(&report, "tool.define.error-messages");
    assert!(
        p.contains("'define' answered ok: false with an empty error"),
        "{p}"
    );
    // The problem's input is in the report whole.
    let share = report
        .items
        .iter()
        .find(|i| i.id == "tool.share.no-crash")
        .and_then(|i| i.input.clone());
    assert_eq!(share, Some(serde_json::json!({"people": 0})));
    server.shutdown().await;
}

#[tokio::test]
async fn an_unreachable_server_is_an_error_not_a_report() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let opts = CheckOptions::new("gsm8k");
    let result = check::run(Client::builder(&url).no_api_key(), &opts, &mut |_| {}).await;
    match result {
        Err(check::CheckError::Unreachable(m)) => assert!(m.contains(&url), "{m}"),
        other => panic!("expected Unreachable, got {other:?}"),
    }
}
