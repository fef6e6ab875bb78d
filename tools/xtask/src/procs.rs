//! Processes of checks and benchmarks: servers spawned, awaited until they print their ready
//! line, and killed when dropped so no run leaves a process behind; commands run to their end
//! with their output captured and a time limit.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A running server process; killed on drop.
pub struct ServerProcess {
    child: Child,
    /// The base URL, `http://127.0.0.1:PORT`.
    pub url: String,
    /// The process id (for reading its memory use).
    pub pid: u32,
}

impl ServerProcess {
    /// Start `cmd` (which must print a line containing `listening on http://HOST:PORT`) and
    /// wait up to `timeout` for that line.
    pub fn start(mut cmd: Command, timeout: Duration) -> Result<Self, String> {
        let what = format!("{cmd:?}");
        cmd.stdout(Stdio::piped()).stdin(Stdio::null());
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("could not start {what}: {e}"))?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if !sent {
                    if let Some(i) = line.find("listening on http://") {
                        let url = line[i + "listening on ".len()..].trim().to_owned();
                        let _ = tx.send(url);
                        sent = true;
                    }
                }
                // Keep draining so the server never blocks on a full pipe.
            }
        });
        match rx.recv_timeout(timeout) {
            Ok(url) => {
                let url = url.replace("0.0.0.0", "127.0.0.1");
                let pid = child.id();
                Ok(Self { child, url, pid })
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let _ = child.kill();
                let _ = child.wait();
                Err(format!(
                    "{what} did not print its ready line within {timeout:?}"
                ))
            }
            // Its stdout closed without the line: it exited (a port taken meanwhile, say).
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let _ = child.kill();
                let status = child
                    .wait()
                    .map(|s| s.to_string())
                    .unwrap_or_else(|e| e.to_string());
                Err(format!("{what} exited ({status}) before its ready line"))
            }
        }
    }

    /// The port the server listens on.
    #[allow(dead_code)]
    pub fn port(&self) -> u16 {
        self.url
            .rsplit(':')
            .next()
            .and_then(|p| p.trim_end_matches('/').parse().ok())
            .unwrap_or(0)
    }
}

impl ServerProcess {
    /// Send SIGTERM and wait up to `timeout` for the process to exit; its exit status.
    pub fn terminate(&mut self, timeout: Duration) -> Result<std::process::ExitStatus, String> {
        self.stop_with("TERM", timeout)
    }

    /// Send signal `name` (`TERM`, `INT`) and wait up to `timeout` for the process to exit;
    /// its exit status.
    pub fn stop_with(
        &mut self,
        name: &str,
        timeout: Duration,
    ) -> Result<std::process::ExitStatus, String> {
        signal(self.pid, name)?;
        let deadline = Instant::now() + timeout;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return Ok(status),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                Ok(None) => return Err(format!("pid {} still runs after {timeout:?}", self.pid)),
                Err(e) => return Err(format!("waiting for pid {}: {e}", self.pid)),
            }
        }
    }
}

/// Send a signal (`TERM`, `HUP`, ...) to a process we started.
pub fn signal(pid: u32, name: &str) -> Result<(), String> {
    let sent = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .status()
        .is_ok_and(|s| s.success());
    if sent {
        Ok(())
    } else {
        Err(format!("kill -{name} {pid} failed"))
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A memory figure of a process in KiB from `/proc/PID/status`: `VmRSS` (resident now) or
/// `VmHWM` (the most resident since start, or since [`reset_peak`]).
pub fn status_kib(pid: u32, key: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Start `VmHWM` of a process over from its current resident size (Linux 4.0+).
pub fn reset_peak(pid: u32) -> Result<(), String> {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5")
        .map_err(|e| format!("cannot reset the peak memory of process {pid}: {e}"))
}

/// Run `cmd` to its end (output not captured); `what` names it in the errors.
pub fn run_to_success(cmd: &mut Command, what: &str) -> Result<(), String> {
    let status = cmd
        .status()
        .map_err(|e| format!("could not run {what}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{what} failed ({status})"))
    }
}

/// Run `cargo ARGS` in the workspace root.
pub fn cargo(args: &[&str]) -> Result<(), String> {
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

/// `cargo build` binaries of ors-examples (release or debug) with all its features: jemalloc,
/// which the measurements assume, and what `code` and `mcp_env` require. Returns the target
/// dir.
pub fn build_examples(bins: &[&str], release: bool) -> Result<std::path::PathBuf, String> {
    let mut args = vec!["-p", "ors-examples", "--all-features"];
    for bin in bins {
        args.extend(["--bin", bin]);
    }
    cargo_build(&args, release)
}

/// The opt-in features every `cargo xtask` build of the workspace turns on, so the parts a
/// first install leaves out (`ors mcp`) are linted and tested too. Every `cargo test`,
/// `clippy` and `--no-run` here passes them: a step then reuses the step before's build.
pub const WORKSPACE_FEATURES: [&str; 2] = ["--features", "ors-cli/mcp"];

/// Build the `ors` command as the tests use it (debug, with `ors mcp`) and return its path.
pub fn ors_binary() -> Result<std::path::PathBuf, String> {
    Ok(cargo_build(
        &["-p", "ors-cli", "--features", "mcp", "--bin", "ors"],
        false,
    )?
    .join("ors"))
}

/// `cargo build` the given packages/binaries (release or debug), returning the target dir.
pub fn cargo_build(args: &[&str], release: bool) -> Result<std::path::PathBuf, String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut cmd = Command::new(cargo);
    cmd.arg("build").args(args);
    if release {
        cmd.arg("--release");
    }
    cmd.current_dir(crate::workspace::workspace_root());
    let status = cmd.status().map_err(|e| format!("cargo build: {e}"))?;
    if !status.success() {
        return Err(format!("cargo build {args:?} failed"));
    }
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| crate::workspace::workspace_root().join("target"));
    Ok(target.join(if release { "release" } else { "debug" }))
}

/// Run `cmd` with `stdin` (or none), collecting its output; killed after `timeout`, so a hang
/// fails the step instead of CI.
pub fn run_captured(
    mut cmd: Command,
    stdin: Option<&str>,
    timeout: Duration,
) -> Result<Output, String> {
    let what = format!("{cmd:?}");
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("could not run {what}: {e}"))?;
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        // A few short lines fit in the pipe buffer; dropping the pipe is the end of input.
        pipe.write_all(text.as_bytes())
            .map_err(|e| format!("writing the stdin of {what}: {e}"))?;
    }
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut buf);
            }
            buf
        })
    };
    let stdout = drain(child.stdout.take().map(|p| Box::new(p) as _));
    let stderr = drain(child.stderr.take().map(|p| Box::new(p) as _));
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{what} did not finish within {timeout:?}"));
            }
            Err(e) => return Err(format!("waiting for {what}: {e}")),
        }
    };
    Ok(Output {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_that_exits_early_is_said_to_have_exited_not_to_be_slow() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo starting; exit 3"]);
        let err = ServerProcess::start(cmd, Duration::from_secs(600))
            .err()
            .unwrap_or_default();
        assert!(
            err.contains("exited (exit status: 3) before its ready line"),
            "{err}"
        );
    }
}
