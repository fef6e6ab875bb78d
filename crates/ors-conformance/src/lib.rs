//! Protocol checking for ORS servers, in two forms:
//!
//! - the **conformance runner**: every rule of the protocol as a clause with a stable id,
//!   checked over raw HTTP/1.1 against a server hosting the conformance fixture, with a report
//!   that ends in `N passed, M failed`. It proves a *server* implements the protocol.
//! - [`check`] (`ors check ENV`): whether one *environment*, on any server, is ready for
//!   training, with no fixture: its discovery answers, episodes on sampled tasks, and its tools
//!   fuzzed with inputs generated from their schemas. It talks to the server through
//!   `ors-client`, as a trainer would; it lives here, beside the clauses, because both are the
//!   protocol's checkers and share their report shape.
//!
//! Used by `ors conformance` (any server, no checkout needed) and `cargo xtask conformance`
//! (which can also build and start this repository's fixture). The fixture's contract is the
//! `conformance` environment of `examples/src/conformance.rs`; `tools/interop/python/conformance_env.py`
//! is the same fixture on the Python reference SDK.
//!
//! ```
//! use ors_conformance::{clauses, ExpectedFailures, RunOptions};
//!
//! let expected = ExpectedFailures::parse("sessions.delete.gone  # answers 404 instead\n")?;
//! assert_eq!(expected.reason("sessions.delete.gone"), Some("answers 404 instead"));
//! assert!(clauses::all().len() > 100);
//! let opts = RunOptions { expected, ..RunOptions::default() };
//! assert_eq!(opts.env, "conformance");
//! # Ok::<(), String>(())
//! ```

#![warn(missing_docs)]

pub mod check;
pub mod clauses;
pub mod http;
mod report;
mod support;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

pub use report::{ExpectedFailures, Outcome, Report, Status};
use support::Ctx;

/// What to run, independent of any command line.
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

/// The command-line options both `ors conformance` and `cargo xtask conformance` take (the
/// server URL and API key come from each command's own options).
#[derive(Debug, Clone, clap::Args)]
pub struct ConformanceArgs {
    /// Name of the fixture environment on the server.
    #[arg(long, default_value = "conformance")]
    pub env: String,
    /// Clauses known to fail, one `clause-id  # reason` per line; they do not fail the run.
    #[arg(long, value_name = "FILE")]
    pub expected_failures: Option<PathBuf>,
    /// Write a JSON report to this file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Also run the slow clauses (keep-alive: the interval plus 1.5 s).
    #[arg(long)]
    pub slow: bool,
    /// The server's keep-alive interval in seconds (ORS_KEEPALIVE_SECS of ours).
    #[arg(long, default_value_t = 10)]
    pub keepalive_secs: u64,
    /// Only run clauses whose id starts with one of these prefixes (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
    /// Print every clause id and description, then exit.
    #[arg(long)]
    pub list: bool,
}

impl ConformanceArgs {
    /// The [`RunOptions`] these arguments ask for (reads the expected-failures file).
    pub fn options(&self, api_key: Option<String>) -> Result<RunOptions, String> {
        let expected = self
            .expected_failures
            .as_deref()
            .map(ExpectedFailures::load);
        Ok(RunOptions {
            env: self.env.clone(),
            expected: expected.transpose()?.unwrap_or_default(),
            slow: self.slow,
            keepalive_secs: self.keepalive_secs,
            only: self.only.clone(),
            api_key,
            verbose: true,
        })
    }
}

/// Print a line on stdout; a closed pipe (`--list | head`) ends the output quietly instead of
/// panicking as `println!` does.
fn out(line: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{line}");
}

/// Print every clause id and description, and the count.
pub fn print_list() {
    for c in clauses::all() {
        let slow = if c.slow { " (--slow)" } else { "" };
        out(&format!("{:<48} {}{slow}", c.id, c.description));
    }
    out(&format!("{} clauses", clauses::all().len()));
}

/// Print the summary of a finished run, write its JSON report if asked, and give the exit
/// code: failure only for a clause that failed without being listed as expected.
pub fn finish(
    report: &Report,
    expected_file: Option<&Path>,
    json: Option<&Path>,
) -> Result<ExitCode, String> {
    for line in report.summary(expected_file) {
        out(&line);
    }
    if let Some(path) = json {
        let text = serde_json::to_string_pretty(&report.to_json()).map_err(|e| e.to_string())?;
        std::fs::write(path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    Ok(if report.unexpected_failures().is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Run the checks `args` ask for against `url`, printing each clause and the summary.
pub fn run_cli(
    args: &ConformanceArgs,
    url: &str,
    api_key: Option<String>,
) -> Result<ExitCode, String> {
    if args.list {
        print_list();
        return Ok(ExitCode::SUCCESS);
    }
    let report = run_against(url, &args.options(api_key)?)?;
    finish(
        &report,
        args.expected_failures.as_deref(),
        args.json.as_deref(),
    )
}

/// Run the selected clauses against the server at `url`.
pub fn run_against(url: &str, opts: &RunOptions) -> Result<Report, String> {
    let target = http::Target::from_url(url, opts.api_key.clone())?;
    let keepalive = Duration::from_secs(opts.keepalive_secs);
    let ctx = Ctx::new(target, opts.env.clone(), keepalive);
    let selected = clauses::all()
        .into_iter()
        .filter(|c| opts.only.is_empty() || opts.only.iter().any(|p| c.id.starts_with(p.as_str())));
    let started = Instant::now();
    let mut outcomes = Vec::new();
    for clause in selected {
        let t = Instant::now();
        let status = if clause.slow && !opts.slow {
            Status::Skip("slow; run with --slow".to_owned())
        } else {
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (clause.check)(&ctx))) {
                Ok(Ok(())) => ctx.take_skip().map_or(Status::Pass, Status::Skip),
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
            out(&outcome.line());
        }
        outcomes.push(outcome);
    }
    let unknown_expected = opts
        .expected
        .ids()
        .filter(|id| !clauses::all().iter().any(|c| c.id == *id))
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
