//! `cargo xtask coldbuild`: a newcomer's first two builds, timed from cold. The README's serve
//! command (`cargo run --release -p ors-examples --bin gsm8k`) to its ready line, and its CLI
//! install (`cargo install --path crates/ors-cli`) to its end, each read from the README of
//! the tree measured and run as written, in a cargo home and target directory of its own: the
//! registry index is copied in, so every crate is downloaded and compiled as on a fresh
//! machine, without sccache (`RUSTC_WRAPPER`) or incremental builds. What it prints: the time,
//! the crates compiled and downloaded, and the load average before and after (the figures mean
//! something only on a quiet machine).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Arguments of `cargo xtask coldbuild`.
#[derive(clap::Args)]
pub struct ColdbuildArgs {
    /// Measure this git revision (exported with `git archive`) instead of the working tree,
    /// e.g. the one before a change, for a before/after.
    #[arg(long)]
    pub rev: Option<String>,
    /// Only one of the two builds.
    #[arg(long, value_enum)]
    pub only: Option<Step>,
}

/// One of the two builds measured.
#[derive(Clone, Copy, PartialEq, Eq, Debug, clap::ValueEnum)]
pub enum Step {
    /// The README's serve command, to its ready line.
    Serve,
    /// The README's CLI install.
    Cli,
}

/// The targets of issue 27, on a quiet 2-core machine.
const SERVE_TARGET: Duration = Duration::from_secs(150);
const CLI_TARGET: Duration = Duration::from_secs(120);

/// Longest a build may take before the run gives up on it.
const LIMIT: Duration = Duration::from_secs(60 * 60);

/// What one build took.
struct Measured {
    step: Step,
    command: String,
    elapsed: Duration,
    compiled: usize,
    downloaded: usize,
    load_before: String,
    load_after: String,
}

/// Run the measurement.
pub fn run(args: ColdbuildArgs) -> Result<ExitCode, String> {
    let work = crate::workspace::workspace_root().join("target/xtask-coldbuild");
    remove(&work)?;
    std::fs::create_dir_all(&work).map_err(|e| format!("{}: {e}", work.display()))?;
    let src = match &args.rev {
        None => crate::workspace::workspace_root(),
        Some(rev) => export(rev, &work.join("src"))?,
    };
    let readme = std::fs::read_to_string(src.join("README.md"))
        .map_err(|e| format!("{}: {e}", src.join("README.md").display()))?;
    let index = registry_index()?;
    eprintln!(
        "xtask: coldbuild: {} on {} CPUs; each build in a fresh cargo home (registry index copied \
         from {}) and target directory, without sccache or incremental builds",
        args.rev.as_deref().unwrap_or("the working tree"),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        index.display(),
    );
    let mut results = Vec::new();
    for step in [Step::Serve, Step::Cli] {
        if args.only.is_some_and(|only| only != step) {
            continue;
        }
        let dir = work.join(match step {
            Step::Serve => "serve",
            Step::Cli => "cli",
        });
        let home = dir.join("cargo-home");
        copy_dir(&index, &home.join("registry/index"))?;
        let measured = match step {
            Step::Serve => serve(&src, &dir, &home, &readme)?,
            Step::Cli => cli(&src, &dir, &home, &readme)?,
        };
        eprintln!("xtask: coldbuild: {}", line(&measured));
        results.push(measured);
        // The downloads and builds are gigabytes; only the figures are kept.
        remove(&dir)?;
    }
    if args.rev.is_some() {
        remove(&work.join("src"))?;
    }
    println!(
        "{:<6} {:>9}  {:>8}  {:>10}  {:>10}  command",
        "build", "time", "compiled", "downloaded", "load"
    );
    for m in &results {
        println!(
            "{:<6} {:>9}  {:>8}  {:>10}  {:>10}  {}",
            match m.step {
                Step::Serve => "serve",
                Step::Cli => "cli",
            },
            minutes(m.elapsed),
            m.compiled,
            m.downloaded,
            format!("{}→{}", m.load_before, m.load_after),
            m.command
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The summary line of one build, with its target.
fn line(m: &Measured) -> String {
    let (what, target) = match m.step {
        Step::Serve => ("ready line after", SERVE_TARGET),
        Step::Cli => ("installed after", CLI_TARGET),
    };
    format!(
        "`{}`: {what} {} ({} crates compiled, {} downloaded; load average {} before, {} after); \
         target {}: {}",
        m.command,
        minutes(m.elapsed),
        m.compiled,
        m.downloaded,
        m.load_before,
        m.load_after,
        minutes(target),
        if m.elapsed <= target { "met" } else { "missed" },
    )
}

/// `2 min 07 s`.
fn minutes(d: Duration) -> String {
    let s = d.as_secs();
    format!("{} min {:02} s", s / 60, s % 60)
}

/// The README's serve command (the first `cargo run` of a `sh` block), run until the server
/// prints its ready line; the server then gets SIGTERM.
fn serve(src: &Path, dir: &Path, home: &Path, readme: &str) -> Result<Measured, String> {
    let command = serve_command(readme)?;
    let mut cmd = cargo_command(&command, src, dir, home)?;
    // Any free port: another server may hold 8080.
    cmd.env("ORS_PORT", "0").env("ORS_HOST", "127.0.0.1");
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .stdin(Stdio::null());
    let load_before = crate::bench::load::load_average().unwrap_or_default();
    let started = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("could not run `{command}`: {e}"))?;
    let counts = count_cargo_lines(child.stderr.take().ok_or("no stderr")?);
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if line.contains("listening on http://") {
                let _ = tx.send(());
            }
        }
    });
    let ready = rx.recv_timeout(LIMIT);
    let elapsed = started.elapsed();
    let load_after = crate::bench::load::load_average().unwrap_or_default();
    // `cargo run` replaces itself with the program on Unix: the pid is the server's.
    let _ = crate::procs::signal(child.id(), "TERM");
    let deadline = Instant::now() + Duration::from_secs(15);
    while child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let status = child.wait().ok();
    if ready.is_err() {
        return Err(format!(
            "`{command}` did not print its ready line (exit status {status:?}); see the output above"
        ));
    }
    let (compiled, downloaded) = counts.join().map_err(|_| "the stderr reader panicked")?;
    Ok(Measured {
        step: Step::Serve,
        command,
        elapsed,
        compiled,
        downloaded,
        load_before,
        load_after,
    })
}

/// The README's CLI install (`cargo install --path ...`), into a root of its own.
fn cli(src: &Path, dir: &Path, home: &Path, readme: &str) -> Result<Measured, String> {
    let command = cli_command(readme)?;
    let root = dir.join("root");
    let mut cmd = cargo_command(&command, src, dir, home)?;
    cmd.arg("--root").arg(&root);
    cmd.stdout(Stdio::null())
        .stderr(Stdio::piped())
        .stdin(Stdio::null());
    let load_before = crate::bench::load::load_average().unwrap_or_default();
    let started = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("could not run `{command}`: {e}"))?;
    let counts = count_cargo_lines(child.stderr.take().ok_or("no stderr")?);
    let status = child
        .wait()
        .map_err(|e| format!("waiting for `{command}`: {e}"))?;
    let elapsed = started.elapsed();
    let load_after = crate::bench::load::load_average().unwrap_or_default();
    if !status.success() {
        return Err(format!("`{command}` failed ({status})"));
    }
    let ors = root.join("bin/ors");
    let version = Command::new(&ors)
        .arg("--version")
        .output()
        .map_err(|e| format!("the installed {} does not run: {e}", ors.display()))?;
    if !version.status.success() {
        return Err(format!("`{} --version` failed", ors.display()));
    }
    let (compiled, downloaded) = counts.join().map_err(|_| "the stderr reader panicked")?;
    Ok(Measured {
        step: Step::Cli,
        command,
        elapsed,
        compiled,
        downloaded,
        load_before,
        load_after,
    })
}

/// A `cargo ...` command line from the README as a process: the cargo running this xtask, in
/// `src`, with a cargo home and target directory of its own and nothing that would reuse an
/// earlier build.
fn cargo_command(line: &str, src: &Path, dir: &Path, home: &Path) -> Result<Command, String> {
    let mut words = line.split_whitespace();
    if words.next() != Some("cargo") {
        return Err(format!("`{line}` is not a cargo command"));
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut cmd = Command::new(cargo);
    cmd.args(words).current_dir(src);
    for var in [
        "RUSTC_WRAPPER",
        "CARGO_BUILD_RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_BUILD_RUSTC_WORKSPACE_WRAPPER",
        "CARGO_INCREMENTAL",
        "CARGO_BUILD_INCREMENTAL",
        "CARGO_BUILD_TARGET_DIR",
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
    ] {
        cmd.env_remove(var);
    }
    // The cargo home holds the user's config too (a wrapper, debug settings): a fresh one
    // has none.
    cmd.env("CARGO_HOME", home)
        .env("CARGO_TARGET_DIR", dir.join("target"))
        .env("CARGO_TERM_COLOR", "never")
        .env("CARGO_TERM_PROGRESS_WHEN", "never");
    Ok(cmd)
}

/// Count cargo's `Compiling` and `Downloaded` lines on a thread, echoing every other line
/// (warnings, errors) to our stderr.
fn count_cargo_lines(stderr: std::process::ChildStderr) -> std::thread::JoinHandle<(usize, usize)> {
    std::thread::spawn(move || {
        let (mut compiled, mut downloaded) = (0, 0);
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            match line.split_whitespace().next() {
                Some("Compiling") => compiled += 1,
                Some("Downloaded") => downloaded += 1,
                Some(
                    "Downloading" | "Finished" | "Running" | "Installing" | "Installed"
                    | "Replacing" | "Locking" | "Updating" | "Adding",
                ) => {}
                _ => eprintln!("  | {line}"),
            }
        }
        (compiled, downloaded)
    })
}

/// The README's first `cargo run` line of a `sh` block: what a newcomer runs first.
fn serve_command(readme: &str) -> Result<String, String> {
    let mut in_sh = false;
    for line in readme.lines() {
        let t = line.trim();
        if t.starts_with("```") {
            in_sh = t == "```sh";
            continue;
        }
        if in_sh && t.starts_with("cargo run") {
            return Ok(t.to_owned());
        }
    }
    Err("the README has no `cargo run` line in a sh block".to_owned())
}

/// The README's CLI install: the first `` `cargo install --path DIR` `` of its text.
fn cli_command(readme: &str) -> Result<String, String> {
    let start = readme
        .find("`cargo install --path ")
        .ok_or("the README says nowhere `cargo install --path ...`")?;
    let rest = &readme[start + 1..];
    let end = rest
        .find('`')
        .ok_or("an unclosed `cargo install` in the README")?;
    Ok(rest[..end].to_owned())
}

/// The registry index of the user's cargo home (`$CARGO_HOME`, else `~/.cargo`).
fn registry_index() -> Result<PathBuf, String> {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .ok_or("neither CARGO_HOME nor HOME is set")?;
    let index = home.join("registry/index");
    if index.is_dir() {
        Ok(index)
    } else {
        Err(format!(
            "{} does not exist: run any cargo build once to fetch the index",
            index.display()
        ))
    }
}

/// `git archive REV` unpacked into `dir`.
fn export(rev: &str, dir: &Path) -> Result<PathBuf, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let root = crate::workspace::workspace_root();
    let archive = Command::new("git")
        .args(["archive", "--format=tar", rev])
        .current_dir(&root)
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("git archive: {e}"))?;
    let stdout = archive.stdout.ok_or("no stdout from git archive")?;
    let status = Command::new("tar")
        .arg("-x")
        .arg("-C")
        .arg(dir)
        .stdin(stdout)
        .status()
        .map_err(|e| format!("tar: {e}"))?;
    if !status.success() || !dir.join("Cargo.toml").is_file() {
        return Err(format!(
            "could not export revision {rev} (is it a commit of this repository?)"
        ));
    }
    Ok(dir.to_path_buf())
}

/// `cp -a FROM TO`.
fn copy_dir(from: &Path, to: &Path) -> Result<(), String> {
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
    }
    let mut cp = Command::new("cp");
    cp.arg("-a").arg(from).arg(to);
    crate::procs::run_to_success(&mut cp, "cp -a (the registry index)")
}

fn remove(dir: &Path) -> Result<(), String> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("cannot remove {}: {e}", dir.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_commands_are_read_from_the_readme() {
        let readme = "Serve it:\n\n```sh\ncargo run --release -p ors-examples --bin gsm8k\n```\n\n\
                      Install it with `cargo install --path crates/ors-cli` (or ...)\n\n\
                      ```sh\ncargo run -p other\n```\n";
        assert_eq!(
            serve_command(readme).unwrap(),
            "cargo run --release -p ors-examples --bin gsm8k"
        );
        assert_eq!(
            cli_command(readme).unwrap(),
            "cargo install --path crates/ors-cli"
        );
        assert!(serve_command("```console\n$ cargo run\n```").is_err());
        assert!(cli_command("no install here").is_err());
    }

    #[test]
    fn this_readme_has_both_commands() {
        let readme =
            std::fs::read_to_string(crate::workspace::workspace_root().join("README.md")).unwrap();
        assert!(serve_command(&readme).unwrap().contains("--bin gsm8k"));
        assert!(cli_command(&readme).unwrap().contains("ors-cli"));
    }
}
