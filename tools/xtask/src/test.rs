//! `cargo xtask test`: everything CI checks, in order, stopping at the first failure.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use crate::procs::cargo;

/// Arguments of `cargo xtask test`.
#[derive(clap::Args)]
pub struct TestArgs {
    /// Run only the interop steps (Python reference client and server, conformance runner),
    /// skipping fmt, clippy and cargo test.
    #[arg(long)]
    pub interop_only: bool,
    /// The revision the quick speed comparison measures this tree against (default: the
    /// merge base with main, or HEAD's first parent on main).
    #[arg(long, value_name = "REV")]
    pub against: Option<String>,
}

/// Seconds of fuzzing `cargo xtask test` spends, over all targets.
const FUZZ_BUDGET_SECS: u64 = 60;

/// Each fuzz target for its share of [`FUZZ_BUDGET_SECS`] (at least 5 s): enough to catch a
/// target that no longer builds or fails at once. Built without optimizations, which takes
/// minutes less than cargo-fuzz's optimized build, the longest part of the step. Without a
/// nightly toolchain (or a way to install cargo-fuzz) the step is skipped, saying why.
fn fuzz_briefly() -> Result<(), String> {
    if let Err(crate::fuzz::Unavailable(why)) = crate::fuzz::ensure_tools() {
        eprintln!("xtask: fuzz: SKIPPED: {why}");
        return Ok(());
    }
    let targets = crate::fuzz::targets()?;
    let secs = (FUZZ_BUDGET_SECS / targets.len().max(1) as u64).max(5);
    let outcomes = crate::fuzz::fuzz(&targets, secs, true)?;
    crate::fuzz::check(&outcomes)
}

/// The steps run so far with their wall-clock time, printed after each step and as a table at
/// the end (or at the failure), because CI's budget is in minutes and its log has no clock.
#[derive(Default)]
struct Steps(Vec<(&'static str, Duration)>);

impl Steps {
    /// Run one step, announcing it and what it checks, and record how long it took whatever
    /// its outcome.
    fn run<T>(
        &mut self,
        name: &'static str,
        what: &str,
        step: impl FnOnce() -> Result<T, String>,
    ) -> Result<T, String> {
        eprintln!("xtask: step {name}: {what}");
        let start = Instant::now();
        let outcome = step();
        let took = start.elapsed();
        eprintln!("xtask: step {name} took {:.0} s", took.as_secs_f64());
        self.0.push((name, took));
        if outcome.is_err() {
            self.print();
        }
        outcome
    }

    /// The table of steps and their times, longest first, with the total.
    fn print(&self) {
        let mut steps = self.0.clone();
        steps.sort_by_key(|s| std::cmp::Reverse(s.1));
        let total: Duration = steps.iter().map(|s| s.1).sum();
        eprintln!(
            "xtask: test: time per step (total {:.1} min)",
            total.as_secs_f64() / 60.0
        );
        for (name, took) in steps {
            eprintln!("  {:>7.0} s  {name}", took.as_secs_f64());
        }
    }
}

/// `Ok` for a command's success, else `failure`.
fn succeeded(code: ExitCode, failure: &str) -> Result<(), String> {
    if code == ExitCode::SUCCESS {
        Ok(())
    } else {
        Err(failure.to_owned())
    }
}

/// Run every check.
pub fn run(args: TestArgs) -> Result<ExitCode, String> {
    if args.interop_only {
        crate::interop::run_all()?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut steps = Steps::default();
    steps.run("fmt", "formatting", || cargo(&["fmt", "--all", "--check"]))?;
    let [features, list] = crate::procs::WORKSPACE_FEATURES;
    steps.run(
        "clippy",
        "lints of the workspace, all targets and features",
        || {
            cargo(&[
                "clippy",
                "--workspace",
                "--all-targets",
                features,
                list,
                "--",
                "-D",
                "warnings",
            ])
        },
    )?;
    // Everything else builds with the opt-in features; the `ors` a first `cargo install`
    // gives (no `ors mcp`) is linted as it is installed, and its unit tests run as installed:
    // `ors mcp` there must name the missing feature.
    steps.run(
        "the default ors",
        "the `ors` of a first `cargo install`, linted and tested",
        || {
            cargo(&["clippy", "-p", "ors-cli", "--bins", "--", "-D", "warnings"])?;
            cargo(&["test", "-p", "ors-cli", "--bin", "ors"])
        },
    )?;
    steps.run("circles", "no import circle inside any crate", || {
        crate::circles::check()
    })?;
    steps.run("cargo test", "the tests of the workspace", || {
        // The sandboxes' tests run Debian's real bubblewrap.
        crate::debian::ensure("sandboxes", "bwrap", "bubblewrap")?;
        cargo(&["test", "--workspace", features, list])
    })?;
    steps.run("browser", "the HTML report in Chromium", || {
        crate::browser::run()
    })?;
    steps.run("fuzz", "each fuzz target briefly", fuzz_briefly)?;
    steps.run(
        "interop",
        "the Python SDKs, MCP and conformance runs",
        crate::interop::run_all,
    )?;
    steps.run("scale", "replicas behind nginx (short form)", || {
        let quick = crate::scale::ScaleArgs { quick: true };
        succeeded(
            crate::scale::run(quick)?,
            "cargo xtask scale --quick failed",
        )
    })?;
    steps.run(
        "readme",
        "the console examples of the README and the guides against gsm8k",
        crate::readme::run,
    )?;
    steps.run(
        "new-crate",
        "a crate from `ors new`, tested, served and checked",
        crate::newcrate::run,
    )?;
    // Only proves the benchmark runs and every response checks out; its figures are not
    // asserted (shared, noisy machines), and an error in any workload fails the run.
    steps.run(
        "bench",
        "the quick benchmark, every response checked",
        || {
            let quick = crate::bench::BenchArgs::quick();
            succeeded(
                crate::bench::run(quick)?,
                "cargo xtask bench --quick reported errors",
            )
        },
    )?;
    // Ratios against the revision before this change, printed for whoever looks: never
    // judged, as a second per workload on a shared machine decides nothing.
    steps.run(
        "bench --against",
        "this tree against the one it changes (quick, not judged)",
        || {
            crate::bench::quick_against(args.against.as_deref());
            Ok(())
        },
    )?;
    steps.print();
    eprintln!(
        "xtask: test: fmt, clippy, import circles, cargo test, the report in Chromium, fuzz, \
         interop, conformance, scale, README and guides, ors new and bench all passed"
    );
    Ok(ExitCode::SUCCESS)
}
