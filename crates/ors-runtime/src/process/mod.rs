//! Running programs for tools: a shell command, a test suite, a compiler. What every such
//! tool needs and is easy to get wrong:
//!
//! - **Nothing outlives the call.** The program runs in its own process group; on timeout,
//!   on cancellation (the session deleted, the server's tool timeout) and when it exits, the
//!   whole group is killed, so `sh -c 'sleep 100 & sleep 100'` leaves no process behind. If
//!   the call's future is dropped, the group is killed then too.
//! - **Bounded output.** stdout and stderr are captured up to a cap each (64 KiB by default)
//!   and the rest is counted and dropped, with a marker saying how much.
//! - **A clean environment.** The program sees `PATH`, `HOME` (its working directory),
//!   `LANG=C.UTF-8` and the variables you add, not the server's (which may hold API keys),
//!   unless you ask for [`Program::inherit_env`].
//! - **Optional resource limits** ([`Limits`]: CPU seconds, memory, processes), applied by a
//!   `/bin/sh` wrapper with `ulimit` before it `exec`s the program: no `unsafe` code runs
//!   between `fork` and `exec` in this process (`CommandExt::pre_exec` would need it), and
//!   `/bin/sh` exists wherever the rest of this module works (it uses `kill` as well).
//! - **Live output.** With a [`ToolContext`], each line is sent as a `progress` event
//!   `{"stream": "stdout", "line": "..."}` while the program runs.
//!
//! [`WorkDir`] is a per-episode working directory: made in the environment's `new`, removed
//! in `teardown` (or when dropped), with paths from the model confined to it.
//!
//! Unix only (process groups and `kill`).
//!
//! ```
//! # #[cfg(unix)]
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use std::time::Duration;
//! use ors_runtime::process::{Program, Exit};
//! use ors_runtime::ToolContext;
//!
//! let done = Program::shell("echo hello; echo oops >&2; exit 3")
//!     .timeout(Duration::from_secs(10))
//!     .run(&ToolContext::detached())
//!     .await
//!     .expect("sh runs");
//! assert_eq!(done.exit, Exit::Code(3));
//! assert_eq!(done.stdout, "hello\n");
//! assert_eq!(done.stderr, "oops\n");
//!
//! let slow = Program::shell("sleep 100 & sleep 100")
//!     .timeout(Duration::from_millis(200))
//!     .run(&ToolContext::detached())
//!     .await
//!     .unwrap();
//! assert_eq!(slow.exit, Exit::TimedOut); // and both sleeps are gone
//! # }
//! # #[cfg(not(unix))] fn main() {}
//! ```

mod workdir;

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWriteExt, BufReader};

use crate::env::ToolContext;

pub use workdir::{PathError, WorkDir};

/// Default cap on captured stdout, and separately on stderr.
pub const DEFAULT_MAX_OUTPUT: usize = 64 * 1024;
/// Longest line sent in one `progress` event; longer lines are cut there.
const MAX_PROGRESS_LINE: usize = 1000;
/// How long to keep reading output after the program's group was killed: a process that
/// escaped the group (a daemon that called `setsid`) may hold the pipes open.
const DRAIN_AFTER_KILL: Duration = Duration::from_millis(500);
/// The `PATH` a program gets in a clean environment.
pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Why a program could not be run at all (a program that ran and failed is a [`Finished`]).
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    /// The program could not be started (not found, not executable, bad working directory).
    #[error("could not start {program}: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Waiting for it failed.
    #[error("waiting for {program}: {source}")]
    Wait {
        /// The program.
        program: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// Resource limits of a program, applied with `ulimit` by a `/bin/sh` wrapper; each is
/// inherited by the processes it starts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limits {
    /// CPU time in seconds (`ulimit -t`); the kernel kills a process that uses more.
    pub cpu_secs: Option<u64>,
    /// Address space in bytes (`ulimit -v`); allocations beyond it fail.
    pub memory_bytes: Option<u64>,
    /// Processes (`ulimit -u`, `-p` in dash). The kernel counts every process of the user,
    /// not only this program's, so set it above what the user already runs.
    pub processes: Option<u64>,
}

impl Limits {
    fn is_empty(&self) -> bool {
        *self == Limits::default()
    }

    /// The `ulimit` commands, failing the wrapper if one cannot be applied.
    fn script(&self) -> String {
        let mut s = String::new();
        if let Some(t) = self.cpu_secs {
            s.push_str(&format!("ulimit -t {} || exit 126; ", t.max(1)));
        }
        if let Some(m) = self.memory_bytes {
            s.push_str(&format!("ulimit -v {} || exit 126; ", (m / 1024).max(1)));
        }
        if let Some(p) = self.processes {
            let p = p.max(1);
            s.push_str(&format!(
                "{{ ulimit -u {p} 2>/dev/null || ulimit -p {p}; }} || exit 126; "
            ));
        }
        s.push_str("exec \"$@\"");
        s
    }
}

/// How a program ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// It exited with this code.
    Code(i32),
    /// A signal ended it (for example 9 after exceeding a CPU limit, 24 for `SIGXCPU`).
    Signal(i32),
    /// It ran past its timeout and its process group was killed.
    TimedOut,
    /// The call was cancelled (session deleted, server shutdown) and its group was killed.
    Cancelled,
}

/// A program that ran: how it ended and what it printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    /// How it ended.
    pub exit: Exit,
    /// Its standard output, up to the cap, then a truncation marker.
    pub stdout: String,
    /// Its standard error, likewise.
    pub stderr: String,
    /// Whether stdout was cut.
    pub stdout_truncated: bool,
    /// Whether stderr was cut.
    pub stderr_truncated: bool,
    /// How long it ran.
    pub duration: Duration,
}

impl Finished {
    /// Whether it exited with code 0.
    pub fn success(&self) -> bool {
        self.exit == Exit::Code(0)
    }

    /// A summary for the model: how it ended, then stdout and stderr.
    pub fn report(&self) -> String {
        let how = match self.exit {
            Exit::Code(c) => format!("exit code {c}"),
            Exit::Signal(s) => format!("killed by signal {s}"),
            Exit::TimedOut => format!(
                "timed out after {:.1} s; the command and every process it started were killed",
                self.duration.as_secs_f64()
            ),
            Exit::Cancelled => "cancelled; the command and its processes were killed".to_owned(),
        };
        let mut out = format!("[{how}]\n");
        if !self.stdout.is_empty() {
            out.push_str("--- stdout ---\n");
            out.push_str(&self.stdout);
            if !self.stdout.ends_with('\n') {
                out.push('\n');
            }
        }
        if !self.stderr.is_empty() {
            out.push_str("--- stderr ---\n");
            out.push_str(&self.stderr);
            if !self.stderr.ends_with('\n') {
                out.push('\n');
            }
        }
        out
    }
}

/// A program to run for a tool. Build it, then [`Program::run`] it.
#[derive(Debug, Clone)]
pub struct Program {
    program: OsString,
    args: Vec<OsString>,
    cwd: Option<PathBuf>,
    env: Vec<(OsString, OsString)>,
    inherit_env: bool,
    timeout: Option<Duration>,
    max_output: usize,
    limits: Limits,
    stdin: Option<Vec<u8>>,
}

impl Program {
    /// Run `program` (looked up in the clean `PATH` unless it is a path).
    pub fn new(program: impl AsRef<OsStr>) -> Self {
        Self {
            program: program.as_ref().to_owned(),
            args: Vec::new(),
            cwd: None,
            env: Vec::new(),
            inherit_env: false,
            timeout: None,
            max_output: DEFAULT_MAX_OUTPUT,
            limits: Limits::default(),
            stdin: None,
        }
    }

    /// Run a shell command line with `/bin/sh -c`.
    pub fn shell(command: impl AsRef<OsStr>) -> Self {
        Self::new("/bin/sh").arg("-c").arg(command)
    }

    /// Add an argument.
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    /// Add arguments.
    pub fn args<I: IntoIterator<Item = S>, S: AsRef<OsStr>>(mut self, args: I) -> Self {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// Run in this directory (also the program's `HOME`).
    pub fn current_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cwd = Some(dir.into());
        self
    }

    /// Set an environment variable for the program.
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.env
            .push((key.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    /// Give the program the server's whole environment (secrets included) instead of a clean
    /// one.
    pub fn inherit_env(mut self) -> Self {
        self.inherit_env = true;
        self
    }

    /// Kill the program's process group after this long.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Cap on captured stdout, and separately on stderr, in bytes.
    pub fn max_output_bytes(mut self, bytes: usize) -> Self {
        self.max_output = bytes;
        self
    }

    /// Resource limits.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Bytes written to the program's standard input (otherwise it reads nothing).
    pub fn stdin(mut self, bytes: impl Into<Vec<u8>>) -> Self {
        self.stdin = Some(bytes.into());
        self
    }

    fn command(&self) -> tokio::process::Command {
        let mut cmd = if self.limits.is_empty() {
            let mut c = tokio::process::Command::new(&self.program);
            c.args(&self.args);
            c
        } else {
            let mut c = tokio::process::Command::new("/bin/sh");
            c.arg("-c")
                .arg(self.limits.script())
                .arg("sh")
                .arg(&self.program)
                .args(&self.args);
            c
        };
        if !self.inherit_env {
            cmd.env_clear();
            cmd.env("PATH", DEFAULT_PATH).env("LANG", "C.UTF-8");
            if let Some(dir) = &self.cwd {
                cmd.env("HOME", dir);
            }
        }
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        if let Some(dir) = &self.cwd {
            cmd.current_dir(dir);
        }
        cmd.stdin(if self.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        #[cfg(unix)]
        cmd.process_group(0);
        cmd
    }

    /// Run it to the end, its timeout, or the call's cancellation. `ctx` receives each output
    /// line as a `progress` event (pass [`ToolContext::detached`] outside a tool).
    pub async fn run(&self, ctx: &ToolContext) -> Result<Finished, ProcessError> {
        let name = self.program.to_string_lossy().into_owned();
        let started = Instant::now();
        let mut child = self
            .command()
            .spawn()
            .map_err(|source| ProcessError::Spawn {
                program: name.clone(),
                source,
            })?;
        // From here on the group is killed whatever happens, also if this future is dropped.
        let group = GroupGuard::new(child.id());
        if let (Some(bytes), Some(mut stdin)) = (self.stdin.clone(), child.stdin.take()) {
            tokio::spawn(async move {
                // A program that does not read its input closes the pipe: not an error.
                let _ = stdin.write_all(&bytes).await;
            });
        }
        let stdout = child
            .stdout
            .take()
            .map(|s| capture(s, "stdout", self.max_output, ctx));
        let stderr = child
            .stderr
            .take()
            .map(|s| capture(s, "stderr", self.max_output, ctx));
        let outputs = async {
            let (out, err) = tokio::join!(
                async {
                    match stdout {
                        Some(f) => f.await,
                        None => Captured::default(),
                    }
                },
                async {
                    match stderr {
                        Some(f) => f.await,
                        None => Captured::default(),
                    }
                }
            );
            (out, err)
        };
        tokio::pin!(outputs);
        let deadline = async {
            match self.timeout {
                Some(d) => tokio::time::sleep(d).await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(deadline);
        // The program's end, its timeout or the call's cancellation, while reading output.
        let mut finished_output = None;
        let exit = {
            let wait = child.wait();
            tokio::pin!(wait);
            loop {
                tokio::select! {
                    status = &mut wait => {
                        break match status {
                            Ok(s) => exit_of(s),
                            Err(source) => return Err(ProcessError::Wait { program: name, source }),
                        };
                    }
                    out = &mut outputs, if finished_output.is_none() => finished_output = Some(out),
                    _ = &mut deadline => break Exit::TimedOut,
                    _ = ctx.cancelled() => break Exit::Cancelled,
                }
            }
        };
        // Whatever ended it, nothing of its group may live on.
        group.kill();
        if !matches!(exit, Exit::Code(_) | Exit::Signal(_)) {
            let _ = child.wait().await;
        }
        let (out, err) = match finished_output {
            Some(pair) => pair,
            None => tokio::time::timeout(DRAIN_AFTER_KILL, &mut outputs)
                .await
                .unwrap_or_default(),
        };
        let duration = started.elapsed();
        tracing::debug!(program = %name, ?exit, ms = duration.as_millis() as u64, "program ended");
        Ok(Finished {
            exit,
            stdout: out.text(),
            stderr: err.text(),
            stdout_truncated: out.dropped > 0,
            stderr_truncated: err.dropped > 0,
            duration,
        })
    }
}

#[cfg(unix)]
fn exit_of(status: std::process::ExitStatus) -> Exit {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => Exit::Code(c),
        (None, Some(s)) => Exit::Signal(s),
        (None, None) => Exit::Code(-1),
    }
}

#[cfg(not(unix))]
fn exit_of(status: std::process::ExitStatus) -> Exit {
    Exit::Code(status.code().unwrap_or(-1))
}

/// Kills a program's process group when told to, or when dropped. Also the guard of the MCP
/// servers [`crate::mcp`] starts.
pub(crate) struct GroupGuard(Option<u32>);

impl GroupGuard {
    /// The group led by the process `pid` (started with `process_group(0)`).
    pub(crate) fn new(pid: Option<u32>) -> Self {
        Self(pid)
    }

    /// `SIGKILL` to every process of the group, through `kill(1)` (no `unsafe` `killpg` call).
    /// A group with no process left makes `kill` fail quietly.
    fn kill(mut self) {
        self.kill_now();
    }

    /// [`GroupGuard::kill`] through a reference; later calls do nothing.
    pub(crate) fn kill_now(&mut self) {
        if let Some(pgid) = self.0.take() {
            let status = std::process::Command::new("kill")
                .args(["-s", "KILL", "--", &format!("-{pgid}")])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
            if let Err(e) = status {
                tracing::warn!(pgid, error = %e, "could not run kill(1) on a tool's process group");
            }
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill_now();
    }
}

/// One stream's captured bytes, and how many were dropped past the cap.
#[derive(Default)]
struct Captured {
    bytes: Vec<u8>,
    dropped: u64,
}

impl Captured {
    fn text(&self) -> String {
        let mut text = String::from_utf8_lossy(&self.bytes).into_owned();
        if self.dropped > 0 {
            if !text.ends_with('\n') && !text.is_empty() {
                text.push('\n');
            }
            text.push_str(&format!(
                "[... output truncated: {} more bytes]\n",
                self.dropped
            ));
        }
        text
    }
}

/// Read a stream line by line to its end: keep up to `cap` bytes, count the rest, and send
/// each kept line as progress.
async fn capture(
    stream: impl AsyncRead + Unpin,
    name: &'static str,
    cap: usize,
    ctx: &ToolContext,
) -> Captured {
    let mut reader = BufReader::new(stream);
    let mut captured = Captured::default();
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = cap.saturating_sub(captured.bytes.len());
                if room == 0 {
                    captured.dropped += n as u64;
                    continue;
                }
                let kept = n.min(room);
                captured.bytes.extend_from_slice(&line[..kept]);
                captured.dropped += (n - kept) as u64;
                let text = String::from_utf8_lossy(&line[..kept.min(MAX_PROGRESS_LINE)]);
                ctx.progress(json!({"stream": name, "line": text.trim_end_matches(['\n', '\r'])}));
            }
        }
    }
    captured
}
