//! `cargo xtask conformance`: the `ors-conformance` runner, plus building and starting this
//! repository's `conformance` example when no `--url` is given.
//!
//! With `--url` it checks any server that hosts the fixture; `ors conformance` does the same
//! without a checkout of this workspace.

use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

pub use ors_conformance::{run_against, ExpectedFailures, Report, RunOptions, Status};

use crate::procs::ServerProcess;

/// Arguments of `cargo xtask conformance`.
#[derive(clap::Args)]
pub struct XtaskConformanceArgs {
    /// Check the server at this URL (http://host:port) instead of starting the `conformance` example.
    #[arg(long)]
    url: Option<String>,
    /// Send this as X-API-Key on every request (for servers that require a key).
    #[arg(long, env = "ORS_API_KEY", hide_env_values = true)]
    api_key: Option<String>,
    #[command(flatten)]
    args: ors_conformance::ConformanceArgs,
}

/// Run the conformance checks.
pub fn run(args: XtaskConformanceArgs) -> Result<ExitCode, String> {
    let XtaskConformanceArgs { url, api_key, args } = args;
    if let Some(url) = &url {
        return ors_conformance::run_cli(&args, url, api_key);
    }
    if args.list {
        ors_conformance::print_list();
        return Ok(ExitCode::SUCCESS);
    }
    // Our server runs with an API key so the auth clauses are exercised too.
    let key = api_key.unwrap_or_else(throwaway_api_key);
    let keepalive = args.keepalive_secs.to_string();
    let server = start_our_server(&[
        ("ORS_API_KEY", key.as_str()),
        ("ORS_KEEPALIVE_SECS", keepalive.as_str()),
    ])?;
    eprintln!("xtask: started the conformance example at {}", server.url);
    ors_conformance::run_cli(&args, &server.url, Some(key))
}

/// Build and start this repository's `conformance` example on a free loopback port, with
/// extra environment variables. Its stderr goes to `target/xtask-logs/conformance.log`.
pub fn start_our_server(envs: &[(&str, &str)]) -> Result<ServerProcess, String> {
    let dir = crate::procs::build_examples(&["conformance"], false)?;
    let mut cmd = Command::new(dir.join("conformance"));
    cmd.args(["--host", "127.0.0.1", "--port", "0"]);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd.stderr(log_file("conformance")?);
    ServerProcess::start(cmd, Duration::from_secs(60))
}

/// A random-enough API key for a server started only for this run.
pub fn throwaway_api_key() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("ors-conformance-{}-{nanos:x}", std::process::id())
}

/// A fresh log file `target/xtask-logs/NAME.log` for a server's stderr, so its logs (and
/// the panics the fixture provokes on purpose) do not drown the report.
pub fn log_file(name: &str) -> Result<Stdio, String> {
    let dir = crate::workspace::workspace_root()
        .join("target")
        .join("xtask-logs");
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let path = dir.join(format!("{name}.log"));
    let file =
        std::fs::File::create(&path).map_err(|e| format!("creating {}: {e}", path.display()))?;
    Ok(Stdio::from(file))
}
