//! `cargo xtask test`: everything CI checks, in order, stopping at the first failure.

use std::process::{Command, ExitCode};

/// Arguments of `cargo xtask test`.
#[derive(clap::Args)]
pub struct TestArgs {
    /// Run only the interop steps (Python reference client and server, conformance runner),
    /// skipping fmt, clippy and cargo test.
    #[arg(long)]
    pub interop_only: bool,
}

/// Run `cargo ARGS` in the workspace root.
pub(crate) fn cargo(args: &[&str]) -> Result<(), String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    eprintln!("xtask: cargo {}", args.join(" "));
    let status = Command::new(cargo)
        .args(args)
        .current_dir(crate::workspace::workspace_root())
        .status()
        .map_err(|e| format!("could not run cargo: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`cargo {}` failed", args.join(" ")))
    }
}

/// Seconds of fuzzing `cargo xtask test` spends, over all targets.
const FUZZ_BUDGET_SECS: u64 = 60;

/// Each fuzz target for its share of [`FUZZ_BUDGET_SECS`] (at least 5 s): enough to catch a
/// target that no longer builds or fails at once. Without a nightly toolchain (or a way to
/// install cargo-fuzz) the step is skipped, saying why.
fn fuzz_briefly() -> Result<(), String> {
    if let Err(crate::fuzz::Unavailable(why)) = crate::fuzz::ensure_tools() {
        eprintln!("xtask: fuzz: SKIPPED: {why}");
        return Ok(());
    }
    let targets = crate::fuzz::targets()?;
    let secs = (FUZZ_BUDGET_SECS / targets.len().max(1) as u64).max(5);
    let outcomes = crate::fuzz::fuzz(&targets, secs)?;
    crate::fuzz::check(&outcomes)
}

/// Run every check.
pub fn run(args: TestArgs) -> Result<ExitCode, String> {
    if args.interop_only {
        crate::interop::run_all()?;
        return Ok(ExitCode::SUCCESS);
    }
    cargo(&["fmt", "--all", "--check"])?;
    cargo(&[
        "clippy",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ])?;
    cargo(&["test", "--workspace"])?;
    eprintln!("xtask: browser: the HTML report in Chromium");
    crate::browser::run()?;
    fuzz_briefly()?;
    crate::interop::run_all()?;
    eprintln!("xtask: scale: replicas behind nginx (short form)");
    let scale = crate::scale::run(crate::scale::ScaleArgs { quick: true })?;
    if scale != ExitCode::SUCCESS {
        return Err("cargo xtask scale --quick failed".to_owned());
    }
    eprintln!("xtask: readme: the README's console examples against a gsm8k server");
    crate::readme::run()?;
    // Only proves the benchmark runs and every response checks out; its figures are not
    // asserted (shared, noisy machines), and an error in any workload fails the run.
    let bench = crate::bench::run(crate::bench::BenchArgs::quick())?;
    if bench != ExitCode::SUCCESS {
        return Err("cargo xtask bench --quick reported errors".to_owned());
    }
    eprintln!(
        "xtask: test: fmt, clippy, cargo test, the report in Chromium, fuzz, interop, conformance, \
         scale, README and bench all passed"
    );
    Ok(ExitCode::SUCCESS)
}
