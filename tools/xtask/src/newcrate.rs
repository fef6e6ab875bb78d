//! `cargo xtask new-crate` (and a step of `cargo xtask test`): what `ors new` makes works as the
//! newcomer runs it. `ors new demo --path <this checkout>` in `target/tmp/ors-new/`, then in
//! the crate `cargo test` (its episodes played in-process) and `cargo run` (on a free port),
//! and `ors check demo` against that server, which must pass every check.
//!
//! The crate builds into this workspace's target directory with this workspace's lock file
//! copied in, so the dependencies it shares with the workspace are the versions already built
//! (only ors-server's default-feature build and the crate itself compile).

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::procs::{ors_binary, run_captured, run_to_success, ServerProcess};
use crate::workspace::workspace_root;

/// Limit on the built server's start and on `ors check`.
const RUN_TIMEOUT: Duration = Duration::from_secs(120);

/// Generate, test, serve and check a crate from `ors new`.
pub fn run() -> Result<(), String> {
    let started = Instant::now();
    let root = workspace_root();
    let ors = ors_binary()?;
    let target = ors
        .parent()
        .and_then(Path::parent)
        .ok_or("`ors` is not in a target directory")?
        .to_path_buf();
    let scratch = target.join("tmp").join("ors-new");
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).map_err(|e| format!("{}: {e}", scratch.display()))?;

    let mut new = Command::new(&ors);
    new.args(["new", "demo", "--path"])
        .arg(&root)
        .current_dir(&scratch);
    let out = run_captured(new, None, RUN_TIMEOUT)?;
    print!("{}", String::from_utf8_lossy(&out.stdout));
    if !out.status.success() {
        return Err(format!(
            "ors new demo failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let demo = scratch.join("demo");
    std::fs::copy(root.join("Cargo.lock"), demo.join("Cargo.lock"))
        .map_err(|e| format!("copying Cargo.lock: {e}"))?;

    in_crate(&demo, &target, &["test"], "cargo test in the new crate")?;
    in_crate(&demo, &target, &["build"], "cargo build in the new crate")?;
    let mut serve = Command::new(target.join("debug").join("demo"));
    serve
        .env("ORS_HOST", "127.0.0.1")
        .env("ORS_PORT", "0")
        .stderr(std::process::Stdio::null());
    let server = ServerProcess::start(serve, RUN_TIMEOUT)?;

    let mut check = Command::new(&ors);
    check
        .args(["--url", &server.url, "check", "demo", "--seed", "1"])
        .env_remove("ORS_API_KEY");
    let out = run_captured(check, None, RUN_TIMEOUT)?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    print!("{stdout}");
    if !out.status.success() {
        return Err(format!(
            "ors check demo failed on the crate `ors new` made ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    if !stdout.trim_end().ends_with(" passed, 0 failed") {
        return Err(format!(
            "ors check demo did not end with `N passed, 0 failed`: {stdout}"
        ));
    }
    println!(
        "PASS ors new: the new crate's tests pass, it serves, and ors check passes on it ({:.0} s)",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// `cargo ARGS` in the generated crate, into the workspace's target directory.
fn in_crate(demo: &Path, target: &Path, args: &[&str], what: &str) -> Result<(), String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    eprintln!(
        "xtask: new-crate: cargo {} (in {})",
        args.join(" "),
        demo.display()
    );
    let mut cmd = Command::new(cargo);
    cmd.args(args)
        .current_dir(demo)
        .env("CARGO_TARGET_DIR", target);
    run_to_success(&mut cmd, what)
}
