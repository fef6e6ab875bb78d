//! `cargo xtask conformance`: checks an ORS server hosting the conformance fixture, clause by
//! clause, over raw HTTP/1.1, decoding SSE with the core codec.
//!
//! Without `--url` it builds and starts this repository's `conformance` example on a free
//! port. With `--url` it checks any server that hosts the fixture (the contract is in the
//! server issue; `interop/python/conformance_env.py` is the same fixture on the reference SDK).

mod clauses;
mod http;
mod report;
mod support;

use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

pub use report::{ExpectedFailures, Report, Status};

use crate::procs::{cargo_build, ServerProcess};
use report::Outcome;
use support::Ctx;

/// Arguments of `cargo xtask conformance`.
#[derive(clap::Args)]
pub struct ConformanceArgs {
    /// Check the server at this URL (http://host:port) instead of starting the `conformance` example.
    #[arg(long)]
    url: Option<String>,
    /// Name of the fixture environment on the server.
    #[arg(long, default_value = "conformance")]
    env: String,
    /// Clauses known to fail, one `clause-id  # reason` per line; they do not fail the run.
    #[arg(long)]
    expected_failures: Option<PathBuf>,
    /// Write a JSON report to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Also run the slow clauses (keep-alive: the interval plus 1.5 s).
    #[arg(long)]
    slow: bool,
    /// The server's keep-alive interval in seconds (ORS_KEEPALIVE_SECS of ours).
    #[arg(long, default_value_t = 10)]
    keepalive_secs: u64,
    /// Only run clauses whose id starts with one of these prefixes (comma-separated).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Print every clause id and description, then exit.
    #[arg(long)]
    list: bool,
    /// Send this as X-API-Key on every request (for servers that require a key).
    #[arg(long, env = "ORS_API_KEY", hide_env_values = true)]
    api_key: Option<String>,
}

/// What to run, independent of the command line (interop uses it directly).
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The fixture environment's name.
    pub env: String,
    /// Clauses allowed to fail.
    pub expected: ExpectedFailures,
    /// Include slow clauses.
    pub slow: bool,
    /// The server's keep-alive interval, in seconds.
    pub keepalive_secs: u64,
    /// Id prefixes to run (all when empty).
    pub only: Vec<String>,
    /// X-API-Key to send.
    pub api_key: Option<String>,
    /// Print each clause's line as it finishes.
    pub verbose: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            env: "conformance".to_owned(),
            expected: ExpectedFailures::default(),
            slow: false,
            keepalive_secs: 10,
            only: Vec::new(),
            api_key: None,
            verbose: false,
        }
    }
}

/// Run the conformance checks.
pub fn run(args: ConformanceArgs) -> Result<ExitCode, String> {
    if args.list {
        for c in clauses::all() {
            let slow = if c.slow { " (--slow)" } else { "" };
            println!("{:<48} {}{slow}", c.id, c.description);
        }
        println!("{} clauses", clauses::all().len());
        return Ok(ExitCode::SUCCESS);
    }
    let expected = match &args.expected_failures {
        Some(path) => ExpectedFailures::load(path)?,
        None => ExpectedFailures::default(),
    };
    let opts = RunOptions {
        env: args.env.clone(),
        expected,
        slow: args.slow,
        keepalive_secs: args.keepalive_secs,
        only: args.only.clone(),
        api_key: args.api_key.clone(),
        verbose: true,
    };
    let report = match &args.url {
        Some(url) => run_against(url, &opts)?,
        None => {
            // Our server runs with an API key so the auth clauses are exercised too.
            let key = opts.api_key.clone().unwrap_or_else(throwaway_api_key);
            let keepalive = opts.keepalive_secs.to_string();
            let server = start_our_server(&[
                ("ORS_API_KEY", key.as_str()),
                ("ORS_KEEPALIVE_SECS", keepalive.as_str()),
            ])?;
            eprintln!("xtask: started the conformance example at {}", server.url);
            let opts = RunOptions {
                api_key: Some(key),
                ..opts
            };
            run_against(&server.url, &opts)?
        }
    };
    for line in report.summary(args.expected_failures.as_deref()) {
        println!("{line}");
    }
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&report.to_json()).map_err(|e| e.to_string())?;
        std::fs::write(path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    Ok(if report.unexpected_failures().is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Build and start this repository's `conformance` example on a free loopback port, with
/// extra environment variables. Its stderr goes to `target/xtask-logs/conformance.log`.
pub fn start_our_server(envs: &[(&str, &str)]) -> Result<ServerProcess, String> {
    let dir = cargo_build(&["-p", "ors-examples", "--bin", "conformance"], false)?;
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
    let dir = crate::python::workspace_root()
        .join("target")
        .join("xtask-logs");
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let path = dir.join(format!("{name}.log"));
    let file =
        std::fs::File::create(&path).map_err(|e| format!("creating {}: {e}", path.display()))?;
    Ok(Stdio::from(file))
}

/// Run the selected clauses against the server at `url`.
pub fn run_against(url: &str, opts: &RunOptions) -> Result<Report, String> {
    let target = http::Target::from_url(url, opts.api_key.clone())?;
    let keepalive = Duration::from_secs(opts.keepalive_secs);
    let ctx = Ctx::new(target, opts.env.clone(), keepalive);
    let selected: Vec<_> = clauses::all()
        .into_iter()
        .filter(|c| opts.only.is_empty() || opts.only.iter().any(|p| c.id.starts_with(p.as_str())))
        .collect();
    let started = Instant::now();
    let mut outcomes = Vec::with_capacity(selected.len());
    for clause in selected {
        let t = Instant::now();
        let status = if clause.slow && !opts.slow {
            Status::Skip("slow; run with --slow".to_owned())
        } else {
            let result =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (clause.check)(&ctx)));
            match result {
                Ok(Ok(())) => match ctx.take_skip() {
                    Some(why) => Status::Skip(why),
                    None => Status::Pass,
                },
                Ok(Err(reason)) => Status::Fail(reason),
                Err(_) => Status::Fail("the check itself panicked (a runner bug)".to_owned()),
            }
        };
        let outcome = Outcome {
            clause,
            status,
            expected: opts.expected.reason(clause.id).map(str::to_owned),
            duration: t.elapsed(),
        };
        if opts.verbose {
            println!("{}", outcome.line());
        }
        outcomes.push(outcome);
    }
    let known: Vec<&str> = clauses::all().iter().map(|c| c.id).collect();
    let unknown_expected = opts
        .expected
        .ids()
        .filter(|id| !known.contains(id))
        .map(str::to_owned)
        .collect();
    Ok(Report {
        url: url.to_owned(),
        env: opts.env.clone(),
        outcomes,
        unknown_expected,
        duration: started.elapsed(),
    })
}
