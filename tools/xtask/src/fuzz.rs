//! `cargo xtask fuzz`: every cargo-fuzz target in `tools/fuzz/` for a while each, on the nightly
//! toolchain (libFuzzer needs it). `cargo xtask test` runs each briefly.
//!
//! The targets are whatever `cargo fuzz list` names, so adding one to `tools/fuzz/Cargo.toml` is
//! enough. Each keeps its corpus in `tools/fuzz/corpus/TARGET` (not committed) and starts from the
//! committed seeds in `tools/fuzz/seeds/TARGET` when there are any; a crash leaves its input in
//! `tools/fuzz/artifacts/TARGET/`, and `cargo +nightly fuzz run TARGET FILE` replays it.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

/// Arguments of `cargo xtask fuzz`.
#[derive(clap::Args)]
pub struct FuzzArgs {
    /// Seconds to fuzz each target.
    #[arg(long, default_value_t = 60)]
    pub secs: u64,
    /// Only these targets (default: every one `cargo fuzz list` names).
    #[arg(long, value_delimiter = ',')]
    pub targets: Vec<String>,
    /// Build without optimizations (`cargo fuzz --dev`): a faster build, far fewer inputs a
    /// second; what `cargo xtask test`'s brief runs use.
    #[arg(long)]
    pub dev: bool,
}

/// The toolchain the targets build with.
const NIGHTLY: &str = "nightly";

/// How long one input may run before libFuzzer calls it a hang.
const INPUT_TIMEOUT_SECS: u64 = 10;

/// Why fuzzing cannot run on this machine, when it cannot: no nightly toolchain, or no
/// cargo-fuzz and no way to install it.
pub struct Unavailable(pub String);

fn fuzz_dir() -> PathBuf {
    crate::workspace::workspace_root()
        .join("tools")
        .join("fuzz")
}

/// `cargo +nightly ...`, through rustup, without the variables the outer (stable) cargo set
/// for us, which would pin the toolchain, the compiler or the target directory.
fn nightly_cargo() -> Command {
    let mut cmd = Command::new("rustup");
    cmd.args(["run", NIGHTLY, "cargo"]);
    for var in [
        "CARGO",
        "RUSTC",
        "RUSTDOC",
        "RUSTUP_TOOLCHAIN",
        "RUSTFLAGS",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET_DIR",
    ] {
        cmd.env_remove(var);
    }
    cmd.env("CARGO_INCREMENTAL", "0");
    cmd.current_dir(crate::workspace::workspace_root());
    cmd
}

fn quiet_ok(mut cmd: Command) -> bool {
    cmd.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Make sure the nightly toolchain and cargo-fuzz are there, installing cargo-fuzz (from
/// crates.io, `--locked`) when it is missing. A missing nightly is not installed: it is a
/// large download that CI images carry already.
pub fn ensure_tools() -> Result<(), Unavailable> {
    let mut rustc = Command::new("rustup");
    rustc.args(["run", NIGHTLY, "rustc", "--version"]);
    if !quiet_ok(rustc) {
        return Err(Unavailable(format!(
            "no {NIGHTLY} toolchain (install it with `rustup toolchain install {NIGHTLY}`)"
        )));
    }
    let mut version = nightly_cargo();
    version.args(["fuzz", "--version"]);
    if quiet_ok(version) {
        return Ok(());
    }
    eprintln!(
        "xtask: fuzz: cargo-fuzz is missing; installing it (cargo install cargo-fuzz --locked)"
    );
    let mut install = nightly_cargo();
    install.args(["install", "cargo-fuzz", "--locked"]);
    match install.status() {
        Ok(s) if s.success() => Ok(()),
        Ok(s) => Err(Unavailable(format!(
            "cargo-fuzz is not installed and `cargo install cargo-fuzz` failed ({s})"
        ))),
        Err(e) => Err(Unavailable(format!(
            "cargo-fuzz is not installed and cargo could not be run to install it: {e}"
        ))),
    }
}

/// The targets `cargo fuzz list` names.
pub fn targets() -> Result<Vec<String>, String> {
    let mut cmd = nightly_cargo();
    cmd.args(["fuzz", "list", "--fuzz-dir"]).arg(fuzz_dir());
    let out = crate::procs::run_captured(cmd, None, Duration::from_secs(120))?;
    if !out.status.success() {
        return Err(format!(
            "cargo fuzz list failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect())
}

/// How one target's run went.
pub struct Outcome {
    /// The target.
    pub target: String,
    /// Inputs run, from libFuzzer's last `Done N runs` line (absent if it crashed).
    pub runs: Option<u64>,
    /// How long it ran.
    pub took: Duration,
    /// The failure and where its input was saved, if it failed.
    pub failure: Option<String>,
}

/// libFuzzer's `Done 12345 runs in 60 second(s)`.
fn runs_done(stderr: &str) -> Option<u64> {
    stderr.lines().rev().find_map(|l| {
        l.trim()
            .strip_prefix("Done ")?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    })
}

/// The lines of a failed run worth showing: the panic message and the saved input.
fn failure_summary(stderr: &str) -> String {
    let lines: Vec<&str> = stderr.lines().collect();
    let mut keep: Vec<&str> = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if line.contains("panicked at") {
            // The message follows on the next lines (an assertion's left and right).
            keep.extend(lines.iter().skip(i).take(4).copied());
        } else if line.contains("ERROR: libFuzzer")
            || line.contains("ERROR: AddressSanitizer")
            || line.contains("Test unit written to")
        {
            keep.push(*line);
        }
    }
    if keep.is_empty() {
        lines[lines.len().saturating_sub(20)..].join("\n")
    } else {
        keep.iter()
            .take(24)
            .copied()
            .collect::<Vec<&str>>()
            .join("\n")
    }
}

/// cargo-fuzz's flag for the build `dev` asks for (release, with debug assertions, is its
/// default).
fn profile(dev: bool) -> &'static str {
    if dev {
        "--dev"
    } else {
        "--release"
    }
}

/// Build every target (streaming cargo's output).
fn build(dev: bool) -> Result<(), String> {
    let profile = profile(dev);
    eprintln!("xtask: fuzz: building the targets (cargo +{NIGHTLY} fuzz build {profile})");
    let mut cmd = nightly_cargo();
    cmd.args(["fuzz", "build", profile, "--fuzz-dir"])
        .arg(fuzz_dir());
    crate::procs::run_to_success(&mut cmd, "cargo fuzz build")
}

/// Fuzz `target` for `secs` seconds.
fn run_target(target: &str, secs: u64, dev: bool) -> Result<Outcome, String> {
    let dir = fuzz_dir();
    let corpus = dir.join("corpus").join(target);
    std::fs::create_dir_all(&corpus).map_err(|e| format!("creating {}: {e}", corpus.display()))?;
    let seeds = dir.join("seeds").join(target);
    let dict = dir.join("dict").join(format!("{target}.dict"));
    let mut cmd = nightly_cargo();
    cmd.args(["fuzz", "run", profile(dev), "--fuzz-dir"])
        .arg(&dir)
        .arg(target)
        .arg(&corpus);
    if seeds.is_dir() {
        cmd.arg(&seeds);
    }
    cmd.arg("--")
        .arg(format!("-max_total_time={secs}"))
        .arg(format!("-timeout={INPUT_TIMEOUT_SECS}"))
        .arg("-print_final_stats=1");
    if dict.is_file() {
        cmd.arg(format!("-dict={}", dict.display()));
    }
    let started = Instant::now();
    // The build is done; a run that outlives its time by minutes is stuck.
    let out = crate::procs::run_captured(cmd, None, Duration::from_secs(secs + 300))?;
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let failure = (!out.status.success()).then(|| failure_summary(&stderr));
    Ok(Outcome {
        target: target.to_owned(),
        runs: runs_done(&stderr),
        took,
        failure,
    })
}

/// Build and run the targets (all, or the ones named), `secs` each, and report each; `dev`:
/// built without optimizations.
pub fn fuzz(only: &[String], secs: u64, dev: bool) -> Result<Vec<Outcome>, String> {
    build(dev)?;
    let all = targets()?;
    let chosen: Vec<String> = if only.is_empty() {
        all
    } else {
        for t in only {
            if !all.contains(t) {
                return Err(format!("no fuzz target {t:?}; the targets are {all:?}"));
            }
        }
        only.to_vec()
    };
    let mut outcomes = Vec::with_capacity(chosen.len());
    for target in &chosen {
        eprintln!("xtask: fuzz: {target} for {secs} s ...");
        let outcome = run_target(target, secs, dev)?;
        match &outcome.failure {
            None => eprintln!(
                "xtask: fuzz: {target}: clean, {} inputs in {:.0} s",
                outcome.runs.map_or("?".to_owned(), |n| n.to_string()),
                outcome.took.as_secs_f64()
            ),
            Some(why) => eprintln!("xtask: fuzz: {target}: FAILED\n{why}"),
        }
        outcomes.push(outcome);
    }
    Ok(outcomes)
}

/// The failures among `outcomes`, as one message (none: `Ok`).
pub fn check(outcomes: &[Outcome]) -> Result<(), String> {
    let failed: Vec<&str> = outcomes
        .iter()
        .filter(|o| o.failure.is_some())
        .map(|o| o.target.as_str())
        .collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "fuzz targets failed: {} (inputs in {}; replay one with `cargo +{NIGHTLY} fuzz run \
             TARGET FILE` in tools/fuzz/)",
            failed.join(", "),
            artifacts_dir().display()
        ))
    }
}

fn artifacts_dir() -> PathBuf {
    Path::new("tools").join("fuzz").join("artifacts")
}

/// `cargo xtask fuzz`.
pub fn run(args: FuzzArgs) -> Result<ExitCode, String> {
    ensure_tools().map_err(|Unavailable(why)| format!("cannot fuzz: {why}"))?;
    let outcomes = fuzz(&args.targets, args.secs.max(1), args.dev)?;
    check(&outcomes)?;
    eprintln!(
        "xtask: fuzz: all {} targets ran clean for {} s each",
        outcomes.len(),
        args.secs
    );
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_libfuzzers_summary() {
        let stderr = "#1000 NEW cov: 12\nDone 64046 runs in 21 second(s)\nstat::number_of_executed_units: 64046\n";
        assert_eq!(runs_done(stderr), Some(64046));
        assert_eq!(runs_done("INFO: Seed: 1\n"), None);
        let crash = "INFO: Seed: 1\nthread '<unnamed>' panicked at x.rs:1:1:\nboom\n==1== ERROR: libFuzzer: deadly signal\nartifact_prefix='a/'; Test unit written to a/crash-1\n";
        let summary = failure_summary(crash);
        assert!(
            summary.contains("panicked at") && summary.contains("boom"),
            "{summary}"
        );
        assert!(summary.contains("a/crash-1"), "{summary}");
    }
}
