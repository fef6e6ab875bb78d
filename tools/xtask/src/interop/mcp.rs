//! MCP both ways, against the official Python MCP SDK (PyPI `mcp`, in the reference venv):
//! - the SDK's client drives `ors mcp` serving our `conformance` fixture, over stdio and over
//!   streamable HTTP (`tools/interop/python/mcp_client_ors.py`);
//! - our `mcp_env` example wraps an SDK server (`tools/interop/python/mcp_server.py`, started per
//!   episode over stdio, or one over HTTP) and the webhooks of
//!   `tools/interop/python/webhook_server.py`, and is driven by the reference ORS client
//!   (`tools/interop/python/client_mcp_env.py`) and checked by `ors check`.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::check::problems;
use super::rust_client::Ors;
use super::servers::{build_examples, interop_dir, our_server, python_script, START_TIMEOUT};
use crate::conformance;
use crate::procs::ServerProcess;
use crate::python::Peer;
use crate::workspace::workspace_root;

/// The webhook endpoint's secret (a throwaway; the endpoint refuses calls without it).
const HOOK_SECRET: &str = "interop-hook-secret";

/// The bearer token `ors mcp --http` is given (a throwaway).
const MCP_TOKEN: &str = "interop-mcp-token";

/// The variable `mcp_env` reads the webhooks' secret from (the file names it, not the value).
const HOOK_SECRET_VAR: &str = "ORS_INTEROP_HOOK_SECRET";

/// The tasks `client_mcp_env.py` expects, one JSON object a line.
const TASKS: &str = "{\"prompt\": \"Add 2 and 3 with the add tool.\"}\n\
                     {\"prompt\": \"Look up order 7.\"}\n";

/// Build `ors` and the examples (separately, as the other steps do, so each build is found
/// done); the directory of the examples and the path of `ors`.
fn build() -> Result<(PathBuf, PathBuf), String> {
    let ors = crate::procs::ors_binary()?;
    Ok((build_examples()?, ors))
}

/// The step: the Python MCP client against `ors mcp`, over stdio and HTTP.
pub fn python_mcp_client_against_ors_mcp() -> Result<(), String> {
    let (bins, ors) = build()?;
    let ors = path_str(&ors)?;
    let fixture = our_server(&bins, "conformance", &[])?;
    python_script(
        Peer::OrsSdk,
        "mcp_client_ors.py",
        &["stdio", ors, &fixture.url],
        &[],
    )?;
    let mut cmd = Command::new(ors);
    cmd.args(["--url", &fixture.url, "mcp", "conformance"])
        .args(["--split", "train", "--index", "3"])
        .args(["--secret", "API_TOKEN=s3cr3t-value"])
        .args(["--http", "127.0.0.1:0", "--token", MCP_TOKEN])
        .env_remove("ORS_API_KEY")
        .env_remove("ORS_SECRETS");
    cmd.stderr(conformance::log_file("ors-mcp-http")?);
    let mcp = ServerProcess::start(cmd, START_TIMEOUT)?;
    python_script(
        Peer::OrsSdk,
        "mcp_client_ors.py",
        &["http", &mcp.url, &fixture.url, "--token", MCP_TOKEN],
        &[],
    )
}

/// The step: `mcp_env` wrapping the Python MCP server and the webhooks, per episode over
/// stdio and shared over HTTP; the reference client drives it and `ors check` passes.
pub fn mcp_env_with_python_servers(python: &Path) -> Result<(), String> {
    let (bins, ors) = build()?;
    let dir = workspace_root().join("target").join("xtask-mcp");
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let hooks_server = python_process(
        python,
        &["webhook_server.py", "--secret", HOOK_SECRET],
        "webhook-server",
    )?;
    let hooks = dir.join("webhooks.json");
    write(&hooks, &webhooks_file(&hooks_server.url))?;
    let tasks = dir.join("tasks.jsonl");
    write(&tasks, TASKS)?;
    let py = path_str(python)?;
    let script = interop_dir().join("python").join("mcp_server.py");
    let command = format!("{py} {} --crash-tool", path_str(&script)?);
    let common = [
        "--webhooks",
        path_str(&hooks)?,
        "--tasks",
        path_str(&tasks)?,
    ];

    // Per episode: a server process of its own for each.
    let mut args = vec!["--mcp-command", command.as_str()];
    args.extend(common);
    let env = mcp_env(&bins, &args, "mcp-env-stdio")?;
    python_script(
        Peer::OrsSdk,
        "client_mcp_env.py",
        &[&env.url, "--per-episode"],
        &[],
    )?;
    // Every fuzzed call starts a Python process: few inputs, a generous limit.
    ors_check(&ors, &env.url, "3")?;
    drop(env);

    // Over HTTP: one server process, an MCP session per episode, tool names prefixed.
    let mcp_server = python_process(python, &["mcp_server.py", "--http"], "mcp-server-http")?;
    let mut args = vec!["--mcp-url", &mcp_server.url, "--mcp-prefix", "py_"];
    args.extend(common);
    let env = mcp_env(&bins, &args, "mcp-env-http")?;
    python_script(
        Peer::OrsSdk,
        "client_mcp_env.py",
        &[&env.url, "--prefix", "py_"],
        &[],
    )?;
    ors_check(&ors, &env.url, "8")
}

/// `ors check mcp`: no problem.
fn ors_check(ors: &Path, url: &str, fuzz: &str) -> Result<(), String> {
    let run = Ors { exe: ors, url }.run(
        &[
            "check",
            "mcp",
            "--seed",
            "1",
            "--fuzz",
            fuzz,
            "--timeout",
            "60",
        ],
        None,
    )?;
    println!("ors check mcp (mcp_env at {url}):");
    for line in run.stdout.lines().filter(|l| !l.starts_with("ok ")) {
        println!("  {line}");
    }
    if run.code == Some(0) {
        return Ok(());
    }
    let found = problems(&run).unwrap_or_default();
    Err(format!(
        "ors check on mcp_env found problems {found:?} (exit {:?}, stderr {:?})",
        run.code, run.stderr
    ))
}

/// The webhook tools of `client_mcp_env.py`, at the endpoint `base`.
fn webhooks_file(base: &str) -> String {
    let hook = |name: &str, description: &str, field: Option<&str>, path: &str| {
        let mut hook = serde_json::json!({
            "name": name,
            "description": description,
            "url": format!("{base}{path}"),
            "secret_env": HOOK_SECRET_VAR,
            "timeout_secs": 10,
        });
        if let Some(field) = field {
            hook["input_schema"] = serde_json::json!({
                "type": "object",
                "properties": {field: {"type": "string"}},
                "required": [field],
            });
        }
        hook
    };
    serde_json::json!([
        hook(
            "lookup_order",
            "Look up an order by its id.",
            Some("orderId"),
            "/lookup"
        ),
        hook(
            "grade",
            "Grade the final answer (42); ends the episode when right.",
            Some("answer"),
            "/grade"
        ),
        hook("teapot", "Always answers HTTP 418.", None, "/teapot"),
    ])
    .to_string()
}

/// Start `mcp_env` with `args` on a free port, the webhooks' secret in its environment.
fn mcp_env(bins: &Path, args: &[&str], log: &str) -> Result<ServerProcess, String> {
    let mut cmd = Command::new(bins.join("mcp_env"));
    cmd.args(["--host", "127.0.0.1", "--port", "0"])
        .args(args)
        .env(HOOK_SECRET_VAR, HOOK_SECRET)
        .env_remove("ORS_API_KEY");
    cmd.stderr(conformance::log_file(log)?);
    ServerProcess::start(cmd, START_TIMEOUT)
}

/// Start a Python script of `tools/interop/python/` that prints a `listening on http://` line.
fn python_process(python: &Path, args: &[&str], log: &str) -> Result<ServerProcess, String> {
    let mut cmd = Command::new(python);
    cmd.args(args).current_dir(interop_dir().join("python"));
    cmd.stderr(conformance::log_file(log)?);
    ServerProcess::start(cmd, START_TIMEOUT)
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("writing {}: {e}", path.display()))
}

fn path_str(path: &Path) -> Result<&str, String> {
    path.to_str()
        .ok_or_else(|| format!("{} is not UTF-8", path.display()))
}
