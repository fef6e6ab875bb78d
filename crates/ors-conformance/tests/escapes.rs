//! `ors check`'s escape checks against real servers: a tool that runs commands as the server's
//! user (found by its name and schema, as on a server that does not declare it) leaks in all
//! seven ways, each named; the same tool in a sandbox per episode, declared with
//! `#[tool(runs_commands)]`, in none.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a failed assumption is a failed test

use std::time::Duration;

use ors_client::Client;
use ors_conformance::check::{self, CheckItem, CheckOptions, CheckReport};
use ors_server::prelude::*;
use ors_server::process::{Program, WorkDir};
use ors_server::sandbox::{Sandbox, SandboxSettings, Sandboxes};
use ors_server::{RunningServer, Server};

#[wire]
#[derive(Clone, Debug)]
struct Task {}

#[wire]
struct Run {
    /// A shell command line.
    command: String,
}

/// Runs the agent's commands in a directory of the episode's, as the server's user.
struct Bare {
    dir: WorkDir,
}

#[environment]
impl Environment for Bare {
    type Task = Task;
    fn splits() -> Vec<Split> {
        vec![Split::train("train")]
    }
    async fn tasks(_split: &str) -> Result<Vec<Task>, EnvError> {
        Ok(vec![Task {}])
    }
    async fn new(_task: Task, _secrets: Secrets) -> Result<Self, EnvError> {
        Ok(Bare {
            dir: WorkDir::create("ors-escape-test-")?,
        })
    }
    async fn prompt(&self) -> Result<Blocks, EnvError> {
        Ok(vec![Block::text("Run commands.")])
    }

    /// Run a shell command in your directory.
    #[tool]
    async fn run_shell(&self, ctx: &ToolContext, input: Run) -> Result<String, String> {
        let done = Program::shell(&input.command)
            .current_dir(self.dir.path())
            .timeout(Duration::from_secs(20))
            .run(ctx)
            .await
            .map_err(|e| e.to_string())?;
        Ok(done.report())
    }
}

/// The same tool, in a sandbox per episode taken from the environment's sandboxes (its state).
struct Boxed {
    sandbox: Sandbox,
}

#[environment]
impl Environment for Boxed {
    type Task = Task;
    type State = Sandboxes;
    fn splits() -> Vec<Split> {
        vec![Split::train("train")]
    }
    async fn tasks(_split: &str) -> Result<Vec<Task>, EnvError> {
        Ok(vec![Task {}])
    }
    async fn new(sandboxes: &Sandboxes, _task: Task, _secrets: Secrets) -> Result<Self, EnvError> {
        Ok(Boxed {
            sandbox: sandboxes.sandbox(),
        })
    }
    async fn prompt(&self) -> Result<Blocks, EnvError> {
        Ok(vec![Block::text("Run commands.")])
    }
    async fn teardown(&mut self) {
        let _ = self.sandbox.shutdown().await;
    }

    /// Run a shell command in your workspace.
    #[tool(runs_commands)]
    async fn run(&self, ctx: &ToolContext, input: Run) -> Result<String, String> {
        let done = Program::shell(&input.command)
            .timeout(Duration::from_secs(20))
            .run_in(&self.sandbox, ctx)
            .await
            .map_err(|e| e.to_string())?;
        Ok(done.report())
    }
}

async fn check<E: Environment>(env: &str, seed: u64, state: E::State) -> CheckReport {
    let server: RunningServer = Server::new()
        .host("127.0.0.1")
        .port(0)
        .environment_with::<E>(state)
        .bind()
        .await
        .expect("the test server starts");
    let mut opts = CheckOptions::new(env);
    opts.seed = seed;
    opts.fuzz = 0;
    opts.timeout = Duration::from_secs(60);
    let report = check::run(
        Client::builder(server.url()).no_api_key(),
        &opts,
        &mut |_: &CheckItem| {},
    )
    .await
    .expect("the server is reachable");
    server.shutdown().await;
    report
}

fn lines(report: &CheckReport) -> String {
    report
        .items
        .iter()
        .map(CheckItem::line)
        .collect::<Vec<_>>()
        .join("\n")
}

const ESCAPES: [&str; 7] = [
    "host-file",
    "server-loopback",
    "other-episode",
    "write-outside",
    "detached-process",
    "process-limit",
    "server-env",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_escape_of_an_unsandboxed_tool_is_named() {
    let report = check::<Bare>("bare", 11, ()).await;
    let text = lines(&report);
    let problem = |id: &str| {
        report
            .items
            .iter()
            .find(|i| i.id == format!("tool.run_shell.escape.{id}"))
            .and_then(|i| i.problem.clone())
            .unwrap_or_else(|| panic!("no problem {id}:\n{text}"))
    };
    for id in ESCAPES {
        let p = problem(id);
        assert!(p.contains("found by its name and input"), "{p}");
    }
    assert!(problem("host-file").contains("the process that started the command"));
    assert!(problem("server-loopback").contains("/health answered HTTP 200"));
    assert!(problem("other-episode").contains("ors-escape-test-"));
    assert!(problem("write-outside").contains("/tmp/ors-check-"));
    assert!(problem("detached-process").contains("setsid"));
    let flood = problem("process-limit");
    assert!(
        flood.contains("processes at once (it asked for 300)"),
        "{flood}"
    );
    // The test's own variables (cargo's), by name only: CARGO_PKG_NAME's value is not there.
    let env = problem("server-env");
    assert!(env.contains("CARGO_"), "{env}");
    assert!(!env.contains("ors-conformance"), "{env}");
    assert_eq!(report.failed(), 7, "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandboxed_tool_lets_nothing_out() {
    let sandboxes = Sandboxes::new(SandboxSettings::new()).unwrap_or_else(|e| panic!("{e}"));
    let report = check::<Boxed>("boxed", 12, sandboxes).await;
    let text = lines(&report);
    for id in ESCAPES {
        let item = report
            .items
            .iter()
            .find(|i| i.id == format!("tool.run.escape.{id}"))
            .unwrap_or_else(|| panic!("no check {id}:\n{text}"));
        assert!(item.passed(), "{text}");
        assert!(
            !item
                .note
                .as_deref()
                .unwrap_or_default()
                .contains("could not tell"),
            "{text}"
        );
    }
    assert_eq!(report.failed(), 0, "{text}");
}
